-- Windows with ORDER BY: running and sliding frames (ROWS, RANGE, GROUPS,
-- EXCLUDE), LAG and LEAD, and ranks as filters (top-k). Oracles: central
-- finite differences (ddx_gradcheck) and closed forms.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA frames;
SET search_path = frames, public;
\set VERBOSITY terse
-- Two partitions and a NULL one; t has peers (ties) inside partitions; one
-- NULL value; ids break every tie.
CREATE TABLE ts (id int PRIMARY KEY, g int, t int, val float8);
INSERT INTO ts SELECT i, CASE WHEN i % 5 = 0 THEN NULL ELSE i % 2 END, i / 3,
                      CASE WHEN i = 7 THEN NULL ELSE sin(i * 1.3) + i * 0.01 END
FROM generate_series(1, 20) i;
CREATE FUNCTION check_grad(loss text) RETURNS text LANGUAGE sql AS $$
  SELECT format('%s rows, %s', rows_checked, CASE WHEN max_rel_error < 1e-6 OR max_abs_error < 1e-8 THEN 'ok'
                                              ELSE 'FAILED: ' || max_abs_error || ' ' || max_rel_error END)
  FROM ddx_gradcheck(loss, 'ts', 'val')
$$;
-- running sums and averages (the default frame: RANGE to the current row, peers included)
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT sum(val) OVER (PARTITION BY g ORDER BY t) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(val * a) FROM (SELECT val, avg(val) OVER (PARTITION BY g ORDER BY t DESC NULLS FIRST) AS a FROM ts) q$$);
SELECT check_grad($$SELECT sum(val * c) FROM (SELECT val, count(val) OVER (ORDER BY t) AS c FROM ts) q$$);
-- ROWS frames: sliding, ahead of the row, excluding it
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT avg(val) OVER (PARTITION BY g ORDER BY t, id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(s * val) FROM (SELECT val, sum(val * val) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(exp(s)) FROM (SELECT sum(val) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE CURRENT ROW) AS s FROM ts) q$$);
-- RANGE with an offset, GROUPS, EXCLUDE GROUP and TIES
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT sum(val) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT avg(val) OVER (ORDER BY t DESC GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW EXCLUDE TIES) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT sum(val) OVER (ORDER BY t GROUPS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING EXCLUDE GROUP) AS s FROM ts) q$$);
-- running and sliding MIN and MAX
SELECT check_grad($$SELECT sum(s * val) FROM (SELECT val, max(val) OVER (PARTITION BY g ORDER BY t) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT min(2 * val) OVER (ORDER BY id ROWS 3 PRECEDING) AS s FROM ts) q$$);
SELECT check_grad($$SELECT sum(s) FROM (SELECT max(val * val) OVER (ORDER BY t GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP) AS s FROM ts) q$$);
-- LAG and LEAD, with offsets and a default that carries gradient
SELECT check_grad($$SELECT sum(d * d) FROM (SELECT val - lag(val) OVER (PARTITION BY g ORDER BY t, id) AS d FROM ts) q$$);
SELECT check_grad($$SELECT sum(d * val) FROM (SELECT val, lead(val * val, 2, val + 1) OVER (ORDER BY id) AS d FROM ts) q$$);
SELECT check_grad($$SELECT sum(d) FROM (SELECT lag(exp(val), 3, 0.5) OVER (PARTITION BY g ORDER BY id DESC) * val AS d FROM ts) q$$);
-- windows over a join, two windows at one level, a window over a window
CREATE TABLE w (g int PRIMARY KEY, scale float8);
INSERT INTO w VALUES (0, 2), (1, -0.5);
SELECT check_grad($$SELECT sum(s * s) FROM (SELECT sum(ts.val * w.scale) OVER (PARTITION BY ts.g ORDER BY ts.id) AS s FROM ts JOIN w ON w.g = ts.g) q$$);
SELECT check_grad($$SELECT sum(a * b) FROM (SELECT sum(val) OVER (ORDER BY id) AS a, lag(val) OVER (PARTITION BY g ORDER BY id) AS b FROM ts) q$$);
SELECT check_grad($$SELECT sum(b * b) FROM (SELECT sum(a) OVER (ORDER BY id ROWS 1 PRECEDING) AS b FROM (SELECT id, avg(val) OVER (ORDER BY t) AS a FROM ts) q) r$$);
-- top-k: ranks as filters; the kept rows get the gradient
SELECT check_grad($$SELECT sum(val * val) FROM (SELECT val, row_number() OVER (PARTITION BY g ORDER BY val DESC, id) AS rn FROM ts) q WHERE rn <= 2$$);
SELECT check_grad($$SELECT sum(exp(val)) FROM (SELECT val, dense_rank() OVER (ORDER BY t) AS r FROM ts) q WHERE r BETWEEN 2 AND 3$$);

