-- grad: the contract on a linear model, against closed forms.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA grad_basic;
SET search_path = grad_basic, public;
\set VERBOSITY terse
CREATE TABLE w (f int, val float8);
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int, val float8);
INSERT INTO w VALUES (1, 0.5), (2, -0.25), (3, 2.0);
INSERT INTO x VALUES (1, 1, 1.0), (1, 2, 2.0), (2, 1, 3.0), (2, 2, -1.0), (3, 1, 0.5), (3, 2, 0.25),
                     (1, 3, 0.1), (2, 3, -0.7);
INSERT INTO y VALUES (1, 1.0), (2, 2.0), (3, -1.0);

-- closed form of ∂/∂w_f mean_s (z_s - y_s)^2: 2/N Σ_s (z_s - y_s) x_sf
CREATE VIEW closed AS
  WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
  SELECT x.f, 2.0 / 3 * sum((p.z - y.val) * x.val) AS g
  FROM x JOIN pred p ON p.s = x.s JOIN y ON y.s = x.s GROUP BY x.f;

-- the loss as a CTE name
WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s),
     loss AS (SELECT avg(power(pred.z - y.val, 2)) AS l FROM pred JOIN y ON pred.s = y.s)
SELECT w.f, abs(grad('loss', w.val) - c.g) < 1e-12 AS ok FROM w JOIN closed c ON c.f = w.f ORDER BY w.f;

-- the loss as a scalar subquery
WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
SELECT w.f, abs(grad((SELECT avg(power(pred.z - y.val, 2)) FROM pred JOIN y ON pred.s = y.s), w.val) - c.g) < 1e-12 AS ok
FROM w JOIN closed c ON c.f = w.f ORDER BY w.f;

-- the loss as a view
CREATE VIEW pred AS SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s;
CREATE VIEW loss AS SELECT avg(power(pred.z - y.val, 2)) AS l FROM pred JOIN y ON pred.s = y.s;
SELECT w.f, abs(grad('loss', w.val) - c.g) < 1e-12 AS ok FROM w JOIN closed c ON c.f = w.f ORDER BY w.f;

-- a CTE of the statement shadows a view of the same name
WITH loss AS (SELECT sum(3 * w.val) AS l FROM w) SELECT w.f, grad('loss', w.val) FROM w ORDER BY w.f;

-- several calls, one loss, one backward pass; expressions around the call
SELECT w.f, abs(grad('loss', w.val) - c.g) < 1e-12 AS first_call, abs(2 * grad('loss', w.val) - 2 * c.g) < 1e-12 AS second_call,
       abs(w.val - 0.1 * grad('loss', w.val) - (w.val - 0.1 * c.g)) < 1e-12 AS step
FROM w JOIN closed c ON c.f = w.f ORDER BY w.f;

-- UPDATE ... SET with grad: one gradient descent step, closed form computed first
CREATE TEMP TABLE expected AS SELECT w.f, w.val - 0.1 * c.g AS val FROM w JOIN closed c ON c.f = w.f;
UPDATE w SET val = val - 0.1 * grad('loss', val);
SELECT w.f, abs(w.val - e.val) < 1e-12 AS ok FROM w JOIN expected e ON e.f = w.f ORDER BY w.f;

-- NULL value -> NULL gradient; a row that no gradient reaches -> 0
INSERT INTO w VALUES (4, NULL), (5, 1.0);
SELECT w.f, grad('loss', w.val) IS NULL AS is_null, grad('loss', w.val) = 0 AS zero FROM w WHERE w.f >= 4 ORDER BY w.f;

-- a NULL loss sends no gradient
WITH loss AS (SELECT sum(w.val) FILTER (WHERE false) AS l FROM w) SELECT 1;
WITH loss AS (SELECT CASE WHEN false THEN sum(w.val) END AS l FROM w)
SELECT w.f, grad('loss', w.val) FROM w WHERE w.val IS NOT NULL ORDER BY w.f;

