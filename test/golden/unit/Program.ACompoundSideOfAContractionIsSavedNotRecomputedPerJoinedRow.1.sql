WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.s AS c0, t.e AS c1, t.val AS c2 FROM public.x t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.s AS c0, t.val AS c1 FROM public.a t),
f4 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.e AS c0, t.val AS c1 FROM public.g t),
f6 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.e AS c0, t.val AS c1 FROM public.b t),
f9 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.e AS c0, t.c AS c1, t.val AS c2 FROM public.w t),
f12 AS MATERIALIZED (SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS rid, a0.c0 AS c0, sum((((a0.c2 * a1.c1) + (a2.c1 * a3.c1)) * a4.c2)) AS c1 FROM ((((f1 a0 JOIN f2 a1 ON (a0.c0 = a1.c0)) JOIN f4 a2 ON (a0.c1 = a2.c0)) JOIN f6 a3 ON (a0.c1 = a3.c0)) JOIN f9 a4 ON (a0.c1 = a4.c0)) GROUP BY 2),
f14 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((a0.c1 * a0.c1)) AS c0 FROM f12 a0),
b14 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f14 WHERE c0 IS NOT NULL),
b12 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1, q.c0, q.c1 FROM (SELECT r.a0_rid AS rid, (COALESCE(((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c1), 0::float8) + COALESCE(((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c1), 0::float8)) AS d1, r.a0_c0 AS c0, r.a0_c1 AS c1 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1 FROM f12 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b14 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
m12 AS MATERIALIZED (SELECT GROUPING(q.r4, q.r0, q.r1, q.r2, q.r3) AS gs, q.r4, sum(q.t4_2) AS t4_2, q.r0, q.r1, q.r2, q.r3, sum(q.u0) AS u0 FROM (SELECT r.a4_rid AS r4, (COALESCE(((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL OR r.a2_c1 IS NULL OR r.a3_c1 IS NULL OR r.a4_c2 IS NULL THEN NULL ELSE a.bd1 END) * ((r.a0_c2 * r.a1_c1) + (r.a2_c1 * r.a3_c1))), 0::float8)) AS t4_2, r.a0_rid AS r0, r.a1_rid AS r1, r.a2_rid AS r2, r.a3_rid AS r3, COALESCE(((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL OR r.a2_c1 IS NULL OR r.a3_c1 IS NULL OR r.a4_c2 IS NULL THEN NULL ELSE a.bd1 END) * r.a4_c2), 0::float8) AS u0 FROM (SELECT a0.rid AS a0_rid, a1.rid AS a1_rid, a2.rid AS a2_rid, a3.rid AS a3_rid, a4.rid AS a4_rid, a0.c2 AS a0_c2, a1.c1 AS a1_c1, a2.c1 AS a2_c1, a3.c1 AS a3_c1, a4.c2 AS a4_c2, COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS k0 FROM ((((f1 a0 JOIN f2 a1 ON (a0.c0 = a1.c0)) JOIN f4 a2 ON (a0.c1 = a2.c0)) JOIN f6 a3 ON (a0.c1 = a3.c0)) JOIN f9 a4 ON (a0.c1 = a4.c0)) OFFSET 0) r JOIN (SELECT a.*, a.d1 AS bd1, COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0 FROM b12 a OFFSET 0) a ON r.k0 = a.h0) q GROUP BY GROUPING SETS ((q.r4), (q.r0, q.r1, q.r2, q.r3))),
b9 AS NOT MATERIALIZED (SELECT r4 AS rid, t4_2 AS d2 FROM m12 WHERE gs = 15 AND r4 IS NOT NULL),
b1 AS NOT MATERIALIZED (SELECT q.rid, sum(q.d2) AS d2 FROM (SELECT n.r0 AS rid, (COALESCE((n.u0 * n.x1_1_0), 0::float8)) AS d2 FROM (SELECT n.*, a0.c2 AS x0_2_0, a1.c1 AS x1_1_0, a2.c1 AS x2_1_0, a3.c1 AS x3_1_0 FROM (SELECT * FROM m12 WHERE gs = 16) n, f1 a0, f2 a1, f4 a2, f6 a3 WHERE a0.rid = n.r0 AND a1.rid = n.r1 AND a2.rid = n.r2 AND a3.rid = n.r3 AND (a0.c0 = a1.c0) AND (a0.c1 = a2.c0) AND (a0.c1 = a3.c0)) n) q WHERE q.rid IS NOT NULL GROUP BY q.rid)
SELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g, z.key FROM (
SELECT f.toid, f.tid, 1 AS pidx, b.d2 AS g, NULL::text AS key FROM f9 f JOIN b9 b ON b.rid = f.rid
UNION ALL
SELECT f.toid, f.tid, 0 AS pidx, b.d2 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f14
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f14
) z GROUP BY z.toid, z.tid, z.pidx, z.key