-- ddx.shards: a gradient program in parts, the mean of the parts' gradients
-- (src/pg/runner/shards.cpp). Oracle: a linear model's gradient in closed
-- form, written out in plain SQL (d/dw_i of avg_n (x_n . w - y_n)^2 is
-- avg_n 2 e_n x_ni), taken over each part and averaged.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA shards;
SET search_path = shards, public;
SET client_min_messages = warning;
CREATE TABLE x (n int, i int, v float8);
CREATE TABLE y (n int PRIMARY KEY, v float8);
INSERT INTO x SELECT n, i, sin(n * 3 + i * 7) FROM generate_series(1, 12) n, generate_series(1, 3) i;
INSERT INTO y SELECT n, cos(n) FROM generate_series(1, 12) n;
CREATE TABLE w (i int PRIMARY KEY, val float8);
INSERT INTO w SELECT i, 0.1 * i FROM generate_series(1, 3) i;
CREATE VIEW loss AS
  WITH z AS (SELECT x.n, sum(x.v * w.val) AS z FROM x JOIN w ON w.i = x.i WHERE ddx_in_shard(x.n) GROUP BY x.n)
  SELECT avg(power(z.z - y.v, 2)) AS l FROM z JOIN y ON y.n = z.n;
-- the oracle: each part's closed-form gradient (and loss), averaged over
-- the parts (parts: n mod `parts`)
CREATE FUNCTION oracle(parts int, n_max int DEFAULT 12)
RETURNS TABLE (i int, g float8) LANGUAGE sql AS $$
  WITH e AS (SELECT x.n, sum(x.v * w.val) - min(y.v) AS e FROM x JOIN w ON w.i = x.i JOIN y ON y.n = x.n
              WHERE x.n <= n_max GROUP BY x.n),
       part AS (SELECT x.n % parts AS p, x.i, avg(2 * e.e * x.v) AS g FROM x JOIN e ON e.n = x.n GROUP BY 1, 2)
  SELECT part.i, avg(part.g) FROM part GROUP BY part.i ORDER BY part.i
$$;
CREATE FUNCTION oracle_loss(parts int, n_max int DEFAULT 12) RETURNS float8 LANGUAGE sql AS $$
  WITH e AS (SELECT x.n, sum(x.v * w.val) - min(y.v) AS e FROM x JOIN w ON w.i = x.i JOIN y ON y.n = x.n
              WHERE x.n <= n_max GROUP BY x.n)
  SELECT avg(l) FROM (SELECT e.n % parts AS p, avg(e.e * e.e) AS l FROM e GROUP BY 1) q
$$;
-- the gradient of `loss` against the oracle: true where every row agrees to 1e-12
CREATE FUNCTION agrees(parts int, n_max int DEFAULT 12, scale float8 DEFAULT 1) RETURNS boolean LANGUAGE sql AS $$
  SELECT bool_and(abs(d.g - scale * o.g) <= 1e-12 * greatest(1, abs(o.g)))
    FROM (SELECT w.i, grad('loss', w.val) AS g FROM w) d JOIN oracle(parts, n_max) o ON o.i = d.i
$$;
-- this backend's shard workers (they join its lock group)
CREATE FUNCTION workers() RETURNS SETOF int LANGUAGE sql AS $$
  SELECT pid FROM pg_stat_activity WHERE backend_type = 'ddx shard' AND leader_pid = pg_backend_pid() ORDER BY pid
$$;

-- outside a program in parts: part 0 of 1, every key in it
SELECT ddx_shard(), ddx_shards(), ddx_in_shard(7), ddx_in_shard(NULL);
SELECT agrees(1);
SELECT count(*) AS workers FROM workers();

