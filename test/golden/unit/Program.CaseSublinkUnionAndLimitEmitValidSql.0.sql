WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.f AS c0, t.val AS c1 FROM public.w t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.f AS c0 FROM public.x t),
f4 AS MATERIALIZED (SELECT a0.rid AS rid, a0.rid AS l0, a0.c1 AS x0_1, (CASE WHEN (a0.c1 > 0) THEN exp(a0.c1) ELSE a0.c1 END) AS c0 FROM f1 a0 WHERE EXISTS (SELECT 1 FROM f2 s2 WHERE (s2.c0 = a0.c0))),
f5 AS MATERIALIZED (SELECT a0.rid AS rid, a0.rid AS l0, a0.c1 AS x0_1, tanh(a0.c1) AS c0 FROM f1 a0),
f6 AS MATERIALIZED (SELECT row_number() OVER () AS rid, u.* FROM (SELECT 0 AS br, rid AS srid, CAST(c0 AS pg_catalog.float8) AS c0 FROM f4 UNION ALL SELECT 1 AS br, rid AS srid, CAST(c0 AS pg_catalog.float8) AS c0 FROM f5) u),
f7 AS MATERIALIZED (SELECT i.* FROM f6 i ORDER BY i.c0 DESC NULLS LAST LIMIT 3),
f8 AS MATERIALIZED (SELECT 1::bigint AS rid, sum(a0.c0) AS c0, max(a0.c0) AS c1 FROM f7 a0),
f9 AS MATERIALIZED (SELECT a0.rid AS rid, a0.rid AS l0, a0.c0 AS x0_0, a0.c1 AS x0_1, (a0.c0 + a0.c1) AS c0 FROM f8 a0),
b9 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f9 WHERE c0 IS NOT NULL),
b8 AS NOT MATERIALIZED (SELECT q.rid, q.d0 AS d0, q.d1 AS d1 FROM (SELECT f.l0 AS rid, (COALESCE(b.d0, 0::float8)) AS d0, (COALESCE(b.d0, 0::float8)) AS d1 FROM f9 f JOIN b9 b ON b.rid = f.rid) q WHERE q.rid IS NOT NULL),
b7 AS NOT MATERIALIZED (SELECT q.rid, q.d0 AS d0 FROM (SELECT r.a0_rid AS rid, (COALESCE((CASE WHEN r.a0_c0 IS NULL THEN NULL ELSE a.bd0 END), 0::float8) + COALESCE((CASE WHEN (r.a0_c0) = a.c1 THEN a.bd1 / count(*) FILTER (WHERE (r.a0_c0) = a.c1) OVER (PARTITION BY a.rid) END), 0::float8)) AS d0 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0 FROM f7 a0 OFFSET 0) r CROSS JOIN (SELECT a.*, b.d0 AS bd0, b.d1 AS bd1 FROM f8 a JOIN b8 b ON b.rid = a.rid OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b6 AS MATERIALIZED (SELECT * FROM b7),
b5 AS NOT MATERIALIZED (SELECT u.srid AS rid, b.d0 FROM b6 b JOIN f6 u ON u.rid = b.rid WHERE u.br = 1),
b4 AS NOT MATERIALIZED (SELECT u.srid AS rid, b.d0 FROM b6 b JOIN f6 u ON u.rid = b.rid WHERE u.br = 0),
b1 AS NOT MATERIALIZED (SELECT z.rid, sum(z.d1) AS d1 FROM (SELECT q.rid, q.d1 AS d1 FROM (SELECT q.rid, q.d1 AS d1 FROM (SELECT f.l0 AS rid, (COALESCE((b.d0 * (1 - f.v0 * f.v0)), 0::float8)) AS d1 FROM (SELECT f.*, tanh(f.x0_1) AS v0 FROM f5 f OFFSET 0) f JOIN b5 b ON b.rid = f.rid) q WHERE q.rid IS NOT NULL) q UNION ALL SELECT q.rid, q.d1 AS d1 FROM (SELECT q.rid, q.d1 AS d1 FROM (SELECT f.l0 AS rid, (COALESCE(((CASE WHEN (f.v0) IS TRUE THEN b.d0 ELSE 0::float8 END) * f.v1), 0::float8) + COALESCE((CASE WHEN (f.v0) IS NOT TRUE THEN b.d0 ELSE 0::float8 END), 0::float8)) AS d1 FROM (SELECT f.*, CASE WHEN (f.v0) IS TRUE THEN exp(f.x0_1) END AS v1 FROM (SELECT f.*, (f.x0_1 > 0) AS v0 FROM f4 f OFFSET 0) f OFFSET 0) f JOIN b4 b ON b.rid = f.rid) q WHERE q.rid IS NOT NULL) q) z GROUP BY z.rid)
SELECT f.toid, f.tid, 0 AS pidx, b.d1 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f9
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f9