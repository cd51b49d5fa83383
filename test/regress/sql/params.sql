-- Statement parameters inside a loss: PREPARE/EXECUTE $n (custom and
-- generic plans), plpgsql variables, SQL-function arguments, and the step
-- number ($1) of an optimizer step. Each execution differentiates with its
-- own values. Oracle: the closed form of a linear loss, computed by plain SQL.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA params;
SET search_path = params, public;
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO x SELECT s, f, sin(s * 5 + f) FROM generate_series(1, 6) s, generate_series(1, 3) f;
INSERT INTO w SELECT f, 0.5 * f FROM generate_series(1, 3) f;
-- loss(b) = Σ_{x.s <= b} x.val · w.val, so ∂/∂w_f = Σ_{s <= b, f} x.val
CREATE FUNCTION closed(b int) RETURNS TABLE (f int, g float8) LANGUAGE sql AS $$
  SELECT w.f, coalesce((SELECT sum(x.val) FROM x WHERE x.f = w.f AND x.s <= b), 0) FROM w
$$;
CREATE TABLE got (b int, f int, g float8);
CREATE FUNCTION agree() RETURNS TABLE (b int, right bigint, rows bigint) LANGUAGE sql AS $$
  SELECT got.b, count(*) FILTER (WHERE abs(got.g - c.g) < 1e-12), count(*)
    FROM got CROSS JOIN LATERAL closed(got.b) c WHERE c.f = got.f GROUP BY got.b ORDER BY got.b
$$;

-- PREPARE / EXECUTE, a custom plan per execution, then the generic plan
PREPARE g(int) AS
  WITH loss AS (SELECT sum(x.val * w.val) AS l FROM x JOIN w ON x.f = w.f WHERE x.s <= $1)
  INSERT INTO got SELECT $1, f, grad('loss', val) FROM w;
EXECUTE g(1);
EXECUTE g(4);
SET plan_cache_mode = force_generic_plan;
EXECUTE g(2);
EXECUTE g(6);
RESET plan_cache_mode;
SELECT * FROM agree();
-- a parameter as a factor: ∂(Σ val · $1)/∂val = $1
PREPARE m(float8) AS WITH loss AS (SELECT sum(val * $1) AS l FROM w) SELECT f, grad('loss', val) = $1 AS closed FROM w ORDER BY f;
EXECUTE m(2.5);
EXECUTE m(-1);
-- a NULL parameter: no rows pass x.s <= NULL, the loss is NULL, the gradient 0
DELETE FROM got;
EXECUTE g(NULL);
SELECT count(*) FILTER (WHERE g = 0) AS zero, count(*) FROM got;

-- a plpgsql loop picks its batch through the loop variable
DELETE FROM got;
DO $$
BEGIN
  FOR b IN 1 .. 5 LOOP
    WITH loss AS (SELECT sum(x.val * w.val) AS l FROM x JOIN w ON x.f = w.f WHERE x.s <= b)
    INSERT INTO got SELECT b, f, grad('loss', val) FROM w;
  END LOOP;
END $$;
SELECT * FROM agree();

-- SQL functions: an argument by name and by number; a set-returning function
-- inlined into the caller with a lateral argument (a new value per row)
CREATE FUNCTION grad_sum(b int) RETURNS float8 LANGUAGE sql AS $$
  WITH loss AS (SELECT sum(x.val * w.val) AS l FROM x JOIN w ON x.f = w.f WHERE x.s <= b)
  SELECT sum(grad('loss', val)) FROM w
$$;
SELECT b, abs(grad_sum(b) - (SELECT sum(g) FROM closed(b))) < 1e-12 AS ok FROM generate_series(0, 3) b;
CREATE FUNCTION grads(int) RETURNS TABLE (f int, g float8) LANGUAGE sql AS $$
  WITH loss AS (SELECT sum(x.val * w.val) AS l FROM x JOIN w ON x.f = w.f WHERE x.s <= $1)
  SELECT f, grad('loss', val) FROM w
$$;
DELETE FROM got;
INSERT INTO got SELECT b, r.f, r.g FROM generate_series(1, 6) b, LATERAL grads(b) r;
SELECT * FROM agree();

-- a parameter in a nonlinear term and in LIMIT, against the same loss with
-- the values written in (itself checked against finite differences)
PREPARE h(float8, int) AS
  WITH loss AS (SELECT sum(power(t.v - $1, 2)) AS l
                  FROM (SELECT x.val * w.val AS v FROM x JOIN w ON x.f = w.f ORDER BY x.s, x.f LIMIT $2) t)
  SELECT f, grad('loss', val) AS g FROM w;
CREATE TABLE lit AS
  WITH loss AS (SELECT sum(power(t.v - 0.25, 2)) AS l
                  FROM (SELECT x.val * w.val AS v FROM x JOIN w ON x.f = w.f ORDER BY x.s, x.f LIMIT 7) t)
  SELECT f, grad('loss', val) AS g FROM w;
SELECT rows_checked, max_rel_error < 1e-6 AS ok FROM ddx_gradcheck($$
  SELECT sum(power(t.v - 0.25, 2)) FROM (SELECT x.val * w.val AS v FROM x JOIN w ON x.f = w.f ORDER BY x.s, x.f LIMIT 7) t$$,
  'w', 'val');
CREATE TABLE par AS EXECUTE h(0.25, 7);
SELECT count(*) FILTER (WHERE abs(p.g - l.g) < 1e-12) AS same, count(*) FROM par p JOIN lit l USING (f);
-- ddx_value reads the parameters too
PREPARE v(int) AS WITH loss AS (SELECT sum(x.val * w.val) AS l FROM x JOIN w ON x.f = w.f WHERE x.s <= $1)
  SELECT abs(ddx_value('loss') - (SELECT l FROM loss)) < 1e-12 AS same;
EXECUTE v(3);

-- an optimizer step's loss may read $1, the step being taken: mini-batches
-- by step. SGD on batch s = step: w_f -= lr · Σ_{x.s = step} x.val (closed form)
CREATE TABLE w2 (f int PRIMARY KEY, val float8);
INSERT INTO w2 SELECT f, 0 FROM generate_series(1, 3) f;
CREATE TABLE w2_expected AS SELECT f, val FROM w2;
SELECT ddx_schedule_constant('c', 0.1, 4);
CALL ddx_train($$SELECT sum(x.val * w2.val) FROM x JOIN w2 ON x.f = w2.f WHERE x.s = $1$$, ARRAY['w2.val'], 4, 'c',
               optimizer => 'sgd');
CREATE TABLE losses (step int, l float8);
DO $$
BEGIN
  FOR b IN 1 .. 4 LOOP  -- the same steps by hand
    INSERT INTO losses SELECT b, sum(x.val * e.val) FROM x JOIN w2_expected e ON e.f = x.f WHERE x.s = b;
    UPDATE w2_expected e SET val = e.val - 0.1 * (SELECT sum(x.val) FROM x WHERE x.f = e.f AND x.s = b);
  END LOOP;
END $$;
SELECT f, abs(w2.val - e.val) < 1e-12 AS closed_form FROM w2 JOIN w2_expected e USING (f) ORDER BY f;
-- the loss logged is each step's own batch's, before the step
SELECT l.step, abs(l.loss - h.l) < 1e-12 AS same FROM ddx_train_log l JOIN losses h USING (step)
 WHERE l.run = 'params.w2.val' ORDER BY l.step;
DEALLOCATE ALL;
