WITH f5 AS MATERIALIZED (SELECT (CAST(a0.i AS pg_catalog.int8) * 4294967296 + ((CAST(a1.j AS pg_catalog.int8) + 2147483648 + CAST(a0.i AS pg_catalog.int8) * 40503) % 4294967296 + 4294967296) % 4294967296) AS rid, a0.i AS c0, a1.j AS c1, sum((a0.val * a1.val)) AS c2 FROM (public.x a0 JOIN public.w a1 ON (a0.j OPERATOR(pg_catalog.=) a1.i)) GROUP BY 2, 3),
f8 AS MATERIALIZED (SELECT 1::bigint AS rid, sum(power(tanh(a0.c2), CAST(('2'::integer) AS pg_catalog.float8))) AS c0 FROM f5 a0),
f9 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.rid AS l0, a0.c0 AS x0_0, a0.c0 AS c0 FROM f8 a0),
b9 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f9 WHERE c0 IS NOT NULL),
b8 AS NOT MATERIALIZED (SELECT q.rid, q.d0 AS d0 FROM (SELECT f.l0 AS rid, (COALESCE(b.d0, 0::float8)) AS d0 FROM f9 f JOIN b9 b ON b.rid = f.rid) q WHERE q.rid IS NOT NULL),
b5 AS NOT MATERIALIZED (SELECT q.rid, q.d2 AS d2, q.c0, q.c1, q.c2 FROM (SELECT r.a0_rid AS rid, (COALESCE((((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END) * (CASE WHEN CAST(('2'::integer) AS pg_catalog.float8) = 0 THEN 0::float8 WHEN r.v0 = 0 AND CAST(('2'::integer) AS pg_catalog.float8) < 1 THEN 'Infinity'::float8 ELSE CAST(('2'::integer) AS pg_catalog.float8) * power(r.v0, CAST(('2'::integer) AS pg_catalog.float8) - 1) END)) * (1 - r.v0 * r.v0)), 0::float8)) AS d2, r.a0_c0 AS c0, r.a0_c1 AS c1, r.a0_c2 AS c2 FROM (SELECT r.*, tanh(r.a0_c2) AS v0 FROM (SELECT a0.rid AS a0_rid, a0.c0 AS a0_c0, a0.c1 AS a0_c1, a0.c2 AS a0_c2 FROM f5 a0 OFFSET 0) r OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b8 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b2 AS NOT MATERIALIZED (SELECT a1.ctid AS rid, CASE WHEN a1.val IS NULL THEN 0::float8 ELSE t.d2 END AS d2 FROM (SELECT q.g1, q.oa0_c1, sum(q.d2) AS d2 FROM (SELECT a.c1 AS g1, r.a0_c1 AS oa0_c1, (COALESCE((a.bd2 * r.a0_c2), 0::float8)) AS d2 FROM (SELECT a0.i AS k0, a0.j AS a0_c1, a0.val AS a0_c2 FROM public.x a0 OFFSET 0) r JOIN (SELECT a.*, a.d2 AS bd2 FROM b5 a OFFSET 0) a ON r.k0 = a.c0) q GROUP BY q.g1, q.oa0_c1) t JOIN public.w a1 ON a1.j = t.g1 AND (t.oa0_c1 OPERATOR(pg_catalog.=) a1.i))
SELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g, z.key FROM (
SELECT CAST('public.w' AS pg_catalog.regclass)::pg_catalog.oid AS toid, b.rid AS tid, 0 AS pidx, b.d2 AS g, NULL::text AS key FROM b2 b
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f9
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f9
) z GROUP BY z.toid, z.tid, z.pidx, z.key