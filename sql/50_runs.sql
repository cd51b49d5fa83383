-- --- runs ------------------------------------------------------------------

-- The run `run_name`, refreshed: if a table it stepped was dropped since,
-- it starts again from step 0 (a NOTICE says so). Its id and step count;
-- NULL when there is no such run visible to the current role.
CREATE FUNCTION _ddx.run_refresh(run_name text, OUT run_id int, OUT run_step int)
LANGUAGE plpgsql AS $$
DECLARE
  gone text;
BEGIN
  SELECT r.id, r.step INTO run_id, run_step FROM _ddx.run r WHERE r.name = run_name;
  IF run_id IS NULL THEN
    RETURN;
  END IF;
  SELECT p.param::oid::text INTO gone FROM _ddx.run_param p
   WHERE p.run = run_id AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = p.param) LIMIT 1;
  IF gone IS NOT NULL THEN
    PERFORM _ddx.run_clear(run_id);
    run_step := 0;
    RAISE NOTICE 'training run "%" starts again from step 0: a table it trained was dropped', run_name;
  END IF;
END $$;

-- Forgets everything a run has learned: its state rows, log and stepped
-- columns; its step count goes back to 0.
CREATE FUNCTION _ddx.run_clear(run_id int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  st regclass;
BEGIN
  -- Only the state tables of the tables the run stepped (run_param, which a
  -- step writes in the transaction that writes its state rows): on Citus, a
  -- DELETE from another run's reference or distributed state table modifies
  -- its placements over connections of their own, and Citus then refuses
  -- (25001) the step's program that reads co-located placements (every
  -- reference table's) over others in the same transaction.
  FOR st IN SELECT DISTINCT s.state FROM _ddx.state_table s JOIN _ddx.run r ON r.owner = s.owner
              JOIN _ddx.run_param p ON p.run = r.id AND p.param = s.param
             WHERE r.id = run_id AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = s.state) LOOP
    EXECUTE format('DELETE FROM %s s WHERE s.run = $1', st) USING run_id;
  END LOOP;
  DELETE FROM _ddx.run_param p WHERE p.run = run_id;
  DELETE FROM _ddx.train_log l WHERE l.run = (SELECT r.name FROM _ddx.run r WHERE r.id = run_id);
  UPDATE _ddx.run r SET step = 0, updated = now() WHERE r.id = run_id;
END $$;

-- Deletes a run's state rows that count no more: rows not stepped when
-- their column last was (their value was NULL, or the row was deleted).
CREATE FUNCTION _ddx.run_prune(run_name text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  st regclass;
  pcol text;
  plast int;
  run_id int := (SELECT r.id FROM _ddx.run r WHERE r.name = run_name);
BEGIN
  -- one statement per column, reading run_param here: on Citus, a state
  -- table placed like its reference table may not be joined to a local one
  FOR st, pcol, plast IN
      SELECT s.state, p.col::text, p.last_step FROM _ddx.state_table s JOIN _ddx.run r ON r.owner = s.owner
        JOIN _ddx.run_param p ON p.run = r.id AND p.param = s.param
       WHERE r.id = run_id AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = s.state) LOOP
    EXECUTE format('DELETE FROM %s s WHERE s.run = $1 AND s.col = $2 AND s.at < $3', st) USING run_id, pcol, plast;
  END LOOP;
END $$;

