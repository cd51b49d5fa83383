-- Every relational construct, each against central finite differences of
-- the same loss (ddx_gradcheck evaluates only the forward query).
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA constructs;
SET search_path = constructs, public;
\set VERBOSITY terse
CREATE TABLE w (f int, val float8);
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int, val float8);
INSERT INTO w VALUES (1, 0.5), (2, -0.25), (3, 1.25), (NULL, 0.75);
INSERT INTO x VALUES (1, 1, 1.0), (1, 2, 2.0), (2, 1, 3.0), (2, 2, -1.0), (3, 1, 0.5), (3, 3, 0.25),
                     (4, NULL, 1.5), (4, 2, NULL), (3, 3, 0.25);
INSERT INTO y VALUES (1, 1.0), (2, 2.0), (3, -1.0), (5, 4.0);

CREATE FUNCTION check_grad(loss text, tol float8 DEFAULT 1e-6) RETURNS text LANGUAGE sql AS $$
  SELECT format('%s rows, %s', rows_checked, CASE WHEN max_rel_error < tol OR max_abs_error < tol THEN 'ok'
                                              ELSE 'FAILED: ' || max_abs_error || ' ' || max_rel_error END)
  FROM ddx_gradcheck(loss, 'w', 'val')
$$;

-- joins: inner, comma, theta, cross, IS NOT DISTINCT FROM, LEFT, RIGHT, FULL
SELECT check_grad($$SELECT sum(x.val * w.val) FROM x JOIN w ON x.f = w.f$$);
SELECT check_grad($$SELECT sum(x.val * w.val * w.val) FROM x, w WHERE x.f = w.f$$);
SELECT check_grad($$SELECT sum(exp(x.val * w.val)) FROM x JOIN w ON x.f < w.f$$);
SELECT check_grad($$SELECT sum(w.val * y.val) FROM w CROSS JOIN y$$);
-- two columns of the other tables equated with one of w (x.f and y.s with w.f):
-- the transpose joins x and y on x.f = y.s itself (NULL keys in w and x)
SELECT check_grad($$SELECT sum(w.val * x.val * y.val) FROM w JOIN x ON x.f = w.f JOIN y ON y.s = w.f$$);
SELECT count(*) FILTER (WHERE sql LIKE '%a1.f OPERATOR(pg_catalog.=) a2.s%') AS x_y_joined
  FROM ddx_explain($$WITH loss AS (SELECT sum(w.val * x.val * y.val) AS l FROM w JOIN x ON x.f = w.f
                     JOIN y ON y.s = w.f) SELECT grad('loss', val) FROM w$$);
