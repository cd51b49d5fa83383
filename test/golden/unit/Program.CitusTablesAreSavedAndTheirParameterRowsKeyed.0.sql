WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.s AS c0, t.f AS c1, t.val AS c2 FROM public.x t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, ROW(t.f)::text AS key, t.f AS c0, t.val AS c1 FROM public.w t),
f5 AS MATERIALIZED (SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS rid, a0.c0 AS c0, sum((a0.c2 * a1.c1)) AS c1 FROM (f1 a0 JOIN f2 a1 ON (a0.c1 = a1.c0)) GROUP BY 2),
f7 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((a0.c1 * a0.c1)) AS c0 FROM f5 a0),
b7 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f7 WHERE c0 IS NOT NULL),
b5 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1, q.c0, q.c1 FROM (SELECT r.a0_rid AS rid, (COALESCE(((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c1), 0::float8) + COALESCE(((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c1), 0::float8)) AS d1, r.a0_c0 AS c0, r.a0_c1 AS c1 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1 FROM f5 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b7 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b2 AS NOT MATERIALIZED (SELECT a1.rid AS rid, sum(CASE WHEN a1.c1 IS NULL THEN 0::float8 ELSE t.d1 END) AS d1 FROM (SELECT q.oa0_c1, sum(q.d1) AS d1 FROM (SELECT r.a0_c1 AS oa0_c1, (COALESCE((a.bd1 * r.a0_c2), 0::float8)) AS d1 FROM (SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS k0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f1 a0 OFFSET 0) r JOIN (SELECT a.*, a.d1 AS bd1, COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0 FROM b5 a OFFSET 0) a ON r.k0 = a.h0) q GROUP BY q.oa0_c1) t JOIN f2 a1 ON (t.oa0_c1 = a1.c0) GROUP BY 1)
SELECT CAST('public.w' AS pg_catalog.regclass)::pg_catalog.oid AS toid, NULL::tid AS tid, 0 AS pidx, b.d1 AS g, f.key FROM f2 f JOIN b2 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f7
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f7