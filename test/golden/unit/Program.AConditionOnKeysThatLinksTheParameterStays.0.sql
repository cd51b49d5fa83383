WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.s AS c0, t.f AS c1, t.val AS c2 FROM public.x t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.f AS c0, t.val AS c1 FROM public.w t),
f5 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a1.c0 AS c0, a0.c1 AS c1, sum((a0.c2 * a1.c1)) AS c2 FROM (f1 a0 JOIN f2 a1 ON (a0.c1 OPERATOR(pg_catalog.=) a1.c0)) GROUP BY 2, 3),
f7 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((a0.c2 * a0.c2)) AS c0 FROM f5 a0),
b7 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f7 WHERE c0 IS NOT NULL),
b5 AS NOT MATERIALIZED (SELECT q.rid, q.d2 AS d2, q.c0, q.c1, q.c2 FROM (SELECT r.a0_rid AS rid, (COALESCE(((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c2), 0::float8) + COALESCE(((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c2), 0::float8)) AS d2, r.a0_c0 AS c0, r.a0_c1 AS c1, r.a0_c2 AS c2 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f5 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b7 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b1 AS NOT MATERIALIZED (SELECT a0.rid AS rid, CASE WHEN a0.c2 IS NULL THEN 0::float8 ELSE t.d2 END AS d2 FROM (SELECT q.oa1_c0, sum(q.d2) AS d2 FROM (SELECT r.a1_c0 AS oa1_c0, (COALESCE((a.bd2 * r.a1_c1), 0::float8)) AS d2 FROM (SELECT COALESCE(CAST(a1.c0 AS pg_catalog.int8), 4294967296) AS k0, COALESCE(CAST(a1.c0 AS pg_catalog.int8), 4294967296) AS k1, a1.c0 AS a1_c0, a1.c1 AS a1_c1 FROM f2 a1 OFFSET 0) r JOIN (SELECT a.*, a.d2 AS bd2, COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0, COALESCE(CAST(a.c1 AS pg_catalog.int8), 4294967296) AS h1 FROM b5 a OFFSET 0) a ON r.k0 = a.h0 AND r.k1 = a.h1) q GROUP BY q.oa1_c0) t JOIN f1 a0 ON (a0.c1 OPERATOR(pg_catalog.=) t.oa1_c0))
SELECT f.toid, f.tid, 0 AS pidx, b.d2 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f7
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f7