-- What users write inside a loss: their own functions (inlined where
-- PostgreSQL inlines them, called as they are elsewhere, refused where a
-- parameter could hide in them), FILTER, the spreads (var_*, stddev_*), and
-- higher orders through stop_gradient and abs. Oracles: closed forms, and
-- central finite differences (ddx_gradcheck).
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA functions;
SET search_path = functions, public;
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO w VALUES (1, 0.5), (2, -1.25), (3, 2.0), (4, 0.75);
CREATE TABLE x (s int, f int, val float8);
INSERT INTO x SELECT s, f, sin(s * 7 + f * 3) FROM generate_series(1, 6) s, generate_series(1, 4) f;
CREATE TABLE tw (f int PRIMARY KEY, val float8);  -- a tangent of w
INSERT INTO tw VALUES (1, 1), (2, -2), (3, 0.5), (4, 3);
-- a gradient check that passes: every row within 1e-6 of finite differences
CREATE FUNCTION fd_ok(loss_sql text) RETURNS boolean LANGUAGE sql AS $$
  SELECT rows_checked = 4 AND max_rel_error < 1e-6 FROM ddx_gradcheck(loss_sql, 'functions.w', 'val')
$$;

-- 1. SQL helpers that PostgreSQL inlines are differentiated through their
-- bodies, helpers of helpers too: d/dw Σ (w - 1)² / 2 = w - 1
CREATE FUNCTION sq_err(p float8, t float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT (p - t) * (p - t)';
CREATE FUNCTION half_sq(p float8, t float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT sq_err(p, t) / 2';
WITH loss AS (SELECT sum(half_sq(val, 1)) FROM w) SELECT f, grad('loss', val), val - 1 AS closed FROM w ORDER BY f;
-- named and default arguments, a STRICT helper, an operator made of one
CREATE FUNCTION scaled_sq(v float8, k float8 DEFAULT 3) RETURNS float8 LANGUAGE sql IMMUTABLE STRICT AS 'SELECT k * v * v';
CREATE FUNCTION l1(a float8, b float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT abs(a - b)';
CREATE OPERATOR <-> (LEFTARG = float8, RIGHTARG = float8, FUNCTION = l1);
WITH loss AS (SELECT sum(scaled_sq(val) + scaled_sq(k => 0.5, v => val) + (val <-> 1)) FROM w)
SELECT f, grad('loss', val), 7 * val + sign(val - 1) AS closed FROM w ORDER BY f;
-- a set-returning SQL function in FROM that reads the parameters
CREATE FUNCTION scaled(k float8) RETURNS TABLE (f int, v float8) LANGUAGE sql STABLE AS 'SELECT f, val * k FROM functions.w';
WITH loss AS (SELECT sum(v * v) FROM scaled(3)) SELECT f, grad('loss', val), 18 * val AS closed FROM w ORDER BY f;
-- a recursive helper is inlined once, and its inner call is an opaque call:
-- fine where no gradient reaches it, refused where gradient does
CREATE FUNCTION fact(n int) RETURNS int LANGUAGE sql IMMUTABLE AS
  'SELECT CASE WHEN n <= 1 THEN 1 ELSE n * fact(n - 1) END';
WITH loss AS (SELECT sum(val * fact(f)) FROM w) SELECT f, grad('loss', val) FROM w ORDER BY f;
CREATE FUNCTION rpow(v float8, n int) RETURNS float8 LANGUAGE sql IMMUTABLE AS
  'SELECT CASE WHEN n <= 0 THEN 1 ELSE v * rpow(v, n - 1) END';
WITH loss AS (SELECT sum(rpow(val, 2)) FROM w) SELECT f, grad('loss', val) FROM w ORDER BY f;
\echo :LAST_ERROR_SQLSTATE

-- 2. Helpers that are not inlined run in the gradient program as they run
-- in the statement, their bodies resolving unqualified names with the
-- caller's search_path: a filter, a scaling of data, a helper calling a
-- helper (plpgsql, and an SQL function with a FROM, which is not inlined)
CREATE SCHEMA app;
CREATE FUNCTION app.factor() RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT 2.0::float8 FROM (VALUES (1)) v';
CREATE FUNCTION app.scale_x(v float8) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN v * factor(); END';
CREATE FUNCTION app.keep(s int) RETURNS boolean LANGUAGE plpgsql STABLE AS
  'BEGIN RETURN EXISTS (SELECT 1 FROM kept k WHERE k.s = keep.s); END';
CREATE TABLE app.kept (s int);
INSERT INTO app.kept VALUES (1), (3), (4);
SET search_path = app, functions, public;
WITH z AS (SELECT x.s, sum(scale_x(x.val) * w.val) AS z FROM x JOIN w USING (f) WHERE keep(x.s) GROUP BY x.s),
     loss AS (SELECT sum(z * z) FROM z)
SELECT f, round(grad('loss', val)::numeric, 10) FROM w ORDER BY f;
SELECT fd_ok($$WITH z AS (SELECT x.s, sum(scale_x(x.val) * w.val) AS z FROM x JOIN w USING (f) WHERE keep(x.s)
                          GROUP BY x.s) SELECT sum(z * z) FROM z$$);
SET search_path = functions, public;

-- 3. A loss that reaches its parameters only through a function ddx cannot
-- see into is refused, never answered with zeros; so is grad of a table the
-- loss does not read at all
CREATE VIEW loss_v AS SELECT sum(val * val) AS l FROM w;
CREATE FUNCTION my_loss() RETURNS float8 LANGUAGE sql STABLE AS 'SELECT l FROM functions.loss_v';
SELECT f, grad((SELECT my_loss()), w.val) FROM w;
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pl_loss() RETURNS float8 LANGUAGE plpgsql STABLE AS 'BEGIN RETURN (SELECT l FROM functions.loss_v); END';
WITH loss AS (SELECT pl_loss() + sum(x.val) FROM x) SELECT f, grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(x.val * x.val) FROM x) SELECT f, grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- a function whose argument carries gradient and that ddx cannot see into
CREATE FUNCTION pl_sq(v float8) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN v * v; END';
WITH loss AS (SELECT sum(pl_sq(val)) FROM w) SELECT f, grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- the same function where no gradient reaches it is a constant, as data is
WITH loss AS (SELECT sum(val * pl_sq(f)) FROM w) SELECT f, grad('loss', val), f * f AS closed FROM w ORDER BY f;

-- 4. FILTER: the aggregate of the rows that pass
WITH loss AS (SELECT sum(val * val) FILTER (WHERE f > 2) + count(*) FILTER (WHERE val > 0) FROM w)
SELECT f, grad('loss', val), CASE WHEN f > 2 THEN 2 * val ELSE 0 END AS closed FROM w ORDER BY f;
SELECT fd_ok($$SELECT sum(a) FROM (SELECT x.s, avg(x.val * w.val) FILTER (WHERE x.val > 0) AS a,
                                          max(w.val * x.val) FILTER (WHERE x.f <> 2) AS m
                                     FROM x JOIN w USING (f) GROUP BY x.s) q$$);
-- ... over a window too
SELECT fd_ok($$SELECT sum(s * s) FROM (SELECT sum(x.val * w.val) FILTER (WHERE x.f <> 3) OVER (PARTITION BY x.s) AS s
                                       FROM x JOIN w USING (f)) q$$);

-- 5. Spreads: var_pop' = 2 (x - mean) / n, var_samp' = 2 (x - mean) / (n - 1),
-- stddev' = (x - mean) / ((n - 1) stddev)
WITH loss AS (SELECT var_pop(val) FROM w)
SELECT f, grad('loss', val), 2 * (val - (SELECT avg(val) FROM w)) / 4 AS closed FROM w ORDER BY f;
WITH loss AS (SELECT variance(val) FROM w)
SELECT f, round(grad('loss', val)::numeric, 12), round((2 * (val - (SELECT avg(val) FROM w)) / 3)::numeric, 12) AS closed
  FROM w ORDER BY f;
WITH loss AS (SELECT stddev(val) FROM w)
SELECT f, abs(grad('loss', val) - (val - (SELECT avg(val) FROM w)) / (3 * (SELECT stddev(val) FROM w))) < 1e-15 AS closed
  FROM w ORDER BY f;
-- grouped, with NULLs, one-row groups (var_samp NULL there) and float4
CREATE TABLE z4 (s int, f int, v float4);
INSERT INTO z4 SELECT s, f, (s * 0.25 + f)::float4 FROM generate_series(1, 3) s, generate_series(1, 4) f;
INSERT INTO z4 VALUES (4, 1, 0.5), (5, 2, NULL), (5, 3, 1.5), (5, 4, 2.5);
SELECT fd_ok($$SELECT sum(coalesce(a, 0) + coalesce(b, 0) + coalesce(c, 0) + coalesce(d, 0))
                 FROM (SELECT z4.s, stddev_samp(z4.v * w.val) AS a, var_samp(z4.v + w.val) AS b,
                              stddev_pop(z4.v * w.val) FILTER (WHERE z4.s <> 4) AS c,
                              var_pop(w.val) FILTER (WHERE z4.v > 1) AS d
                         FROM z4 JOIN w USING (f) GROUP BY z4.s) q$$);
-- a standard deviation of zero is a kink (sqrt at 0): its derivative is
-- NaN, as PyTorch's std gives it (d/dx √x at 0 is +Infinity, times 0)
WITH loss AS (SELECT stddev_pop(val) FROM w WHERE f = 1) SELECT f, grad('loss', val) FROM w ORDER BY f;
-- the spread's second derivative: var_pop's Hessian is 2/n (I - 11ᵀ/n)
WITH loss AS (SELECT var_pop(val) AS l FROM w)
SELECT f, hvp('loss', val, 'w.val', 'tw'),
       2.0 / 4 * ((SELECT t.val FROM tw t WHERE t.f = w.f) - (SELECT avg(val) FROM tw)) AS closed FROM w ORDER BY f;
-- and its jvp: 2 cov(x, t)
WITH o AS (SELECT var_pop(val) AS v FROM w)
SELECT jvp(o.v, 'w.val', 'tw'), 2 * (SELECT covar_pop(w.val, t.val) FROM w JOIN tw t USING (f)) AS closed FROM o;

-- 6. Higher orders: stop_gradient is a constant at every order (JAX's
-- stop_gradient, torch's detach()), and sign, abs's derivative, has none
WITH loss AS (SELECT sum(val * stop_gradient(val)) AS l FROM w) SELECT f, hvp('loss', val, 'w.val', 'tw') FROM w ORDER BY f;
WITH loss AS (SELECT sum(exp(stop_gradient(2 * val)) * val) AS l FROM w) SELECT f, hvp('loss', val, 'w.val', 'tw') FROM w ORDER BY f;
-- ... while what is not held constant still has its second derivative: 2 e^(2w) v
WITH loss AS (SELECT sum(exp(2 * stop_gradient(val)) * val * val) AS l FROM w)
SELECT f, abs(hvp('loss', val, 'w.val', 'tw') - 2 * exp(2 * val) * (SELECT t.val FROM tw t WHERE t.f = w.f)) < 1e-12 AS closed
  FROM w ORDER BY f;
-- d²/dx² |x| x = 2 sign(x)
WITH loss AS (SELECT sum(abs(val) * val) AS l FROM w)
SELECT f, hvp('loss', val, 'w.val', 'tw'), 2 * sign(val) * (SELECT t.val FROM tw t WHERE t.f = w.f) AS closed FROM w ORDER BY f;
