-- Training runs that never mix, lose or touch a user's data. Oracles: a
-- fresh Adam step's closed form (each weight moves by lr * g / (|g| + eps)),
-- the same model in another layout stepped beside it, and plain SQL.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA runs;
SET search_path = runs, public;
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int PRIMARY KEY, val float8);
INSERT INTO x SELECT s, f, sin(s * 7 + f * 3) FROM generate_series(1, 30) s, generate_series(1, 4) f;
INSERT INTO y SELECT s, cos(s) FROM generate_series(1, 30) s;
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO w SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE VIEW loss AS
  WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
  SELECT avg(power(z.z - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s;
-- the gradient of the loss at the current weights, by ddx's grad (checked
-- against finite differences in constructs.sql and by PyTorch elsewhere)
CREATE TABLE g0 (f int PRIMARY KEY, g float8);
CREATE TABLE before (f int PRIMARY KEY, val float8);
CREATE FUNCTION snapshot() RETURNS void LANGUAGE sql AS $$
  DELETE FROM g0; INSERT INTO g0 SELECT f, grad('loss', val) FROM w;
  DELETE FROM before; INSERT INTO before SELECT f, val FROM w;
$$;
-- every weight moved as a fresh AdamW step moves it (weight_decay 0)
CREATE FUNCTION fresh_adam_step(lr float8) RETURNS TABLE (f int, fresh boolean) LANGUAGE sql AS $$
  SELECT w.f, abs((w.val - b.val) + lr * g0.g / (abs(g0.g) + 1e-8)) < 1e-12
    FROM w JOIN before b USING (f) JOIN g0 USING (f) ORDER BY 1
$$;

-- 1. Runs never mix: a run named anew on a table trained before starts at zero
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.05, weight_decay => 0, state_name => 'a');
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.05, weight_decay => 0, state_name => 'a');
SELECT snapshot();
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, weight_decay => 0, state_name => 'b');
SELECT * FROM fresh_adam_step(0.1);
SELECT name, optimizer, step, params FROM ddx_runs WHERE name IN ('a', 'b') ORDER BY name;
-- ... and the default run is the model's own: a new model starts at step 1
CREATE TABLE w2 (f int PRIMARY KEY, val float8);
INSERT INTO w2 SELECT f, 0 FROM generate_series(1, 4) f;
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01);
SELECT step FROM ddx_adamw_step($$WITH z AS (SELECT x.s, sum(x.val * w2.val) AS z FROM x JOIN w2 ON x.f = w2.f GROUP BY x.s)
                                  SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$, ARRAY['w2.val'], 0.01);
SELECT ddx_schedule_constant('c', 0.05, 30);
CREATE TABLE w3 (f int PRIMARY KEY, val float8);
INSERT INTO w3 SELECT f, 0 FROM generate_series(1, 4) f;
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * w3.val) AS z FROM x JOIN w3 ON x.f = w3.f GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$, ARRAY['w3.val'], 30, 'c');
SELECT run, count(*), min(step), max(step), count(loss) AS with_loss FROM ddx_train_log WHERE run = 'runs.w3.val' GROUP BY run;
-- an optimizer is the run's: an SGD step on an AdamW run is refused
SELECT step FROM ddx_sgd_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, state_name => 'a');
\echo :LAST_ERROR_SQLSTATE

-- 2. A row inserted between steps is trained, its state starting at zero
SELECT snapshot();
INSERT INTO w VALUES (4, 0);
INSERT INTO g0 SELECT 4, grad('loss', val) FROM w WHERE f = 4;
INSERT INTO before VALUES (4, 0);
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, weight_decay => 0, state_name => 'b');
SELECT * FROM fresh_adam_step(0.1) WHERE f = 4;
SELECT key, step FROM ddx_state('b', 'w.val') ORDER BY key;

