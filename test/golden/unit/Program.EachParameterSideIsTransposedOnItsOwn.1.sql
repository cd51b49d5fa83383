WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.i AS c0, t.c AS c1, t.val AS c2 FROM public.q t),
f2 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.j AS c0, t.c AS c1, t.val AS c2 FROM public.k t),
f5 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.c0 AS c0, a1.c0 AS c1, sum((a0.c2 * a1.c2)) AS c2 FROM (f1 a0 JOIN f2 a1 ON ((a0.c1 OPERATOR(pg_catalog.=) a1.c1) AND (a1.c0 OPERATOR(pg_catalog.<=) a0.c0))) GROUP BY 2, 3),
f7 AS MATERIALIZED (SELECT 1::bigint AS rid, sum((a0.c2 * a0.c2)) AS c0 FROM f5 a0),
b7 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f7 WHERE c0 IS NOT NULL),
b5 AS NOT MATERIALIZED (SELECT q.rid, q.d2 AS d2, q.c0, q.c1, q.c2 FROM (SELECT r.a0_rid AS rid, (COALESCE(((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c2), 0::float8) + COALESCE(((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * r.a0_c2), 0::float8)) AS d2, r.a0_c0 AS c0, r.a0_c1 AS c1, r.a0_c2 AS c2 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f5 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b7 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
m5 AS MATERIALIZED (SELECT GROUPING(q.r0, q.r1) AS gs, q.r0, sum(q.t0_2) AS t0_2, q.r1, sum(q.t1_2) AS t1_2 FROM (SELECT r.a0_rid AS r0, (COALESCE(((CASE WHEN r.a0_c2 IS NULL OR r.a1_c2 IS NULL THEN NULL ELSE a.bd2 END) * r.a1_c2), 0::float8)) AS t0_2, r.a1_rid AS r1, (COALESCE(((CASE WHEN r.a0_c2 IS NULL OR r.a1_c2 IS NULL THEN NULL ELSE a.bd2 END) * r.a0_c2), 0::float8)) AS t1_2 FROM (SELECT a0.rid AS a0_rid, a1.rid AS a1_rid, a0.c2 AS a0_c2, a1.c2 AS a1_c2, COALESCE(a0.c0, CAST(0 AS pg_catalog.numeric)) AS k0, (a0.c0) IS NULL AS k0n, COALESCE(a1.c0, CAST(0 AS pg_catalog.numeric)) AS k1, (a1.c0) IS NULL AS k1n FROM (f1 a0 JOIN f2 a1 ON ((a0.c1 OPERATOR(pg_catalog.=) a1.c1) AND (a1.c0 OPERATOR(pg_catalog.<=) a0.c0))) OFFSET 0) r JOIN (SELECT a.*, a.d2 AS bd2, COALESCE(a.c0, CAST(0 AS pg_catalog.numeric)) AS h0, (a.c0) IS NULL AS h0n, COALESCE(a.c1, CAST(0 AS pg_catalog.numeric)) AS h1, (a.c1) IS NULL AS h1n FROM b5 a OFFSET 0) a ON r.k0 = a.h0 AND r.k0n = a.h0n AND r.k1 = a.h1 AND r.k1n = a.h1n) q GROUP BY GROUPING SETS ((q.r0), (q.r1))),
b2 AS NOT MATERIALIZED (SELECT r1 AS rid, t1_2 AS d2 FROM m5 WHERE gs = 2 AND r1 IS NOT NULL),
b1 AS NOT MATERIALIZED (SELECT r0 AS rid, t0_2 AS d2 FROM m5 WHERE gs = 1 AND r0 IS NOT NULL)
SELECT f.toid, f.tid, 1 AS pidx, b.d2 AS g, NULL::text AS key FROM f2 f JOIN b2 b ON b.rid = f.rid
UNION ALL
SELECT f.toid, f.tid, 0 AS pidx, b.d2 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f7
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f7