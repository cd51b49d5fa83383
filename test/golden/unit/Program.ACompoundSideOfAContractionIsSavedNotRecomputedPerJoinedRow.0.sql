WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.s AS c0, t.e AS c1, t.val AS c2 FROM public.x t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.s AS c0, t.val AS c1 FROM public.a t),
f4 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.e AS c0, t.val AS c1 FROM public.g t),
f6 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.e AS c0, t.val AS c1 FROM public.b t),
f8 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.rid AS l0, a1.rid AS l1, a2.rid AS l2, a3.rid AS l3, a0.c0 AS x0_0, a0.c1 AS x0_1, a0.c2 AS x0_2, a1.c1 AS x1_1, a2.c1 AS x2_1, a3.c1 AS x3_1, a0.c0 AS c0, a0.c1 AS c1, ((a0.c2 * a1.c1) + (a2.c1 * a3.c1)) AS c2 FROM (((f1 a0 JOIN f2 a1 ON (a0.c0 = a1.c0)) JOIN f4 a2 ON (a0.c1 = a2.c0)) JOIN f6 a3 ON (a0.c1 = a3.c0))),
f9 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.e AS c0, t.c AS c1, t.val AS c2 FROM public.w t),
f12 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.c0 AS c0, a1.c1 AS c1, sum((a0.c2 * a1.c2)) AS c2 FROM (f8 a0 JOIN f9 a1 ON (a0.c1 = a1.c0)) GROUP BY 2, 3),
f14 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((a0.c2 * a0.c2)) AS c0 FROM f12 a0),
b14 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f14 WHERE c0 IS NOT NULL),
b12 AS MATERIALIZED (SELECT q.rid, q.d2 AS d2, q.c0, q.c1, q.c2 FROM (SELECT r.a0_rid AS rid, (COALESCE(((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c2), 0::float8) + COALESCE(((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c2), 0::float8)) AS d2, r.a0_c0 AS c0, r.a0_c1 AS c1, r.a0_c2 AS c2 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f12 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b14 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b9 AS NOT MATERIALIZED (SELECT a1.rid AS rid, sum(CASE WHEN a1.c2 IS NULL THEN 0::float8 ELSE t.d2 END) AS d2 FROM (SELECT q.g1, q.oa0_c1, sum(q.d2) AS d2 FROM (SELECT a.c1 AS g1, r.a0_c1 AS oa0_c1, (COALESCE((a.bd2 * r.a0_c2), 0::float8)) AS d2 FROM (SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS k0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f8 a0 OFFSET 0) r JOIN (SELECT a.*, a.d2 AS bd2, COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0, COALESCE(CAST(a.c1 AS pg_catalog.int8), 4294967296) AS h1 FROM b12 a OFFSET 0) a ON r.k0 = a.h0) q GROUP BY q.g1, q.oa0_c1) t JOIN f9 a1 ON COALESCE(CAST(a1.c1 AS pg_catalog.int8), 4294967296) = COALESCE(CAST(t.g1 AS pg_catalog.int8), 4294967296) AND (t.oa0_c1 = a1.c0) GROUP BY 1),
b8 AS NOT MATERIALIZED (SELECT a0.rid AS rid, sum(CASE WHEN a0.c2 IS NULL THEN 0::float8 ELSE t.d2 END) AS d2 FROM (SELECT q.g0, q.oa1_c0, sum(q.d2) AS d2 FROM (SELECT a.c0 AS g0, r.a1_c0 AS oa1_c0, (COALESCE((a.bd2 * r.a1_c2), 0::float8)) AS d2 FROM (SELECT COALESCE(CAST(a1.c1 AS pg_catalog.int8), 4294967296) AS k1, a1.c0 AS a1_c0, a1.c2 AS a1_c2 FROM f9 a1 OFFSET 0) r JOIN (SELECT a.*, a.d2 AS bd2, COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0, COALESCE(CAST(a.c1 AS pg_catalog.int8), 4294967296) AS h1 FROM b12 a OFFSET 0) a ON r.k1 = a.h1) q GROUP BY q.g0, q.oa1_c0) t JOIN f8 a0 ON COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) = COALESCE(CAST(t.g0 AS pg_catalog.int8), 4294967296) AND (a0.c1 = t.oa1_c0) GROUP BY 1),
b1 AS NOT MATERIALIZED (SELECT q.rid, sum(q.d2) AS d2 FROM (SELECT f.l0 AS rid, (COALESCE((b.d2 * f.x1_1), 0::float8)) AS d2 FROM f8 f JOIN b8 b ON b.rid = f.rid) q WHERE q.rid IS NOT NULL GROUP BY q.rid)
SELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g, z.key FROM (
SELECT f.toid, f.tid, 1 AS pidx, b.d2 AS g, NULL::text AS key FROM f9 f JOIN b9 b ON b.rid = f.rid
UNION ALL
SELECT f.toid, f.tid, 0 AS pidx, b.d2 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f14
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f14
) z GROUP BY z.toid, z.tid, z.pidx, z.key