-- The run `run_name` for a step or a training loop with optimizer `opt`,
-- created if new, and locked for this transaction (or, with `session`, for
-- this session, until _ddx.run_unlock or an abort: ddx_train's): one session
-- trains a run at a time, and another one's step or ddx_train on it is
-- refused (55P03) rather than interleaved with its steps. Its id.
CREATE FUNCTION _ddx.run_claim(run_name text, opt text, session boolean) RETURNS int
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

-- Locks run `run_name` (see _ddx.run_claim), or refuses with 55P03 naming
-- the process that trains it.
CREATE FUNCTION _ddx.run_lock_or_refuse(run_name text, session boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  holder int;
BEGIN
  IF _ddx.run_lock(_ddx.run_key(run_name), session) THEN
    RETURN;
  END IF;
  SELECT min(k.pid) INTO holder FROM pg_catalog.pg_locks k
   WHERE k.locktype = 'advisory' AND k.granted AND k.classid = 1145329665::oid
     AND k.objid = (_ddx.run_key(run_name)::int8 & 4294967295)::oid AND k.objsubid = 2;
  RAISE EXCEPTION 'training run "%" is being trained by another session', run_name
    USING ERRCODE = '55P03',
          DETAIL = format('Process %s is training it (ddx_runs shows how far it is).', coalesce(holder::text, '(gone)')),
          HINT = 'Wait until it ends, or train a run of another name (state_name => ...).';
END $$;

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

-- Starts the next step of run `run_name` with optimizer `opt`: creates the
-- run on its first step, locks it for the transaction, checks that it is an
-- `opt` run, and returns its id, the number of the step now being taken and
-- its owner (whose state tables hold the run's state). It writes nothing
-- where the run exists: the step's number is written with the step
-- (_ddx.run_stepped), after its gradient, so that a step's transaction has
-- written nothing when its gradient runs, which is what lets ddx.shards run
-- the gradient's parts in other processes (src/pg/runner/shards.cpp). The
-- run's lock keeps any other session from stepping it in between.
CREATE FUNCTION _ddx.run_next_step(run_name text, opt text, OUT run_id int, OUT run_step int, OUT run_owner regrole)
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

-- The run `run_name` as the current role sees it; an error if none. With
-- `lock`, locked for the transaction (a run another session trains is not
-- reset, dropped or copied under it).
CREATE FUNCTION _ddx.run_named(run_name text, lock boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  i int;
BEGIN
  IF run_name IS NULL THEN
    RAISE EXCEPTION 'the name of a training run must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT r.id INTO i FROM _ddx.run r WHERE r.name = run_name;
  IF i IS NULL THEN
    RAISE EXCEPTION 'training run "%" does not exist', run_name
      USING ERRCODE = '42704', HINT = 'SELECT name FROM ddx_runs lists the runs.';
  END IF;
  IF lock THEN
    PERFORM _ddx.run_lock_or_refuse(run_name, false);
  END IF;
  RETURN i;
END $$;

-- ddx_run_reset(run): the run starts again from step 0 (state, log and step
-- count forgotten). The parameter tables are left as they are.
CREATE FUNCTION _ddx.ddx_run_reset(run text) RETURNS void
LANGUAGE sql AS $$ SELECT _ddx.run_clear(_ddx.run_named($1, true)) $$;

-- ddx_run_drop(run): the run, its state and its log, gone.
CREATE FUNCTION _ddx.ddx_run_drop(run text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  i int := _ddx.run_named(run, true);
BEGIN
  PERFORM _ddx.run_clear(i);
  DELETE FROM _ddx.run r WHERE r.id = i;
END $$;

-- ddx_run_copy(source, target): a new run `target` that continues from where
-- `source` is (step count, every state row, the log), to try other settings
-- from the same point. The parameter tables are shared: copy them too to
-- keep both.
CREATE FUNCTION _ddx.ddx_run_copy(source text, target text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  src int := _ddx.run_named(source, true);
  dst int;
  st regclass;
BEGIN
  IF target IS NULL THEN
    RAISE EXCEPTION 'the name of a training run must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF EXISTS (SELECT 1 FROM _ddx.run r WHERE r.name = target) THEN
    RAISE EXCEPTION 'training run "%" already exists', target USING ERRCODE = '42710';
  END IF;
  INSERT INTO _ddx.run (name, optimizer, step)
    SELECT target, r.optimizer, r.step FROM _ddx.run r WHERE r.id = src RETURNING id INTO dst;
  INSERT INTO _ddx.run_param SELECT dst, p.param, p.col, p.last_step FROM _ddx.run_param p WHERE p.run = src;
  INSERT INTO _ddx.train_log SELECT target, l.step, l.loss, l.grad_norm, l.lr, l.at FROM _ddx.train_log l
   WHERE l.run = source;
  FOR st IN SELECT s.state FROM _ddx.state_table s JOIN _ddx.run r ON r.owner = s.owner
             WHERE r.id = src AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = s.state) LOOP
    EXECUTE format('INSERT INTO %1$s (run, %2$s) SELECT $2, %2$s FROM %1$s s WHERE s.run = $1', st,
                   (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid = st AND a.attnum > 1 AND NOT a.attisdropped))
      USING src, dst;
  END LOOP;
END $$;

-- ddx_state(run, param): the optimizer state a run keeps for a parameter
-- column ('table.column'): each row's key (as jsonb, by the table's key
-- column names), its own step count, Adam's moments, SGD's buffer. Rows
-- whose value was NULL, or that were deleted, when the column was last
-- stepped have none. A column the run has not stepped, where it has stepped
-- others, is refused (a run that has stepped nothing yet has no state).
CREATE FUNCTION _ddx.ddx_state(run text, param text)
RETURNS TABLE (key jsonb, step int, m float8, v float8, buf float8)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  i int := _ddx.run_named(run);
  p record;
  st regclass;
  made name[];
  kj text := '';
  last int;
BEGIN
  SELECT * INTO p FROM _ddx.param_columns(ARRAY[param]);
  IF p.tbl IS NULL THEN
    RAISE EXCEPTION 'the parameter column must not be NULL' USING ERRCODE = '22004';
  END IF;
  -- a row counts only if it was stepped when its column last was (a row
  -- NULL or deleted since has no state). That step is read here, not joined:
  -- Citus would send run_param's regclass to the workers of a distributed
  -- state table as the coordinator's OID, which names nothing there.
  SELECT r.last_step INTO last FROM _ddx.run_param r WHERE r.run = i AND r.param = p.tbl AND r.col = p.col;
  IF last IS NULL AND NOT EXISTS (SELECT 1 FROM _ddx.run_param x WHERE x.run = i) THEN
    RETURN;  -- a run that has stepped nothing yet (new, or reset) has no state
  END IF;
  IF last IS NULL THEN
    RAISE EXCEPTION 'training run "%" has not stepped %', run, param
      USING ERRCODE = '42704',
            DETAIL = format('It has stepped %s.', coalesce((SELECT string_agg(x.param::text || '.' || quote_ident(x.col),
                                                                               ', ' ORDER BY 1)
                                                              FROM _ddx.run_param x WHERE x.run = i), 'no column yet')),
            HINT = 'SELECT params FROM ddx_runs lists what each run has stepped.';
  END IF;
  SELECT s.state, s.keys INTO st, made FROM _ddx.state_table s JOIN _ddx.run r ON r.owner = s.owner
   WHERE r.id = i AND s.param = p.tbl;
  IF st IS NULL THEN
    RETURN;  -- an optimizer without state (SGD without momentum)
  END IF;
  FOR k IN 1 .. coalesce(array_length(made, 1), 0) LOOP
    kj := kj || format('%L, s.k%s, ', made[k], k);
  END LOOP;
  RETURN QUERY EXECUTE format('SELECT jsonb_build_object(%s) AS key, s.step, s.m, s.v, s.buf FROM %s s '
                              'WHERE s.run = $1 AND s.col = $2 AND s.at = $3 ORDER BY 1', rtrim(kj, ', '), st)
    USING i, p.col::text, last;
END $$;

CREATE FUNCTION ddx_run_reset(run text) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_run_drop(run text) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_run_copy(source text, target text) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_state(run text, param text) RETURNS TABLE (key jsonb, step int, m float8, v float8, buf float8)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C STABLE PARALLEL UNSAFE;