-- two parts, the second in a worker; three, two in workers
SET ddx.shards = 2;
SELECT agrees(2), agrees(1) AS whole_batch;
-- (pg_stat_activity is read once per transaction: the workers are counted
-- in a statement of their own)
SELECT count(*) AS workers FROM workers();
SELECT abs(ddx_value('loss') - oracle_loss(2)) < 1e-12 AS loss_is_the_parts_mean;
SET ddx.shards = 3;
SELECT agrees(3);
SELECT count(*) AS workers FROM workers();
-- parts of unequal sizes (10 samples: 3, 4, 3): the mean of the parts'
-- means, not the batch's mean (DistributedDataParallel's)
DELETE FROM y WHERE n > 10;
SELECT agrees(3, 10), agrees(1, 10) AS whole_batch;
INSERT INTO y SELECT n, cos(n) FROM generate_series(11, 12) n;

-- a part without rows (every key even: part 2 of 2 has none) is refused,
-- not averaged in as a zero gradient
SET ddx.shards = 2;
CREATE VIEW loss_even AS
  WITH z AS (SELECT x.n, sum(x.v * w.val) AS z FROM x JOIN w ON w.i = x.i WHERE ddx_in_shard(2 * x.n) GROUP BY x.n)
  SELECT avg(power(z.z - y.v, 2)) AS l FROM z JOIN y ON y.n = z.n;
SELECT w.i, grad('loss_even', w.val) FROM w;

-- a transaction that has written runs every part in the backend (a worker
-- would not see its rows), and sees its own rows
SET ddx.shards = 2;
BEGIN;
UPDATE y SET v = v + 1 WHERE n = 4;
SELECT agrees(2);
ROLLBACK;
SELECT agrees(2);

-- the backend's settings and role reach the workers, and a change of them
SELECT count(*) AS workers FROM workers() \gset
CREATE VIEW loss_set AS
  SELECT l * current_setting('shards_test.scale')::float8 AS l FROM loss;