SELECT check_grad($$SELECT sum(x.val * w.val) FROM x JOIN w ON x.f IS NOT DISTINCT FROM w.f$$);
SELECT check_grad($$SELECT sum(coalesce(x.val, 1) * w.val) FROM w LEFT JOIN x ON x.f = w.f$$);
SELECT check_grad($$SELECT sum(coalesce(w.val, 2) * y.val) FROM w RIGHT JOIN y ON y.s = w.f$$);
SELECT check_grad($$SELECT sum(coalesce(w.val * w.val, 0) + coalesce(y.val, 0)) FROM w FULL JOIN y ON y.s = w.f$$);
SELECT check_grad($$SELECT sum(a.val * b.val) FROM w a JOIN w b ON a.f <> b.f$$);   -- self join
-- semi and anti joins
SELECT check_grad($$SELECT sum(w.val * w.val) FROM w WHERE EXISTS (SELECT 1 FROM x WHERE x.f = w.f AND x.val > 0.6)$$);
SELECT check_grad($$SELECT sum(w.val * w.val) FROM w WHERE NOT EXISTS (SELECT 1 FROM x WHERE x.f = w.f)$$);
SELECT check_grad($$SELECT sum(w.val * w.val) FROM w WHERE w.f IN (SELECT f FROM x WHERE val < 0)$$);
SELECT check_grad($$SELECT sum(w.val * w.val) FROM w WHERE w.f NOT IN (SELECT f FROM x WHERE f IS NOT NULL AND val > 2)$$);
SELECT check_grad($$SELECT sum(w.val) FROM w WHERE w.f = ANY (SELECT s FROM y WHERE val > 0)$$);
-- aggregates: grouped and not, SUM AVG COUNT MIN MAX, HAVING, NULL groups
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT x.s, sum(x.val * w.val) z FROM x JOIN w ON x.f = w.f GROUP BY x.s) g$$);
SELECT check_grad($$SELECT avg(g.m) + sum(g.n) FROM (SELECT x.s, avg(x.val * w.val) m, count(w.val) n FROM x JOIN w ON x.f = w.f GROUP BY x.s) g$$);
SELECT check_grad($$SELECT sum(g.hi - 2 * g.lo) FROM (SELECT x.s, max(x.val * w.val) hi, min(w.val) lo FROM x JOIN w ON x.f = w.f GROUP BY x.s) g$$);
SELECT check_grad($$SELECT sum(g.m) FROM (SELECT w.f, avg(w.val) m FROM w GROUP BY w.f) g$$);   -- NULL key
SELECT check_grad($$SELECT sum(g.z) FROM (SELECT x.s, sum(x.val * w.val) z FROM x JOIN w ON x.f = w.f GROUP BY x.s HAVING sum(x.val * w.val) > 0.1) g$$);   -- group 1 sums to 0: away from the kink
SELECT check_grad($$SELECT max(w.val) * count(*) + min(w.val) FROM w$$);
-- the contraction transpose (only w receives gradient: x joined with the
-- cotangents first, summed by what w is compared with, then joined to w): a
-- key of w equated with x's, a key of w compared by <=, NULL-safe keys that
-- pair NULLs, AVG, two aggregates, no group key, and a parameter that is NULL
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT x.s, w.f, sum(x.val * w.val) z FROM x JOIN w ON x.f = w.f GROUP BY x.s, w.f) g$$);
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT x.s, w.f, sum(x.val * w.val) z FROM x JOIN w ON x.f <= w.f GROUP BY x.s, w.f) g$$);
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT x.s, w.f, sum(x.val * exp(w.val)) z FROM x JOIN w ON x.f IS NOT DISTINCT FROM w.f GROUP BY x.s, w.f) g$$);
SELECT check_grad($$SELECT sum(g.m * g.m + g.z) FROM (SELECT w.f, x.s, avg(x.val * w.val) m, sum(w.val / (1 + x.s)) z FROM x JOIN w ON x.f <= w.f GROUP BY w.f, x.s) g$$);
SELECT check_grad($$SELECT sum(tanh(x.val * w.val)) + sum(x.val * w.val) FROM x JOIN w ON x.f = w.f WHERE x.s > 1$$);
CREATE TABLE wn (f int, val float8);
INSERT INTO wn VALUES (1, 0.5), (2, NULL), (3, -2.0), (NULL, 1.5);
SELECT rows_checked, max_rel_error < 1e-6 FROM ddx_gradcheck($$SELECT sum(g.z * g.z) FROM (SELECT x.s, wn.f, sum(x.val * wn.val) z FROM x JOIN wn ON x.f IS NOT DISTINCT FROM wn.f GROUP BY x.s, wn.f) g$$, 'wn', 'val');
WITH g AS (SELECT x.s, sum(x.val * wn.val) z FROM x JOIN wn ON x.f = wn.f GROUP BY x.s), loss AS (SELECT sum(z) AS l FROM g)
SELECT f, val, grad('loss', wn.val) FROM wn ORDER BY f;   -- closed form: sum of x.val over x.f = f (a NULL parameter gets NULL, as everywhere)
-- a condition that tells apart values = cannot (numeric 1.0 and 1.00 as text), and
-- a column without an equality (json): the transpose steps aside (closed forms 7, 3 and 2, 8)
CREATE TABLE wt (t text, k int, val float8);
CREATE TABLE xt (n numeric, j json, val float8);
INSERT INTO wt VALUES ('1.0', 1, 0.5), ('1.00', 2, -0.25);
INSERT INTO xt VALUES (1.0, '{"k":1}', 2.0), (1.00, '{"k":2}', 3.0), (1.0, '{"k":2}', 5.0);
WITH loss AS (SELECT sum(xt.val * wt.val) AS l FROM xt JOIN wt ON xt.n::text = wt.t)
SELECT t, grad('loss', wt.val) FROM wt ORDER BY t;
WITH loss AS (SELECT sum(xt.val * wt.val) AS l FROM xt JOIN wt ON (xt.j->>'k')::int = wt.k)
SELECT k, grad('loss', wt.val) FROM wt ORDER BY k;
-- both sides parameters (a self join), each transposed on its own; the
-- inequality reads each side only through its group key
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT a.f, b.f AS f2, sum(a.val * b.val) z FROM w a JOIN w b ON a.f <= b.f GROUP BY a.f, b.f) g$$);
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT x.s, w.f, sum(x.val * w.val * w.val) z FROM x JOIN w ON x.f = w.f AND x.s <= w.f GROUP BY x.s, w.f) g$$);
-- a costly value of one side, computed below the join that repeats it (once
-- per row of w, not per pair): with a deferred factor, a group key, AVG, and
-- a softmax over x's groups read by a join with y; a row of wl that joins
-- nothing has a value the forward never computes (ln(-1)): no error, and the
-- closed form (the sum of x.val over x.f = 1, over 0.5: 9; and 0)
SELECT check_grad($$SELECT sum(exp(w.val) / (1 + w.val * w.val) * y.val) FROM w CROSS JOIN y$$);
SELECT check_grad($$SELECT sum(g.z * g.z) FROM (SELECT x.s, sum(tanh(w.val) * x.val) z FROM x JOIN w ON x.f = w.f GROUP BY x.s) g$$);
SELECT check_grad($$SELECT sum(g.m * y.val) FROM (SELECT x.s, avg(exp(w.val * x.val)) m FROM x JOIN w ON x.f = w.f GROUP BY x.s) g JOIN y ON y.s = g.s$$);
SELECT check_grad($$WITH e AS (SELECT x.s, x.f, exp(x.val * w.val) AS e FROM x JOIN w ON x.f = w.f),
  z AS (SELECT s, sum(e) AS z FROM e GROUP BY s),
  p AS (SELECT e.s, e.f, e.e / z.z AS p FROM e JOIN z ON z.s = e.s)
  SELECT sum(p.p * y.val * y.val) FROM p JOIN y ON y.s <= p.s$$);
