-- ddx 0.1: reverse-mode gradients of SQL queries.
\echo Use "CREATE EXTENSION ddx" to load this file. \quit

-- grad(loss, t.col): ∂loss/∂(t.col of the current row), float8.
-- The loss is a CTE name or view name as a string, or a scalar subquery.
-- The post-parse hook rewrites every call into ddx_grad_at; the C function
-- behind grad only explains what to do when the hook did not run.
CREATE FUNCTION grad("any", "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- vjp(out, cotangent, t.col): the gradient of Σ out.v · cotangent.v over the
-- rows of out matched with the cotangent on the output's keys (its columns
-- that do not depend on a parameter), for every value column v. grad is vjp
-- seeded with 1.
CREATE FUNCTION vjp("any", "any", "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ddx_value(loss): the loss's value, computed by the same pass as the
-- statement's grad(loss, ...) calls (a training step logs it without a
-- second forward), or alone: the loss under the plan settings ddx's
-- programs use (nested loops off), often far faster than PostgreSQL's
-- default plan of a chain of CTEs.
CREATE FUNCTION ddx_value("any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What grad becomes: the program, the parameter's index in it, the row's
-- identity and whether the row's value is NULL. Not for direct use.
CREATE FUNCTION ddx_grad_at(text, int4, oid, tid, bool) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_at' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION ddx_grad_at(text, int4, oid, tid, bool) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ddx_grad_at(text, int4, oid, tid, bool) TO PUBLIC;

-- stop_gradient(x) is x, held constant by the backward pass.
CREATE FUNCTION stop_gradient(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ddx_stop_gradient(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- ddx_gradcheck: compares ddx's gradient of a loss with central finite
-- differences of the same loss, row by row, and reports the largest errors
-- (PyTorch's gradcheck, for SQL models).
--   loss_sql  a query returning one row and one number, e.g.
--             'WITH pred AS (...) SELECT avg(...) FROM pred'
--   param     the parameter table; col its float column
--   eps       relative step: h = eps * greatest(1, |value|)
-- Every perturbation is rolled back before it returns (a subtransaction);
-- the caller needs UPDATE on the parameter table.
CREATE FUNCTION ddx_gradcheck(loss_sql text, param regclass, col name, eps float8 DEFAULT 1e-6,
                              OUT rows_checked int, OUT max_abs_error float8, OUT max_rel_error float8)
LANGUAGE plpgsql AS $$
DECLARE
  tids tid[];
  toids oid[];
  toid oid;
  analytic float8[];
  vals float8[];
  numeric_g float8[] := '{}';
  t tid;
  x float8;
  xp float8;
  xm float8;
  lp float8;
  lm float8;
  err float8;
  rel float8;
BEGIN
  -- rows are identified by (tableoid, ctid): ctids repeat across partitions
  EXECUTE format('WITH ddx_gradcheck_loss AS (%s) SELECT array_agg(t.tableoid ORDER BY t.tableoid, t.ctid), '
                 'array_agg(t.ctid ORDER BY t.tableoid, t.ctid), '
                 'array_agg(@extschema@.grad(''ddx_gradcheck_loss'', t.%I) ORDER BY t.tableoid, t.ctid), '
                 'array_agg(t.%I::float8 ORDER BY t.tableoid, t.ctid) FROM %s t', loss_sql, col, col, param)
    INTO toids, tids, analytic, vals;
  rows_checked := 0;
  max_abs_error := 0;
  max_rel_error := 0;
  IF tids IS NULL THEN
    RETURN;
  END IF;
  BEGIN
    FOR i IN 1 .. array_length(tids, 1) LOOP
      x := vals[i];
      IF x IS NULL THEN
        numeric_g := numeric_g || NULL::float8;
        CONTINUE;
      END IF;
      toid := toids[i];
      EXECUTE format('UPDATE %s SET %I = $1 WHERE tableoid = $3 AND ctid = $2 RETURNING ctid, %I::float8', param, col, col)
        USING x + eps * greatest(1, abs(x)), tids[i], toid INTO t, xp;
      EXECUTE loss_sql INTO lp;
      EXECUTE format('UPDATE %s SET %I = $1 WHERE tableoid = $3 AND ctid = $2 RETURNING ctid, %I::float8', param, col, col)
        USING x - eps * greatest(1, abs(x)), t, toid INTO t, xm;
      EXECUTE loss_sql INTO lm;
      EXECUTE format('UPDATE %s SET %I = $1 WHERE tableoid = $3 AND ctid = $2', param, col) USING x, t, toid;
      numeric_g := numeric_g || ((lp - lm) / (xp - xm));
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = 'DDXGC';
  EXCEPTION WHEN SQLSTATE 'DDXGC' THEN
    NULL;  -- undo every perturbation
  END;
  FOR i IN 1 .. array_length(tids, 1) LOOP
    CONTINUE WHEN vals[i] IS NULL;
    rows_checked := rows_checked + 1;
    err := abs(coalesce(analytic[i], 0) - coalesce(numeric_g[i], 0));
    rel := err / greatest(abs(analytic[i]), abs(numeric_g[i]), 1e-300);
    max_abs_error := greatest(max_abs_error, err);
    IF err > 0 THEN
      max_rel_error := greatest(max_rel_error, rel);
    END IF;
  END LOOP;
END;
$$;

-- ddx_backward: one backward pass of a loss, many parameter tables.
--   loss_sql  a query returning one row and one number
--   params    'table.column' or 'schema.table.column', one per parameter
-- For each parameter it fills the table <table>_grad (created beside the
-- parameter table if missing), keyed by the parameter table's primary key,
-- with the gradient in column `grad`. All gradients come from one statement,
-- so one backward pass. Returns each parameter's gradient table and row count.
CREATE FUNCTION ddx_backward(loss_sql text, params text[])
RETURNS TABLE (param text, grad_table regclass, grad_rows bigint)
LANGUAGE plpgsql AS $$
DECLARE
  spec text;
  r record;
  ctes text[] := '{}';
  sels text[] := '{}';
  i int := 0;
BEGIN
  FOREACH spec IN ARRAY params LOOP
    IF array_length(parse_ident(spec), 1) < 2 THEN
      RAISE EXCEPTION 'parameter "%" is not of the form table.column', spec
        USING ERRCODE = '22023', HINT = 'Name each parameter as ''table.column'' or ''schema.table.column''.';
    END IF;
  END LOOP;
  FOR r IN SELECT * FROM @extschema@.ddx_param_tables(params) LOOP
    IF r.keys IS NULL THEN
      RAISE EXCEPTION 'parameter table % has no primary key', r.tbl
        USING ERRCODE = '42P10', HINT = 'Gradient tables are keyed like their parameter tables: add a PRIMARY KEY.';
    END IF;
    IF to_regclass(r.grad_table) IS NULL THEN
      EXECUTE format('CREATE TABLE %s AS SELECT %s, NULL::float8 AS grad FROM %s WITH NO DATA', r.grad_table, r.keys, r.tbl);
      EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (%s)', r.grad_table, r.keys);
    END IF;
    EXECUTE format('DELETE FROM %s', r.grad_table);  -- not TRUNCATE: a new relfilenode per step would churn pg_class
    i := i + 1;
    ctes := ctes || format('g%s AS (INSERT INTO %s (%s, grad) SELECT %s, @extschema@.grad(''ddx_loss'', t.%I) '
                           'FROM %s t RETURNING 1)', i, r.grad_table, r.keys, r.keys, r.col, r.tbl);
    sels := sels || format('SELECT %s AS i, %L AS spec, %L::regclass AS gt, count(*) AS c FROM g%s',
                           i, r.spec, r.grad_table, i);
  END LOOP;
  RETURN QUERY EXECUTE format('WITH ddx_loss AS (%s), %s SELECT r.spec, r.gt, r.c FROM (%s) r ORDER BY r.i',
                              loss_sql, array_to_string(ctes, ', '), array_to_string(sels, ' UNION ALL '));
END;
$$;

-- Learning-rate schedules are ordinary tables (step int PRIMARY KEY, lr),
-- one row per step from step 0; ddx_schedule_table writes one from an array.
CREATE FUNCTION ddx_schedule_table(name text, lrs float8[]) RETURNS regclass
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DROP TABLE IF EXISTS %I', name);
  EXECUTE format('CREATE TABLE %I (step int PRIMARY KEY, lr float8 NOT NULL)', name);
  EXECUTE format('INSERT INTO %I SELECT o - 1, lr FROM unnest($1) WITH ORDINALITY AS u(lr, o)', name) USING lrs;
  RETURN name::regclass;
END $$;

-- nanoGPT's get_lr: linear warmup, cosine decay to min_lr at decay_steps,
-- min_lr after; `steps` rows (decay_steps + 2 by default).
CREATE FUNCTION ddx_schedule_warmup_cosine(name text, warmup_steps int, decay_steps int, max_lr float8,
                                           min_lr float8, steps int DEFAULT NULL)
RETURNS regclass LANGUAGE sql AS $$
  SELECT @extschema@.ddx_schedule_table($1, ARRAY(
    SELECT CASE WHEN it < $2 THEN $4 * (it + 1) / ($2 + 1)
                WHEN it > $3 THEN $5
                ELSE $5 + 0.5 * (1 + cos(pi() * (it - $2)::float8 / ($3 - $2))) * ($4 - $5) END
      FROM generate_series(0, coalesce($6, $3 + 2) - 1) it ORDER BY it))
$$;

-- The parameter tables named by params ('table.column' or
-- 'schema.table.column'), in order: table, column, gradient table, primary
-- key columns and the join condition t.key = g.key on them.
CREATE FUNCTION ddx_param_tables(params text[])
RETURNS TABLE (spec text, tbl regclass, relname name, nspname name, col text, grad_table text, keys text,
               on_keys text)
LANGUAGE sql STABLE AS $$
  SELECT p.spec, c.oid::regclass, c.relname, s.nspname, x.pi[array_length(x.pi, 1)],
         quote_ident(s.nspname) || '.' || quote_ident(c.relname || '_grad'), k.keys, k.on_keys
    FROM unnest(params) WITH ORDINALITY AS p(spec, o)
    CROSS JOIN LATERAL (SELECT parse_ident(p.spec) AS pi) x
    JOIN pg_class c ON c.oid = (SELECT string_agg(quote_ident(q), '.')
                                  FROM unnest(x.pi[1:array_length(x.pi, 1) - 1]) q)::regclass
    JOIN pg_namespace s ON s.oid = c.relnamespace
    CROSS JOIN LATERAL (
      SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY u.ord) AS keys,
             string_agg(format('t.%1$I = g.%1$I', a.attname), ' AND ' ORDER BY u.ord) AS on_keys
        FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS u(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.attnum
       WHERE i.indrelid = c.oid AND i.indisprimary) k
   ORDER BY p.o
$$;

-- An optimizer's state table <table><suffix>, keyed like the parameter table
-- and created on first use with the columns `init` (e.g. '0::float8 AS m').
-- fillfactor 45: each step's UPDATE finds room on the row's own page (a HOT
-- update, no new index entry): as fast as writing a new table
-- (bench/rewrite.py), and the table keeps its OID, grants and dependents.
CREATE FUNCTION ddx_state_table(nspname name, relname name, tbl regclass, keys text, suffix text, init text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  st text := quote_ident(nspname) || '.' || quote_ident(relname || suffix);
BEGIN
  IF to_regclass(st) IS NULL THEN
    EXECUTE format('CREATE TABLE %s WITH (fillfactor = 45) AS SELECT %s, %s FROM %s', st, keys, init, tbl);
    EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (%s)', st, keys);
  END IF;
  RETURN st;
END $$;

-- The start of every optimizer step: advance the named state's step count,
-- run one backward pass for all parameter tables, and compute the gradient's
-- global norm and the factor clip_grad_norm_ would scale it by.
CREATE FUNCTION ddx_optimizer_begin(loss_sql text, params text[], max_grad_norm float8, state_name text,
                                    OUT step int, OUT grad_norm float8, OUT scale float8)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  total float8 := 0;
  part float8;
BEGIN
  IF to_regclass('ddx_optimizer_state') IS NULL THEN
    CREATE TABLE ddx_optimizer_state (name text PRIMARY KEY, step int NOT NULL);
  END IF;
  INSERT INTO ddx_optimizer_state VALUES (state_name, 0) ON CONFLICT (name) DO NOTHING;
  UPDATE ddx_optimizer_state s SET step = s.step + 1 WHERE s.name = state_name RETURNING s.step INTO step;
  FOR r IN SELECT * FROM @extschema@.ddx_backward(loss_sql, params) LOOP
    EXECUTE format('SELECT coalesce(sum(grad * grad), 0) FROM %s', r.grad_table) INTO part;
    total := total + part;
  END LOOP;
  grad_norm := sqrt(total);
  scale := CASE WHEN max_grad_norm IS NULL THEN 1 ELSE least(max_grad_norm / (grad_norm + 1e-6), 1.0) END;
END $$;

-- ddx_adamw_step: one optimizer step inside the caller's transaction, with
-- PyTorch's semantics (torch.optim.AdamW, or Adam with L2 weight decay when
-- decoupled is false): one backward pass (ddx_backward), optional global-norm
-- clipping as torch.nn.utils.clip_grad_norm_ computes it, bias-corrected
-- moments. State is ordinary tables: <table>_adam (primary key, m, v) beside
-- each parameter table and ddx_optimizer_state (name, step). Parameters named
-- in no_decay get no weight decay. Returns the step number, the gradient's
-- global norm before clipping, and the learning rate used.
CREATE FUNCTION ddx_adamw_step(loss_sql text, params text[], lr float8,
                               beta1 float8 DEFAULT 0.9, beta2 float8 DEFAULT 0.999, eps float8 DEFAULT 1e-8,
                               weight_decay float8 DEFAULT 0.01, no_decay text[] DEFAULT '{}',
                               max_grad_norm float8 DEFAULT NULL, state_name text DEFAULT 'default',
                               decoupled boolean DEFAULT true,
                               OUT step int, OUT grad_norm float8, OUT lr_used float8)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  st text;
  scale float8;
  wd float8;
  bc1 float8;
  bc2 float8;
BEGIN
  SELECT b.step, b.grad_norm, b.scale INTO step, grad_norm, scale
    FROM @extschema@.ddx_optimizer_begin(loss_sql, params, max_grad_norm, state_name) b;
  lr_used := lr;
  bc1 := 1 - beta1 ^ step;
  bc2 := 1 - beta2 ^ step;
  FOR r IN SELECT * FROM @extschema@.ddx_param_tables(params) LOOP
    st := @extschema@.ddx_state_table(r.nspname, r.relname, r.tbl, r.keys, '_adam', '0::float8 AS m, 0::float8 AS v');
    wd := CASE WHEN r.spec = ANY (no_decay) THEN 0 ELSE weight_decay END;
    -- moments (Adam: the L2 term joins the gradient; AdamW: decay is decoupled)
    EXECUTE format('UPDATE %s t SET m = $1 * t.m + (1 - $1) * gg.g, v = $2 * t.v + (1 - $2) * gg.g * gg.g '
                   'FROM (SELECT g.*, g.grad * $3 + CASE WHEN $5 THEN 0 ELSE $4 * p.%I END AS g '
                   '      FROM %s g JOIN %s p USING (%s)) gg WHERE %s',
                   st, r.col, r.grad_table, r.tbl, r.keys, replace(r.on_keys, 'g.', 'gg.'))
      USING beta1, beta2, scale, wd, decoupled;
    EXECUTE format('UPDATE %s t SET %I = t.%I * (1 - CASE WHEN $6 THEN $1 * $2 ELSE 0 END) '
                   '  - ($1 / $3) * g.m / (sqrt(g.v) / sqrt($4) + $5) FROM %s g WHERE %s',
                   r.tbl, r.col, r.col, st, r.on_keys)
      USING lr, wd, bc1, bc2, eps, decoupled;
  END LOOP;
END $$;

-- More schedules as tables: a constant rate, PyTorch's StepLR and ExponentialLR.
CREATE FUNCTION ddx_schedule_constant(name text, lr float8, steps int) RETURNS regclass
LANGUAGE sql AS $$ SELECT @extschema@.ddx_schedule_table($1, array_fill($2, ARRAY[$3])) $$;

CREATE FUNCTION ddx_schedule_step(name text, lr float8, step_size int, gamma float8, steps int) RETURNS regclass
LANGUAGE sql AS $$
  SELECT @extschema@.ddx_schedule_table($1, ARRAY(SELECT $2 * $4 ^ (it / $3) FROM generate_series(0, $5 - 1) it ORDER BY it))
$$;

CREATE FUNCTION ddx_schedule_exponential(name text, lr float8, gamma float8, steps int) RETURNS regclass
LANGUAGE sql AS $$
  SELECT @extschema@.ddx_schedule_table($1, ARRAY(SELECT $2 * $3 ^ it FROM generate_series(0, $4 - 1) it ORDER BY it))
$$;

-- ddx_sgd_step: torch.optim.SGD (momentum, dampening, Nesterov, L2 weight
-- decay) after one backward pass, with optional global-norm clipping. The
-- momentum buffers live in <table>_sgd (primary key, buf).
CREATE FUNCTION ddx_sgd_step(loss_sql text, params text[], lr float8, momentum float8 DEFAULT 0,
                             dampening float8 DEFAULT 0, weight_decay float8 DEFAULT 0,
                             nesterov boolean DEFAULT false, max_grad_norm float8 DEFAULT NULL,
                             state_name text DEFAULT 'default',
                             OUT step int, OUT grad_norm float8, OUT lr_used float8)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  st text;
  scale float8;
BEGIN
  SELECT b.step, b.grad_norm, b.scale INTO step, grad_norm, scale
    FROM @extschema@.ddx_optimizer_begin(loss_sql, params, max_grad_norm, state_name) b;
  lr_used := lr;
  FOR r IN SELECT * FROM @extschema@.ddx_param_tables(params) LOOP
    st := @extschema@.ddx_state_table(r.nspname, r.relname, r.tbl, r.keys, '_sgd', 'NULL::float8 AS buf');
    -- d = scale * grad + wd * p; buf = d on the first step, else momentum * buf + (1 - dampening) * d
    EXECUTE format('UPDATE %s t SET buf = CASE WHEN t.buf IS NULL THEN g.d ELSE $1 * t.buf + (1 - $2) * g.d END '
                   'FROM (SELECT g.*, g.grad * $3 + $4 * p.%I AS d FROM %s g JOIN %s p USING (%s)) g WHERE %s',
                   st, r.col, r.grad_table, r.tbl, r.keys, r.on_keys)
      USING momentum, dampening, scale, weight_decay;
    IF momentum = 0 THEN
      EXECUTE format('UPDATE %s t SET %I = t.%I - $1 * (g.grad * $2 + $3 * t.%I) FROM %s g WHERE %s',
                     r.tbl, r.col, r.col, r.col, r.grad_table, r.on_keys)
        USING lr, scale, weight_decay;
    ELSIF nesterov THEN
      EXECUTE format('UPDATE %s t SET %I = t.%I - $1 * ((g.grad * $2 + $3 * t.%I) + $4 * s.buf) '
                     'FROM %s g JOIN %s s USING (%s) WHERE %s',
                     r.tbl, r.col, r.col, r.col, r.grad_table, st, r.keys, r.on_keys)
        USING lr, scale, weight_decay, momentum;
    ELSE
      EXECUTE format('UPDATE %s t SET %I = t.%I - $1 * g.buf FROM %s g WHERE %s',
                     r.tbl, r.col, r.col, st, r.on_keys)
        USING lr;
    END IF;
  END LOOP;
END $$;

-- ddx_train: a training run as a PROCEDURE that COMMITs every step. An
-- interrupted run keeps every finished step; CALL it again and it resumes
-- from ddx_optimizer_state. The learning rate of step s is the schedule
-- table's row s (0-based). Every step is logged in ddx_train_log (step, loss
-- before the step every log_every steps, gradient norm, learning rate), with a
-- NOTICE every log_every steps.
CREATE PROCEDURE ddx_train(loss_sql text, params text[], steps int, schedule regclass,
                           optimizer text DEFAULT 'adamw', weight_decay float8 DEFAULT 0.01,
                           no_decay text[] DEFAULT '{}', max_grad_norm float8 DEFAULT NULL,
                           momentum float8 DEFAULT 0.9, state_name text DEFAULT 'default',
                           log_every int DEFAULT 100)
LANGUAGE plpgsql AS $$
DECLARE
  done int;
  lr float8;
  l float8;
  r record;
BEGIN
  IF optimizer NOT IN ('adamw', 'adam', 'sgd') THEN
    RAISE EXCEPTION 'unknown optimizer "%"', optimizer USING ERRCODE = '22023', HINT = 'Use adamw, adam or sgd.';
  END IF;
  IF to_regclass('ddx_train_log') IS NULL THEN
    CREATE TABLE ddx_train_log (state_name text, step int, loss float8, grad_norm float8, lr float8,
                                at timestamptz DEFAULT clock_timestamp(), PRIMARY KEY (state_name, step));
  END IF;
  LOOP
    done := 0;
    IF to_regclass('ddx_optimizer_state') IS NOT NULL THEN
      SELECT s.step INTO done FROM ddx_optimizer_state s WHERE s.name = state_name;
    END IF;
    done := coalesce(done, 0);
    EXIT WHEN done >= steps;
    EXECUTE format('SELECT lr FROM %s WHERE step = $1', schedule) INTO lr USING done;
    IF lr IS NULL THEN
      RAISE EXCEPTION 'schedule % has no row for step %', schedule, done USING ERRCODE = '22023';
    END IF;
    l := NULL;
    IF (done + 1) % log_every = 0 OR done = 0 THEN
      EXECUTE loss_sql INTO l;
    END IF;
    IF optimizer = 'sgd' THEN
      SELECT * INTO r FROM @extschema@.ddx_sgd_step(loss_sql, params, lr, momentum => momentum,
                                                    weight_decay => weight_decay, max_grad_norm => max_grad_norm,
                                                    state_name => state_name);
    ELSE
      SELECT * INTO r FROM @extschema@.ddx_adamw_step(loss_sql, params, lr, weight_decay => weight_decay,
                                                      no_decay => no_decay, max_grad_norm => max_grad_norm,
                                                      state_name => state_name, decoupled => optimizer = 'adamw');
    END IF;
    INSERT INTO ddx_train_log (state_name, step, loss, grad_norm, lr) VALUES (state_name, r.step, l, r.grad_norm, lr);
    IF l IS NOT NULL THEN
      RAISE NOTICE 'step % loss % grad norm % lr %', r.step, l, r.grad_norm, lr;
    END IF;
    COMMIT;
  END LOOP;
END $$;

-- ddx_explain: the gradient programs behind a statement, step by step: each
-- step's name, kind (forward: a saved relation; backward: a cotangent or a
-- shared pass over a region) and SQL; with run_analyze, each step's rows and the
-- time until it was complete (ms, from the start of the program), measured by
-- running the program under the settings ddx runs it with (with every step
-- stored: a backward step that one later step reads is otherwise NOT
-- MATERIALIZED, planned inside its reader).
CREATE FUNCTION ddx_explain(statement text, run_analyze boolean DEFAULT false)
RETURNS TABLE (program int, step int, name text, kind text, rows double precision, ms double precision, sql text)
LANGUAGE plpgsql AS $$
DECLARE
  plan jsonb;
  prog text;
  parts text[];
  p int := 0;
  old_path text := current_setting('search_path');
  old_jit text := current_setting('jit');
  old_nl text := current_setting('enable_nestloop');
  old_mj text := current_setting('enable_mergejoin');
  old_sort text := current_setting('enable_sort');
  aplan jsonb;
BEGIN
  EXECUTE 'EXPLAIN (VERBOSE, FORMAT JSON) ' || statement INTO plan;
  FOR prog IN
    SELECT DISTINCT replace(m[1], '''''', '''')
      FROM jsonb_path_query(plan, 'strict $.**.Output[*]') o(v),
           regexp_matches(o.v #>> '{}', 'ddx_grad_at\(''((?:[^'']|'''')*)''::text', 'g') m
  LOOP
    p := p + 1;
    parts := regexp_split_to_array(substr(prog, 6), E',\n(?=[fgbm][0-9_]+ AS (NOT )?MATERIALIZED)');
    IF run_analyze THEN
      -- every step stored, so that each has its rows and time (a step that
      -- one later step reads runs inside it, NOT MATERIALIZED, otherwise)
      prog := replace(prog, ' AS NOT MATERIALIZED (', ' AS MATERIALIZED (');
      PERFORM set_config('search_path', 'pg_catalog, pg_temp', true);
      PERFORM set_config('jit', 'off', true);
      PERFORM set_config('enable_nestloop', 'off', true);
      PERFORM set_config('enable_mergejoin', 'off', true);
      PERFORM set_config('enable_sort', 'off', true);
      EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || prog INTO aplan;
      PERFORM set_config('search_path', old_path, true);
      PERFORM set_config('jit', old_jit, true);
      PERFORM set_config('enable_nestloop', old_nl, true);
      PERFORM set_config('enable_mergejoin', old_mj, true);
      PERFORM set_config('enable_sort', old_sort, true);
    END IF;
    FOR i IN 1 .. array_length(parts, 1) LOOP
      program := p;
      step := i;
      sql := parts[i];
      IF i = array_length(parts, 1) THEN  -- the last CTE and the final SELECT
        sql := split_part(parts[i], E'\nSELECT z.toid', 1);
      END IF;
      name := split_part(sql, ' ', 1);
      kind := CASE left(name, 1) WHEN 'f' THEN 'forward' WHEN 'b' THEN 'backward: cotangent'
                                 WHEN 'm' THEN 'backward: shared pass' ELSE 'forward' END;
      rows := NULL;
      ms := NULL;
      IF run_analyze THEN
        SELECT (n ->> 'Actual Rows')::float8, (n ->> 'Actual Total Time')::float8 INTO rows, ms
          FROM jsonb_path_query(aplan, 'strict $.**') n
         WHERE jsonb_typeof(n) = 'object' AND n ->> 'Subplan Name' = 'CTE ' || name
         LIMIT 1;
      END IF;
      RETURN NEXT;
    END LOOP;
  END LOOP;
END $$;
