WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.f AS c0, t.val AS c1 FROM public.w t),
f3 AS MATERIALIZED (SELECT row_number() OVER () AS rid, a0.c1 AS c0, count(a0.c1) AS c1 FROM f1 a0 GROUP BY 2),
f5 AS MATERIALIZED (SELECT 1::bigint AS rid, sum(CAST(a0.c1 AS pg_catalog.float8)) AS c0 FROM f3 a0)
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f5
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f5