-- log-sum-exp by GROUP BY: its max held constant; an exp(z - max) that is not normalized keeps it
SELECT check_grad($$WITH m AS (SELECT x.s, max(x.val * w.val) m FROM x JOIN w ON x.f = w.f GROUP BY x.s),
  e AS (SELECT x.s, exp(x.val * w.val - m.m) e FROM x JOIN w ON x.f = w.f JOIN m ON m.s = x.s)
  SELECT sum(m.m + ln(z.z)) FROM m JOIN (SELECT s, sum(e) z FROM e GROUP BY s) z ON z.s = m.s$$);
SELECT check_grad($$WITH m AS (SELECT x.s, max(x.val * w.val) m FROM x JOIN w ON x.f = w.f GROUP BY x.s)
  SELECT sum(exp(x.val * w.val - m.m)) FROM x JOIN w ON x.f = w.f JOIN m ON m.s = x.s$$);
CREATE TABLE wl (f int, val float8);
INSERT INTO wl VALUES (1, 0.5), (7, -1.0);
WITH loss AS (SELECT sum(ln(wl.val) * x.val) AS l FROM wl JOIN x ON x.f = wl.f)
SELECT f, grad('loss', wl.val) FROM wl ORDER BY f;
-- the same where the rows join one to one (both keyed by f): ln is computed
-- after the join, for the rows that join, as PostgreSQL computes it (no split
-- below it, src/core/region.cpp BelowSides): no error, and the closed form
-- 3 / 0.5 = 6, and 0
CREATE TABLE wu (f int PRIMARY KEY, val float8);
INSERT INTO wu VALUES (1, 0.5), (7, -1.0);
CREATE TABLE xu (f int PRIMARY KEY, val float8);
INSERT INTO xu VALUES (1, 3), (2, 5);
WITH loss AS (SELECT sum(ln(wu.val) * xu.val) AS l FROM wu JOIN xu ON xu.f = wu.f)
SELECT f, grad('loss', wu.val) FROM wu ORDER BY f;
-- ties of MIN/MAX share the gradient evenly (closed form: 1/2 each); a tie
-- of LEAST(min, 1) goes to its last argument, the constant (0 to val = 1)
CREATE TABLE tie (val float8);
INSERT INTO tie VALUES (3), (3), (1);
WITH loss AS (SELECT max(val) AS l FROM tie) SELECT val, grad('loss', val) FROM tie ORDER BY val, 2;
WITH loss AS (SELECT greatest(max(val), 2) + least(min(val), 1) AS l FROM tie) SELECT val, grad('loss', val) FROM tie ORDER BY val, 2;
-- DISTINCT, CTEs read twice, FROM subqueries, views, scalar subqueries
SELECT check_grad($$SELECT sum(d.v) FROM (SELECT DISTINCT w.val * 3 AS v FROM w) d$$);
SELECT check_grad($$WITH c AS (SELECT w.f, w.val * w.val AS q FROM w) SELECT sum(a.q * b.q) FROM c a JOIN c b ON a.f = b.f$$);
SELECT check_grad($$WITH c AS MATERIALIZED (SELECT sum(w.val) AS t FROM w) SELECT (SELECT t FROM c) * (SELECT t FROM c)$$);
CREATE VIEW wv AS SELECT f, val * 2 AS v2 FROM w WHERE f IS NOT NULL;
SELECT check_grad($$SELECT sum(v2 * v2) FROM wv$$);
SELECT check_grad($$SELECT s.a / (SELECT sum(abs(val)) FROM w) FROM (SELECT sum(w.val) AS a FROM w) s$$);
SELECT check_grad($$SELECT sum(w.val * (SELECT max(val) FROM w)) FROM w$$);
SELECT check_grad($$SELECT sum(x.val) / (SELECT sum(w.val * w.val) FROM w) FROM x$$);
-- UNION ALL (the reference refuses it) and UNION
SELECT check_grad($$SELECT sum(v) FROM (SELECT w.val * 2 AS v FROM w UNION ALL SELECT tanh(w.val) FROM w WHERE w.f = 1 UNION ALL SELECT 1.0) u$$);
SELECT check_grad($$SELECT sum(v) FROM (SELECT w.val AS v FROM w UNION SELECT w.val * 3 FROM w) u$$);
-- ORDER BY ... LIMIT with a total order
SELECT check_grad($$SELECT sum(t.v) FROM (SELECT w.val * w.val AS v FROM w ORDER BY w.f NULLS FIRST LIMIT 2) t$$);
SELECT check_grad($$SELECT sum(t.v) FROM (SELECT w.val AS v FROM w ORDER BY w.f DESC LIMIT 2 OFFSET 1) t$$);
-- OFFSET 0, PostgreSQL's optimization fence: the rows as they are (no order needed)
SELECT check_grad($$SELECT sum(t.v * t.v) FROM (SELECT x.s, sum(x.val * w.val) AS v FROM x JOIN w ON w.f = x.f GROUP BY x.s OFFSET 0) t$$);
-- VALUES and set-returning functions in FROM
SELECT check_grad($$SELECT sum(w.val * v.c) FROM w JOIN (VALUES (1, 2.0::float8), (2, -1.5)) AS v(f, c) ON v.f = w.f$$);
SELECT check_grad($$SELECT sum(w.val * g) FROM w JOIN generate_series(1, 2) g ON g = w.f$$);
-- unpivoting a row: LATERAL (VALUES ...), and unnest(ARRAY[...]) (lateral
-- without the word), zipped and WITH ORDINALITY
SELECT check_grad($$SELECT sum(u.v * x.val) FROM w CROSS JOIN LATERAL (VALUES (1, w.val), (2, w.val * w.val)) AS u(k, v) JOIN x ON x.f = u.k$$);
SELECT check_grad($$SELECT sum(u.v) FROM w, LATERAL (VALUES (w.val), (tanh(w.val)), (NULL)) AS u(v) WHERE w.f IS NOT NULL$$);
SELECT check_grad($$SELECT sum(u.v * u.v) FROM w LEFT JOIN LATERAL (VALUES (w.val - 1), (exp(w.val))) AS u(v) ON true$$);
SELECT check_grad($$SELECT sum(exp(a.v) * a.o) FROM w, unnest(ARRAY[w.val, 2 * w.val, w.val - 1]) WITH ORDINALITY AS a(v, o)$$);
SELECT check_grad($$SELECT sum(a.v * coalesce(a.c, 3)) FROM w, unnest(ARRAY[w.val, w.val * w.val], ARRAY[1.5]) AS a(v, c)$$);
SELECT check_grad($$SELECT sum(g.s * g.s) FROM (SELECT a.o, sum(a.v * x.val) AS s FROM w JOIN x ON x.f = w.f,
                                                   unnest(ARRAY[w.val, sin(w.val)]) WITH ORDINALITY AS a(v, o) GROUP BY a.o) g$$);