-- closed forms on one ordered partition x = (1, 2, 3, 4)
CREATE TABLE x (i int PRIMARY KEY, v float8);
INSERT INTO x VALUES (1, 1), (2, 2), (3, 3), (4, 4);
-- Σ_j Σ_{k<=j} x_k: ∂/∂x_i = n - i + 1
WITH loss AS (SELECT sum(s) FROM (SELECT sum(v) OVER (ORDER BY i) AS s FROM x) q)
SELECT i, grad('loss', v), 4 - i + 1 AS expected FROM x ORDER BY i;
-- Σ_j (x_j - x_{j-1})² with lag's NULL for the first row: ∂/∂x_i = 2(d_i - d_{i+1}) with d = 1 where defined
WITH loss AS (SELECT sum(d * d) FROM (SELECT v - lag(v) OVER (ORDER BY i) AS d FROM x) q)
SELECT i, grad('loss', v), CASE i WHEN 1 THEN -2 WHEN 4 THEN 2 ELSE 0 END AS expected FROM x ORDER BY i;
-- top-2 by value: the kept rows 3 and 4 get the gradient of Σ v², the others 0
WITH loss AS (SELECT sum(v * v) FROM (SELECT v, rank() OVER (ORDER BY v DESC) AS r FROM x) q WHERE r <= 2)
SELECT i, grad('loss', v), CASE WHEN i >= 3 THEN 2 * v ELSE 0 END AS expected FROM x ORDER BY i;
-- a running max with ties shares each output's gradient among the rows attaining it:
-- values (2, 2, 1): outputs 2 (row 1), 2 (rows 1, 2), 2 (rows 1, 2) -> 1 + 1/2 + 1/2, 1/2 + 1/2, 0
CREATE TABLE m (i int PRIMARY KEY, v float8);
INSERT INTO m VALUES (1, 2), (2, 2), (3, 1);
WITH loss AS (SELECT sum(s) FROM (SELECT max(v) OVER (ORDER BY i ROWS UNBOUNDED PRECEDING) AS s FROM m) q)
SELECT i, grad('loss', v) FROM m ORDER BY i;

-- refusals
-- a rank used as a value
WITH loss AS (SELECT sum(val * rn) FROM (SELECT val, row_number() OVER (ORDER BY id) AS rn FROM ts) q)
SELECT grad('loss', val) FROM ts LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT max(rn)::float8 FROM (SELECT val, dense_rank() OVER (ORDER BY id) AS rn FROM ts) q)
SELECT grad('loss', val) FROM ts LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
-- an ORDER BY that leaves ties for row_number, lag or a ROWS frame: the
-- forward and the backward could each order the ties another way
WITH loss AS (SELECT sum(val) FROM (SELECT val, row_number() OVER (ORDER BY t) AS rn FROM ts) q WHERE rn <= 3)
SELECT grad('loss', val) FROM ts LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(d * d) FROM (SELECT val - lag(val) OVER (PARTITION BY g ORDER BY t) AS d FROM ts) q)
SELECT grad('loss', val) FROM ts LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
-- rank() keeps ties together: the same ORDER BY is accepted
WITH loss AS (SELECT sum(val) FROM (SELECT val, rank() OVER (ORDER BY t) AS r FROM ts) q WHERE r <= 3)
SELECT sum(grad('loss', val)) AS kept FROM ts;
-- other window functions, and min/max over a RANGE offset
WITH loss AS (SELECT sum(val * n) FROM (SELECT val, ntile(2) OVER (ORDER BY id) AS n FROM ts) q)
SELECT grad('loss', val) FROM ts LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(s) FROM (SELECT max(val) OVER (ORDER BY t RANGE 1 PRECEDING) AS s FROM ts) q)
SELECT grad('loss', val) FROM ts LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
