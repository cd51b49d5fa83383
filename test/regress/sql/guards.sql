-- What the training API refuses, and what it does instead of going wrong:
-- settings checked as torch.optim checks them, a non-finite loss that stops
-- a run with its state intact, a parameter table the loss never reads
-- skipped as PyTorch skips a parameter without a gradient, steps logged,
-- ddx_train inside a transaction, messages that say what is wrong, and the
-- SQL API as \df+ shows it. Oracles: the tables before the refusal, a run
-- stepped beside on a copy, closed forms, finite differences.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA guards;
SET search_path = guards, public;
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int PRIMARY KEY, val float8);
INSERT INTO x SELECT s, f, sin(s * 7 + f * 3) FROM generate_series(1, 12) s, generate_series(1, 3) f;
INSERT INTO y SELECT s, cos(s) FROM generate_series(1, 12) s;
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO w SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE TABLE u (k int PRIMARY KEY, val float8);  -- a parameter table the loss below never reads
INSERT INTO u VALUES (1, 1.5), (2, -2.5);
CREATE VIEW loss AS
  WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
  SELECT avg(power(z.z - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s;
SELECT ddx_schedule_constant('c', 0.05, 50);
-- what a step must leave as it was when it is refused
CREATE TABLE saved (what text, k int, v float8);
CREATE FUNCTION save() RETURNS void LANGUAGE sql AS $$
  DELETE FROM saved;
  INSERT INTO saved SELECT 'w', f, val FROM w UNION ALL SELECT 'u', k, val FROM u
    UNION ALL SELECT 'm', (s.key ->> 'f')::int, s.m FROM ddx_state('g', 'w.val') s;
$$;
CREATE FUNCTION unchanged() RETURNS boolean LANGUAGE sql AS $$
  SELECT count(*) = 0 FROM ((SELECT * FROM saved) EXCEPT ALL
    (SELECT 'w', f, val FROM w UNION ALL SELECT 'u', k, val FROM u
       UNION ALL SELECT 'm', (s.key ->> 'f')::int, s.m FROM ddx_state('g', 'w.val') s)) d
$$;
SELECT step, round(loss::numeric, 10) AS loss FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, state_name => 'g');
SELECT save();

-- 1. Settings as torch.optim checks them: finite, in range; each refusal
-- names the argument, and nothing moves
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 'NaN', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 'Infinity', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], NULL, state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, eps => 'NaN', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, weight_decay => 'NaN', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, weight_decay => 'Infinity', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, beta1 => 'NaN', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, max_grad_norm => 'NaN', state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_sgd_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, momentum => 'Infinity', state_name => 'h');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_sgd_step('SELECT l FROM loss', ARRAY['w.val'], 0.01, dampening => 'NaN', state_name => 'h');
\echo :LAST_ERROR_SQLSTATE
SELECT unchanged() AS unchanged, (SELECT step FROM ddx_runs WHERE name = 'g') AS step,
       (SELECT count(*) FROM ddx_runs WHERE name = 'h') AS runs_h;