-- a NULL value keeps no state, and is trained from zero once it has a value
UPDATE w SET val = NULL WHERE f = 2;
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, weight_decay => 0, state_name => 'b');
SELECT f, val IS NULL AS null_value FROM w ORDER BY f;
SELECT key, step, m IS NULL OR v IS NULL AS null_moment FROM ddx_state('b', 'w.val') ORDER BY key;
UPDATE w SET val = 0.2 WHERE f = 2;
SELECT snapshot();
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, weight_decay => 0, state_name => 'b');
SELECT * FROM fresh_adam_step(0.1) WHERE f = 2;
SELECT key, step FROM ddx_state('b', 'w.val') ORDER BY key;
-- a row deleted and inserted again later starts again too
DELETE FROM w WHERE f = 3;
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, weight_decay => 0, state_name => 'b');
INSERT INTO w VALUES (3, 0.3);
SELECT snapshot();
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, weight_decay => 0, state_name => 'b');
SELECT * FROM fresh_adam_step(0.1) WHERE f = 3;

-- a row's state that counts no more (its value NULL at the last step) is
-- not shown, and ddx_train deletes it when it ends
UPDATE w SET val = NULL WHERE f = 4;
CALL ddx_train('SELECT l FROM loss', ARRAY['w.val'], 7, 'c', state_name => 'b', weight_decay => 0);
SELECT key, step FROM ddx_state('b', 'w.val') ORDER BY key;
DO $$
DECLARE n int;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s s WHERE s.run = (SELECT id FROM _ddx.run WHERE name = ''b'')',
                 (SELECT state FROM _ddx.state_table WHERE param = 'runs.w'::regclass)) INTO n;
  RAISE WARNING 'state rows of run b: %', n;
END $$;
UPDATE w SET val = 0.4 WHERE f = 4;

-- 3. Tables of the user's with the names ddx once used are never touched
CREATE TABLE w_grad (note text);
INSERT INTO w_grad VALUES ('my gradient log'), ('keep me');
CREATE TABLE w_adam (m text, v text);
INSERT INTO w_adam VALUES ('mine', 'too');
CREATE TABLE w_sgd (buf int);
INSERT INTO w_sgd VALUES (7);
CREATE TABLE ddx_optimizer_state (name text, step int);
INSERT INTO ddx_optimizer_state VALUES ('mine', 1000);
CREATE TABLE ddx_train_log (who text);
INSERT INTO ddx_train_log VALUES ('me');
CREATE VIEW mine AS
  SELECT 'w_grad' AS t, md5(string_agg(g::text || g.ctid::text || g.xmin::text, ',' ORDER BY g.ctid)) FROM w_grad g
  UNION ALL SELECT 'w_adam', md5(string_agg(a::text || a.ctid::text || a.xmin::text, ',')) FROM w_adam a
  UNION ALL SELECT 'w_sgd', md5(string_agg(s::text || s.ctid::text || s.xmin::text, ',')) FROM w_sgd s
  UNION ALL SELECT 'state', md5(string_agg(o::text || o.ctid::text || o.xmin::text, ',')) FROM ddx_optimizer_state o
  UNION ALL SELECT 'log', md5(string_agg(l::text || l.ctid::text || l.xmin::text, ',')) FROM runs.ddx_train_log l;
CREATE TABLE mine_before AS SELECT * FROM mine;
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01);
SELECT step FROM ddx_sgd_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, momentum => 0.9, state_name => 'sgd run');
CALL ddx_train('SELECT l FROM loss', ARRAY['w.val'], 3, 'c', optimizer => 'sgd', state_name => 'sgd train');
SELECT * FROM ddx_backward('SELECT l FROM loss', ARRAY['w.val']);
\echo :LAST_ERROR_SQLSTATE
SELECT t, m.md5 = b.md5 AS untouched FROM mine m JOIN mine_before b USING (t) ORDER BY t;
DROP VIEW mine;
DROP TABLE ddx_train_log;  -- it hid ddx's view of the same name
-- named elsewhere, the gradients go where asked
SELECT * FROM ddx_backward('SELECT l FROM loss', ARRAY['w.val'], grad_tables => ARRAY['w_gradients']);
SELECT count(*) FILTER (WHERE abs(g.grad - d.g) < 1e-15) AS right, count(*) FROM w_gradients g
  JOIN (SELECT f, grad('loss', val) AS g FROM w) d USING (f);
