-- ddx 0.1 -> 0.2: ddx_version(); an optimizer step's applied gradients computed
-- inline (_ddx.step_table_sql); an optimizer step's statement under its
-- generic plan, worked out once per session (_ddx.step_plan); ddx_explain of
-- programs without a GROUP BY at their end; ddx_train's log_every 0 (no
-- progress NOTICE); an optimizer step refuses a NULL loss (22004) and writes
-- its settings exactly whatever extra_float_digits is; one session steps a
-- parameter column at a time (_ddx.params_lock_or_refuse); ddx.shards, a
-- gradient program in parts (ddx_in_shard, ddx_shard, ddx_shards), and a
-- step that writes its run's row after its gradient (_ddx.run_stepped);
-- ddx_train commits the run's row before its first step.
\echo Use "ALTER EXTENSION ddx UPDATE TO '0.2'" to load this file. \quit

-- --- versions ---------------------------------------------------------------

-- ddx_version(): what runs. The library the server loaded, the version of
-- the extension's SQL objects, and PostgreSQL's. After a newer package is
-- installed and the server restarted, the library is the new one and the SQL
-- objects stay those of the old version until ALTER EXTENSION ddx UPDATE
-- (the library serves both).
CREATE FUNCTION _ddx.library_version() RETURNS text
  AS 'MODULE_PATHNAME', 'ddx_library_version' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ddx_version(OUT library text, OUT extension text, OUT postgres text) RETURNS record
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT _ddx.library_version(),
         (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'ddx'),
         pg_catalog.current_setting('server_version') $$;
COMMENT ON FUNCTION ddx_version() IS
  'ddx_version(): the versions of ddx''s loaded library, of its SQL objects (ALTER EXTENSION ddx UPDATE brings them to the library''s) and of PostgreSQL';

-- --- parameter locks ---------------------------------------------------------