-- 2. A loss that reaches no parameter but through a function ddx cannot see
-- into is refused; nothing moves
CREATE FUNCTION my_loss() RETURNS float8 LANGUAGE sql STABLE AS 'SELECT l FROM guards.loss';
SELECT ddx_adamw_step('SELECT my_loss()', ARRAY['w.val'], 0.01, state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT unchanged() AS unchanged, (SELECT step FROM ddx_runs WHERE name = 'g') AS step;

-- 3. A parameter table the loss never reads is skipped (a NOTICE, once per
-- session and run), as PyTorch skips a parameter whose grad is None: its
-- values stay and it gets no state; the table the loss reads steps as it
-- would alone (w4, the same model trained without u)
CREATE TABLE w3 (f int PRIMARY KEY, val float8);
INSERT INTO w3 SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE TABLE w4 (f int PRIMARY KEY, val float8);
INSERT INTO w4 SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE VIEW loss3 AS
  WITH z AS (SELECT x.s, sum(x.val * w3.val) AS z FROM x JOIN w3 ON x.f = w3.f GROUP BY x.s)
  SELECT avg(power(z.z - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s;
CREATE VIEW loss4 AS
  WITH z AS (SELECT x.s, sum(x.val * w4.val) AS z FROM x JOIN w4 ON x.f = w4.f GROUP BY x.s)
  SELECT avg(power(z.z - y.val, 2)) AS l FROM z JOIN y ON y.s = z.s;
SET client_min_messages = notice;
SELECT step FROM ddx_adamw_step('SELECT l FROM loss3', ARRAY['w3.val', 'u.val'], 0.01, state_name => 'g3');
SELECT step FROM ddx_adamw_step('SELECT l FROM loss3', ARRAY['w3.val', 'u.val'], 0.01, state_name => 'g3');
SET client_min_messages = warning;
SELECT step FROM ddx_adamw_step('SELECT l FROM loss4', ARRAY['w4.val'], 0.01, state_name => 'g4');
SELECT step FROM ddx_adamw_step('SELECT l FROM loss4', ARRAY['w4.val'], 0.01, state_name => 'g4');
SELECT f, a.val = b.val AS same FROM w3 a JOIN w4 b USING (f) ORDER BY f;
SELECT k, val FROM u ORDER BY k;
SELECT params FROM ddx_runs WHERE name = 'g3';
SELECT * FROM ddx_state('g3', 'u.val');
\echo :LAST_ERROR_SQLSTATE
-- every step is logged, by the step functions too; ddx_runs has the last loss
SELECT run, step, loss IS NOT NULL AS loss, grad_norm > 0 AS norm, lr FROM ddx_train_log WHERE run IN ('g', 'g3') ORDER BY 1, 2;
SELECT r.last_loss = l.loss AS last_loss FROM ddx_runs r, ddx_train_log l WHERE r.name = 'g' AND l.run = 'g' AND l.step = 1;

-- 4. A loss that is not finite stops the run: 22P01 names the step and run,
-- and the parameters and state are those of the step before. Step 4 reads a
-- sample whose feature is infinite ($1: the step).
CREATE TABLE xb (s int, f int, val float8);
INSERT INTO xb SELECT s, f, CASE WHEN s = 4 AND f = 2 THEN 'Infinity' ELSE sin(s * 7 + f * 3) END
  FROM generate_series(1, 12) s, generate_series(1, 3) f;
CREATE TABLE wb (f int PRIMARY KEY, val float8);
INSERT INTO wb SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE TABLE wc (f int PRIMARY KEY, val float8);  -- the same, trained three steps
INSERT INTO wc SELECT f, val FROM wb;
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * wb.val) AS z FROM xb x JOIN wb ON x.f = wb.f WHERE x.s = $1 GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$, ARRAY['wb.val'], 10, 'c');
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * wc.val) AS z FROM xb x JOIN wc ON x.f = wc.f WHERE x.s = $1 GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$, ARRAY['wc.val'], 3, 'c');
SELECT name, step FROM ddx_runs WHERE name IN ('guards.wb.val', 'guards.wc.val') ORDER BY 1;
SELECT count(*) AS logged, max(step) FROM ddx_train_log WHERE run = 'guards.wb.val';
SELECT b.f, b.val = c.val AS same FROM wb b JOIN wc c USING (f) ORDER BY 1;
SELECT (SELECT array_agg(s ORDER BY s.key) FROM ddx_state('guards.wb.val', 'wb.val') s)::text =
       (SELECT array_agg(s ORDER BY s.key) FROM ddx_state('guards.wc.val', 'wc.val') s)::text AS same_state;

-- A NULL loss stops the run too (22004): step 13 reads a batch past the
-- data's 12 samples, whose avg is NULL; without the refusal it would step
-- on a zero gradient, weight decay and momentum moving the parameters. The
-- run stays at step 12, as a copy trained 12 steps.
CREATE TABLE wn (f int PRIMARY KEY, val float8);
INSERT INTO wn SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE TABLE wm (f int PRIMARY KEY, val float8);
INSERT INTO wm SELECT f, val FROM wn;
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * wn.val) AS z FROM x JOIN wn ON x.f = wn.f WHERE x.s = $1 GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$, ARRAY['wn.val'], 14, 'c');
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * wm.val) AS z FROM x JOIN wm ON x.f = wm.f WHERE x.s = $1 GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$, ARRAY['wm.val'], 12, 'c');
SELECT name, step FROM ddx_runs WHERE name IN ('guards.wn.val', 'guards.wm.val') ORDER BY 1;
SELECT count(*) AS logged, count(loss) AS with_loss FROM ddx_train_log WHERE run = 'guards.wn.val';
SELECT n.f, n.val = m.val AS same FROM wn n JOIN wm m USING (f) ORDER BY 1;
SELECT (SELECT array_agg(s ORDER BY s.key) FROM ddx_state('guards.wn.val', 'wn.val') s)::text =
       (SELECT array_agg(s ORDER BY s.key) FROM ddx_state('guards.wm.val', 'wm.val') s)::text AS same_state;
-- and a step function's, in the caller's transaction
SELECT ddx_adamw_step('SELECT avg(val) FROM w WHERE f > 10', ARRAY['w.val'], 0.01, state_name => 'g');
\echo :LAST_ERROR_SQLSTATE
SELECT unchanged() AS unchanged;

