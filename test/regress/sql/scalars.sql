-- Every scalar rule against central finite differences, and the points where
-- PostgreSQL would raise but the derivative must not.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA scalars;
SET search_path = scalars, public;
\set VERBOSITY terse
CREATE TABLE p (k int, val float8);
INSERT INTO p VALUES (1, 0.3), (2, 0.7), (3, -0.45);
CREATE FUNCTION check_scalar(expr text) RETURNS text LANGUAGE sql AS $$
  SELECT format('%-32s %s', expr, CASE WHEN max_rel_error < 1e-6 OR max_abs_error < 1e-7 THEN 'ok'
                                  ELSE 'FAILED ' || max_abs_error END)
  FROM ddx_gradcheck(format('SELECT sum(%s) FROM p', expr), 'p', 'val')
$$;
SELECT check_scalar(e) FROM (VALUES
  ('val + 2 * val'), ('val - 3'), ('7 - val * val'), ('val * val * k'), ('1 / (val + 2)'), ('(val + 1) / (val - 2)'),
  ('- val'), ('+ val'), ('exp(val)'), ('ln(val + 1)'), ('log(val + 1)'), ('sqrt(val + 1)'),
  ('power(val, 2)'), ('power(abs(val), 2.5)'), ('power(2, val)'), ('power(val + 1, val + 1)'), ('abs(val)'),
  ('sin(val)'), ('cos(val)'), ('tan(val)'), ('asin(val)'), ('acos(val)'), ('atan(val)'),
  ('sinh(val)'), ('cosh(val)'), ('tanh(val)'),
  ('greatest(val, 0.5, -val)'), ('least(val, 0.5)'), ('greatest(val, NULL)'),
  ('CASE WHEN val > 0 THEN val * val WHEN val < -0.4 THEN -val ELSE 0 END'),
  ('CASE k WHEN 1 THEN sin(val) ELSE val END'),
  ('coalesce(NULLIF(k, 2)::float8 * val, val * 3)'),
  ('(val::numeric * 3)::float8'), ('val * 2.5::numeric'), ('val * k::float8 / 3')
) AS t(e) ORDER BY 1;
-- finite differences cannot see these: closed forms
WITH loss AS (SELECT sum(val::float4::float8 * 2) AS l FROM p) SELECT k, grad('loss', val) FROM p ORDER BY k;   -- 2
WITH loss AS (SELECT sum(stop_gradient(val) * val) AS l FROM p) SELECT k, grad('loss', val) = val FROM p ORDER BY k;
-- where PostgreSQL raises but the derivative has a value, as PyTorch gives it
CREATE TABLE z (val float8);
INSERT INTO z VALUES (0);
WITH loss AS (SELECT sqrt(val) AS l FROM z) SELECT grad('loss', val) FROM z;          -- +Infinity
WITH loss AS (SELECT power(val, 0.5) AS l FROM z) SELECT grad('loss', val) FROM z;    -- +Infinity
WITH loss AS (SELECT power(val, 0) AS l FROM z) SELECT grad('loss', val) FROM z;      -- 0
WITH loss AS (SELECT power(val, 2) AS l FROM z) SELECT grad('loss', val) FROM z;      -- 0
WITH loss AS (SELECT power(val, 1) AS l FROM z) SELECT grad('loss', val) FROM z;      -- 1
WITH loss AS (SELECT power(2, val) AS l FROM z) SELECT round(grad('loss', val)::numeric, 12) FROM z;  -- ln 2
WITH loss AS (SELECT power(val, val + 1) AS l FROM z) SELECT grad('loss', val) FROM z; -- 1
WITH loss AS (SELECT abs(val) AS l FROM z) SELECT grad('loss', val) FROM z;           -- 0
-- GREATEST/LEAST at a tie: the last attaining argument takes the derivative
WITH loss AS (SELECT greatest(val, 0) AS l FROM z) SELECT grad('loss', val) FROM z;   -- 0: ReLU at 0, as PyTorch
WITH loss AS (SELECT greatest(0, val) AS l FROM z) SELECT grad('loss', val) FROM z;   -- 1
WITH loss AS (SELECT least(val, 0) AS l FROM z) SELECT grad('loss', val) FROM z;      -- 0
UPDATE z SET val = 1;
WITH loss AS (SELECT asin(val) AS l FROM z) SELECT grad('loss', val) FROM z;          -- +Infinity
-- log is base 10, ln natural
UPDATE z SET val = 10;
WITH loss AS (SELECT log(val) + ln(val) AS l FROM z) SELECT round(grad('loss', val)::numeric, 15) AS g, round((1 / (10 * ln(10)) + 0.1)::numeric, 15) AS closed FROM z;
-- a CASE branch is differentiated only where the forward took it: sqrt of the
-- negative values the other branch handles is never evaluated (this failed
-- with "cannot take square root of a negative number" before)
CREATE TABLE c (val float8);
INSERT INTO c VALUES (4), (-1), (0.25), (-9);
WITH loss AS (SELECT sum(CASE WHEN val > 0 THEN sqrt(val) ELSE 2 * val END) AS l FROM c)
SELECT val, grad('loss', val), CASE WHEN val > 0 THEN 0.5 / sqrt(val) ELSE 2 END AS closed FROM c ORDER BY val;
