-- Window aggregates over whole partitions (PARTITION BY, no ORDER BY): each
-- is the partition's aggregate joined back to its rows. Finite differences
-- and closed forms as the oracle.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA windows;
SET search_path = windows, public;
\set VERBOSITY terse
CREATE TABLE ws (g int, val float8);
INSERT INTO ws VALUES (1, 0.5), (1, -1), (1, 2), (2, 0.3), (2, 0.1), (NULL, 1), (NULL, -0.5);
CREATE FUNCTION check_grad(loss text) RETURNS text LANGUAGE sql AS $$
  SELECT format('%s rows, %s', rows_checked, CASE WHEN max_rel_error < 1e-6 OR max_abs_error < 1e-8 THEN 'ok'
                                              ELSE 'FAILED: ' || max_abs_error || ' ' || max_rel_error END)
  FROM ddx_gradcheck(loss, 'ws', 'val')
$$;
-- SUM AVG COUNT MIN MAX over partitions (a NULL key is a partition too) and over everything
SELECT check_grad($$SELECT sum(v) FROM (SELECT val * sum(val) OVER (PARTITION BY g) AS v FROM ws) s$$);
SELECT check_grad($$SELECT sum(v) FROM (SELECT exp(val) * avg(val) OVER () AS v FROM ws) s$$);
SELECT check_grad($$SELECT sum(v) FROM (SELECT val * count(*) OVER (PARTITION BY g) + min(val) OVER (PARTITION BY g) - 2 * max(val * val) OVER (PARTITION BY g) AS v FROM ws) s$$);
-- softmax and cross-entropy written with windows
SELECT check_grad($$SELECT sum(p * p * coalesce(g, 3)) FROM
  (SELECT g, e / sum(e) OVER (PARTITION BY g) AS p FROM (SELECT g, exp(val - max(val) OVER (PARTITION BY g)) AS e FROM ws) t) s$$);
SELECT check_grad($$SELECT -avg(lp) FROM
  (SELECT val - m - ln(sum(exp(val - m)) OVER (PARTITION BY g)) AS lp FROM (SELECT g, val, max(val) OVER (PARTITION BY g) AS m FROM ws) t) s$$);
-- the max above is held constant (the loss cannot see it); not where exp(val - max) is
-- not normalized, and a min serves as well as a max
SELECT check_grad($$SELECT sum(e * e) FROM (SELECT exp(val - max(val) OVER (PARTITION BY g)) AS e FROM ws) t$$);
SELECT check_grad($$SELECT sum(p * p * coalesce(g, 3)) FROM
  (SELECT g, e / sum(e) OVER (PARTITION BY g) AS p FROM (SELECT g, exp(val - min(val) OVER (PARTITION BY g)) AS e FROM ws) t) s$$);
-- softmax probabilities sum to one in each partition: the gradient of Σ p is 0
WITH loss AS (SELECT sum(p) AS l FROM (SELECT exp(val) / sum(exp(val)) OVER (PARTITION BY g) AS p FROM ws) s)
SELECT g, val, abs(grad('loss', val)) < 1e-12 AS zero FROM ws ORDER BY g, val;
-- a named window, and two windows in one query
SELECT check_grad($$SELECT sum(val * a + b) FROM (SELECT val, avg(val) OVER w AS a, max(val) OVER () AS b FROM ws WINDOW w AS (PARTITION BY g)) s$$);
-- a window over a grouped query (it runs over the groups, after HAVING)
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT g, sum(sum(val)) OVER () + max(avg(val * val)) OVER () AS s FROM ws GROUP BY g HAVING count(*) > 1) t$$);
-- refused: a rank used as a value (frames.sql has the rest)
WITH loss AS (SELECT sum(val * r) FROM (SELECT val, rank() OVER (ORDER BY val) AS r FROM ws) t) SELECT grad('loss', val) FROM ws;
\echo :LAST_ERROR_SQLSTATE
