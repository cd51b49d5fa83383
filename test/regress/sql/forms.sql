-- Where grad works: SELECT lists (also in CTEs and subqueries), CREATE TABLE
-- AS, INSERT ... SELECT, UPDATE, PREPARE/EXECUTE, plpgsql and SQL function
-- bodies, cursors, EXPLAIN. Each execution recomputes with what it sees.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA forms;
SET search_path = forms, public;
\set VERBOSITY terse
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO w VALUES (1, 1.0), (2, 2.0), (3, -3.0);
CREATE VIEW sq AS SELECT sum(val * val) AS l FROM w;     -- ∂/∂w = 2w

-- inside a CTE and a subquery
WITH g AS (SELECT f, grad('sq', val) AS g FROM w) SELECT * FROM g ORDER BY f;
SELECT * FROM (SELECT f, grad('sq', val) AS g FROM w) s ORDER BY f;
SELECT f, (SELECT grad('sq', w2.val) FROM w w2 WHERE w2.f = w.f) AS g FROM w ORDER BY f;
-- CREATE TABLE AS and INSERT ... SELECT
CREATE TABLE gt AS SELECT f, grad('sq', val) AS g FROM w;
SELECT * FROM gt ORDER BY f;
INSERT INTO gt SELECT f + 10, grad('sq', val) FROM w;
SELECT * FROM gt ORDER BY f;
-- PREPARE / EXECUTE: a cached plan never serves a stale gradient
PREPARE step(float8) AS UPDATE w SET val = val - $1 * grad('sq', val);
PREPARE g AS SELECT f, grad('sq', val) FROM w ORDER BY f;
EXECUTE g;
EXECUTE step(0.25);   -- w := w - 0.25 * 2w = w / 2
EXECUTE g;
EXECUTE step(0.25);
EXECUTE g;
SELECT * FROM w ORDER BY f;
-- force the generic plan too
SET plan_cache_mode = force_generic_plan;
EXECUTE step(0.25);
EXECUTE g;
RESET plan_cache_mode;
DEALLOCATE ALL;
-- plpgsql: a loop of steps, and a function returning a gradient
CREATE FUNCTION descend(n int, lr float8) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    UPDATE w SET val = val - lr * grad('sq', val);
  END LOOP;
END $$;
UPDATE w SET val = f;
SELECT descend(3, 0.25);
SELECT f, val, val = f / 8.0 AS closed FROM w ORDER BY f;
CREATE FUNCTION grad_of(k int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE g float8;
BEGIN
  SELECT grad('sq', val) INTO g FROM w WHERE f = k;
  RETURN g;
END $$;
SELECT grad_of(1), grad_of(3);
UPDATE w SET val = 10 * f;
SELECT grad_of(1), grad_of(3);
-- SQL functions, also inlined
CREATE FUNCTION grads() RETURNS TABLE (f int, g float8) LANGUAGE sql AS $$ SELECT f, grad('sq', val) FROM w $$;
SELECT * FROM grads() ORDER BY f;
CREATE FUNCTION grad_sum() RETURNS float8 LANGUAGE sql STABLE AS $$ SELECT sum(grad('sq', val)) FROM w $$;
SELECT grad_sum();
-- a view that calls grad recomputes on every read
CREATE VIEW gv AS SELECT f, grad('sq', val) AS g FROM w;
SELECT * FROM gv ORDER BY f;
UPDATE w SET val = -val;
SELECT * FROM gv ORDER BY f;
-- a cursor
BEGIN;
DECLARE c CURSOR FOR SELECT f, grad('sq', val) FROM w ORDER BY f;
FETCH 2 FROM c;
FETCH 2 FROM c;
COMMIT;
-- EXPLAIN (without running) and EXPLAIN ANALYZE
EXPLAIN (COSTS OFF) SELECT f, grad('sq', val) FROM w;
-- EXPLAIN ANALYZE's lines, the same on every major (18 counts buffers by
-- default and shows rows with two decimals).
CREATE FUNCTION explain_analyzed(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    RETURN NEXT regexp_replace(line, 'rows=(\d+)\.00 ', 'rows=\1 ', 'g');
  END LOOP;
END $$;
SELECT explain_analyzed($$SELECT f, grad('sq', val) FROM w$$);
DROP FUNCTION explain_analyzed(text);
-- the loss sees changes made earlier in the same transaction
BEGIN;
UPDATE w SET val = 1;
SELECT f, grad('sq', val) FROM w ORDER BY f;
ROLLBACK;
-- the session's output settings do not change the derivative: the loss's
-- constants reach the program exactly (they were printed with the
-- session's extra_float_digits: at -15, 0.123456789 became 0.1)
SET extra_float_digits = -15;
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
WITH loss AS (SELECT sum(val * '0.123456789'::float8) AS l FROM w)
SELECT f, grad('loss', val) = '0.123456789'::float8 AS exact FROM w ORDER BY f;
WITH loss AS (SELECT sum(val * '0.123456789'::float4) AS l FROM w)
SELECT f, grad('loss', val) = '0.123456789'::float4::float8 AS exact FROM w ORDER BY f;
WITH loss AS (SELECT sum(w.val * v.x) AS l FROM w, (VALUES ('2.718281828459045'::float8)) v(x))
SELECT f, grad('loss', val) = '2.718281828459045'::float8 AS exact FROM w ORDER BY f;
WITH loss AS (SELECT sum(val * extract(day FROM '07/12/2026'::date) * extract(epoch FROM '-1 2:00:00'::interval)) AS l
              FROM w)
SELECT f, grad('loss', val) = 7 * -93600 AS exact FROM w ORDER BY f;
SHOW extra_float_digits;
RESET extra_float_digits;
RESET DateStyle;
RESET IntervalStyle;