-- a partitioned parameter table
CREATE TABLE pw (k int, val float8) PARTITION BY RANGE (k);
CREATE TABLE pw1 PARTITION OF pw FOR VALUES FROM (0) TO (10);
CREATE TABLE pw2 PARTITION OF pw FOR VALUES FROM (10) TO (20);
INSERT INTO pw VALUES (1, 1.0), (11, 2.0), (12, -3.0);
WITH loss AS (SELECT sum(pw.val * pw.val * pw.k) AS l FROM pw) SELECT k, grad('loss', val) FROM pw ORDER BY k;
SELECT rows_checked, max_rel_error < 1e-6 FROM ddx_gradcheck($$SELECT sum(exp(pw.val) * pw.k) FROM pw$$, 'pw', 'val');
-- a temporary and an unlogged parameter table
CREATE TEMP TABLE tw AS SELECT * FROM w;
CREATE UNLOGGED TABLE uw AS SELECT * FROM w;
SELECT rows_checked, max_rel_error < 1e-6 FROM ddx_gradcheck($$SELECT sum(sin(tw.val) * uw.val) FROM tw JOIN uw ON tw.f = uw.f$$, 'tw', 'val');
SELECT rows_checked, max_rel_error < 1e-6 FROM ddx_gradcheck($$SELECT sum(sin(tw.val) * uw.val) FROM tw JOIN uw ON tw.f = uw.f$$, 'uw', 'val');
