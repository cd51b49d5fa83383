WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.s AS c0, t.f AS c1, t.val AS c2 FROM public.x t),
f3 AS MATERIALIZED (SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS rid, a0.c0 AS c0, max(a0.c2) AS c1 FROM f1 a0 GROUP BY 2),
f7 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((exp((a0.c2 - a1.c1)) * exp((a0.c2 - a1.c1)))) AS c0 FROM (f1 a0 JOIN f3 a1 ON (a0.c0 OPERATOR(pg_catalog.=) a1.c0))),
b7 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f7 WHERE c0 IS NOT NULL),
m7 AS MATERIALIZED (SELECT r.a0_rid AS r0, (COALESCE((((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.v0) * r.v0), 0::float8) + COALESCE((((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.v0) * r.v0), 0::float8)) AS t0_2, r.a1_rid AS r1, (COALESCE((- (((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.v0) * r.v0)), 0::float8) + COALESCE((- (((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.v0) * r.v0)), 0::float8)) AS t1_1 FROM (SELECT r.*, exp((r.a0_c2 - r.a1_c1)) AS v0 FROM (SELECT a0.rid AS a0_rid, a1.rid AS a1_rid, a0.c2 AS a0_c2, a1.c1 AS a1_c1 FROM (f1 a0 JOIN f3 a1 ON (a0.c0 OPERATOR(pg_catalog.=) a1.c0)) OFFSET 0) r OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b7 b OFFSET 0) a),
b3 AS NOT MATERIALIZED (SELECT r1 AS rid, sum(t1_1) AS d1 FROM m7 WHERE r1 IS NOT NULL GROUP BY r1),
b1 AS NOT MATERIALIZED (SELECT z.rid, sum(z.d2) AS d2 FROM (SELECT q.rid, q.d2 AS d2 FROM (SELECT r0 AS rid, t0_2 AS d2 FROM m7 WHERE r0 IS NOT NULL) q UNION ALL SELECT q.rid, q.d2 AS d2 FROM (SELECT q.rid, q.d2 AS d2 FROM (SELECT r.a0_rid AS rid, (COALESCE((CASE WHEN (r.a0_c2) = a.c1 THEN a.bd1 / count(*) FILTER (WHERE (r.a0_c2) = a.c1) OVER (PARTITION BY a.rid) END), 0::float8)) AS d2 FROM (SELECT a0.rid AS a0_rid, a0.c2 AS a0_c2, COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS k0 FROM f1 a0 OFFSET 0) r JOIN (SELECT a.*, b.d1 AS bd1, COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0 FROM f3 a JOIN b3 b ON b.rid = a.rid OFFSET 0) a ON r.k0 = a.h0) q WHERE q.rid IS NOT NULL) q) z GROUP BY z.rid)
SELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g, z.key FROM (
SELECT f.toid, f.tid, 0 AS pidx, b.d2 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f7
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f7
) z GROUP BY z.toid, z.tid, z.pidx, z.key