SELECT obj_description('w_gradients'::regclass, 'pg_class');
-- ddx's own state lives in its own schema, with room for HOT updates
SELECT c.relnamespace::regnamespace AS schema, c.reloptions FROM _ddx.state_table s
  JOIN pg_class c ON c.oid = s.state WHERE s.param = 'w'::regclass;

-- 4. Key columns named m, v, g, grad, step: the same weights as plain names
CREATE TABLE kn (m int, v int, g int, grad int, step int, val float8, PRIMARY KEY (m, v, g, grad, step));
CREATE TABLE kp (a int, b int, c int, d int, e int, val float8, PRIMARY KEY (a, b, c, d, e));
INSERT INTO kn SELECT f, f, f, f, f, 0.1 * f FROM generate_series(1, 4) f;
INSERT INTO kp SELECT * FROM kn;
CREATE FUNCTION k_loss(t text, k text) RETURNS text LANGUAGE sql AS $$
  SELECT format('WITH z AS (SELECT x.s, sum(x.val * exp(t.val)) AS z FROM x JOIN %s t ON x.f = t.%s GROUP BY x.s) '
                'SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s', t, k)
$$;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_adamw_step(k_loss('kn', 'step'), ARRAY['kn.val'], 0.05, max_grad_norm => 0.5); END LOOP; END $$;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_adamw_step(k_loss('kp', 'e'), ARRAY['kp.val'], 0.05, max_grad_norm => 0.5); END LOOP; END $$;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_sgd_step(k_loss('kn', 'step'), ARRAY['kn.val'], 0.05, momentum => 0.9, nesterov => true, state_name => 'kn sgd'); END LOOP; END $$;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_sgd_step(k_loss('kp', 'e'), ARRAY['kp.val'], 0.05, momentum => 0.9, nesterov => true, state_name => 'kp sgd'); END LOOP; END $$;
CALL ddx_train(k_loss('kn', 'step'), ARRAY['kn.val'], 3, 'c', optimizer => 'adam', weight_decay => 0.1, state_name => 'kn adam');
CALL ddx_train(k_loss('kp', 'e'), ARRAY['kp.val'], 3, 'c', optimizer => 'adam', weight_decay => 0.1, state_name => 'kp adam');
SELECT count(*) FILTER (WHERE n.val = p.val) AS same, count(*) FROM kn n JOIN kp p ON p.a = n.m;
SELECT key, step, m > 0 AS m FROM ddx_state('runs.kn.val', 'kn.val') ORDER BY key;
-- the gradient table keeps the keys; a key named grad leaves the gradient its column's name
CREATE VIEW kn_loss AS
  WITH z AS (SELECT x.s, sum(x.val * exp(t.val)) AS z FROM x JOIN kn t ON x.f = t.step GROUP BY x.s)
  SELECT avg(power(z.z - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s;
SELECT grad_table, grad_rows FROM ddx_backward('SELECT l FROM kn_loss', ARRAY['kn.val']);
SELECT count(*) FILTER (WHERE abs(kn_grad.val - d.g2) < 1e-15) AS right, count(*) FROM kn_grad
  JOIN (SELECT m, v, g, grad, step, grad('kn_loss', val) AS g2 FROM kn) d USING (m, v, g, grad, step);
SELECT rows_checked, max_rel_error < 1e-6 AS ok FROM ddx_gradcheck('SELECT l FROM kn_loss', 'kn', 'val');
-- gradcheck on a sample of the rows
SELECT rows_checked, max_rel_error < 1e-6 AS ok FROM ddx_gradcheck('SELECT l FROM kn_loss', 'kn', 'val', sample => 2);
SELECT rows_checked FROM ddx_gradcheck('SELECT l FROM kn_loss', 'kn', 'val', sample => 0);
\echo :LAST_ERROR_SQLSTATE

-- 5. Several parameter columns of one table, and a table of one row without
-- a key: the same weights as the long layout
CREATE TABLE wide (id int PRIMARY KEY, w1 float8, w2 float8, w3 float8, w4 float8);
INSERT INTO wide VALUES (1, 0.1, 0.2, 0.3, 0.4);
CREATE TABLE bias (b float8);
INSERT INTO bias VALUES (0.5);
CREATE TABLE long (f int PRIMARY KEY, val float8);
INSERT INTO long VALUES (1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4);
CREATE TABLE bias2 (k int PRIMARY KEY, b float8);
INSERT INTO bias2 VALUES (1, 0.5);
CREATE VIEW wide_loss AS
  WITH u AS (SELECT v.f, v.w FROM wide CROSS JOIN LATERAL (VALUES (1, wide.w1), (2, wide.w2), (3, wide.w3), (4, wide.w4)) AS v(f, w)),
       z AS (SELECT x.s, sum(x.val * u.w) AS z FROM x JOIN u ON u.f = x.f GROUP BY x.s)
  SELECT avg(power(z.z + bias.b - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s CROSS JOIN bias;
CREATE VIEW long_loss AS
  WITH z AS (SELECT x.s, sum(x.val * long.val) AS z FROM x JOIN long ON long.f = x.f GROUP BY x.s)
  SELECT avg(power(z.z + bias2.b - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s CROSS JOIN bias2;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_adamw_step('SELECT l FROM wide_loss', ARRAY['wide.w1', 'wide.w2', 'wide.w3', 'wide.w4', 'bias.b'], 0.05,
                                no_decay => ARRAY['bias.b'], max_grad_norm => 0.1); END LOOP; END $$;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_adamw_step('SELECT l FROM long_loss', ARRAY['long.val', 'bias2.b'], 0.05,
                                no_decay => ARRAY['bias2.b'], max_grad_norm => 0.1); END LOOP; END $$;
CREATE VIEW unpivoted AS
  SELECT v.f, v.w FROM wide CROSS JOIN LATERAL (VALUES (1, wide.w1), (2, wide.w2), (3, wide.w3), (4, wide.w4)) AS v(f, w);
SELECT f, abs(u.w - long.val) < 1e-15 AS same FROM long JOIN unpivoted u USING (f) ORDER BY f;
SELECT abs(bias.b - bias2.b) < 1e-15 AS same_bias FROM bias, bias2;
-- no_decay on one column of several: after one step, w4 differs from its
-- decayed twin by exactly lr * weight_decay * w4
CREATE TABLE w4_before AS SELECT w4 FROM wide;
SELECT step FROM ddx_adamw_step('SELECT l FROM wide_loss', ARRAY['wide.w1', 'wide.w2', 'wide.w3', 'wide.w4', 'bias.b'], 0.05,
                                weight_decay => 0.5, no_decay => ARRAY['wide.w4', 'bias.b'], state_name => 'wide, w4 not decayed');
SELECT step FROM ddx_adamw_step('SELECT l FROM long_loss', ARRAY['long.val', 'bias2.b'], 0.05,
                                weight_decay => 0.5, no_decay => ARRAY['bias2.b'], state_name => 'long, all decayed');
SELECT f, CASE WHEN f < 4 THEN abs(u.w - long.val) < 1e-15
               ELSE abs(u.w - long.val - 0.05 * 0.5 * (SELECT w4 FROM w4_before)) < 1e-15 END AS closed_form
  FROM long JOIN unpivoted u USING (f) ORDER BY f;
SELECT * FROM ddx_backward('SELECT l FROM wide_loss', ARRAY['wide.w1', 'wide.w3', 'bias.b']);
SELECT abs(g.w1 - grad('wide_loss', wide.w1)) < 1e-15 AS w1, abs(g.w3 - grad('wide_loss', wide.w3)) < 1e-15 AS w3
  FROM wide_grad g JOIN wide USING (id);
SELECT abs(g.grad - grad('wide_loss', bias.b)) < 1e-15 AS b FROM bias_grad g, bias;
SELECT key, step FROM ddx_state('runs.bias.b, runs.wide.w1, runs.wide.w2, runs.wide.w3, runs.wide.w4', 'wide.w2');
-- a table without a key may have one row only
INSERT INTO bias VALUES (1);
SELECT step FROM ddx_adamw_step('SELECT l FROM wide_loss', ARRAY['bias.b'], 0.05);
\echo :LAST_ERROR_SQLSTATE

-- 6. One set of defaults, PyTorch's: ddx_train with SGD is ddx_sgd_step
CREATE TABLE sa (f int PRIMARY KEY, val float8);
CREATE TABLE sb (f int PRIMARY KEY, val float8);
INSERT INTO sa SELECT f, 0 FROM generate_series(1, 4) f;
INSERT INTO sb SELECT * FROM sa;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_sgd_step(k_loss('sa', 'f'), ARRAY['sa.val'], 0.05); END LOOP; END $$;
CALL ddx_train(k_loss('sb', 'f'), ARRAY['sb.val'], 3, 'c', optimizer => 'sgd');
SELECT count(*) FILTER (WHERE a.val = b.val) AS same, count(*) FROM sa a JOIN sb b USING (f);
-- and AdamW's: ddx_train with adamw is ddx_adamw_step (weight decay 0.01)
UPDATE sa SET val = 0;
UPDATE sb SET val = 0;
DO $$ BEGIN FOR i IN 1 .. 3 LOOP PERFORM ddx_adamw_step(k_loss('sa', 'f'), ARRAY['sa.val'], 0.05, state_name => 'sa adamw'); END LOOP; END $$;
CALL ddx_train(k_loss('sb', 'f'), ARRAY['sb.val'], 3, 'c', state_name => 'sb adamw');
SELECT count(*) FILTER (WHERE a.val = b.val) AS same, count(*) FROM sa a JOIN sb b USING (f);

-- 7. Traps. A schedule shorter than the run fails before the first step:
CREATE TABLE t7 (f int PRIMARY KEY, val float8);
INSERT INTO t7 SELECT f, 0 FROM generate_series(1, 4) f;
CALL ddx_train(k_loss('t7', 'f'), ARRAY['t7.val'], 31, 'c');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS runs FROM ddx_runs WHERE name = 'runs.t7.val';
SELECT sum(abs(val)) AS moved FROM t7;
-- the log has every step's loss, the loss before that step (from its own pass)
CREATE TABLE t7_losses (step int, l float8);
DO $$ DECLARE l float8; BEGIN EXECUTE k_loss('t7', 'f') INTO l; INSERT INTO t7_losses VALUES (1, l); END $$;
CALL ddx_train(k_loss('t7', 'f'), ARRAY['t7.val'], 5, 'c', log_every => 2);
SELECT count(*) AS steps, count(loss) AS with_loss, bool_and(loss > 0) AS positive FROM ddx_train_log WHERE run = 'runs.t7.val';
SELECT abs(l.loss - t.l) < 1e-12 AS first_loss FROM ddx_train_log l JOIN t7_losses t USING (step) WHERE l.run = 'runs.t7.val';
CALL ddx_train(k_loss('t7', 'f'), ARRAY['t7.val'], 5, 'c');
-- a run whose table was dropped starts again with the new table
DROP TABLE t7;
CREATE TABLE t7 (f int PRIMARY KEY, val float8);
INSERT INTO t7 SELECT f, 0 FROM generate_series(1, 4) f;
CALL ddx_train(k_loss('t7', 'f'), ARRAY['t7.val'], 2, 'c');
SELECT step FROM ddx_runs WHERE name = 'runs.t7.val';
-- a divergent step names its step and run, without kilobytes of SQL
UPDATE t7 SET val = 400;
DO $$
DECLARE msg text; det text; ctx text; hint text; st text;
BEGIN
  PERFORM ddx_adamw_step(k_loss('t7', 'f'), ARRAY['t7.val'], 0.1, state_name => 'diverged');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, ctx = PG_EXCEPTION_CONTEXT,
                          hint = PG_EXCEPTION_HINT;
  RAISE WARNING '% %: %', st, msg, det;
  RAISE WARNING 'hint: %', hint;
  RAISE WARNING 'context under 1,000 characters: %, quotes generated SQL: %', length(ctx) < 1000, ctx LIKE '%MATERIALIZED%';
END $$;
SET ddx.show_sql = on;
DO $$
DECLARE det text;
BEGIN
  PERFORM ddx_adamw_step(k_loss('t7', 'f'), ARRAY['t7.val'], 0.1, state_name => 'diverged');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS det = PG_EXCEPTION_DETAIL;
  RAISE WARNING 'with ddx.show_sql the detail has the statement: %', det LIKE '%Statement: WITH ddx_loss AS%';
END $$;
RESET ddx.show_sql;
-- bad settings are refused before anything runs, as PyTorch refuses them
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], -1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, beta2 => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_sgd_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, nesterov => true);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.1, no_decay => ARRAY['w2.val']);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val', 'runs.w.val'], 0.1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.nope'], 0.1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.f'], 0.1);
\echo :LAST_ERROR_SQLSTATE

-- Runs: listed, copied, reset, dropped
SELECT ddx_run_copy('b', 'b2');
SELECT (SELECT array_agg(s ORDER BY s.key) FROM ddx_state('b', 'w.val') s) =
       (SELECT array_agg(s ORDER BY s.key) FROM ddx_state('b2', 'w.val') s) AS same_state,
       (SELECT step FROM ddx_runs WHERE name = 'b') = (SELECT step FROM ddx_runs WHERE name = 'b2') AS same_step;
SELECT ddx_run_copy('b', 'b2');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_run_reset('b2');
SELECT name, step, params, last_loss FROM ddx_runs WHERE name = 'b2';
SELECT count(*) AS state_rows FROM ddx_state('b2', 'w.val');
SELECT count(*) AS state_rows FROM ddx_state('b', 'w.val');
SELECT ddx_run_drop('b2');
SELECT count(*) FROM ddx_runs WHERE name = 'b2';
SELECT ddx_run_drop('b2');
\echo :LAST_ERROR_SQLSTATE
-- a loss whose text changes every step (its batch formatted in) keeps at
-- most 8 prepared step statements in the session
DO $$ BEGIN FOR b IN 1 .. 12 LOOP
  PERFORM ddx_adamw_step(format('SELECT l * %s FROM loss', b), ARRAY['w.val'], 0.01, state_name => 'formatted');
END LOOP; END $$;
SELECT count(*) AS kept FROM pg_prepared_statements WHERE name LIKE '\_ddx\_step\_%';
-- the loss may end with a semicolon
SELECT step FROM ddx_adamw_step('SELECT l FROM loss;  ', ARRAY['w.val'], 0.01, state_name => 'semicolon');
-- a step's statement runs under its generic plan from its first execution
-- (a custom plan is planned anew at every step), and the session's own
-- plan_cache_mode is as it was
SELECT step FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, state_name => 'semicolon');
SELECT generic_plans, custom_plans FROM pg_prepared_statements
 WHERE name LIKE '\_ddx\_step\_%' ORDER BY prepare_time DESC LIMIT 1;
SHOW plan_cache_mode;