-- A session's extra_float_digits does not change a step's settings: they
-- reach the step's statement as exact literals (at -15 the rate 0.0123456
-- was written 0.01, and beta2's 0.999 1: a division by zero). The same step
-- of a copy under the default is the oracle.
CREATE TABLE we (f int PRIMARY KEY, val float8);
INSERT INTO we SELECT f, 0.1 * f FROM generate_series(1, 3) f;
CREATE TABLE wd (f int PRIMARY KEY, val float8);
INSERT INTO wd SELECT f, val FROM we;
SELECT step FROM ddx_adamw_step('SELECT sum(power(val - 1, 2)) FROM wd', ARRAY['wd.val'], 0.0123456);
SET extra_float_digits = -15;
SELECT step FROM ddx_adamw_step('SELECT sum(power(val - 1, 2)) FROM we', ARRAY['we.val'], 0.0123456);
RESET extra_float_digits;
SELECT e.f, e.val = d.val AS same, e.val <> 0.1 * e.f AS moved FROM we e JOIN wd d USING (f) ORDER BY 1;

-- 5. ddx_gradcheck of a training loss that reads $1: the step to bind
SELECT rows_checked, max_rel_error < 1e-6 AS ok
  FROM ddx_gradcheck($$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f WHERE x.s % 3 = $1 % 3
                                  GROUP BY x.s) SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$,
                     'w', 'val', step => 2);
SELECT * FROM ddx_gradcheck($$SELECT sum(val * $1) FROM w$$, 'w', 'val');
\echo :LAST_ERROR_SQLSTATE

-- 6. ddx_train where it cannot commit (inside BEGIN, in a string of several
-- statements): every step in the caller's transaction (a NOTICE says so:
-- test/soak/faults.py reads it with the progress NOTICEs)
BEGIN;
CALL ddx_train('SELECT l FROM loss4', ARRAY['w4.val'], 3, 'c', state_name => 'inside');
SELECT step FROM ddx_runs WHERE name = 'inside';
ROLLBACK;
SELECT count(*) FROM ddx_runs WHERE name = 'inside';
SELECT 1 AS one \; CALL ddx_train('SELECT l FROM loss4', ARRAY['w4.val'], 2, 'c', state_name => 'inside');
SELECT step FROM ddx_runs WHERE name = 'inside';

-- 7. Messages that say what is wrong
CREATE TABLE mine (a int, b float8);
CALL ddx_train('SELECT l FROM loss', ARRAY['w.val'], 10, 'mine', state_name => 'm');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_schedule_constant('neg', 0.1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_schedule_warmup_cosine('wcos', 10, 10, 1.0, 0.1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_schedule_constant('nan', 'NaN', 3);
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train(NULL, ARRAY['w.val'], 10, 'c', state_name => 'm');
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train('SELECT l FROM loss', ARRAY['w.val'], NULL, 'c', state_name => 'm');
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train('SELECT l FROM loss', ARRAY['w.val'], 10, 'c', momentum => 0.9, state_name => 'm');
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train('SELECT l FROM loss', ARRAY['w.val'], 10, 'c', optimizer => 'sgd', beta2 => 0.99, state_name => 'm');
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step(NULL, ARRAY['w.val'], 0.01, state_name => 'm');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ddx_state('g', 'x.val');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ddx_explain($$SELECT * FROM ddx_adamw_step('SELECT l FROM loss', ARRAY['w.val'], 0.01)$$);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM ddx_runs WHERE name = 'm';
-- an error inside a step carries the step's DETAIL and HINT, and no CONTEXT
-- line of ddx's internal functions
\set VERBOSITY default
SELECT ddx_sgd_step('SELECT l FROM loss', ARRAY['w.val'], 'NaN', state_name => 'g');
CREATE FUNCTION user_loop() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ddx_adamw_step('SELECT l FROM loss WHERE l > 1 / 0', ARRAY['w.val'], 0.01, state_name => 'g');
END $$;
SELECT user_loop();
-- ... and the frames of the user's own functions inside the step stay
CREATE FUNCTION boom(s int) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF s = 7 THEN RAISE EXCEPTION 'boom at sample %', s; END IF;
  RETURN true;
END $$;
SELECT ddx_adamw_step($$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f WHERE boom(x.s)
                                   GROUP BY x.s) SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$,
                      ARRAY['w.val'], 0.01, state_name => 'g');
\set VERBOSITY terse

-- 8. DROP EXTENSION ddx while runs exist says that CASCADE drops every run's
-- state; with CASCADE it does (rolled back here)
\set VERBOSITY sqlstate
DROP EXTENSION ddx;
\set VERBOSITY terse
SELECT :'LAST_ERROR_MESSAGE' LIKE 'cannot drop extension ddx because it keeps % training run%' AS says_why;
BEGIN;
DROP EXTENSION ddx CASCADE;
SELECT count(*) AS ddx_schema FROM pg_namespace WHERE nspname = '_ddx';
SELECT count(*) AS params_kept FROM w;
ROLLBACK;

-- 9. The SQL API as \df+ shows it: every public function documented, and
-- nothing of ddx's internals in the extension's schema
SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) AS args
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ddx')
   AND p.pronamespace <> '_ddx'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL;