CREATE FUNCTION agrees_set(scale float8) RETURNS boolean LANGUAGE sql AS $$
  SELECT bool_and(abs(d.g - scale * o.g) <= 1e-12 * greatest(1, abs(o.g)))
    FROM (SELECT w.i, grad('loss_set', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i
$$;
SET shards_test.scale = 3;
SELECT agrees_set(3);
SET shards_test.scale = 5;
SELECT agrees_set(5);
CREATE ROLE ddx_shards_role;
GRANT USAGE ON SCHEMA shards TO ddx_shards_role;
GRANT SELECT ON ALL TABLES IN SCHEMA shards TO ddx_shards_role;
CREATE FUNCTION whoami() RETURNS text LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN current_user; END $$;
CREATE VIEW loss_role AS
  SELECT l * CASE WHEN whoami() = 'ddx_shards_role' THEN 1 ELSE 100 END AS l FROM loss;
GRANT SELECT ON loss_role TO ddx_shards_role;
SET ROLE ddx_shards_role;
SELECT bool_and(abs(d.g - o.g) <= 1e-12 * greatest(1, abs(o.g))) AS as_the_role
  FROM (SELECT w.i, grad('loss_role', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i;
RESET ROLE;

-- an error in a worker's part is raised here, with its SQLSTATE and a line
-- naming the part; the worker goes on serving
CREATE VIEW loss_err AS
  SELECT l + (SELECT sum(1 / (x.n - 7)) FROM x WHERE ddx_in_shard(x.n)) AS l FROM loss;
SELECT array_agg(p) AS before FROM workers() p \gset
DO $$
DECLARE
  st text;
  ctx text;
BEGIN
  PERFORM grad('shards.loss_err', w.val) FROM shards.w;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, ctx = PG_EXCEPTION_CONTEXT;
  RAISE WARNING 'raised %, in part 2: %', st, ctx LIKE '%ddx part 2 of 2 (ddx.shards), background worker%';
END $$;
SELECT agrees(2);
SELECT array_agg(p) = :'before' AS same_worker FROM workers() p;

-- a part's notices and warnings reach the client, as the backend's own
-- (after part 1's), as client_min_messages has them (terse: their context
-- names the worker's process)
CREATE FUNCTION say_part() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE NOTICE 'in part % of %', ddx_shard() + 1, ddx_shards();
  IF ddx_shard() = 1 THEN
    RAISE WARNING 'a warning of part 2';
  END IF;
  RETURN 0;
END $$;
CREATE VIEW loss_notice AS SELECT l + (SELECT say_part()) * 0 AS l FROM loss;
\set VERBOSITY terse
SET client_min_messages = notice;
SELECT count(grad('loss_notice', w.val)) AS gradients FROM w;
SET client_min_messages = warning;
SELECT count(grad('loss_notice', w.val)) AS gradients FROM w;
\set VERBOSITY default
SELECT agrees(2), array_agg(p) = :'before' AS same_worker FROM workers() p;

-- a cancel while a worker runs its part: the statement is canceled, the
-- worker's part stopped and its answer dropped; the next program is right
CREATE FUNCTION slow_in_part_2() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF ddx_shard() = 1 THEN
    PERFORM pg_sleep(5);
  END IF;
  RETURN 0;
END $$;
CREATE VIEW loss_slow AS
  SELECT l + (SELECT count(*) FROM x WHERE ddx_in_shard(x.n) AND x.n > slow_in_part_2()) * 0 AS l FROM loss;
SET statement_timeout = '1s';
SELECT w.i, grad('loss_slow', w.val) FROM w;
RESET statement_timeout;
SELECT agrees(2);
SELECT array_agg(p) = :'before' AS same_worker FROM workers() p;

-- a worker that is gone: its part runs here; the next program starts one again
SELECT count(pg_terminate_backend(p)) FROM workers() p;
DO $$
BEGIN
  FOR k IN 1 .. 1200 LOOP  -- (up to a minute: under valgrind a process ends slowly)
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'ddx shard'
                           AND leader_pid = pg_backend_pid());
    PERFORM pg_sleep(0.05);
    PERFORM pg_stat_clear_snapshot();  -- (pg_stat_activity is read once per transaction)
  END LOOP;
END $$;
SELECT agrees(2);
SELECT agrees(2);
SELECT count(*) AS workers, array_agg(p) <> :'before' AS a_new_worker FROM workers() p;

-- training: each step's gradient in parts (its transaction writes nothing
-- before its gradient), SGD's steps as the closed form takes them; every
-- step's second part in the worker, the first step's too (its loss raises
-- where the backend computes that part)
CREATE TABLE expect (i int PRIMARY KEY, val float8);
INSERT INTO expect SELECT i, val FROM w;
SELECT ddx_schedule_constant('shards_lr', 0.05, 5);
SELECT set_config('shards_test.leader', pg_backend_pid()::text, false) IS NOT NULL AS leader_set;
CREATE FUNCTION part_2_in_a_worker() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF ddx_shard() = 1 AND pg_backend_pid() = current_setting('shards_test.leader')::int THEN
    RAISE EXCEPTION 'part 2 of 2 computed in the backend';
  END IF;
  RETURN 0;
END $$;
CREATE VIEW loss_train AS
  SELECT l + (SELECT count(*) FROM x WHERE ddx_in_shard(x.n) AND x.n > part_2_in_a_worker()) * 0 AS l FROM loss;
SELECT clock_timestamp() AS started \gset
CALL ddx_train('SELECT l FROM loss_train', ARRAY['w.val'], 5, 'shards_lr', optimizer => 'sgd',
               state_name => 'shards', log_every => 0);
-- (the same five steps by the oracle, from the same start)
CREATE TABLE trained AS SELECT * FROM w;
UPDATE w SET val = e.val FROM expect e WHERE e.i = w.i;
DO $$
BEGIN
  FOR k IN 1 .. 5 LOOP
    UPDATE shards.w SET val = w.val - 0.05 * o.g FROM shards.oracle(2) o WHERE o.i = w.i;
  END LOOP;
END $$;
SELECT bool_and(abs(t.val - w.val) <= 1e-12) AS trained_as_the_oracle FROM trained t JOIN w USING (i);
-- (its worker served the steps: it shows its last part in pg_stat_activity)
SELECT count(*) AS workers, bool_and(a.state_change > :'started' AND a.query = 'ddx part 2 of 2') AS served_the_steps
  FROM workers() p JOIN pg_stat_activity a ON a.pid = p;
-- AdamW on a parameter table without optimizer state yet: ddx_train makes
-- its state table before its first COMMIT, so the first step (which would
-- otherwise make it, an XID) has its part 2 in the worker too; its two
-- steps as torch.optim.AdamW takes them (defaults: betas 0.9, 0.999, eps
-- 1e-8, weight decay 0.01), from the closed-form gradient
CREATE TABLE adam_expect AS SELECT i, val, 0::float8 AS m, 0::float8 AS v FROM w;
CALL ddx_train('SELECT l FROM loss_train', ARRAY['w.val'], 2, 'shards_lr', state_name => 'shards_adam',
               log_every => 0);
CREATE TABLE adam_trained AS SELECT * FROM w;
UPDATE w SET val = e.val FROM adam_expect e WHERE e.i = w.i;
DO $$
DECLARE
  lr float8 := 0.05;
BEGIN
  FOR k IN 1 .. 2 LOOP
    UPDATE shards.adam_expect e SET m = 0.9 * e.m + 0.1 * o.g, v = 0.999 * e.v + 0.001 * o.g * o.g
      FROM shards.oracle(2) o WHERE o.i = e.i;
    UPDATE shards.w SET val = w.val * (1 - lr * 0.01) - lr / (1 - 0.9 ^ k) * e.m / (sqrt(e.v) / sqrt(1 - 0.999 ^ k) + 1e-8)
      FROM shards.adam_expect e WHERE e.i = w.i;
  END LOOP;
END $$;
SELECT bool_and(abs(t.val - w.val) <= 1e-12) AS adamw_as_the_oracle FROM adam_trained t JOIN w USING (i);

-- a worker plans no parallel query (a Gather would make it, a member of the
-- backend's lock group, the leader of one of its own): under
-- force_parallel_mode a query of the loss's functions would have one
CREATE FUNCTION gather_in_part_2() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  line text;
BEGIN
  IF ddx_shard() = 1 THEN
    FOR line IN EXECUTE 'EXPLAIN SELECT count(*) FROM shards.x' LOOP
      IF line LIKE '%Gather%' THEN
        RAISE EXCEPTION 'a parallel plan in part 2: %', line;
      END IF;
    END LOOP;
  END IF;
  RETURN 0;
END $$;
CREATE VIEW loss_parallel AS
  SELECT l + (SELECT count(*) FROM x WHERE ddx_in_shard(x.n) AND x.n > gather_in_part_2()) * 0 AS l FROM loss;
-- (force_parallel_mode, debug_parallel_query from PostgreSQL 16)
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000 THEN 'debug_parallel_query'
                       ELSE 'force_parallel_mode' END, 'on', false) AS parallel_forced;
SELECT bool_and(abs(d.g - o.g) <= 1e-12 * greatest(1, abs(o.g))) AS no_parallel_plan_in_a_worker
  FROM (SELECT w.i, grad('loss_parallel', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000 THEN 'debug_parallel_query'
                       ELSE 'force_parallel_mode' END, 'off', false) AS parallel_as_before;

-- a gradient in parts inside a security-definer function, then one outside
-- it with other settings: between parts the worker is back to its own user
-- and context (a definer's context kept would refuse the next settings)
CREATE FUNCTION agrees_definer() RETURNS boolean LANGUAGE sql SECURITY DEFINER
  SET search_path = public, shards AS $$ SELECT shards.agrees(2) $$;
SELECT agrees_definer();
SET shards_test.scale = 11;
SELECT agrees(2) AS after_a_definer;

-- now() in a worker's part is the backend's, and so is the isolation level
CREATE FUNCTION backend_xact_in_part_2() RETURNS int LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF ddx_shard() = 1 AND now() <> current_setting('shards_test.now')::timestamptz THEN
    RAISE EXCEPTION 'now() in part 2 is %, in the backend %', now(), current_setting('shards_test.now');
  END IF;
  IF ddx_shard() = 1 AND current_setting('transaction_isolation') <> current_setting('shards_test.iso') THEN
    RAISE EXCEPTION 'part 2 runs in %, the backend in %', current_setting('transaction_isolation'),
                    current_setting('shards_test.iso');
  END IF;
  RETURN 0;
END $$;
CREATE VIEW loss_xact AS
  SELECT l + (SELECT count(*) FROM x WHERE ddx_in_shard(x.n) AND x.n > backend_xact_in_part_2()) * 0 AS l FROM loss;
BEGIN;
SELECT set_config('shards_test.now', now()::text, true) IS NOT NULL AND
       set_config('shards_test.iso', current_setting('transaction_isolation'), true) IS NOT NULL AS noted;
SELECT bool_and(abs(d.g - o.g) <= 1e-12 * greatest(1, abs(o.g))) AS read_committed
  FROM (SELECT w.i, grad('loss_xact', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT set_config('shards_test.now', now()::text, true) IS NOT NULL AND
       set_config('shards_test.iso', current_setting('transaction_isolation'), true) IS NOT NULL AS noted;
SELECT bool_and(abs(d.g - o.g) <= 1e-12 * greatest(1, abs(o.g))) AS repeatable_read
  FROM (SELECT w.i, grad('loss_xact', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i;
COMMIT;

-- ddx.shards back to 1: the workers end with the statement's transaction
-- (they hold max_worker_processes slots, which others share)
SELECT count(*) AS workers FROM workers();
RESET ddx.shards;
DO $$
BEGIN
  FOR k IN 1 .. 1200 LOOP  -- (up to a minute)
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'ddx shard'
                           AND leader_pid = pg_backend_pid());
    PERFORM pg_sleep(0.05);
    PERFORM pg_stat_clear_snapshot();
  END LOOP;
END $$;
SELECT count(*) AS workers_after_reset FROM workers();
SET ddx.shards = 2;

-- a temporary table in the loss, or any in the session (a function of the
-- loss could name one without its schema): the parts run here, as right;
-- once the session has none, in the workers again
CREATE TEMP TABLE yt AS SELECT * FROM y;
CREATE VIEW loss_temp AS
  WITH z AS (SELECT x.n, sum(x.v * w.val) AS z FROM x JOIN w ON w.i = x.i WHERE ddx_in_shard(x.n) GROUP BY x.n)
  SELECT avg(power(z.z - y.v, 2)) AS l FROM z JOIN yt y ON y.n = z.n;
SELECT bool_and(abs(d.g - o.g) <= 1e-12 * greatest(1, abs(o.g))) AS temp_table
  FROM (SELECT w.i, grad('loss_temp', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i;
-- (a loss that does not name it: its part 2 in the backend too)
SELECT w.i, grad('loss_train', w.val) FROM w;
-- none any more: the workers again
DROP VIEW loss_temp;
DROP TABLE yt;
SELECT bool_and(abs(d.g - o.g) <= 1e-12 * greatest(1, abs(o.g))) AS in_a_worker_again
  FROM (SELECT w.i, grad('loss_train', w.val) AS g FROM w) d JOIN oracle(2) o ON o.i = d.i;

RESET ddx.shards;
RESET search_path;
DROP SCHEMA shards CASCADE;
REVOKE ALL ON SCHEMA public FROM ddx_shards_role;
DROP ROLE ddx_shards_role;
SELECT ddx_run_drop('shards');
SELECT ddx_run_drop('shards_adam');
