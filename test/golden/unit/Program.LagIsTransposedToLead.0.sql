WITH f1 AS MATERIALIZED (SELECT row_number() OVER () AS rid, t.tableoid AS toid, t.ctid AS tid, t.f AS c0, t.val AS c1 FROM public.w t),
f3 AS MATERIALIZED (SELECT row_number() OVER () AS rid, i.*, lag(i.c1, 2, i.c1) OVER w AS c2, row_number() OVER w AS pos, dense_rank() OVER w AS grp, row_number() OVER w - rank() OVER w AS tie FROM (SELECT a0.rid AS l0, a0.c0 AS x0_0, a0.c1 AS x0_1, a0.c0 AS c0, a0.c1 AS c1 FROM f1 a0) i WINDOW w AS (ORDER BY i.c0 ASC NULLS LAST)),
f5 AS MATERIALIZED (SELECT 1::bigint AS rid, sum(a0.c2) AS c0 FROM f3 a0),
b5 AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f5 WHERE c0 IS NOT NULL),
b3 AS NOT MATERIALIZED (SELECT q.rid, q.d2 AS d2 FROM (SELECT r.a0_rid AS rid, (COALESCE((CASE WHEN r.a0_c2 IS NULL THEN NULL ELSE a.bd0 END), 0::float8)) AS d2 FROM (SELECT a0.rid AS a0_rid, a0.c2 AS a0_c2 FROM f3 a0 OFFSET 0) r CROSS JOIN (SELECT b.rid AS rid, b.d0 AS bd0 FROM b5 b OFFSET 0) a) q WHERE q.rid IS NOT NULL),
b1 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1 FROM (SELECT q.l0 AS rid, (COALESCE(q.a1, 0::float8)) AS d1 FROM (SELECT f.*, (COALESCE(lead(b.d2, 2) OVER wp, 0::float8) + COALESCE(CASE WHEN lag(true, 2, false) OVER wp THEN NULL ELSE b.d2 END, 0::float8)) AS a1 FROM f3 f LEFT JOIN b3 b ON b.rid = f.rid WINDOW wt AS (ORDER BY f.grp), wp AS (ORDER BY f.pos)) q) q WHERE q.rid IS NOT NULL)
SELECT f.toid, f.tid, 0 AS pidx, b.d1 AS g, NULL::text AS key FROM f1 f JOIN b1 b ON b.rid = f.rid
UNION ALL
SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM f5
UNION ALL
SELECT NULL::oid, NULL::tid, -4, c0::float8, NULL::text FROM f5
UNION ALL
SELECT NULL::oid, NULL::tid, -3, count(*)::float8, NULL::text FROM f3 WHERE tie > 0