SELECT DISTINCT p.proname
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ddx') AND p.pronamespace <> '_ddx'::regnamespace
 ORDER BY 1;

-- 10. A session keeps what it worked out for a run's step (the tables, those
-- the loss reads, the statement) while the catalogs stay as they were; what
-- changes them counts from the next step. Oracle: SGD's closed form,
-- p - lr * dl/dp.
SET client_min_messages = notice;
CREATE TABLE pa (f int PRIMARY KEY, val float8);
CREATE TABLE pb (f int PRIMARY KEY, val float8);
INSERT INTO pa VALUES (1, 1), (2, 2);
INSERT INTO pb VALUES (1, 1), (2, 2);
CREATE VIEW lp AS SELECT sum(val * val * f) AS l FROM pa;
SELECT step FROM ddx_sgd_step('SELECT l FROM lp', ARRAY['pa.val', 'pb.val'], 0.1, state_name => 'p');
SELECT step FROM ddx_sgd_step('SELECT l FROM lp', ARRAY['pa.val', 'pb.val'], 0.1, state_name => 'p');
-- the view now reads pb too: pb steps (dl/dpb = f)
CREATE OR REPLACE VIEW lp AS SELECT (SELECT sum(val * val * f) FROM pa) + (SELECT sum(val * f) FROM pb) AS l;
SELECT step FROM ddx_sgd_step('SELECT l FROM lp', ARRAY['pa.val', 'pb.val'], 0.1, state_name => 'p');
SELECT 'pa' AS t, f, val, abs(val - CASE f WHEN 1 THEN 0.512 ELSE 0.432 END) < 1e-12 AS closed_form FROM pa
UNION ALL
SELECT 'pb', f, val, abs(val - CASE f WHEN 1 THEN 0.9 ELSE 1.8 END) < 1e-12 FROM pb ORDER BY 1, 2;
-- a function of the loss that ddx saw into becomes one it cannot: refused
CREATE FUNCTION lpf() RETURNS TABLE (l float8) LANGUAGE sql STABLE AS 'SELECT l FROM guards.lp';
SELECT step FROM ddx_sgd_step('SELECT l FROM lpf()', ARRAY['pa.val', 'pb.val'], 0.1, state_name => 'pf');
SELECT step FROM ddx_sgd_step('SELECT l FROM lpf()', ARRAY['pa.val', 'pb.val'], 0.1, state_name => 'pf');
CREATE OR REPLACE FUNCTION lpf() RETURNS TABLE (l float8) LANGUAGE plpgsql STABLE AS
  'BEGIN RETURN QUERY SELECT lp.l FROM guards.lp; END';
SELECT step FROM ddx_sgd_step('SELECT l FROM lpf()', ARRAY['pa.val', 'pb.val'], 0.1, state_name => 'pf');
\echo :LAST_ERROR_SQLSTATE
-- a table without a primary key that gains a second row: refused
CREATE TABLE pc (val float8);
INSERT INTO pc VALUES (3);
SELECT step FROM ddx_sgd_step('SELECT sum(val * val) AS l FROM pc', ARRAY['pc.val'], 0.1, state_name => 'pc');
SELECT step FROM ddx_sgd_step('SELECT sum(val * val) AS l FROM pc', ARRAY['pc.val'], 0.1, state_name => 'pc');
INSERT INTO pc VALUES (4);
SELECT step FROM ddx_sgd_step('SELECT sum(val * val) AS l FROM pc', ARRAY['pc.val'], 0.1, state_name => 'pc');
\echo :LAST_ERROR_SQLSTATE
SELECT val FROM pc ORDER BY val;
-- names resolve through the search_path of each step
CREATE SCHEMA guards2;
CREATE TABLE guards2.pa (f int PRIMARY KEY, val float8);
INSERT INTO guards2.pa VALUES (1, 10);
CREATE VIEW guards2.lp AS SELECT sum(val * val * f) AS l FROM guards2.pa;
SELECT step FROM ddx_sgd_step('SELECT l FROM lp', ARRAY['pa.val'], 0.1);
SET search_path = guards2, guards, public;
SELECT step FROM ddx_sgd_step('SELECT l FROM lp', ARRAY['pa.val'], 0.1);
SET search_path = guards, public;
-- (guards.pa: six steps since its start at f, each times 1 - 0.2 f)
SELECT 'guards2' AS s, f, val, abs(val - 8) < 1e-12 AS closed_form FROM guards2.pa
UNION ALL
SELECT 'guards', f, round(val::numeric, 9), abs(val - f * (1 - 0.2 * f) ^ 6) < 1e-12 FROM guards.pa ORDER BY 1, 2;
SET client_min_messages = warning;
