-- Training loops: schedules as tables, and ddx_train, a PROCEDURE that
-- commits every step and resumes from its state tables.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA train;
SET search_path = train, public;
\set VERBOSITY terse
SET client_min_messages = warning;
-- schedules against their closed forms (StepLR, ExponentialLR, nanoGPT's get_lr)
SELECT ddx_schedule_step('st', 0.1, 3, 0.5, 8);
SELECT step, lr, lr = 0.1 * 0.5 ^ (step / 3) AS closed FROM st ORDER BY step;
SELECT ddx_schedule_exponential('ex', 0.1, 0.9, 4);
SELECT step, abs(lr - 0.1 * 0.9 ^ step) < 1e-15 AS closed FROM ex ORDER BY step;
SELECT ddx_schedule_warmup_cosine('wc', 2, 6, 1.0, 0.1, 8);
SELECT step, round(lr::numeric, 12) AS lr FROM wc ORDER BY step;
SELECT ddx_schedule_constant('c', 0.3, 100);
-- a noiseless linear model: the least-squares weights are (2, -1, 0.5)
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int PRIMARY KEY, val float8);
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO x SELECT s, f, ((s * 7919 + f * 104729 + s * f * 31) % 1000) / 500.0 - 1 FROM generate_series(1, 60) s, generate_series(1, 3) f;
INSERT INTO y SELECT s, sum(val * (ARRAY[2.0, -1.0, 0.5])[f]) FROM x GROUP BY s;
INSERT INTO w VALUES (1, 0), (2, 0), (3, 0);
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$,
               ARRAY['w.val'], 40, 'c', optimizer => 'sgd', momentum => 0.5, log_every => 10);
SELECT name, optimizer, step, params FROM ddx_runs WHERE name = 'train.w.val';
SELECT count(*) AS logged, min(step), max(step), count(loss) AS with_loss FROM ddx_train_log WHERE run = 'train.w.val';
-- a run longer than the schedule fails before its first step, and nothing
-- of it runs; CALL again with more steps resumes where it stopped
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$,
               ARRAY['w.val'], 150, 'c', optimizer => 'sgd', momentum => 0.5, log_every => 10);
\echo :LAST_ERROR_SQLSTATE
SELECT name, step FROM ddx_runs WHERE name = 'train.w.val';
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$,
               ARRAY['w.val'], 100, 'c', optimizer => 'sgd', momentum => 0.5, log_every => 10);
SELECT name, step FROM ddx_runs WHERE name = 'train.w.val';
SELECT count(*) AS logged, min(step), max(step), count(loss) AS with_loss FROM ddx_train_log WHERE run = 'train.w.val';
-- the loss went from order 1 to nothing, and the weights reached least squares
SELECT (SELECT loss FROM ddx_train_log WHERE run = 'train.w.val' ORDER BY step LIMIT 1) > 0.1 AS started_high,
       (SELECT loss FROM ddx_train_log WHERE run = 'train.w.val' ORDER BY step DESC LIMIT 1) < 1e-12 AS ended_low;
SELECT f, round(val::numeric, 6) AS weight FROM w ORDER BY f;
-- a finished run does nothing when called again
SET client_min_messages = notice;
CALL ddx_train('SELECT 1.0::float8', ARRAY['w.val'], 100, 'c', optimizer => 'sgd');
SET client_min_messages = warning;
-- log_every 0: no progress NOTICE at all (first, last or any step), the
-- steps taken and logged all the same
SET client_min_messages = notice;
CALL ddx_train($$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
                 SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$$,
               ARRAY['w.val'], 3, 'c', optimizer => 'sgd', state_name => 'quiet', log_every => 0);
SET client_min_messages = warning;
SELECT count(*) AS logged, min(step), max(step) FROM ddx_train_log WHERE run = 'quiet';
-- the state table leaves room on each page, so that its per-step UPDATE is HOT
SELECT c.reloptions FROM _ddx.state_table s JOIN pg_class c ON c.oid = s.state WHERE s.param = 'w'::regclass;
-- a schedule is a table of ddx's: a user's table of the same name is left alone
CREATE TABLE mine (step int, lr float8);
INSERT INTO mine VALUES (0, 42);
SELECT ddx_schedule_constant('mine', 0.1, 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM mine;
SELECT ddx_schedule_constant('c', 0.2, 2);
SELECT * FROM c ORDER BY step;
-- errors
CALL ddx_train('SELECT 1.0::float8', ARRAY['w.val'], 1, 'c', optimizer => 'lbfgs');
\echo :LAST_ERROR_SQLSTATE
CALL ddx_train('SELECT 1.0::float8', ARRAY['w.val'], 1, 'c', log_every => -1);
\echo :LAST_ERROR_SQLSTATE
