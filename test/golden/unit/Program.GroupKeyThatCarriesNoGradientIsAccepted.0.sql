WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.f AS c0, t.val AS c1 FROM public.w t),
f3 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.c1 AS c0, sum(a0.c1) AS c1 FROM f1 a0 GROUP BY 2),
f5 AS MATERIALIZED (SELECT 1::bigint AS rid, sum(a0.c1) AS c0 FROM f3 a0),
b5 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f5 WHERE c0 IS NOT NULL),
b3 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1, q.c0, q.c1 FROM (SELECT r.a0_rid AS rid, (COALESCE((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END), 0::float8)) AS d1, r.a0_c0 AS c0, r.a0_c1 AS c1 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1 FROM f3 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b5 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b1 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1 FROM (SELECT r.a0_rid AS rid, (COALESCE((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd1 END), 0::float8)) AS d1 FROM (SELECT a0.rid AS a0_rid, a0.c1 AS a0_c1, COALESCE(a0.c1, CAST(0 AS pg_catalog.float8)) AS k0, (a0.c1) IS NULL AS k0n FROM f1 a0 OFFSET 0) r JOIN (SELECT a.*, a.d1 AS bd1, COALESCE(a.c0, CAST(0 AS pg_catalog.float8)) AS h0, (a.c0) IS NULL AS h0n FROM b3 a OFFSET 0) a ON r.k0 = a.h0 AND r.k0n = a.h0n) q WHERE q.rid IS NOT NULL)
SELECT f.toid, f.tid, 0 AS pidx, b.d1 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f5
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f5