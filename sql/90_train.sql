-- --- training runs ---------------------------------------------------------

-- ddx_train: a training run as a PROCEDURE that COMMITs every step. The run
-- (state_name; by default one run per set of parameter columns) takes steps
-- until it has taken `steps`: an interrupted run keeps every finished step,
-- and CALL again resumes it. The learning rate of step s (1-based) is the
-- schedule's row s - 1; the schedule must cover every step still to run
-- with finite rates (checked before the first). Defaults are PyTorch's for
-- the optimizer chosen (weight_decay: AdamW 0.01, Adam and SGD 0); a setting
-- of another optimizer (momentum for adamw, betas for sgd) is refused. Every
-- step is logged in _ddx.train_log (loss before the step from the step's own
-- pass, gradient norm, learning rate), with a NOTICE of progress (elapsed
-- time, steps per second, ETA) at its first and last step and every
-- log_every steps (log_every 0: none, for a caller that reports progress
-- its own way).
--   One session trains a run at a time: the run is locked for the session
--   until the CALL ends (a second CALL or step on it is refused, 55P03).
--   A loss or gradient norm that is not finite stops the run with an error
--   (22P01), its last step rolled back.
--   Where it cannot commit (inside BEGIN, in a string of several statements,
--   from a function or an exception block), it takes every step in the
--   caller's transaction, which commits or rolls back all of them (a NOTICE
--   says so).
CREATE PROCEDURE _ddx.ddx_train(loss_sql text, params text[], steps int, schedule regclass,
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
CREATE PROCEDURE ddx_train(loss_sql text, params text[], steps int, schedule regclass,
                           optimizer text DEFAULT 'adamw', weight_decay float8 DEFAULT NULL,
                           no_decay text[] DEFAULT '{}', max_grad_norm float8 DEFAULT NULL,
                           momentum float8 DEFAULT NULL, state_name text DEFAULT NULL,
                           log_every int DEFAULT 100, beta1 float8 DEFAULT NULL, beta2 float8 DEFAULT NULL,
                           eps float8 DEFAULT NULL, dampening float8 DEFAULT NULL, nesterov boolean DEFAULT NULL)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C;
