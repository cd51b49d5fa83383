WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.f AS c0, t.val AS c1 FROM public.w t),
f5 AS MATERIALIZED (SELECT 1::bigint AS rid, sum(((a0.c1 * a0.c1) * (a1.c1 * a1.c1))) AS c0 FROM (f1 a0 JOIN f1 a1 ON (a0.c0 = a1.c0))),
b5 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f5 WHERE c0 IS NOT NULL),
m5 AS MATERIALIZED (SELECT GROUPING(q.r0, q.r1) AS gs, q.r0, sum(q.u0) AS u0, q.r1, sum(q.u1) AS u1 FROM (SELECT r.a0_rid AS r0, COALESCE(((CASE WHEN r.a0_c1 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd0 END) * (r.a1_c1 * r.a1_c1)), 0::float8) AS u0, r.a1_rid AS r1, COALESCE(((CASE WHEN r.a0_c1 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd0 END) * (r.a0_c1 * r.a0_c1)), 0::float8) AS u1 FROM (SELECT a0.rid AS a0_rid, a1.rid AS a1_rid, a0.c1 AS a0_c1, a1.c1 AS a1_c1 FROM (f1 a0 JOIN f1 a1 ON (a0.c0 = a1.c0)) OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b5 b OFFSET 0) a) q GROUP BY GROUPING SETS ((q.r0), (q.r1))),
b1 AS NOT MATERIALIZED (SELECT z.rid, sum(z.d1) AS d1 FROM (SELECT q.rid, q.d1 AS d1 FROM (SELECT q.rid, q.d1 AS d1 FROM (SELECT n.r0 AS rid, (COALESCE((n.u0 * n.x0_1_0), 0::float8) + COALESCE((n.u0 * n.x0_1_0), 0::float8)) AS d1 FROM (SELECT n.*, a0.c1 AS x0_1_0 FROM (SELECT * FROM m5 WHERE gs = 1) n, f1 a0 WHERE a0.rid = n.r0) n) q WHERE q.rid IS NOT NULL) q UNION ALL SELECT q.rid, q.d1 AS d1 FROM (SELECT q.rid, q.d1 AS d1 FROM (SELECT n.r1 AS rid, (COALESCE((n.u1 * n.x1_1_1), 0::float8) + COALESCE((n.u1 * n.x1_1_1), 0::float8)) AS d1 FROM (SELECT n.*, a1.c1 AS x1_1_1 FROM (SELECT * FROM m5 WHERE gs = 2) n, f1 a1 WHERE a1.rid = n.r1) n) q WHERE q.rid IS NOT NULL) q) z GROUP BY z.rid)
SELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g, z.key FROM (
SELECT f.toid, f.tid, 0 AS pidx, b.d1 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f5
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f5
) z GROUP BY z.toid, z.tid, z.pidx, z.key