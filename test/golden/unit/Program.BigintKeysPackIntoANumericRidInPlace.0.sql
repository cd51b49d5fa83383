WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.s AS c0, t.f AS c1, t.val AS c2 FROM public.x t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, ROW(t.f)::text AS key, t.f AS c0, t.j AS c1, t.val AS c2 FROM public.w1 t),
f5 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.c0 AS c0, a1.c1 AS c1, sum((a0.c2 * a1.c2)) AS c2 FROM (f1 a0 JOIN f2 a1 ON (a0.c1 = a1.c0)) GROUP BY 2, 3),
f7 AS MATERIALIZED (SELECT row_number() OVER () AS rid, ROW(t.j)::text AS key, t.j AS c0, t.val AS c1 FROM public.w2 t),
f10 AS MATERIALIZED (SELECT (s.a0_c0) AS rid, s.a0_c0 AS c0, sum((s.h0 * a1.c1)) AS c1 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1, tanh(a0.c2) AS h0 FROM f5 a0 WHERE EXISTS (SELECT 1 FROM f7 a1 WHERE (a0.c1 = a1.c0)) OFFSET 0) s, f7 a1 WHERE (s.a0_c1 = a1.c0) GROUP BY 2),
f12 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((a0.c1 * a0.c1)) AS c0 FROM f10 a0),
b12 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f12 WHERE c0 IS NOT NULL),
b10 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1, q.c0, q.c1 FROM (SELECT r.a0_rid AS rid, (COALESCE(((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c1), 0::float8) + COALESCE(((CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c1), 0::float8)) AS d1, r.a0_c0 AS c0, r.a0_c1 AS c1 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1 FROM f10 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b12 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
m10 AS MATERIALIZED (SELECT GROUPING(q.r1, q.r0) AS gs, q.r1, sum(q.t1_1) AS t1_1, q.r0, sum(q.u0) AS u0 FROM (SELECT r.a1_rid AS r1, (COALESCE(((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd1 END) * r.h0), 0::float8)) AS t1_1, r.a0_rid AS r0, COALESCE(((CASE WHEN r.a0_c2 IS NULL OR r.a1_c1 IS NULL THEN NULL ELSE a.bd1 END) * r.a1_c1), 0::float8) AS u0 FROM (SELECT s.a0_rid AS a0_rid, a1.rid AS a1_rid, s.a0_c2 AS a0_c2, a1.c1 AS a1_c1, s.a0_c0 AS k0, s.h0 AS h0 FROM (SELECT s.*, tanh(s.a0_c2) AS h0 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f5 a0 WHERE EXISTS (SELECT 1 FROM f7 a1 WHERE (a0.c1 = a1.c0)) OFFSET 0) s OFFSET 0) s, f7 a1 WHERE (s.a0_c1 = a1.c0) OFFSET 0) r JOIN (SELECT a.*, a.d1 AS bd1 FROM b10 a OFFSET 0) a ON r.k0 = a.c0) q GROUP BY GROUPING SETS ((q.r1), (q.r0))),
b7 AS NOT MATERIALIZED (SELECT r1 AS rid, t1_1 AS d1 FROM m10 WHERE gs = 1 AND r1 IS NOT NULL),
b5 AS NOT MATERIALIZED (SELECT q.rid, q.d2 AS d2 FROM (SELECT n.r0 AS rid, (COALESCE((n.u0 * (1 - n.v0 * n.v0)), 0::float8)) AS d2 FROM (SELECT n.*, tanh(n.x0_2_0) AS v0 FROM (SELECT n.*, a0.c2 AS x0_2_0 FROM (SELECT * FROM m10 WHERE gs = 2) n, f5 a0 WHERE a0.rid = n.r0) n OFFSET 0) n) q WHERE q.rid IS NOT NULL),
b2 AS NOT MATERIALIZED (SELECT a1.rid AS rid, sum(CASE WHEN a1.c2 IS NULL THEN 0::float8 ELSE t.d2 END) AS d2 FROM (SELECT q.g1, q.oa0_c1, sum(q.d2) AS d2 FROM (SELECT a.c1 AS g1, r.a0_c1 AS oa0_c1, (COALESCE((a.bd2 * r.a0_c2), 0::float8)) AS d2 FROM (SELECT a0.c0 AS k0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f1 a0 OFFSET 0) r JOIN (SELECT a.*, b.d2 AS bd2 FROM f5 a JOIN b5 b ON b.rid = a.rid OFFSET 0) a ON r.k0 = a.c0) q GROUP BY q.g1, q.oa0_c1) t JOIN f2 a1 ON a1.c1 = t.g1 AND (t.oa0_c1 = a1.c0) GROUP BY 1)
SELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g, z.key FROM (
SELECT CAST('public.w2' AS pg_catalog.regclass)::pg_catalog.oid AS toid, NULL::tid AS tid, 1 AS pidx, b.d1 AS g, f.key FROM f7 f JOIN b7 b ON b.rid = f.rid
UNION ALL
SELECT CAST('public.w1' AS pg_catalog.regclass)::pg_catalog.oid AS toid, NULL::tid AS tid, 0 AS pidx, b.d2 AS g, f.key FROM f2 f JOIN b2 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f12
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f12
) z GROUP BY z.toid, z.tid, z.pidx, z.key