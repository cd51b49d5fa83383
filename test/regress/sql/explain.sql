-- ddx_explain: the steps of a statement's gradient program, their SQL, and
-- with run_analyze their rows.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA explain;
SET search_path = explain, public;
\set VERBOSITY terse
-- (the plans of ddx's SQL programs: not the dense statement, ddx.dense)
SET ddx.dense = off;
CREATE TABLE w (f int PRIMARY KEY, val float8);
CREATE TABLE x (s int, f int, val float8);
INSERT INTO w VALUES (1, 0.5), (2, -1);
INSERT INTO x VALUES (1, 1, 2), (1, 2, 3), (2, 1, 1), (3, 2, 4);
SELECT program, step, name, kind, rows, ms >= 0 AS timed,
       sql ~ ('^' || name || ' AS (NOT )?MATERIALIZED \(') AND sql !~ E'\nSELECT ' AND sql ~ '\)$' AS sql_ok
  FROM ddx_explain($$WITH loss AS (SELECT sum(z * z) AS l FROM
                       (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON w.f = x.f GROUP BY x.s) t)
                     SELECT grad('loss', w.val) FROM w$$, true);
-- each step's time is its own, not the steps' it reads: together no more
-- than the call (they were nested, the gradient's step counting the whole
-- program: 199 ms of steps in a call of 74)
CREATE TABLE xl (s int, f int, val float8);
INSERT INTO xl SELECT s, f, ((s * 7 + f * 3) % 11) / 8.0 FROM generate_series(1, 20000) s, generate_series(1, 2) f;
ANALYZE xl;
DO $$
DECLARE
  t0 timestamptz := clock_timestamp();
  steps float8;
BEGIN
  SELECT sum(ms) INTO steps
    FROM ddx_explain($q$WITH z AS (SELECT xl.s, sum(xl.val * w.val) AS z FROM xl JOIN w ON w.f = xl.f GROUP BY xl.s),
                          h AS (SELECT s, tanh(z) AS h FROM z), loss AS (SELECT sum(h * h) AS l FROM h)
                        SELECT grad('loss', w.val) FROM w$q$, true);
  RAISE NOTICE 'steps within the call: %', steps <= extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
-- without run_analyze nothing runs; the caller's settings are left as they were
SELECT count(*) AS steps, count(rows) AS measured FROM ddx_explain($$WITH loss AS (SELECT sum(val) AS l FROM w) SELECT grad('loss', val) FROM w$$);
SHOW search_path;
SHOW enable_nestloop;
-- two losses in one statement: two programs
SELECT program, count(*) FROM ddx_explain($$WITH a AS (SELECT sum(val) AS l FROM w), b AS (SELECT sum(val * val) AS l FROM w)
  SELECT grad('a', val), grad('b', val) FROM w$$) GROUP BY program ORDER BY program;
-- ddx_explain_plan: EXPLAIN of the program as the runner plans it (its
-- settings: the program's grouped sums of products planned with the
-- contraction node); with run_analyze it runs, read-only
SET ddx.contraction = programs;
SELECT bool_or(line ~ 'Custom Scan \(ddx contraction\)') AS node, bool_or(line ~ 'actual time') AS analyzed
  FROM ddx_explain_plan($$WITH loss AS (SELECT sum(z * z) AS l FROM
                          (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON w.f = x.f GROUP BY x.s) t)
                        SELECT grad('loss', w.val) FROM w$$, true);
RESET ddx.contraction;
SELECT program, count(*) > 0 AS lines FROM ddx_explain_plan($$WITH a AS (SELECT sum(val) AS l FROM w), b AS (SELECT sum(val * val) AS l FROM w)
  SELECT grad('a', val), grad('b', val) FROM w$$) GROUP BY program ORDER BY program;
SHOW enable_nestloop;
SELECT count(*) FROM w;
-- the function under it explains programs only
SELECT * FROM _ddx.explain_program('DELETE FROM explain.w', NULL, 'ANALYZE');
SELECT * FROM _ddx.explain_program('WITH d AS (DELETE FROM explain.w RETURNING 1) SELECT 1', NULL, 'ANALYZE');
SELECT * FROM _ddx.explain_program('WITH a AS (SELECT 1) SELECT 1', NULL, 'ANALYZE; DELETE');