-- two equal rows are two parameters, each with its own gradient
CREATE TABLE dup (k int, val float8);
INSERT INTO dup VALUES (1, 2.0), (1, 2.0), (2, 3.0);
WITH loss AS (SELECT sum(d.val * d.val * d.k) AS l FROM dup d)
SELECT k, val, grad('loss', val) FROM dup ORDER BY k, val;
WITH loss AS (SELECT sum(d.val) * max(d.val) AS l FROM dup d)  -- max + sum · [row holds the max]
SELECT k, grad('loss', val) FROM dup ORDER BY k;

-- float4 parameters; gradient is float8
CREATE TABLE w4 (f int, val float4);
INSERT INTO w4 VALUES (1, 1.5), (2, -2);
WITH loss AS (SELECT sum(w4.val * w4.val * w4.val) AS l FROM w4) SELECT f, grad('loss', val), pg_typeof(grad('loss', val)) FROM w4 ORDER BY f;

-- gradient with respect to two tables from one loss
CREATE TABLE b (val float8);
INSERT INTO b VALUES (0.5);
WITH loss AS (SELECT sum(power(x.val * w.val + b.val, 2)) AS l FROM x JOIN w ON x.f = w.f CROSS JOIN b)
SELECT 'w' AS t, w.f, round(grad('loss', w.val)::numeric, 10) FROM w WHERE w.f <= 3
UNION ALL
SELECT 'b', 0, round(grad('loss', b.val)::numeric, 10) FROM b ORDER BY 1, 2;
-- closed forms: ∂/∂w_f = Σ 2 (x w + b) x, ∂/∂b = Σ 2 (x w + b)
SELECT x.f, round(sum(2 * (x.val * w.val + 0.5) * x.val)::numeric, 10) FROM x JOIN w ON x.f = w.f GROUP BY x.f ORDER BY 1;
SELECT round(sum(2 * (x.val * w.val + 0.5))::numeric, 10) FROM x JOIN w ON x.f = w.f;

-- stop_gradient holds a value constant (and ddx_stop_gradient is the same)
WITH loss AS (SELECT sum(w.val * stop_gradient(w.val) + ddx_stop_gradient(w.val)) AS l FROM w)
SELECT f, grad('loss', val) = val AS ok FROM w WHERE val IS NOT NULL ORDER BY f;
SELECT stop_gradient(2.5), ddx_stop_gradient(-1);

-- the statement's snapshot: the gradient sees the rows the statement sees
BEGIN ISOLATION LEVEL REPEATABLE READ;
WITH loss AS (SELECT sum(w.val * w.val) AS l FROM w) SELECT count(*) FROM w WHERE grad('loss', w.val) = 2 * w.val;
COMMIT;

-- ddx.retain_memory: freed memory a backend keeps between programs; the
-- same gradients with it at 0 after a program at the default (the kept
-- memory given back), and its bounds
SHOW ddx.retain_memory;
WITH loss AS (SELECT sum(w.val * w.val * w.val) AS l FROM w) SELECT f, abs(grad('loss', w.val) - 3 * w.val * w.val) <= 1e-15 * abs(3 * w.val * w.val) AS ok FROM w ORDER BY f;
SET ddx.retain_memory = 0;
WITH loss AS (SELECT sum(w.val * w.val * w.val) AS l FROM w) SELECT f, abs(grad('loss', w.val) - 3 * w.val * w.val) <= 1e-15 * abs(3 * w.val * w.val) AS ok FROM w ORDER BY f;
SET ddx.retain_memory = '64MB';
WITH loss AS (SELECT sum(w.val * w.val * w.val) AS l FROM w) SELECT f, abs(grad('loss', w.val) - 3 * w.val * w.val) <= 1e-15 * abs(3 * w.val * w.val) AS ok FROM w ORDER BY f;
-- (the SQLSTATE alone: PostgreSQL 17 writes the range with its units)
\set VERBOSITY sqlstate
SET ddx.retain_memory = '2GB';
SET ddx.retain_memory = -1;
\set VERBOSITY terse
RESET ddx.retain_memory;