-- A step's parameter columns locked (sql/10_differentiation.sql, 50_runs.sql).
CREATE FUNCTION _ddx.params_lock(run_key int, tables oid[], cols text[]) RETURNS int
  AS 'MODULE_PATHNAME', 'ddx_params_lock' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- Locks the parameter columns a step of run `run_name` moves (kept's), for
-- the transaction, or for the session where ddx_train holds the run, or
-- refuses with 55P03 naming the process that steps one of them: two runs
-- stepping the same parameters at once would each take its steps from values
-- the other had moved since its gradient (an UPDATE re-reads a row another
-- transaction changed), a trajectory of neither optimizer, without a word.
-- Runs on other columns, or other tables, train side by side; one session
-- may step one column in several runs, one after the other.
CREATE FUNCTION _ddx.params_lock_or_refuse(run_name text, kept _ddx.param_table[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  tbls oid[];
  cols text[];
  failed int;
  holder int;
  other text;
BEGIN
  SELECT array_agg(x.tbl::oid ORDER BY x.o, c.n), array_agg(c.col::text ORDER BY x.o, c.n) INTO tbls, cols
    FROM unnest(kept) WITH ORDINALITY AS x(tbl, qtbl, keys, ktypes, cols, specs, decay, o)
    CROSS JOIN LATERAL unnest(x.cols) WITH ORDINALITY AS c(col, n);
  IF tbls IS NULL THEN
    RETURN;
  END IF;
  failed := _ddx.params_lock(_ddx.run_key(run_name), tbls, cols);
  IF failed = 0 THEN
    RETURN;
  END IF;
  SELECT min(k.pid) INTO holder FROM pg_catalog.pg_locks k
   WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 3 AND k.classid = tbls[failed]
     AND k.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
     AND k.objid = (SELECT a.attnum FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid = tbls[failed] AND a.attname = cols[failed])::int4::oid
     AND k.pid <> pg_catalog.pg_backend_pid();
  SELECT r.name INTO other FROM @extschema@.ddx_runs r WHERE r.training_pid = holder ORDER BY r.name LIMIT 1;
  RAISE EXCEPTION 'parameter column %.% is being trained by another session', tbls[failed]::regclass,
                  quote_ident(cols[failed])
    USING ERRCODE = '55P03',
          DETAIL = format('Process %s is stepping it%s. Two runs that step the same parameters at once would each '
                          'step from values the other had moved since its gradient.', coalesce(holder::text, '(gone)'),
                          CASE WHEN other IS NOT NULL THEN format(' (training run "%s")', other) ELSE '' END),
          HINT = 'Wait until it ends, or train a copy of the table (a run of its own on other parameters).';
END $$;

-- --- data parallelism -------------------------------------------------------

-- Data parallelism (src/pg/runner/shards.cpp): under ddx.shards = N, a
-- gradient program whose loss keeps ddx_in_shard(key) runs as N parts at
-- once, part k over the keys with key mod N = k, and its gradients and loss
-- are the mean of the parts'. Outside such a part: ddx_shard() 0,
-- ddx_shards() 1, ddx_in_shard() true. PARALLEL RESTRICTED: a parallel
-- worker of PostgreSQL's would not know the part.
CREATE FUNCTION ddx_shard() RETURNS int
  AS 'MODULE_PATHNAME', 'ddx_shard' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE FUNCTION ddx_shards() RETURNS int
  AS 'MODULE_PATHNAME', 'ddx_shards' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE FUNCTION _ddx.in_shard_support(internal) RETURNS internal
  AS 'MODULE_PATHNAME', 'ddx_in_shard_support' LANGUAGE C STRICT;
CREATE FUNCTION ddx_in_shard(key bigint) RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_in_shard' LANGUAGE C STABLE PARALLEL RESTRICTED SUPPORT _ddx.in_shard_support;
COMMENT ON FUNCTION ddx_in_shard(bigint) IS
  'ddx_in_shard(key): whether the rows of key belong to the part of the batch being computed (key mod ddx.shards); true outside a program in parts (ddx.shards)';
COMMENT ON FUNCTION ddx_shard() IS 'ddx_shard(): the part of a gradient program being computed, from 0 (0 outside a program in parts: ddx.shards)';
COMMENT ON FUNCTION ddx_shards() IS 'ddx_shards(): how many parts a gradient program runs as (1 outside a program in parts: ddx.shards)';

-- --- optimizer steps ------------------------------------------------------

-- The run `run_name` for a step or a training loop with optimizer `opt`,
-- created if new, and locked for this transaction (or, with `session`, for
-- this session, until _ddx.run_unlock or an abort: ddx_train's): one session
-- trains a run at a time, and another one's step or ddx_train on it is
-- refused (55P03) rather than interleaved with its steps. Its id.
CREATE OR REPLACE FUNCTION _ddx.run_claim(run_name text, opt text, session boolean) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  i int;
BEGIN
  -- (locked before it is created: a second session waits on no one's
  -- uncommitted INSERT of a new run)
  PERFORM _ddx.run_lock_or_refuse(run_name, session);
  -- (inserted only where the run is not there: an INSERT computes its id,
  -- a nextval, before it finds the conflict, and a nextval that logs its
  -- sequence gives the transaction an XID, which a step's gradient must
  -- run without for ddx.shards: _ddx.run_next_step)
  SELECT r.id INTO i FROM _ddx.run r WHERE r.name = run_name;
  IF i IS NULL THEN
    INSERT INTO _ddx.run (name, optimizer) VALUES (run_name, opt) ON CONFLICT ON CONSTRAINT run_pkey DO NOTHING;
    SELECT r.id INTO i FROM _ddx.run r WHERE r.name = run_name;
  END IF;
  IF i IS NULL THEN
    RAISE EXCEPTION 'training run "%" belongs to another role', run_name
      USING ERRCODE = '42501', HINT = 'Give this run another name (state_name => ...).';
  END IF;
  RETURN i;
END $$;

-- Starts the next step of run `run_name` with optimizer `opt`: creates the
-- run on its first step, locks it for the transaction, checks that it is an
-- `opt` run, and returns its id, the number of the step now being taken and
-- its owner (whose state tables hold the run's state). It writes nothing
-- where the run exists: the step's number is written with the step
-- (_ddx.run_stepped), after its gradient, so that a step's transaction has
-- written nothing when its gradient runs, which is what lets ddx.shards run
-- the gradient's parts in other processes (src/pg/runner/shards.cpp). The
-- run's lock keeps any other session from stepping it in between.
CREATE OR REPLACE FUNCTION _ddx.run_next_step(run_name text, opt text, OUT run_id int, OUT run_step int, OUT run_owner regrole)
LANGUAGE plpgsql AS $$
DECLARE
  was text;
BEGIN
  run_id := _ddx.run_claim(run_name, opt, false);
  SELECT f.run_step INTO run_step FROM _ddx.run_refresh(run_name) f;
  SELECT r.optimizer, r.owner INTO was, run_owner FROM _ddx.run r WHERE r.id = run_id;
  IF was <> opt AND run_step > 0 THEN
    RAISE EXCEPTION 'training run "%" is an % run, not %', run_name, was, opt
      USING ERRCODE = '22023', HINT = format('Give the %s run another name (state_name => ...), or start this one '
                                             'again with ddx_run_reset(%L).', opt, run_name);
  END IF;
  run_step := run_step + 1;
END $$;

-- Step `run_step` of run `run_id`, with optimizer `opt`, taken (see
-- _ddx.run_next_step).
CREATE FUNCTION _ddx.run_stepped(run_id int, run_step int, opt text) RETURNS void
LANGUAGE sql AS $$
  UPDATE _ddx.run r SET step = run_step, optimizer = opt, updated = now() WHERE r.id = run_id
$$;


-- A session's plan of an optimizer step, kept until the catalogs may have
-- changed (sql/70_optimizers.sql, _ddx.step_plan).
CREATE TYPE _ddx.step_plan AS (run_name text, run_id int, run_owner regrole, tabs _ddx.param_table[],
                               kept _ddx.param_table[], sql text, prepared text);
CREATE FUNCTION _ddx.step_plan_get(key text) RETURNS _ddx.step_plan
  AS 'MODULE_PATHNAME', 'ddx_step_plan_get' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION _ddx.step_plan_put(key text, plan _ddx.step_plan) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_step_plan_put' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- A step's statement runs under its generic plan, planned once per session,
-- where Citus is not installed, and is worked out once per session while the
-- catalogs stay as they were (sql/70_optimizers.sql, _ddx.optimizer_step).
CREATE OR REPLACE FUNCTION _ddx.optimizer_step(opt text, loss_sql text, params text[], lr float8, beta1 float8, beta2 float8,
                                   eps float8, weight_decay float8, no_decay text[], max_grad_norm float8,
                                   momentum float8, dampening float8, nesterov boolean, run_name text,
                                   OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE plpgsql SET extra_float_digits = 3 AS $$
DECLARE
  tabs _ddx.param_table[];
  kept _ddx.param_table[] := '{}';
  skipped text[] := '{}';
  rd record;
  run_id int;
  run_owner regrole;
  sql text;
  prepared text;
  plan_key text;
  plan _ddx.step_plan;
  many boolean;
  plan_mode text;
  stale text;
  e_state text;
  e_msg text;
  e_detail text;
  e_hint text;
  e_ctx text;
  e_where text;
BEGIN
  -- PyTorch's argument checks
  IF NOT _ddx.finite(lr) OR lr < 0 THEN
    PERFORM _ddx.refuse_setting('lr', lr, 'a finite number, at least 0');
  END IF;
  IF opt <> 'sgd' THEN
    IF NOT _ddx.finite(beta1) OR beta1 < 0 OR beta1 >= 1 THEN
      PERFORM _ddx.refuse_setting('beta1', beta1, 'in [0, 1)');
    END IF;
    IF NOT _ddx.finite(beta2) OR beta2 < 0 OR beta2 >= 1 THEN
      PERFORM _ddx.refuse_setting('beta2', beta2, 'in [0, 1)');
    END IF;
    IF NOT _ddx.finite(eps) OR eps < 0 THEN
      PERFORM _ddx.refuse_setting('eps', eps, 'a finite number, at least 0');
    END IF;
  END IF;
  IF NOT _ddx.finite(weight_decay) OR weight_decay < 0 THEN
    PERFORM _ddx.refuse_setting('weight_decay', weight_decay, 'a finite number, at least 0');
  END IF;
  IF NOT _ddx.finite(momentum) OR momentum < 0 THEN
    PERFORM _ddx.refuse_setting('momentum', momentum, 'a finite number, at least 0');
  END IF;
  IF NOT _ddx.finite(dampening) OR dampening < 0 THEN
    PERFORM _ddx.refuse_setting('dampening', dampening, 'a finite number, at least 0');
  END IF;
  IF max_grad_norm = 'NaN' OR max_grad_norm < 0 THEN
    PERFORM _ddx.refuse_setting('max_grad_norm', max_grad_norm, 'NULL (no clipping) or a number, at least 0');
  END IF;
  IF nesterov IS NULL THEN
    RAISE EXCEPTION 'invalid value for nesterov: NULL' USING ERRCODE = '22004';
  END IF;
  IF nesterov AND (momentum <= 0 OR dampening <> 0) THEN
    RAISE EXCEPTION 'Nesterov momentum requires a momentum and zero dampening' USING ERRCODE = '22023';
  END IF;
  IF loss_sql IS NULL THEN
    RAISE EXCEPTION 'loss_sql must not be NULL' USING ERRCODE = '22004',
      HINT = 'Pass the loss as a query returning one row and one number, e.g. ''SELECT l FROM loss''.';
  END IF;
  loss_sql := regexp_replace(loss_sql, '[\s;]+$', '');
  -- what the step is worked out from besides the catalogs, for the
  -- session's plan of it (_ddx.step_plan_get)
  -- (and of the current user: plans are kept per user, src/pg/api/step_plan.cpp)
  plan_key := format('%L %L %L %L %L %L %L %L %L %L', opt, momentum <> 0, nesterov, weight_decay <> 0, loss_sql,
                     params, no_decay, run_name, session_user, current_setting('search_path'));
  plan := _ddx.step_plan_get(plan_key);
  IF plan IS NULL THEN
    tabs := ARRAY(SELECT x FROM _ddx.param_tables(params, no_decay) x);
    run_name := coalesce(run_name, _ddx.default_run_name(tabs));
  ELSE
    tabs := plan.tabs;
    run_name := plan.run_name;
    -- (what _ddx.param_tables checks that is not in the catalogs)
    FOR i IN 1 .. coalesce(array_length(tabs, 1), 0) LOOP
      IF tabs[i].keys = '{}' THEN
        EXECUTE format('SELECT count(*) > 1 FROM (SELECT 1 FROM %s LIMIT 2) q', tabs[i].qtbl) INTO many;
        IF many THEN
          plan := NULL;
          tabs := ARRAY(SELECT x FROM _ddx.param_tables(params, no_decay) x);  -- (raises the error)
        END IF;
      END IF;
    END LOOP;
  END IF;
  SELECT n.run_id, n.run_step, n.run_owner INTO run_id, step, run_owner FROM _ddx.run_next_step(run_name, opt) n;
  IF plan.run_id = run_id AND plan.run_owner = run_owner THEN
    kept := plan.kept;
    sql := plan.sql;
    prepared := plan.prepared;
  ELSE
    -- the parameter tables the loss reads (unknown where it does not even
    -- translate: then all of them, and preparing the statement says what is
    -- wrong)
    SELECT * INTO rd FROM _ddx.loss_reads(loss_sql, ARRAY(SELECT x.tbl FROM unnest(tabs) x),
                                          ARRAY(SELECT x.cols[1] FROM unnest(tabs) x));
    FOR i IN 1 .. array_length(tabs, 1) LOOP
      IF rd.reads IS NULL OR rd.reads[i] THEN
        kept := kept || tabs[i];
      ELSE
        skipped := skipped || tabs[i].qtbl;
      END IF;
    END LOOP;
    IF skipped <> '{}' AND rd.opaque <> '{}' THEN
      RAISE EXCEPTION 'ddx cannot see into %, which the loss calls', rd.opaque[1]
        USING ERRCODE = '0A000',
              DETAIL = format('Step %s of training run "%s": the loss reads %s nowhere else, so it could reach its '
                              'parameters only inside what ddx cannot differentiate (%s), whose part of the loss '
                              'would get no gradient.', step, run_name, array_to_string(skipped, ', '),
                              array_to_string(rd.opaque, ', ')),
              HINT = 'Write the loss as a view, a CTE, or an SQL function that PostgreSQL inlines (LANGUAGE sql, one '
                     'SELECT of one expression or a set-returning one SELECT, not SECURITY DEFINER, no SET clause).';
    END IF;
    FOR i IN 1 .. coalesce(array_length(skipped, 1), 0) LOOP
      IF _ddx.first_time(format('skip %s %s', run_id, skipped[i])) THEN
        RAISE NOTICE 'training run "%" skips table %: the loss does not read it', run_name, skipped[i]
          USING DETAIL = 'A parameter table that the loss never reads gets no gradient and no step; its values and '
                         'its optimizer state stay as they are (PyTorch skips a parameter whose grad is None so).';
      END IF;
    END LOOP;
    SELECT q.sql INTO sql
      FROM _ddx.step_sql(_ddx.optimizer(opt, momentum <> 0, nesterov), loss_sql, kept, run_owner, weight_decay <> 0) q;
    prepared := '_ddx_step_' || md5(sql);
    -- kept for the session's next steps, until the catalogs may have
    -- changed (src/pg/api/step_plan.cpp)
    PERFORM _ddx.step_plan_put(plan_key, ROW(run_name, run_id, run_owner, tabs, kept, sql, prepared)::_ddx.step_plan);
  END IF;
  -- (its parameter columns too: one session steps them at a time)
  PERFORM _ddx.params_lock_or_refuse(run_name, kept);
  -- prepared once per session and statement (plans are kept across the
  -- COMMITs of ddx_train; DDL on a table it reads makes PostgreSQL plan it,
  -- and ddx differentiate it, again)
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements p WHERE p.name = prepared) THEN
    -- at most 8 kept per session, the least recently prepared go (a loss
    -- whose text changes every step, its batch formatted in, would
    -- otherwise keep one per step)
    FOR stale IN SELECT p.name FROM pg_catalog.pg_prepared_statements p WHERE p.name LIKE '\_ddx\_step\_%'
                  ORDER BY p.prepare_time DESC OFFSET 7 LOOP
      EXECUTE format('DEALLOCATE %I', stale);
    END LOOP;
    BEGIN
      EXECUTE format('PREPARE %I (int, int, float8, float8, float8, float8, float8, float8, float8, float8) AS %s',
                     prepared, sql);
    EXCEPTION WHEN OTHERS THEN  -- the loss as written, or a construct ddx cannot differentiate
      GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT, e_detail = PG_EXCEPTION_DETAIL,
                              e_hint = PG_EXCEPTION_HINT, e_ctx = PG_EXCEPTION_CONTEXT;
      RAISE EXCEPTION USING ERRCODE = e_state, MESSAGE = e_msg,
        DETAIL = format('Step %s of training run "%s" (%s) failed while preparing its statement (the loss as '
                        'written, and its derivative).', step, run_name, opt) || _ddx.users_frames(e_ctx) ||
                 CASE WHEN e_detail <> '' THEN E'\n' || e_detail ELSE '' END ||
                 CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN E'\nStatement: ' || sql ELSE '' END,
        HINT = CASE WHEN e_hint <> '' THEN e_hint || ' ' ELSE '' END ||
               CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN ''
                    ELSE 'SET ddx.show_sql = on to see the statement.' END;
    END;
  END IF;
  BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN  -- (not where Citus is)
      plan_mode := pg_catalog.current_setting('plan_cache_mode');
      PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
    END IF;
    -- (EXECUTE of a prepared statement takes no $n of its own: the values are
    -- literals, float8's text being exact)
    EXECUTE format('EXECUTE %I (%s, %s, %L, %L, %L, %L, %L, %L, %L, %L)', prepared, step, run_id, lr, beta1, beta2,
                   eps, max_grad_norm, momentum, dampening, weight_decay) INTO grad_norm, loss;
    IF plan_mode IS NOT NULL THEN
      PERFORM pg_catalog.set_config('plan_cache_mode', plan_mode, true);
    END IF;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT, e_detail = PG_EXCEPTION_DETAIL,
                            e_hint = PG_EXCEPTION_HINT, e_ctx = PG_EXCEPTION_CONTEXT;
    e_where := CASE WHEN strpos(e_ctx, 'ddx gradient program') > 0 THEN 'computing the loss and its gradient'
                    ELSE 'updating ' || array_to_string(ARRAY(SELECT x.qtbl FROM unnest(kept) x), ', ') ||
                         ' and the optimizer state' END;
    RAISE EXCEPTION USING ERRCODE = e_state, MESSAGE = e_msg,
      DETAIL = format('Step %s of training run "%s" (%s) failed while %s.', step, run_name, opt, e_where) ||
               _ddx.users_frames(e_ctx) ||
               CASE WHEN e_detail <> '' THEN E'\n' || e_detail ELSE '' END ||
               CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN E'\nStatement: ' || sql ELSE '' END,
      HINT = CASE WHEN e_hint <> '' THEN e_hint || ' ' ELSE '' END ||
             CASE WHEN e_state LIKE '22%' AND strpos(e_msg, 'out of range') > 0
                  THEN 'The loss, its gradient or the update left float8''s range: lower the learning rate, or clip '
                       'with max_grad_norm. ' ELSE '' END ||
             CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN ''
                  ELSE 'SET ddx.show_sql = on to see the statement.' END;
  END;
  -- (the error undoes the step's update with everything since the caller's
  -- transaction, or ddx_train's last COMMIT, began)
  IF loss IS NOT NULL AND NOT _ddx.finite(loss) OR grad_norm IS NOT NULL AND NOT _ddx.finite(grad_norm) THEN
    RAISE EXCEPTION 'step % of training run "%" has a % that is not finite (%)', step, run_name,
                    CASE WHEN loss IS NOT NULL AND NOT _ddx.finite(loss) THEN 'loss' ELSE 'gradient norm' END,
                    CASE WHEN loss IS NOT NULL AND NOT _ddx.finite(loss) THEN loss ELSE grad_norm END
      USING ERRCODE = '22P01',
            DETAIL = format('Loss %s, gradient norm %s at learning rate %s: the step was not taken, and the '
                            'parameters and optimizer state are those after step %s.', loss, grad_norm, lr, step - 1),
            HINT = 'Lower the learning rate, clip the gradient (max_grad_norm), or look in the loss for what '
                   'overflows (exp of a large value, a log or a division at zero).';
  END IF;
  IF loss IS NULL THEN
    RAISE EXCEPTION 'step % of training run "%" has a NULL loss', step, run_name
      USING ERRCODE = '22004',
            DETAIL = format('The loss query gave NULL (an aggregate over no rows is NULL: a mini-batch past the end '
                            'of the data, a filter no row passes) or no row; a NULL loss has no gradient to step '
                            'with. The step was not taken, and the parameters and optimizer state are those after '
                            'step %s.', step - 1),
            HINT = 'Check which rows the loss reads at this step (its $1 is the step''s number); where a loss over '
                   'no rows is meant to be 0, write coalesce(..., 0).';
  END IF;
  PERFORM _ddx.run_stepped(run_id, step, opt);
  INSERT INTO _ddx.run_param AS p (run, param, col, last_step)
    SELECT run_id, x.tbl, c, step FROM unnest(kept) x CROSS JOIN LATERAL unnest(x.cols) c
  ON CONFLICT ON CONSTRAINT run_param_pkey DO UPDATE SET last_step = excluded.last_step;
  INSERT INTO _ddx.train_log (run, step, loss, grad_norm, lr) VALUES (run_name, step, loss, grad_norm, lr);
  lr_used := lr;
END $$;

-- A step's applied gradients (ddx_d<i>) read the scale and the last step as
-- scalar subqueries and are planned inside their readers (sql/70_optimizers.sql).
CREATE OR REPLACE FUNCTION _ddx.step_table_sql(rule _ddx.optimizer_rule, t _ddx.param_table, nt int, run_owner regrole,
                                    decays boolean, citus boolean, OUT gcte text, OUT garm text, OUT norms text[],
                                    OUT ctes text[])
LANGUAGE plpgsql AS $$
DECLARE
  st regclass;
  nc int := array_length(t.cols, 1);
  ks text := '';   -- k1, k2, ...
  kgt text := '';  -- AND t.<key> = g.k1 ...
  kst text := '';  -- AND t.<key> = s.k1 ...
  kgs text := '';  -- AND g.k1 = s.k1 ...
  kds text := '';  -- AND s.k1 = d.k1 ...
  gsel text := '';
  dsel text[] := '{}';
  -- d.last: the run step the column was last stepped at (ddx_l<i>, read
  -- once per execution, in a CTE of its own: on Citus, a local table may
  -- not be read inside a statement that updates a Citus table)
  lcase text := 'd.last';
  sret text := rule.state_out;
  upd text := '';
  gk text := '';     -- ARRAY[t.<key>::text, ...]
  gp text := '';     -- ARRAY[t.<col>::float8, ...]
  gg text := '';     -- ARRAY[grad(..., t.<col>), ...]
  gback text := '';  -- (a.k[1])::<type> AS k1, ..., a.p[1] AS p1, a.g[1] AS g1, ...
BEGIN
  norms := '{}';
  ctes := '{}';
  FOR k IN 1 .. coalesce(array_length(t.keys, 1), 0) LOOP
    ks := ks || format('k%s, ', k);
    kgt := kgt || format(' AND t.%I = g.k%s', t.keys[k], k);
    kst := kst || format(' AND t.%I = s.k%s', t.keys[k], k);
    kgs := kgs || format(' AND g.k%s = s.k%s', k, k);
    kds := kds || format(' AND s.k%s = d.k%s', k, k);
    gsel := gsel || format('t.%I AS k%s, ', t.keys[k], k);
    gk := gk || format('t.%I::text, ', t.keys[k]);
    gback := gback || format('(a.k[%1$s])::%2$s AS k%1$s, ', k, t.ktypes[k]);
  END LOOP;
  FOR j IN 1 .. nc LOOP
    gsel := gsel || format('t.%1$I AS p%2$s, @extschema@.grad(''ddx_loss'', t.%1$I) AS g%2$s, ', t.cols[j], j);
    gp := gp || format('t.%I::float8, ', t.cols[j]);
    gg := gg || format('@extschema@.grad(''ddx_loss'', t.%I), ', t.cols[j]);
    gback := gback || format('a.p[%1$s] AS p%1$s, a.g[%1$s] AS g%1$s, ', j);
    norms := norms || format('SELECT sum(g%1$s * g%1$s) AS ss FROM ddx_g%2$s', j, nt);
    -- the gradient applied: clipped, plus the L2 term where the column decays
    -- (the scale and the last step are one value each: scalar subqueries,
    -- evaluated once, where joins with their CTEs rescanned one per row)
    dsel := dsel || format('SELECT %1$s%2$L::text AS col, g.g%3$s * (SELECT c.s FROM ddx_scale c)%4$s AS d, '
                           '(SELECT l.last_step FROM ddx_l%5$s l WHERE l.col = %2$L) AS last '
                           'FROM ddx_g%5$s g WHERE g.p%3$s IS NOT NULL', replace(ks, 'k', 'g.k'), t.cols[j], j,
                           CASE WHEN NOT rule.decoupled AND t.decay[j] AND decays
                                THEN format(' + $10 * g.p%s', j) ELSE '' END, nt);
  END LOOP;
  IF citus THEN
    garm := format('SELECT %s AS t, ARRAY[%s]::text[] AS k, ARRAY[%s]::float8[] AS p, '
                   'ARRAY[%s]::float8[] AS g FROM %s t', nt, rtrim(gk, ', '), rtrim(gp, ', '),
                   rtrim(gg, ', '), t.qtbl);
    gcte := format('ddx_g%s AS (SELECT %s FROM ddx_gall a WHERE a.t = %s)', nt, rtrim(gback, ', '), nt);
  ELSE
    gcte := format('ddx_g%s AS MATERIALIZED (SELECT %s FROM %s t)', nt, rtrim(gsel, ', '), t.qtbl);
  END IF;
  IF rule.plain IS NOT NULL THEN  -- no state: each value moves by its applied gradient
    FOR j IN 1 .. nc LOOP
      upd := upd || format('%1$I = %2$s, ', t.cols[j],
                           format(rule.plain, format('t.%I', t.cols[j]), format('g.g%s * c.s%s', j,
                                  CASE WHEN NOT rule.decoupled AND t.decay[j] AND decays
                                       THEN format(' + $10 * t.%I', t.cols[j]) ELSE '' END)));
    END LOOP;
    ctes := ctes || format('ddx_u%1$s AS (UPDATE %2$s t SET %3$s FROM ddx_g%1$s g, ddx_scale c WHERE true%4$s RETURNING 1)',
                           nt, t.qtbl, rtrim(upd, ', '), kgt);
    RETURN;
  END IF;
  st := _ddx.state_table_for(t.tbl, run_owner);
  ctes := ctes || format('ddx_l%s AS MATERIALIZED (SELECT p.col::text AS col, p.last_step FROM _ddx.run_param p '
                         'WHERE p.run = $2 AND p.param = %s::pg_catalog.oid::pg_catalog.regclass)', nt, t.tbl::oid);
  ctes := ctes || format('ddx_d%s AS NOT MATERIALIZED (%s)', nt, array_to_string(dsel, ' UNION ALL '));
  -- state: rows stepped before are updated (a HOT update: no key changes),
  -- rows new to the run inserted (a row not stepped the last time its
  -- column was starts again from zero); ddx_s<i> has the step each takes
  ctes := ctes || format('ddx_so%1$s AS (UPDATE %2$s s SET %3$s FROM ddx_d%1$s d WHERE s.run = $2 AND s.col = d.col%4$s '
                         'RETURNING s.col, %5$s%6$s)', nt, st,
                         format('step = CASE WHEN s.at = %1$s THEN s.step + 1 ELSE 1 END, ', lcase)
                           || format(rule.state_next, lcase) || ', at = $1',
                         kds, replace(ks, 'k', 's.k'), sret);
  -- The rows the UPDATE missed, by an anti-join with its RETURNING rows
  -- (the rows it matched), not with the state table: on Citus, a state
  -- table distributed like its parameters may not be read by a subquery
  -- correlated with a CTE. (The anti-join runs only when the UPDATE missed
  -- rows: bench/state.py.)
  ctes := ctes || format('ddx_sn%1$s AS (INSERT INTO %2$s AS s (run, col, %3$s%4$s) SELECT $2, d.col, %5$s%6$s '
                         'FROM ddx_d%1$s d LEFT JOIN ddx_so%1$s o ON o.col = d.col%7$s '
                         'WHERE (SELECT count(*) FROM ddx_so%1$s) < (SELECT count(*) FROM ddx_d%1$s) '
                         'AND o.col IS NULL RETURNING s.col, %8$s%9$s)', nt, st, ks, 'step, at, ' || rule.state_cols,
                         replace(ks, 'k', 'd.k'), '1, $1, ' || rule.state_first, replace(kds, 's.k', 'o.k'),
                         replace(ks, 'k', 's.k'), sret);
  ctes := ctes || format('ddx_s%1$s AS (SELECT * FROM ddx_so%1$s UNION ALL SELECT * FROM ddx_sn%1$s)', nt);
  IF rule.move IS NULL THEN
    ctes := ctes || format('ddx_v%1$s AS (SELECT * FROM ddx_s%1$s)', nt);
  ELSE
    ctes := ctes || format('ddx_v%1$s AS (SELECT s.col, %2$s%3$s AS u FROM ddx_s%1$s s%4$s)', nt,
                           replace(ks, 'k', 's.k'), rule.move,
                           CASE WHEN rule.move_reads_gradient
                                THEN format(' JOIN ddx_d%s g ON g.col = s.col%s', nt, kgs) ELSE '' END);
  END IF;
  -- the update; a decoupled rule decays the value itself: p *= 1 - lr * weight_decay
  upd := '';
  FOR j IN 1 .. nc LOOP
    upd := upd || format('%1$I = t.%1$I%2$s - %3$s, ', t.cols[j],
                         CASE WHEN rule.decoupled AND t.decay[j] AND decays THEN ' * (1 - $3 * $10)' ELSE '' END,
                         CASE WHEN nc = 1 THEN 's.u' ELSE format('coalesce(s.u%s, 0)', j) END);
  END LOOP;
  IF nc = 1 THEN
    ctes := ctes || format('ddx_u%1$s AS (UPDATE %2$s t SET %3$s FROM ddx_v%1$s s WHERE true%4$s RETURNING 1)',
                           nt, t.qtbl, rtrim(upd, ', '), kst);
  ELSE  -- one row per key: the columns' steps side by side
    ctes := ctes || format('ddx_u%1$s AS (UPDATE %2$s t SET %3$s FROM (SELECT %4$s%5$s FROM ddx_v%1$s GROUP BY %6$s) s '
                           'WHERE true%7$s RETURNING 1)', nt, t.qtbl, rtrim(upd, ', '), ks,
                           array_to_string(ARRAY(SELECT format('max(u) FILTER (WHERE col = %L) AS u%s', t.cols[j], j)
                                                   FROM generate_series(1, nc) j), ', '),
                           CASE WHEN ks = '' THEN '()' ELSE rtrim(ks, ', ') END, kst);
  END IF;
END $$;

-- --- explain ----------------------------------------------------------------

-- A program's last lines are its gradient rows' SELECT, no longer a GROUP BY
-- over them (the runner sums them): the last step ends where they begin.
CREATE OR REPLACE FUNCTION _ddx.ddx_explain(statement text, run_analyze boolean DEFAULT false)
RETURNS TABLE (program int, step int, name text, kind text, rows double precision, ms double precision, sql text)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  prog text;
  parts text[];
  p int := 0;
  aplan jsonb;
BEGIN
  FOR r IN SELECT * FROM _ddx.statement_programs(statement) LOOP
    p := p + 1;
    aplan := NULL;
    prog := r.program;
    -- (not over Citus tables: Citus plans the steps as distributed subplans,
    -- no plan node per CTE, and every step stored would gather each one)
    IF run_analyze AND r.in_place IS NULL THEN
      -- every step stored, so that each has its rows and time (a step that
      -- one later step reads runs inside it, NOT MATERIALIZED, otherwise)
      SELECT string_agg(l, E'\n')::jsonb INTO aplan
        FROM _ddx.explain_program(replace(prog, ' AS NOT MATERIALIZED (', ' AS MATERIALIZED ('), NULL,
                                  'ANALYZE, FORMAT JSON') l;
    END IF;
    -- over Citus data tables: the variant the runner chooses (in place with
    -- ddx.citus_in_place on, where Citus can plan it; else gathered)
    IF r.in_place IS NOT NULL AND current_setting('ddx.citus_in_place', true) = 'on' THEN
      prog := r.in_place;
    END IF;
    parts := regexp_split_to_array(substr(prog, 6), E',\n(?=[fgbm][0-9_]+ AS (NOT )?MATERIALIZED)');
    FOR i IN 1 .. array_length(parts, 1) LOOP
      program := p;
      step := i;
      sql := parts[i];
      IF i = array_length(parts, 1) THEN  -- the last CTE, then the gradient rows' SELECT on lines of its own
        sql := split_part(parts[i], E'\nSELECT ', 1);
      END IF;
      name := split_part(sql, ' ', 1);
      kind := CASE left(name, 1) WHEN 'f' THEN 'forward' WHEN 'b' THEN 'backward: cotangent'
                                 WHEN 'm' THEN 'backward: shared pass' ELSE 'forward' END;
      rows := NULL;
      ms := NULL;
      IF aplan IS NOT NULL THEN
        -- the step's own time: its plan's, less what its scans of other
        -- steps took (which computed those steps, as far as they had not
        -- been; reading their stored rows is then in neither)
        SELECT (n ->> 'Actual Rows')::float8,
               (n ->> 'Actual Total Time')::float8
                 - coalesce((SELECT sum((s ->> 'Actual Total Time')::float8 * (s ->> 'Actual Loops')::float8)
                               FROM jsonb_path_query(n, 'strict $.**') s
                              WHERE jsonb_typeof(s) = 'object' AND s ->> 'Node Type' = 'CTE Scan'), 0)
          INTO rows, ms
          FROM jsonb_path_query(aplan, 'strict $.**') n
         WHERE jsonb_typeof(n) = 'object' AND n ->> 'Subplan Name' = 'CTE ' || name
         LIMIT 1;
      END IF;
      RETURN NEXT;
    END LOOP;
  END LOOP;
END $$;

-- --- training runs ----------------------------------------------------------

-- log_every 0: no progress NOTICE (sql/90_train.sql).
CREATE OR REPLACE PROCEDURE _ddx.ddx_train(loss_sql text, params text[], steps int, schedule regclass,
                                optimizer text DEFAULT 'adamw', weight_decay float8 DEFAULT NULL,
                                no_decay text[] DEFAULT '{}', max_grad_norm float8 DEFAULT NULL,
                                momentum float8 DEFAULT NULL, state_name text DEFAULT NULL,
                                log_every int DEFAULT 100, beta1 float8 DEFAULT NULL, beta2 float8 DEFAULT NULL,
                                eps float8 DEFAULT NULL, dampening float8 DEFAULT NULL, nesterov boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  tabs _ddx.param_table[];
  run_name text;
  run_id int;
  commits boolean;
  done int;
  first int;
  covered int;
  bad int;
  lo int;
  hi int;
  lr float8;
  r record;
  started timestamptz;
  secs float8;
  other text;
  rd record;
BEGIN
  IF optimizer IS NULL OR optimizer NOT IN ('adamw', 'adam', 'sgd') THEN
    RAISE EXCEPTION 'unknown optimizer "%"', optimizer USING ERRCODE = '22023', HINT = 'Use adamw, adam or sgd.';
  END IF;
  IF loss_sql IS NULL THEN
    RAISE EXCEPTION 'loss_sql must not be NULL' USING ERRCODE = '22004',
      HINT = 'Pass the loss as a query returning one row and one number, e.g. ''SELECT l FROM loss''.';
  END IF;
  PERFORM _ddx.check_count('steps', steps, 0);
  PERFORM _ddx.check_count('log_every', log_every, 0);
  IF schedule IS NULL THEN
    RAISE EXCEPTION 'the schedule must not be NULL' USING ERRCODE = '22004',
      HINT = 'Make one with ddx_schedule_constant, ddx_schedule_warmup_cosine, ...';
  END IF;
  -- a setting of another optimizer would be ignored: refused instead
  other := CASE WHEN optimizer = 'sgd' THEN
                  CASE WHEN beta1 IS NOT NULL THEN 'beta1' WHEN beta2 IS NOT NULL THEN 'beta2'
                       WHEN eps IS NOT NULL THEN 'eps' END
                ELSE CASE WHEN momentum IS NOT NULL THEN 'momentum' WHEN dampening IS NOT NULL THEN 'dampening'
                          WHEN nesterov IS NOT NULL THEN 'nesterov' END END;
  IF other IS NOT NULL THEN
    RAISE EXCEPTION '% is not a setting of %', other, optimizer
      USING ERRCODE = '22023',
            DETAIL = CASE WHEN optimizer = 'sgd' THEN 'beta1, beta2 and eps are settings of adam and adamw.'
                          ELSE 'momentum, dampening and nesterov are settings of sgd.' END,
            HINT = format('Leave out %s, or choose the optimizer it belongs to (optimizer => ...).', other);
  END IF;
  IF (SELECT count(*) FROM pg_catalog.pg_attribute a
       WHERE a.attrelid = schedule AND a.attnum > 0 AND NOT a.attisdropped
         AND (a.attname, a.atttypid) IN (('step', 'int4'::regtype), ('lr', 'float8'::regtype))) <> 2 THEN
    RAISE EXCEPTION '% is not a learning-rate schedule', schedule
      USING ERRCODE = '22023',
            DETAIL = 'A schedule is a table with columns step int and lr float8, one row per step from 0.',
            HINT = 'Make one with ddx_schedule_constant, ddx_schedule_warmup_cosine, ddx_schedule_step or '
                   'ddx_schedule_exponential.';
  END IF;
  tabs := ARRAY(SELECT x FROM _ddx.param_tables(params, no_decay) x);  -- every parameter checked first
  run_name := coalesce(state_name, _ddx.default_run_name(tabs));
  -- locked before its step count is read: no other session steps it until
  -- this CALL ends
  commits := _ddx.nonatomic();
  run_id := _ddx.run_claim(run_name, optimizer, commits);
  done := coalesce((SELECT f.run_step FROM _ddx.run_refresh(run_name) f), 0);
  IF done >= steps THEN
    RAISE NOTICE 'training run "%" has taken % steps already: nothing to do', run_name, done
      USING HINT = format('CALL ddx_train with more steps to go on, or ddx_run_reset(%L) to start again.', run_name);
    IF commits THEN
      PERFORM _ddx.run_unlock(_ddx.run_key(run_name));
    END IF;
    RETURN;
  END IF;
  EXECUTE format('SELECT count(*) FILTER (WHERE s.step >= $1 AND s.step < $2 AND s.lr IS NOT NULL), '
                 'min(s.step) FILTER (WHERE s.step >= $1 AND s.step < $2 AND NOT (_ddx.finite(s.lr) AND s.lr >= 0)), '
                 'min(s.step), max(s.step) FROM %s s', schedule) INTO covered, bad, lo, hi USING done, steps;
  IF covered < steps - done THEN
    RAISE EXCEPTION 'schedule % does not cover steps % to %', schedule, done + 1, steps
      USING ERRCODE = '22023',
            DETAIL = format('Step s takes the learning rate of the schedule''s row s - 1; it has rows %s to %s.',
                            coalesce(lo::text, '(none)'), coalesce(hi::text, '(none)')),
            HINT = format('Make the schedule at least %s rows long (the steps argument of ddx_schedule_*).', steps);
  END IF;
  IF bad IS NOT NULL THEN
    EXECUTE format('SELECT s.lr FROM %s s WHERE s.step = $1', schedule) INTO lr USING bad;
    RAISE EXCEPTION 'schedule % has learning rate % at step %', schedule, lr, bad + 1
      USING ERRCODE = '22023', DETAIL = 'A learning rate is a finite number, at least 0.';
  END IF;
  IF NOT commits THEN
    RAISE NOTICE 'ddx_train of run "%" runs in the caller''s transaction: its steps commit or roll back with it',
                 run_name
      USING HINT = 'CALL it alone, outside BEGIN ... COMMIT, to commit every step, so that an interrupted run keeps '
                   'what it has done.';
  END IF;
  UPDATE _ddx.run x SET target_step = steps, train_started = clock_timestamp(), train_from = done WHERE x.id = run_id;
  -- the optimizer's state tables of the parameter tables the loss reads
  -- (those the step keeps: _ddx.optimizer_step), made here where a first
  -- step would make them
  IF commits AND (optimizer <> 'sgd' OR coalesce(momentum, 0) <> 0) THEN
    SELECT * INTO rd FROM _ddx.loss_reads(regexp_replace(loss_sql, '[\s;]+$', ''), ARRAY(SELECT x.tbl FROM unnest(tabs) x),
                                          ARRAY(SELECT x.cols[1] FROM unnest(tabs) x));
    FOR i IN 1 .. coalesce(array_length(rd.reads, 1), 0) LOOP
      IF rd.reads[i] THEN
        PERFORM _ddx.state_table_for(tabs[i].tbl, (SELECT x.owner FROM _ddx.run x WHERE x.id = run_id));
      END IF;
    END LOOP;
  END IF;
  -- committed before the first step, so that every step's transaction writes
  -- nothing before its gradient and, under ddx.shards, the gradient's parts
  -- run in the session's workers from the first step on (a transaction
  -- with an XID computes them all in the backend: src/pg/runner/shards.cpp;
  -- so is the DDL of the state tables above)
  IF commits THEN
    COMMIT;
  END IF;
  started := clock_timestamp();
  first := done;
  WHILE done < steps LOOP
    EXECUTE format('SELECT s.lr FROM %s s WHERE s.step = $1', schedule) INTO lr USING done;
    SELECT * INTO r FROM _ddx.optimizer_step(optimizer, loss_sql, params, lr, coalesce(beta1, 0.9),
                                            coalesce(beta2, 0.999), coalesce(eps, 1e-8),
                                            coalesce(weight_decay, CASE WHEN optimizer = 'adamw' THEN 0.01 ELSE 0 END),
                                            no_decay, max_grad_norm, coalesce(momentum, 0), coalesce(dampening, 0),
                                            coalesce(nesterov, false), run_name);
    done := r.step;
    IF log_every > 0 AND (done % log_every = 0 OR done = first + 1 OR done = steps) THEN
      secs := extract(epoch FROM clock_timestamp() - started);
      RAISE NOTICE 'training run "%": step %/% loss % grad norm % lr % (% steps/s, elapsed %, ETA %)', run_name,
                   done, steps, _ddx.g4(r.loss), _ddx.g4(r.grad_norm), _ddx.g4(lr),
                   _ddx.g4((done - first) / greatest(secs, 1e-9)),
                   to_char(make_interval(secs => secs), 'HH24:MI:SS'),
                   to_char(make_interval(secs => (steps - done) * secs / (done - first)), 'HH24:MI:SS');
    END IF;
    IF commits THEN
      COMMIT;
    END IF;
  END LOOP;
  PERFORM _ddx.run_prune(run_name);
  IF commits THEN
    PERFORM _ddx.run_unlock(_ddx.run_key(run_name));
  END IF;
END $$;
COMMENT ON PROCEDURE ddx_train(text, text[], int, regclass, text, float8, text[], float8, float8, text, int, float8, float8,
                               float8, float8, boolean) IS
  'CALL ddx_train(loss_sql, params, steps, schedule, ...): trains a run until it has taken steps, committing each step (resumable), with progress NOTICEs every log_every steps (0: none)';
