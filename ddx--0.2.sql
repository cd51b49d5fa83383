-- ddx: reverse-mode gradients of SQL queries. (The install script of the
-- newest version, made of sql/*.sql; sql/upgrades/ has one script from each
-- release to the next.)
\echo Use "CREATE EXTENSION ddx" to load this file. \quit

-- ddx's own schema (see "ddx's own schema _ddx" below): its internal
-- functions, training runs, their log and optimizer state. The public API
-- is in the extension's schema; each public function written in SQL or
-- plpgsql is a C shim (ddx_forward, src/pg/sql_api.cpp) in front of its body
-- _ddx.<the same name>, so that an error says what the user did, without
-- the CONTEXT lines of ddx's internal frames, and so that the first call
-- loads ddx's library in a session that has not.
CREATE SCHEMA _ddx;
COMMENT ON SCHEMA _ddx IS 'ddx: internal functions, training runs, their log and optimizer state';
GRANT USAGE ON SCHEMA _ddx TO PUBLIC;

-- The differentiation API (grad, vjp, jvp, hvp, ddx_value, stop_gradient),
-- what its calls become, and the C side of the training API.

-- grad(loss, t.col): ∂loss/∂(t.col of the current row), float8.
-- The loss is a CTE name or view name as a string, or a scalar subquery.
-- The post-parse hook rewrites every call into _ddx.grad_at; the C function
-- behind grad only explains what to do when the hook did not run.
CREATE FUNCTION grad("any", "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- vjp(out, cotangent, t.col): the gradient of Σ out.v · cotangent.v over the
-- rows of out matched with the cotangent on the output's keys (its columns
-- that do not depend on a parameter), for every value column v. grad is vjp
-- seeded with 1.
CREATE FUNCTION vjp("any", "any", "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- jvp(o.v, 'w.val', 'tangent' [, 'b.val', 'tangent_b' ...]): forward mode.
-- o is a CTE, view or subquery in the FROM list; the value is the
-- derivative of column v of o's current row along the tangent relations
-- (each shaped like its parameter table: the table's key columns, and the
-- tangent under the parameter column's name; a row without a tangent row
-- has tangent 0). The hook replaces o by one query that carries each
-- column's tangent beside it, and each call by its row's tangent.
CREATE FUNCTION jvp("any", VARIADIC text[]) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- hvp(loss, t.col, 'w.val', 'tw' [, 'b.val', 'tb' ...]): (H v) at t.col of
-- this row, H the Hessian of the loss in the listed parameters and v the
-- tangent relations (shaped as for jvp): the gradient of the loss's jvp.
-- Rewritten like grad.
CREATE FUNCTION hvp("any", "any", VARIADIC text[]) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What the output relation of jvp becomes: its rows and their tangents, from
-- the tangent query (run as a program: planner settings, kept plan, the
-- caller's privileges and snapshot). Not for direct use.
CREATE FUNCTION _ddx.jvp_rows(text) RETURNS SETOF record
  AS 'MODULE_PATHNAME', 'ddx_jvp_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION _ddx.jvp_rows(text, VARIADIC "any") RETURNS SETOF record
  AS 'MODULE_PATHNAME', 'ddx_jvp_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- What jvp becomes: its row's tangent column, as it is.
CREATE FUNCTION _ddx.jvp_at(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- ddx_value(loss): the loss's value, computed by the same pass as the
-- statement's grad(loss, ...) calls (a training step logs it without a
-- second forward), or alone: the loss under the plan settings ddx's
-- programs use (nested loops off), often far faster than PostgreSQL's
-- default plan of a chain of CTEs.
CREATE FUNCTION ddx_value("any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What grad becomes: the program (and its variant over Citus tables in
-- place, or NULL), the parameter's index in it, the row's identity and
-- whether the row's value is NULL. Not for direct use.
CREATE FUNCTION _ddx.grad_at(text, text, int4, oid, tid, bool) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_at' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- The same for a loss that reads statement parameters ($n, plpgsql
-- variables, SQL-function arguments): their values follow, the program's $1 ....
CREATE FUNCTION _ddx.grad_at(text, text, int4, oid, tid, bool, VARIADIC "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_at' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- The same for a row identified by its primary key (a parameter in a Citus
-- table): the table and ROW(key columns)::text in place of (tableoid, ctid).
CREATE FUNCTION _ddx.grad_key(text, text, int4, oid, text, bool) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_key' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION _ddx.grad_key(text, text, int4, oid, text, bool, VARIADIC "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_key' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The C side of the SQL API (src/pg/sql_api.cpp, loss_reads.cpp): which
-- parameter tables a loss reads; a run's lock; whether a procedure may commit.
CREATE FUNCTION _ddx.loss_reads(loss_sql text, tables regclass[], cols name[], OUT reads boolean[], OUT opaque text[])
  AS 'MODULE_PATHNAME', 'ddx_loss_reads' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION _ddx.run_lock(run_key int, session boolean) RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_run_lock' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION _ddx.run_unlock(run_key int) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_run_unlock' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- The key of run `run_name`'s lock: its name's hash (pg_locks shows it as
-- objid, classid 1145329665, objsubid 2; two names of one hash share a lock).
CREATE FUNCTION _ddx.run_key(run_name text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT pg_catalog.hashtext(run_name) $$;

CREATE FUNCTION _ddx.nonatomic() RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_nonatomic' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- stop_gradient(x) is x, held constant by the backward pass.
CREATE FUNCTION stop_gradient(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ddx_stop_gradient(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Forward mode's helpers (jvp and hvp).

-- A tangent relation of jvp with two rows for one parameter row, refused
-- where the query jvp's hook writes reads it. (STABLE: an immutable call of
-- constants would be evaluated while planning, whether read or not; a
-- volatile one would keep hvp from differentiating the query that reads it.)
CREATE FUNCTION _ddx.tangent_duplicate(param text) RETURNS float8 LANGUAGE plpgsql STABLE AS $$
BEGIN
  RAISE EXCEPTION 'the tangent relation of % has two rows for one parameter row', param
    USING ERRCODE = '21000', HINT = 'A tangent relation has one row per key of the parameter table.';
END $$;

-- The tangent of max(x) and min(x) over a window frame (jvp): the average
-- of t over the rows of the frame that attain it (src/pg/attained.cpp).
CREATE FUNCTION _ddx.max_tangent_step(internal, anyelement, float8) RETURNS internal
  AS 'MODULE_PATHNAME', 'ddx_max_tangent_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION _ddx.min_tangent_step(internal, anyelement, float8) RETURNS internal
  AS 'MODULE_PATHNAME', 'ddx_min_tangent_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION _ddx.attained_tangent_final(internal) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_attained_tangent_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE _ddx.max_tangent(anyelement, float8) (
  SFUNC = _ddx.max_tangent_step, STYPE = internal, FINALFUNC = _ddx.attained_tangent_final,
  FINALFUNC_MODIFY = READ_ONLY, PARALLEL = SAFE);
CREATE AGGREGATE _ddx.min_tangent(anyelement, float8) (
  SFUNC = _ddx.min_tangent_step, STYPE = internal, FINALFUNC = _ddx.attained_tangent_final,
  FINALFUNC_MODIFY = READ_ONLY, PARALLEL = SAFE);

-- ddx_gradcheck: compares ddx's gradient of a loss with central finite
-- differences of the same loss, row by row, and reports the largest errors
-- (PyTorch's gradcheck, for SQL models).
--   loss_sql  a query returning one row and one number, e.g.
--             'WITH pred AS (...) SELECT avg(...) FROM pred'
--   param     the parameter table; col its float column
--   eps       relative step: h = eps * greatest(1, |value|)
--   sample    how many rows to perturb (evenly spread over the table, in
--             physical order); NULL: every row. Two loss evaluations each.
--   step      the value of $1 in a training loss that reads it (the number
--             of the step, as ddx_train and the step functions bind it: a
--             mini-batch by step); NULL: the loss reads no $1
-- Every perturbation is rolled back before it returns (a subtransaction);
-- the caller needs UPDATE on the parameter table.
CREATE FUNCTION _ddx.ddx_gradcheck(loss_sql text, param regclass, col name, eps float8 DEFAULT 1e-6,
                                   sample int DEFAULT NULL, step int DEFAULT NULL,
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
  i int;
  x float8;
  xp float8;
  xm float8;
  lp float8;
  lm float8;
  err float8;
  rel float8;
  n int;
  pick int[];
  grads text;
BEGIN
  IF loss_sql IS NULL OR param IS NULL OR col IS NULL THEN
    RAISE EXCEPTION 'ddx_gradcheck needs a loss, a table and a column' USING ERRCODE = '22004';
  END IF;
  IF eps IS NULL OR NOT eps > 0 OR eps = 'Infinity' THEN
    RAISE EXCEPTION 'invalid value for eps: %', eps USING ERRCODE = '22023', DETAIL = 'eps is a positive finite number.';
  END IF;
  loss_sql := regexp_replace(loss_sql, '[\s;]+$', '');
  IF sample IS NOT NULL AND sample < 1 THEN
    RAISE EXCEPTION 'sample must be at least 1' USING ERRCODE = '22023';
  END IF;
  -- rows are identified by (tableoid, ctid): ctids repeat across partitions
  grads := format('WITH ddx_gradcheck_loss AS (%s) SELECT array_agg(t.tableoid ORDER BY t.tableoid, t.ctid), '
                  'array_agg(t.ctid ORDER BY t.tableoid, t.ctid), '
                  'array_agg(@extschema@.grad(''ddx_gradcheck_loss'', t.%I) ORDER BY t.tableoid, t.ctid), '
                  'array_agg(t.%I::float8 ORDER BY t.tableoid, t.ctid) FROM %s t', loss_sql, col, col, param);
  BEGIN
    IF step IS NULL THEN
      EXECUTE grads INTO toids, tids, analytic, vals;
    ELSE
      EXECUTE grads INTO toids, tids, analytic, vals USING step;
    END IF;
  EXCEPTION WHEN undefined_parameter THEN
    RAISE EXCEPTION 'the loss reads $1, the number of a training step' USING ERRCODE = '42P02',
      HINT = 'Pass step => n: ddx_gradcheck then checks the loss of step n, as a training step binds $1.';
  END;
  rows_checked := 0;
  max_abs_error := 0;
  max_rel_error := 0;
  IF tids IS NULL THEN
    RETURN;
  END IF;
  n := array_length(tids, 1);
  pick := ARRAY(SELECT DISTINCT 1 + (k * n) / least(coalesce(sample, n), n) FROM generate_series(0, least(coalesce(sample, n), n) - 1) k ORDER BY 1);
  numeric_g := array_fill(NULL::float8, ARRAY[n]);
  BEGIN
    FOREACH i IN ARRAY pick LOOP
      x := vals[i];
      CONTINUE WHEN x IS NULL;
      toid := toids[i];
      EXECUTE format('UPDATE %s SET %I = $1 WHERE tableoid = $3 AND ctid = $2 RETURNING ctid, %I::float8', param, col, col)
        USING x + eps * greatest(1, abs(x)), tids[i], toid INTO t, xp;
      EXECUTE loss_sql INTO lp USING step;
      EXECUTE format('UPDATE %s SET %I = $1 WHERE tableoid = $3 AND ctid = $2 RETURNING ctid, %I::float8', param, col, col)
        USING x - eps * greatest(1, abs(x)), t, toid INTO t, xm;
      EXECUTE loss_sql INTO lm USING step;
      EXECUTE format('UPDATE %s SET %I = $1 WHERE tableoid = $3 AND ctid = $2', param, col) USING x, t, toid;
      numeric_g[i] := (lp - lm) / (xp - xm);
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = 'DDXGC';
  EXCEPTION WHEN SQLSTATE 'DDXGC' THEN
    NULL;  -- undo every perturbation
  END;
  FOREACH i IN ARRAY pick LOOP
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
CREATE FUNCTION ddx_gradcheck(loss_sql text, param regclass, col name, eps float8 DEFAULT 1e-6,
                              sample int DEFAULT NULL, step int DEFAULT NULL,
                              OUT rows_checked int, OUT max_abs_error float8, OUT max_rel_error float8)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ===========================================================================
-- ddx's own schema _ddx: training runs, their log and optimizer state.
--
-- Everything ddx keeps between calls lives here, in a schema the extension
-- creates and owns (CREATE EXTENSION fails if a schema "_ddx" exists), so no
-- table a user names can collide with it and ddx never writes a table it did
-- not create. (Not "ddx": a role named ddx would find it first on the
-- default search_path, "$user", public, and create its own tables there.)
-- Users read it through ddx_runs, ddx_train_log and ddx_state(). Runs belong
-- to the role that started them (row-level security). Optimizer state is one
-- table per parameter table and role, created by _ddx.state_table_for (the
-- one SECURITY DEFINER function: users need no CREATE on this schema), owned
-- by that role, with room for HOT updates.
-- ===========================================================================

-- A training run: a name, an optimizer and a step count. Its state rows are
-- keyed by id in the state tables; its log by name.
CREATE TABLE _ddx.run (
  id int GENERATED ALWAYS AS IDENTITY CONSTRAINT run_id_key UNIQUE,
  name text CONSTRAINT run_pkey PRIMARY KEY,
  optimizer text NOT NULL CHECK (optimizer IN ('adamw', 'adam', 'sgd')),
  step int NOT NULL DEFAULT 0 CHECK (step >= 0),
  owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
  created timestamptz NOT NULL DEFAULT now(),
  updated timestamptz,
  -- the last ddx_train of the run: the step count it trains to, when it
  -- started and from which step (its rate, ETA in ddx_runs)
  target_step int,
  train_started timestamptz,
  train_from int
) WITH (fillfactor = 45);
COMMENT ON TABLE _ddx.run IS 'ddx training runs: step = steps taken';

-- The parameter columns a run has stepped, and the run step at which each
-- was last stepped: a state row continues only if it was stepped then (a row
-- deleted, or NULL, in between starts again at zero, as PyTorch's lazy state).
CREATE TABLE _ddx.run_param (
  run int NOT NULL REFERENCES _ddx.run (id) ON DELETE CASCADE,
  param regclass NOT NULL,
  col name NOT NULL,
  last_step int NOT NULL,
  CONSTRAINT run_param_pkey PRIMARY KEY (run, param, col)
) WITH (fillfactor = 45);

-- One row per step of every run: the loss before the step (from the step's
-- own pass), the gradient's global norm before clipping, the learning rate.
CREATE TABLE _ddx.train_log (
  run text NOT NULL REFERENCES _ddx.run (name) ON UPDATE CASCADE ON DELETE CASCADE,
  step int NOT NULL,
  loss float8,
  grad_norm float8,
  lr float8,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT train_log_pkey PRIMARY KEY (run, step)
);

-- Which table holds the optimizer state of a parameter table for a role, and
-- the primary key it was made for. Written only by _ddx.state_table_for.
CREATE TABLE _ddx.state_table (
  param regclass NOT NULL,
  owner regrole NOT NULL,
  state regclass NOT NULL UNIQUE,
  keys name[] NOT NULL,
  CONSTRAINT state_table_pkey PRIMARY KEY (param, owner)
);

ALTER TABLE _ddx.run ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_runs ON _ddx.run USING (pg_has_role(owner, 'MEMBER')) WITH CHECK (pg_has_role(owner, 'MEMBER'));
ALTER TABLE _ddx.run_param ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_runs ON _ddx.run_param USING (EXISTS (SELECT 1 FROM _ddx.run r WHERE r.id = run_param.run));
ALTER TABLE _ddx.train_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_runs ON _ddx.train_log USING (EXISTS (SELECT 1 FROM _ddx.run r WHERE r.name = train_log.run));
GRANT SELECT, INSERT, UPDATE, DELETE ON _ddx.run, _ddx.run_param, _ddx.train_log TO PUBLIC;
GRANT SELECT ON _ddx.state_table TO PUBLIC;
-- pg_dump keeps their rows (the state tables themselves are ordinary tables)
SELECT pg_catalog.pg_extension_config_dump('_ddx.run', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('_ddx.run', 'id')::regclass, '');
SELECT pg_catalog.pg_extension_config_dump('_ddx.run_param', '');
SELECT pg_catalog.pg_extension_config_dump('_ddx.train_log', '');
SELECT pg_catalog.pg_extension_config_dump('_ddx.state_table', '');

-- ddx_runs: every training run the current role may see, with the parameter
-- columns it has stepped and its latest logged loss; while a session trains
-- it (ddx_train, or a step function in an open transaction), that session's
-- process id; for the last ddx_train, the step count it trains to, its rate
-- (steps committed per second since it started) and, while it runs, the
-- time it still needs at that rate.
CREATE VIEW ddx_runs WITH (security_invoker = true) AS
  SELECT r.name, r.optimizer, r.step,
         ARRAY(SELECT p.param::text || '.' || quote_ident(p.col) FROM _ddx.run_param p WHERE p.run = r.id
                ORDER BY 1) AS params,
         (SELECT l.loss FROM _ddx.train_log l WHERE l.run = r.name ORDER BY l.step DESC LIMIT 1) AS last_loss,
         r.owner, r.created, r.updated,
         t.pid AS training_pid, r.target_step,
         s.rate AS steps_per_second,
         CASE WHEN t.pid IS NOT NULL AND s.rate > 0 AND r.target_step > r.step
              THEN make_interval(secs => (r.target_step - r.step) / s.rate) END AS eta
    FROM _ddx.run r
    LEFT JOIN LATERAL (SELECT min(k.pid) AS pid FROM pg_catalog.pg_locks k
                        WHERE k.locktype = 'advisory' AND k.granted AND k.classid = 1145329665::oid
                          AND k.objid = (_ddx.run_key(r.name)::int8 & 4294967295)::oid AND k.objsubid = 2
                          AND k.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                             WHERE d.datname = pg_catalog.current_database())) t ON true
    LEFT JOIN LATERAL (SELECT (r.step - r.train_from)
                              / nullif(extract(epoch FROM max(l.at) - r.train_started), 0)::float8 AS rate
                         FROM _ddx.train_log l
                        WHERE l.run = r.name AND l.step > r.train_from AND l.at >= r.train_started) s ON true;
GRANT SELECT ON ddx_runs TO PUBLIC;

-- ddx_train_log: one row per step of every run the current role may see.
CREATE VIEW ddx_train_log WITH (security_invoker = true) AS
  SELECT l.run, l.step, l.loss, l.grad_norm, l.lr, l.at FROM _ddx.train_log l;
GRANT SELECT ON ddx_train_log TO PUBLIC;

-- --- parameters ------------------------------------------------------------

-- A parameter column as named by its spec, resolved: the table, its quoted
-- qualified name, the column.
CREATE TYPE _ddx.param_column AS (ord int, spec text, tbl regclass, qtbl text, col name);

-- The parameter columns named by specs ('table.column' or
-- 'schema.table.column', quoted as identifiers where needed), resolved in
-- order. Table names resolve through the caller's search_path.
CREATE FUNCTION _ddx.param_columns(specs text[], what text DEFAULT 'parameter')
RETURNS SETOF _ddx.param_column
LANGUAGE plpgsql STABLE AS $$
DECLARE
  pc _ddx.param_column;
  s text;
  ident text[];
  n int;
  t regclass;
  kind char;
  typ oid;
  i int := 0;
BEGIN
  FOREACH s IN ARRAY coalesce(specs, '{}') LOOP
    i := i + 1;
    ident := parse_ident(s);
    n := array_length(ident, 1);
    IF n NOT IN (2, 3) THEN
      RAISE EXCEPTION '% "%" is not of the form table.column', what, s
        USING ERRCODE = '22023', HINT = 'Name each parameter as ''table.column'' or ''schema.table.column''.';
    END IF;
    t := to_regclass(array_to_string(ARRAY(SELECT quote_ident(x) FROM unnest(ident[1:n - 1]) x), '.'));
    IF t IS NULL THEN
      RAISE EXCEPTION 'table of % "%" does not exist', what, s USING ERRCODE = '42P01';
    END IF;
    SELECT c.relkind INTO kind FROM pg_catalog.pg_class c WHERE c.oid = t;
    IF kind NOT IN ('r', 'p') THEN
      RAISE EXCEPTION '% "%" is not a column of a table', what, s
        USING ERRCODE = '42809', DETAIL = 'Parameters are columns of ordinary or partitioned tables.';
    END IF;
    SELECT a.atttypid INTO typ FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = t AND a.attname = ident[n] AND a.attnum > 0 AND NOT a.attisdropped;
    IF typ IS NULL THEN
      RAISE EXCEPTION 'column "%" of % "%" does not exist', ident[n], what, s USING ERRCODE = '42703';
    END IF;
    IF typ NOT IN ('float8'::regtype, 'float4'::regtype) THEN
      RAISE EXCEPTION 'column "%" of % "%" is of type %', ident[n], what, s, typ::regtype
        USING ERRCODE = '42804', HINT = 'Parameters are float8 or float4 columns.';
    END IF;
    pc.ord := i;
    pc.spec := s;
    pc.tbl := t;
    SELECT quote_ident(ns.nspname) || '.' || quote_ident(c.relname) INTO pc.qtbl
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = t;
    pc.col := ident[n];
    RETURN NEXT pc;
  END LOOP;
END $$;

-- A table's primary-key columns in key order: name and SQL type (with its
-- collation where that is not the type's default). None: no primary key.
CREATE FUNCTION _ddx.key_columns(t regclass) RETURNS TABLE (ord int, name name, type text)
LANGUAGE sql STABLE AS $$
  SELECT u.ord::int, a.attname,
         pg_catalog.format_type(a.atttypid, a.atttypmod) OPERATOR(pg_catalog.||)
           CASE WHEN a.attcollation OPERATOR(pg_catalog.<>) 0 AND a.attcollation OPERATOR(pg_catalog.<>) ty.typcollation
                THEN ' COLLATE ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(cn.nspname) OPERATOR(pg_catalog.||) '.'
                     OPERATOR(pg_catalog.||) pg_catalog.quote_ident(co.collname) ELSE '' END
    FROM pg_catalog.pg_index i
   CROSS JOIN LATERAL pg_catalog.unnest(i.indkey) WITH ORDINALITY AS u(attnum, ord)
    JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.attnum
    JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
    LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
    LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace
   WHERE i.indrelid = t AND i.indisprimary
   ORDER BY u.ord
$$;

-- The parameter tables of a parameter list, one row per table in order of
-- first mention: its key (the primary key; none for a table of at most one
-- row), its parameter columns with their specs, and whether each decays
-- (is not in no_decay). Checks everything a step relies on.
CREATE TYPE _ddx.param_table AS (tbl regclass, qtbl text, keys name[], ktypes text[], cols name[], specs text[],
                                decay boolean[]);
CREATE FUNCTION _ddx.param_tables(params text[], no_decay text[] DEFAULT '{}')
RETURNS SETOF _ddx.param_table
LANGUAGE plpgsql STABLE AS $$
DECLARE
  r _ddx.param_table;
  pcs _ddx.param_column[];
  p record;
  k record;
  d _ddx.param_column;
  seen text[] := '{}';
  nd text[] := '{}';
  many boolean;
BEGIN
  IF coalesce(array_length(params, 1), 0) = 0 THEN
    RAISE EXCEPTION 'no parameters given' USING ERRCODE = '22023', HINT = 'Pass ARRAY[''table.column'', ...].';
  END IF;
  pcs := ARRAY(SELECT c FROM _ddx.param_columns(params) c ORDER BY c.ord);
  FOREACH d IN ARRAY pcs LOOP
    IF d.tbl::oid::text || '.' || d.col = ANY (seen) THEN
      RAISE EXCEPTION 'parameter "%" is listed twice', d.spec USING ERRCODE = '22023';
    END IF;
    seen := seen || (d.tbl::oid::text || '.' || d.col);
  END LOOP;
  FOR d IN SELECT * FROM _ddx.param_columns(no_decay, 'no_decay entry') LOOP
    IF NOT d.tbl::oid::text || '.' || d.col = ANY (seen) THEN
      RAISE EXCEPTION 'no_decay entry "%" is not one of the parameters', d.spec
        USING ERRCODE = '22023', HINT = 'List in no_decay only columns that are in params.';
    END IF;
    nd := nd || (d.tbl::oid::text || '.' || d.col);
  END LOOP;
  FOR p IN SELECT c.tbl, min(c.qtbl) AS qtbl, min(c.ord) AS first, array_agg(c.col ORDER BY c.ord) AS cols,
                  array_agg(c.spec ORDER BY c.ord) AS specs,
                  array_agg(NOT (c.tbl::oid::text || '.' || c.col = ANY (nd)) ORDER BY c.ord) AS decay
             FROM unnest(pcs) c GROUP BY c.tbl ORDER BY 3 LOOP
    r.tbl := p.tbl;
    r.qtbl := p.qtbl;
    r.cols := p.cols;
    r.specs := p.specs;
    r.decay := p.decay;
    r.keys := '{}';
    r.ktypes := '{}';
    FOR k IN SELECT * FROM _ddx.key_columns(p.tbl) LOOP
      IF k.name = ANY (p.cols) THEN
        RAISE EXCEPTION 'parameter column "%" of table % is part of its primary key', k.name, p.qtbl
          USING ERRCODE = '22023', DETAIL = 'A parameter row is identified by its primary key, which a step must not change.';
      END IF;
      r.keys := r.keys || k.name;
      r.ktypes := r.ktypes || k.type;
    END LOOP;
    IF r.keys = '{}' THEN
      EXECUTE format('SELECT count(*) > 1 FROM (SELECT 1 FROM %s LIMIT 2) q', p.qtbl) INTO many;
      IF many THEN
        RAISE EXCEPTION 'parameter table % has no primary key and more than one row', p.qtbl
          USING ERRCODE = '42P10',
                HINT = 'Add a PRIMARY KEY: ddx identifies each parameter row by it (a table of one row needs none).';
      END IF;
    END IF;
    RETURN NEXT r;
  END LOOP;
END $$;

-- A run's name when none is given: its parameter columns (of tables
-- resolved by _ddx.param_tables), qualified and sorted, so that different
-- models never share a run by default.
CREATE FUNCTION _ddx.default_run_name(tabs _ddx.param_table[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT string_agg(x.qtbl || '.' || quote_ident(c), ', ' ORDER BY x.qtbl, c)
    FROM unnest(tabs) x CROSS JOIN LATERAL unnest(x.cols) c
$$;

-- The table holding the optimizer state of parameter table `t` for role
-- `trainer`, created on first use in schema _ddx and owned by that role:
--   run, col (_ddx.run.id, the parameter column's name; text, not name:
--   a 64-byte name key doubled the time of the state's UPDATE at 800k
--   rows), k1 .. kn (the parameter
--   table's primary key, in key order), step (this row's own step count: its
--   bias correction), at (the run step it was last stepped at), m, v (Adam's
--   moments), buf (SGD's momentum buffer).
-- Key columns are named by position so that no name a user gives a key (m,
-- v, step, ...) can clash. SECURITY DEFINER so that users need no CREATE on
-- schema _ddx: it checks that the caller may act as `trainer` and that
-- `trainer` may UPDATE `t`, creates nothing else, and forgets the state of
-- parameter tables that were dropped.
CREATE FUNCTION _ddx.state_table_for(t regclass, trainer regrole) RETURNS regclass
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  st regclass;
  made name[];
  k record;
  want name[] := '{}';
  defs text := '';
  pk text := '';
  base text;
  nm text;
  n int := 0;
  dead regclass;
  dmethod text;
  dmodel text;
  dcol text;
  dk int;
BEGIN
  IF NOT pg_has_role(session_user, trainer, 'MEMBER') THEN
    RAISE EXCEPTION 'role % may not act as role %', session_user, trainer USING ERRCODE = '42501';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t AND c.relkind IN ('r', 'p')) THEN
    RAISE EXCEPTION '% is not a table', t USING ERRCODE = '42809';
  END IF;
  IF NOT has_table_privilege(trainer, t, 'UPDATE') THEN
    RAISE EXCEPTION 'permission denied to train table %', t
      USING ERRCODE = '42501', DETAIL = 'An optimizer step updates its parameter tables: the role needs UPDATE on them.';
  END IF;
  FOR k IN SELECT * FROM _ddx.key_columns(t) LOOP
    want := want || k.name;
    defs := defs || format('k%s %s NOT NULL, ', k.ord, k.type);
    pk := pk || format(', k%s', k.ord);
  END LOOP;
  FOR i IN 1 .. 2 LOOP
    SELECT s.state, s.keys INTO st, made FROM _ddx.state_table s WHERE s.param = t AND s.owner = trainer;
    IF st IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = st) THEN
      DELETE FROM _ddx.state_table s WHERE s.param = t AND s.owner = trainer;  -- dropped by hand: made again
      st := NULL;
    END IF;
    IF st IS NOT NULL THEN
      IF made IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'the primary key of % changed since its optimizer state was created', t
          USING ERRCODE = '55000', DETAIL = format('State %s is keyed by (%s), the table now by (%s).', st,
                                                   array_to_string(made, ', '), array_to_string(want, ', ')),
                HINT = format('Drop the runs that trained it (ddx_run_drop), then DROP TABLE %s.', st);
      END IF;
      RETURN st;
    END IF;
    EXIT WHEN i = 2;
    LOCK TABLE _ddx.state_table IN SHARE ROW EXCLUSIVE MODE;  -- one creator at a time; then look again
  END LOOP;
  -- the state of parameter tables that no longer exist is garbage
  FOR dead IN DELETE FROM _ddx.state_table s WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = s.param)
              RETURNING s.state LOOP
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = dead) THEN
      EXECUTE format('DROP TABLE %s', dead);
    END IF;
  END LOOP;
  SELECT left(c.relname, 48) || '_state' INTO base FROM pg_class c WHERE c.oid = t;
  nm := base;
  WHILE EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = '_ddx'::regnamespace AND c.relname = nm) LOOP
    n := n + 1;
    nm := base || '_' || n;
  END LOOP;
  EXECUTE format('CREATE TABLE _ddx.%I (run int NOT NULL, col text NOT NULL, %s step int NOT NULL, at int NOT NULL, '
                 'm float8, v float8, buf float8, PRIMARY KEY (run, col%s)) WITH (fillfactor = 45)', nm, defs, pk);
  st := format('_ddx.%I', nm)::regclass;
  EXECUTE format('COMMENT ON TABLE %s IS %L', st,
                 format('ddx optimizer state of %s for role %s: run = _ddx.run.id, col = the parameter column, '
                        'k1.. = its primary key (%s)', t, trainer, array_to_string(want, ', ')));
  EXECUTE format('ALTER TABLE %s OWNER TO %s', st, trainer);
  -- On Citus, the state is placed like its parameters: a reference table's
  -- beside every placement of it, so that a step updates both in one
  -- distributed transaction (two-phase commit), and a table Citus manages on
  -- the coordinator's as one too. (pg_dist_partition exists only with Citus.)
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT p.partmethod::text, p.repmodel::text FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
      INTO dmethod, dmodel USING t;
    IF dmodel = 't' THEN
      EXECUTE 'SELECT pg_catalog.create_reference_table($1)' USING st;
    ELSIF dmethod = 'n' THEN
      EXECUTE 'SELECT pg_catalog.citus_add_local_table_to_metadata($1)' USING st;
      st := format('_ddx.%I', nm)::regclass;  -- Citus made the table a shard and put a new one in its place
    ELSIF dmethod = 'h' THEN
      -- a distributed table's state is distributed by the key column that
      -- the table is distributed by, co-located with it: a row's state lives
      -- on its row's worker, and a step updates both in one distributed
      -- transaction
      EXECUTE 'SELECT pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) FROM pg_catalog.pg_dist_partition p '
              'WHERE p.logicalrelid = $1' INTO dcol USING t;
      dk := array_position(want, dcol::name);
      IF dk IS NULL THEN
        RAISE EXCEPTION 'the distribution column of % is not in its primary key', t USING ERRCODE = '0A000';
      END IF;
      EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
        USING st, 'k' || dk, t::text;
    ELSIF dmethod IS NOT NULL THEN
      RAISE EXCEPTION 'ddx does not take parameters from a range- or append-distributed table: % is one', t
        USING ERRCODE = '0A000',
              HINT = 'Distribute the parameters by hash (create_distributed_table), or keep them in a reference table.';
    END IF;
  END IF;
  INSERT INTO _ddx.state_table VALUES (t, trainer, st, want);
  RETURN st;
END $$;

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
  INSERT INTO _ddx.run (name, optimizer) VALUES (run_name, opt) ON CONFLICT ON CONSTRAINT run_pkey DO NOTHING;
  SELECT r.id INTO i FROM _ddx.run r WHERE r.name = run_name;
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

-- Starts the next step of run `run_name` with optimizer `opt`: creates the
-- run on its first step, locks it for the transaction, checks that it is an
-- `opt` run, and returns its id, the number of the step now being taken and
-- its owner (whose state tables hold the run's state).
CREATE FUNCTION _ddx.run_next_step(run_name text, opt text, OUT run_id int, OUT run_step int, OUT run_owner regrole)
LANGUAGE plpgsql AS $$
DECLARE
  was text;
BEGIN
  run_id := _ddx.run_claim(run_name, opt, false);
  SELECT f.run_step INTO run_step FROM _ddx.run_refresh(run_name) f;
  SELECT r.optimizer, r.owner INTO was, run_owner FROM _ddx.run r WHERE r.id = run_id FOR UPDATE;
  IF was <> opt AND run_step > 0 THEN
    RAISE EXCEPTION 'training run "%" is an % run, not %', run_name, was, opt
      USING ERRCODE = '22023', HINT = format('Give the %s run another name (state_name => ...), or start this one '
                                             'again with ddx_run_reset(%L).', opt, run_name);
  END IF;
  UPDATE _ddx.run r SET step = r.step + 1, optimizer = opt, updated = now() WHERE r.id = run_id
    RETURNING r.step INTO run_step;
END $$;

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

-- --- gradients into tables -----------------------------------------------------

-- The gradient table `name` of parameter table t: created (and marked as
-- ddx's by its comment) if missing, else checked to be one ddx made with
-- exactly these columns: t's key columns, then one float8 per gradient.
CREATE FUNCTION _ddx.grad_table(t regclass, name text, keys name[], ktypes text[], gcols name[]) RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
  g regclass := to_regclass(name);
  have text[];
  want text[] := '{}';
  marker text := 'ddx gradient table of ' || t::text;
BEGIN
  FOR k IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
    want := want || (quote_ident(keys[k]) || ' ' || ktypes[k]);
  END LOOP;
  FOR k IN 1 .. array_length(gcols, 1) LOOP
    want := want || (quote_ident(gcols[k]) || ' double precision');
  END LOOP;
  IF g IS NULL THEN
    EXECUTE format('CREATE TABLE %s (%s%s)', name, array_to_string(want, ', '),
                   CASE WHEN keys = '{}' THEN ''
                        ELSE format(', PRIMARY KEY (%s)', array_to_string(ARRAY(SELECT quote_ident(x) FROM unnest(keys) x), ', '))
                   END);
    g := to_regclass(name);
    EXECUTE format('COMMENT ON TABLE %s IS %L', g, marker);
    RETURN g;
  END IF;
  IF coalesce(obj_description(g, 'pg_class'), '') NOT LIKE 'ddx gradient table of %' THEN
    RAISE EXCEPTION 'relation % already exists and was not created by ddx', g
      USING ERRCODE = '42P07', DETAIL = 'ddx writes gradients only into tables it created.',
            HINT = 'Name another gradient table: ddx_backward(..., grad_tables => ARRAY[...]).';
  END IF;
  SELECT array_agg(quote_ident(a.attname) || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
    INTO have FROM pg_catalog.pg_attribute a WHERE a.attrelid = g AND a.attnum > 0 AND NOT a.attisdropped;
  IF have IS DISTINCT FROM ARRAY(SELECT regexp_replace(x, ' COLLATE .*$', '') FROM unnest(want) x) THEN
    RAISE EXCEPTION 'gradient table % has columns (%), not (%)', g, array_to_string(have, ', '),
                    array_to_string(want, ', ')
      USING ERRCODE = '42804', HINT = format('DROP TABLE %s, or name another gradient table.', g);
  END IF;
  RETURN g;
END $$;

-- ddx_backward: one backward pass of a loss, many parameter tables.
--   loss_sql     a query returning one row and one number
--   params       'table.column' or 'schema.table.column', one per parameter
--   grad_tables  optional, one per parameter: where its gradient goes
--                (parameters of one table share one gradient table)
-- The gradients of table t go to t's gradient table, by default <t>_grad
-- beside t: t's primary-key columns (none for a table of one row), then the
-- gradient in column `grad` — or, where t has several parameter columns or a
-- key named grad, one gradient column per parameter column, named as it.
-- ddx creates it if missing and refuses (42P07) to write into a table it did
-- not create. All gradients come from one statement: one backward pass.
-- Returns each parameter's gradient table and row count.
CREATE FUNCTION _ddx.ddx_backward(loss_sql text, params text[], grad_tables text[] DEFAULT NULL)
RETURNS TABLE (param text, grad_table regclass, grad_rows bigint)
LANGUAGE plpgsql AS $$
DECLARE
  t record;
  gt regclass;
  gname text;
  gcols name[];
  ctes text[] := '{}';
  sels text[] := '{}';
  sel text;
  i int := 0;
BEGIN
  IF loss_sql IS NULL THEN
    RAISE EXCEPTION 'loss_sql must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF grad_tables IS NOT NULL AND array_length(grad_tables, 1) IS DISTINCT FROM array_length(params, 1) THEN
    RAISE EXCEPTION 'grad_tables has % entries for % parameters', coalesce(array_length(grad_tables, 1), 0),
                    array_length(params, 1) USING ERRCODE = '22023';
  END IF;
  FOR t IN SELECT * FROM _ddx.param_tables(params) LOOP
    i := i + 1;
    SELECT min(g) INTO gname FROM unnest(params, grad_tables) AS u(s, g) WHERE s = ANY (t.specs);
    IF (SELECT count(DISTINCT coalesce(g, '')) FROM unnest(params, grad_tables) AS u(s, g) WHERE s = ANY (t.specs)) > 1 THEN
      RAISE EXCEPTION 'the parameters of table % name different gradient tables', t.qtbl USING ERRCODE = '22023';
    END IF;
    IF gname IS NULL THEN
      SELECT quote_ident(ns.nspname) || '.' || quote_ident(c.relname || '_grad') INTO gname
        FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = t.tbl;
    END IF;
    gcols := CASE WHEN array_length(t.cols, 1) = 1 AND NOT 'grad' = ANY (t.keys) THEN ARRAY['grad']::name[] ELSE t.cols END;
    gt := _ddx.grad_table(t.tbl, gname, t.keys, t.ktypes, gcols);
    EXECUTE format('DELETE FROM %s', gt);  -- not TRUNCATE: a new relfilenode per step would churn pg_class
    sel := '';
    FOR k IN 1 .. coalesce(array_length(t.keys, 1), 0) LOOP
      sel := sel || format('t.%I, ', t.keys[k]);
    END LOOP;
    FOR j IN 1 .. array_length(t.cols, 1) LOOP
      sel := sel || format('@extschema@.grad(''ddx_loss'', t.%I), ', t.cols[j]);
    END LOOP;
    ctes := ctes || format('ddx_g%s AS (INSERT INTO %s SELECT %s FROM %s t RETURNING 1)', i, gt, rtrim(sel, ', '), t.qtbl);
    FOR j IN 1 .. array_length(t.specs, 1) LOOP
      sels := sels || format('SELECT %s AS o, %L AS spec, %L::regclass AS gt, (SELECT count(*) FROM ddx_g%s) AS c',
                             array_position(params, t.specs[j]), t.specs[j], gt, i);
    END LOOP;
  END LOOP;
  RETURN QUERY EXECUTE format('WITH ddx_loss AS (%s), %s SELECT r.spec, r.gt, r.c FROM (%s) r ORDER BY r.o',
                              regexp_replace(loss_sql, '[\s;]+$', ''), array_to_string(ctes, ', '), array_to_string(sels, ' UNION ALL '));
END;
$$;
CREATE FUNCTION ddx_backward(loss_sql text, params text[], grad_tables text[] DEFAULT NULL)
RETURNS TABLE (param text, grad_table regclass, grad_rows bigint)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- --- optimizer steps -------------------------------------------------------

-- An optimizer's rule: how a row's state moves and how far its value moves,
-- what _ddx.step_sql assembles a step from; one function per optimizer
-- (_ddx.adam_rule, _ddx.sgd_rule), found by _ddx.optimizer. In its texts d.d
-- is a row's gradient as applied (clipped; plus the L2 term where the rule
-- does not decay the value itself), s the row's state, $n the step's
-- settings (see _ddx.step_sql).
--   decoupled    weight decay moves the value (AdamW: p *= 1 - lr * wd), not
--                the gradient (the L2 term of Adam and SGD)
--   plain        a rule without state: the new value of %1$s given the
--                applied gradient %2$s (NULL for a rule with state)
--   state_cols   the state's columns besides step and at
--   state_first  their values at a row's first step
--   state_next   their values at a later one (%1$s: the step its column was
--                last stepped at; a row that missed it starts again)
--   state_out    what the state's update returns: the move u, or what it is
--                computed from
--   move         a row's move u from s (the state returned) and, where
--                move_reads_gradient, its gradient g.d; NULL: state_out is u
CREATE TYPE _ddx.optimizer_rule AS (decoupled boolean, plain text, state_cols text, state_first text, state_next text,
                                    state_out text, move text, move_reads_gradient boolean);

-- Adam (AdamW where `decoupled`), as torch.optim's: m and v with the row's
-- own bias correction; u = lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
CREATE FUNCTION _ddx.adam_rule(decoupled boolean) RETURNS _ddx.optimizer_rule
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT ROW(decoupled, NULL, 'm, v', '(1 - $4) * d.d, (1 - $5) * d.d * d.d',
             'm = CASE WHEN s.at = %1$s THEN $4 * s.m ELSE 0 END + (1 - $4) * d.d, '
             'v = CASE WHEN s.at = %1$s THEN $5 * s.v ELSE 0 END + (1 - $5) * d.d * d.d',
             '($3 / (1 - $4 ^ s.step)) * s.m / (sqrt(s.v) / sqrt(1 - $5 ^ s.step) + $6) AS u',
             NULL, false)::_ddx.optimizer_rule
$$;

-- SGD, as torch.optim's. Without momentum it keeps no state: p -= lr * d.
-- With it, buf = d on a row's first step, else momentum * buf +
-- (1 - dampening) * d, and p -= lr * buf (nesterov: lr * (d + momentum * buf)).
CREATE FUNCTION _ddx.sgd_rule(momentum boolean, nesterov boolean) RETURNS _ddx.optimizer_rule
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT CASE WHEN NOT momentum
              THEN ROW(false, '%1$s - $3 * (%2$s)', NULL, NULL, NULL, NULL, NULL, false)::_ddx.optimizer_rule
              ELSE ROW(false, NULL, 'buf', 'd.d', 'buf = CASE WHEN s.at = %1$s THEN $8 * s.buf + (1 - $9) * d.d ELSE d.d END',
                       's.buf AS b', CASE WHEN nesterov THEN '$3 * (g.d + $8 * s.b)' ELSE '$3 * s.b' END,
                       nesterov)::_ddx.optimizer_rule
         END
$$;

-- The rule of optimizer `opt` ('adam', 'adamw' or 'sgd') with its settings.
CREATE FUNCTION _ddx.optimizer(opt text, momentum boolean, nesterov boolean) RETURNS _ddx.optimizer_rule
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  CASE opt
    WHEN 'adam' THEN RETURN _ddx.adam_rule(false);
    WHEN 'adamw' THEN RETURN _ddx.adam_rule(true);
    WHEN 'sgd' THEN RETURN _ddx.sgd_rule(momentum, nesterov);
  END CASE;
  RAISE EXCEPTION 'unknown optimizer %', opt USING ERRCODE = '22023';
END $$;

-- The statement of one optimizer step (see _ddx.optimizer_step) for the
-- parameter tables `tabs` of a run owned by `run_owner`: the same text for
-- every step of a run with the same settings, so that a session prepares it
-- once (the hook builds the gradient program once, the planner plans the
-- statement once). Its parameters: $1 the step, $2 the run's id, $3 lr,
-- $4 beta1, $5 beta2, $6 eps, $7 max_grad_norm, $8 momentum, $9 dampening,
-- $10 weight_decay; the loss may read $1. Also returns the tables it updates.
--   ddx_g<i>   each parameter table's rows with key, values and gradients
--              (grad() calls of one loss: one backward pass for all tables)
--   ddx_norm   the loss (ddx_value: the same pass) and the global norm
--   ddx_scale  clip_grad_norm_'s factor
--   ddx_d<i>   per (column, row): the gradient to apply (clipped; + L2 decay
--              for Adam and SGD); rows whose value is NULL are skipped
--   ddx_s<i>   the state rows, updated (ddx_so) or inserted (ddx_sn): a row
--              new to the run, or not stepped the last time its column was,
--              starts at zero (lazy state); one UPDATE and an anti-joined
--              INSERT cost less than INSERT ... ON CONFLICT (bench/state.py)
--   ddx_v<i>   what each row's value moves by
--   ddx_u<i>   the parameter table, updated in place
-- (the CTEs of one table: _ddx.step_table_sql). A row whose value is NULL is
-- not stepped: its state row, if any, falls behind its column's last step
-- and counts no more (ddx_state does not show it; it starts again from zero
-- when the row has a value; ddx_train prunes such rows when it ends).
-- Deleting them here cost a nested loop per table.
--   On Citus, every CTE of the statement that reads a Citus table is a
-- subplan of its own, run as an execution of its own, and each execution
-- ran the gradient program again (an MLP's step: once per parameter table
-- and once for the loss). There the gradients of all tables and the loss
-- come from one CTE, ddx_gall (t = the table's number, 0 the loss; keys as
-- text, values and gradients as float8 arrays), and ddx_g<i> read it back.
CREATE FUNCTION _ddx.step_sql(rule _ddx.optimizer_rule, loss_sql text, tabs _ddx.param_table[], run_owner regrole,
                              decays boolean, OUT sql text, OUT stepped text[])
LANGUAGE plpgsql AS $$
DECLARE
  t _ddx.param_table;
  one record;
  gctes text[] := '{}';  -- ddx_g<i>, before ddx_norm
  ctes text[] := '{}';   -- the rest, after ddx_scale
  norms text[] := '{}';
  garms text[] := '{}';  -- on Citus, ddx_gall's arms
  nt int := 0;
  citus boolean := false;
  lossv text := '@extschema@.ddx_value(''ddx_loss'')';
BEGIN
  stepped := '{}';
  IF coalesce(array_length(tabs, 1), 0) = 0 THEN  -- the loss reads no parameter table: its value alone
    sql := format('WITH ddx_loss AS (%s) SELECT 0::float8 AS norm, (SELECT l.v::float8 FROM ddx_loss AS l(v)) AS loss',
                  loss_sql);
    RETURN;
  END IF;
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = ANY ($1))'
      INTO citus USING ARRAY(SELECT x.tbl FROM unnest(tabs) x);
  END IF;
  FOREACH t IN ARRAY tabs LOOP
    nt := nt + 1;
    stepped := stepped || t.qtbl;
    one := _ddx.step_table_sql(rule, t, nt, run_owner, decays, citus);
    gctes := gctes || one.gcte;
    garms := garms || one.garm;
    norms := norms || one.norms;
    ctes := ctes || one.ctes;
  END LOOP;
  IF citus THEN
    gctes := ARRAY[format('ddx_gall AS MATERIALIZED (%s UNION ALL SELECT 0, NULL::text[], NULL::float8[], ARRAY[%s])',
                          array_to_string(garms, ' UNION ALL '), lossv)] || gctes;
    lossv := '(SELECT a.g[1] FROM ddx_gall a WHERE a.t = 0)';
  END IF;
  sql := format('WITH ddx_loss AS (%s), %s, ddx_norm AS MATERIALIZED (SELECT %s AS loss, '
                'sqrt(coalesce(sum(q.ss), 0)) AS norm FROM (%s) q), '
                'ddx_scale AS MATERIALIZED (SELECT CASE WHEN $7::float8 IS NULL THEN 1::float8 '
                'ELSE least($7 / (n.norm + 1e-6), 1::float8) END AS s FROM ddx_norm n), %s '
                'SELECT n.norm, n.loss FROM ddx_norm n',
                loss_sql, array_to_string(gctes, ', '), lossv, array_to_string(norms, ' UNION ALL '),
                array_to_string(ctes, ', '));
END $$;

-- The CTEs of parameter table `t`, the `nt`th of a step (see _ddx.step_sql):
-- gcte its ddx_g<nt> (and on Citus garm, its arm of ddx_gall), norms its
-- columns' sums of squared gradients, ctes the rest (ddx_l, ddx_d, ddx_so,
-- ddx_sn, ddx_s, ddx_v, ddx_u; ddx_u alone for a rule without state).
CREATE FUNCTION _ddx.step_table_sql(rule _ddx.optimizer_rule, t _ddx.param_table, nt int, run_owner regrole,
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
    dsel := dsel || format('SELECT %s%L::text AS col, g.g%s * c.s%s AS d, l.last_step AS last '
                           'FROM ddx_g%s g CROSS JOIN ddx_scale c LEFT JOIN ddx_l%s l ON l.col = %2$L '
                           'WHERE g.p%s IS NOT NULL', replace(ks, 'k', 'g.k'), t.cols[j], j,
                           CASE WHEN NOT rule.decoupled AND t.decay[j] AND decays
                                THEN format(' + $10 * g.p%s', j) ELSE '' END, nt, nt, j);
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
  ctes := ctes || format('ddx_d%s AS (%s)', nt, array_to_string(dsel, ' UNION ALL '));
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

-- An optimizer setting out of its range, refused as torch.optim refuses it
-- (22023; 22004 for NULL), naming the argument and its range.
CREATE FUNCTION _ddx.refuse_setting(name text, value float8, range text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'invalid value for %: %', name, coalesce(value::text, 'NULL')
    USING ERRCODE = CASE WHEN value IS NULL THEN '22004' ELSE '22023' END,
          DETAIL = format('%s is %s.', name, range);
END $$;

-- Whether x is a number: not NULL, NaN or infinite.
CREATE FUNCTION _ddx.finite(x float8) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT x IS NOT NULL AND x NOT IN ('NaN', 'Infinity', '-Infinity') $$;

-- A float for progress messages: four significant digits.
CREATE FUNCTION _ddx.g4(x float8) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN x IS NULL THEN 'NULL' WHEN NOT _ddx.finite(x) THEN x::text WHEN x = 0 THEN '0'
              WHEN abs(x) >= 1e-4 AND abs(x) < 1e6
              THEN trim_scale(round(x::numeric, greatest(0, 3 - floor(log(abs(x)::numeric))::int)))::text
              ELSE btrim(to_char(x, '9.999EEEE')) END
$$;

-- The frames of a user's own functions inside a step (a plpgsql helper of
-- the loss that raised the error), from the error's context, for the DETAIL
-- of the step's error, which a re-raise would otherwise lose: the frames
-- before the first of ddx's own (innermost first: those after it are the
-- caller's, which the error's CONTEXT keeps). "In <frame>; <frame>." or ''.
CREATE FUNCTION _ddx.users_frames(ctx text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  WITH t AS (SELECT l, o FROM regexp_split_to_table(coalesce(ctx, ''), E'\n') WITH ORDINALITY AS t(l, o))
  SELECT coalesce(E'\nIn ' || string_agg(t.l, '; ' ORDER BY t.o) || '.', '')
    FROM t
   WHERE t.o < coalesce((SELECT min(o) FROM t WHERE l LIKE 'PL/pgSQL function \_ddx.%'), 2147483647)
     AND ((t.l LIKE 'PL/pgSQL function %' AND t.l NOT LIKE 'PL/pgSQL function \_ddx.%')
          OR (t.l LIKE 'SQL function "%' AND t.l NOT LIKE 'SQL function "ddx\_%' AND t.l NOT LIKE 'SQL function "\_ddx%'))
$$;

-- A session's first sight of `key` (true once per session): what a NOTICE
-- that should be said once looks up.
CREATE FUNCTION _ddx.first_time(key text) RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_first_time' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- One optimizer step, the body of ddx_adamw_step and ddx_sgd_step (their
-- arguments; `opt` is 'adamw', 'adam' or 'sgd'): checks, the run's next
-- step, and the step's statement (_ddx.step_sql), prepared once per session
-- and executed. All of it reads the statement's snapshot, so the gradients
-- are those of the parameters before the step. An error says which step of
-- which run failed and where (the statement is shown with ddx.show_sql =
-- on). The loss may read $1, the number of the step being taken (a
-- mini-batch by step).
--   Settings are checked as torch.optim checks them (finite, in range).
--   A parameter table the loss never reads is skipped, as PyTorch skips a
--   parameter whose grad is None: no gradient, no step, its state kept (a
--   NOTICE once per session and run); where the loss calls a function ddx
--   cannot see into, the table could be read in there, and the step is
--   refused (0A000).
--   A loss or gradient norm that is not finite stops the step (22P01): the
--   error rolls back its update, so the parameters and the state are those
--   of the step before.
--   The run is locked for the transaction (see _ddx.run_claim); the step is
--   logged in _ddx.train_log.
CREATE FUNCTION _ddx.optimizer_step(opt text, loss_sql text, params text[], lr float8, beta1 float8, beta2 float8,
                                   eps float8, weight_decay float8, no_decay text[], max_grad_norm float8,
                                   momentum float8, dampening float8, nesterov boolean, run_name text,
                                   OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE plpgsql AS $$
DECLARE
  tabs _ddx.param_table[];
  kept _ddx.param_table[] := '{}';
  skipped text[] := '{}';
  rd record;
  run_id int;
  run_owner regrole;
  stepped text[];
  sql text;
  prepared text;
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
  tabs := ARRAY(SELECT x FROM _ddx.param_tables(params, no_decay) x);
  run_name := coalesce(run_name, _ddx.default_run_name(tabs));
  SELECT n.run_id, n.run_step, n.run_owner INTO run_id, step, run_owner FROM _ddx.run_next_step(run_name, opt) n;
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
                            'parameters only inside what ddx cannot differentiate (%s), whose part of the loss would '
                            'get no gradient.', step, run_name, array_to_string(skipped, ', '),
                            array_to_string(rd.opaque, ', ')),
            HINT = 'Write the loss as a view, a CTE, or an SQL function that PostgreSQL inlines (LANGUAGE sql, one '
                   'SELECT of one expression or a set-returning one SELECT, not SECURITY DEFINER, no SET clause).';
  END IF;
  FOR i IN 1 .. coalesce(array_length(skipped, 1), 0) LOOP
    IF _ddx.first_time(format('skip %s %s', run_id, skipped[i])) THEN
      RAISE NOTICE 'training run "%" skips table %: the loss does not read it', run_name, skipped[i]
        USING DETAIL = 'A parameter table that the loss never reads gets no gradient and no step; its values and its '
                       'optimizer state stay as they are (PyTorch skips a parameter whose grad is None so).';
    END IF;
  END LOOP;
  SELECT q.sql, q.stepped INTO sql, stepped
    FROM _ddx.step_sql(_ddx.optimizer(opt, momentum <> 0, nesterov), loss_sql, kept, run_owner, weight_decay <> 0) q;
  -- prepared once per session and statement (plans are kept across the
  -- COMMITs of ddx_train; DDL on a table it reads makes PostgreSQL plan it,
  -- and ddx differentiate it, again)
  prepared := '_ddx_step_' || md5(sql);
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
    -- (EXECUTE of a prepared statement takes no $n of its own: the values are
    -- literals, float8's text being exact)
    EXECUTE format('EXECUTE %I (%s, %s, %L, %L, %L, %L, %L, %L, %L, %L)', prepared, step, run_id, lr, beta1, beta2,
                   eps, max_grad_norm, momentum, dampening, weight_decay) INTO grad_norm, loss;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT, e_detail = PG_EXCEPTION_DETAIL,
                            e_hint = PG_EXCEPTION_HINT, e_ctx = PG_EXCEPTION_CONTEXT;
    e_where := CASE WHEN strpos(e_ctx, 'ddx gradient program') > 0 THEN 'computing the loss and its gradient'
                    ELSE 'updating ' || array_to_string(stepped, ', ') || ' and the optimizer state' END;
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
  INSERT INTO _ddx.run_param AS p (run, param, col, last_step)
    SELECT run_id, x.tbl, c, step FROM unnest(kept) x CROSS JOIN LATERAL unnest(x.cols) c
  ON CONFLICT ON CONSTRAINT run_param_pkey DO UPDATE SET last_step = excluded.last_step;
  INSERT INTO _ddx.train_log (run, step, loss, grad_norm, lr) VALUES (run_name, step, loss, grad_norm, lr);
  lr_used := lr;
END $$;

-- ddx_adamw_step: one optimizer step inside the caller's transaction, with
-- PyTorch's semantics and defaults (torch.optim.AdamW; Adam with L2 weight
-- decay when decoupled is false, whose default weight_decay is 0 as in
-- torch.optim.Adam), optional global-norm clipping as
-- torch.nn.utils.clip_grad_norm_ computes it (max_grad_norm), bias-corrected
-- moments kept per parameter row in ddx's state tables. Columns named in
-- no_decay (nanoGPT: biases and LayerNorm gains) get no weight decay.
-- state_name names the training run (default: one run per set of parameter
-- columns). Returns the step number, the gradient's global norm before
-- clipping, the learning rate used and the loss before the step.
CREATE FUNCTION _ddx.ddx_adamw_step(loss_sql text, params text[], lr float8,
                                    beta1 float8 DEFAULT 0.9, beta2 float8 DEFAULT 0.999, eps float8 DEFAULT 1e-8,
                                    weight_decay float8 DEFAULT NULL, no_decay text[] DEFAULT '{}',
                                    max_grad_norm float8 DEFAULT NULL, state_name text DEFAULT NULL,
                                    decoupled boolean DEFAULT true,
                                    OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE sql AS $$
  SELECT * FROM _ddx.optimizer_step(CASE WHEN decoupled IS NOT FALSE THEN 'adamw' ELSE 'adam' END, loss_sql, params,
                                   lr, beta1, beta2, eps,
                                   coalesce(weight_decay, CASE WHEN decoupled IS NOT FALSE THEN 0.01 ELSE 0 END),
                                   no_decay, max_grad_norm, 0, 0, false, state_name)
$$;
CREATE FUNCTION ddx_adamw_step(loss_sql text, params text[], lr float8,
                               beta1 float8 DEFAULT 0.9, beta2 float8 DEFAULT 0.999, eps float8 DEFAULT 1e-8,
                               weight_decay float8 DEFAULT NULL, no_decay text[] DEFAULT '{}',
                               max_grad_norm float8 DEFAULT NULL, state_name text DEFAULT NULL,
                               decoupled boolean DEFAULT true,
                               OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ddx_sgd_step: torch.optim.SGD (momentum, dampening, Nesterov, L2 weight
-- decay; PyTorch's defaults) after one backward pass, with optional
-- global-norm clipping. Momentum buffers are kept per parameter row in ddx's
-- state tables (none without momentum).
CREATE FUNCTION _ddx.ddx_sgd_step(loss_sql text, params text[], lr float8, momentum float8 DEFAULT 0,
                                  dampening float8 DEFAULT 0, weight_decay float8 DEFAULT 0,
                                  nesterov boolean DEFAULT false, max_grad_norm float8 DEFAULT NULL,
                                  state_name text DEFAULT NULL, no_decay text[] DEFAULT '{}',
                                  OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE sql AS $$
  SELECT * FROM _ddx.optimizer_step('sgd', loss_sql, params, lr, 0.9, 0.999, 0, weight_decay, no_decay,
                                   max_grad_norm, momentum, dampening, nesterov, state_name)
$$;
CREATE FUNCTION ddx_sgd_step(loss_sql text, params text[], lr float8, momentum float8 DEFAULT 0,
                             dampening float8 DEFAULT 0, weight_decay float8 DEFAULT 0,
                             nesterov boolean DEFAULT false, max_grad_norm float8 DEFAULT NULL,
                             state_name text DEFAULT NULL, no_decay text[] DEFAULT '{}',
                             OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- --- schedules -------------------------------------------------------------

-- Learning-rate schedules are ordinary tables (step int PRIMARY KEY, lr),
-- one row per step from step 0; _ddx.schedule_table writes one from an
-- array, in the current schema. A table of that name that is not a ddx
-- schedule is left alone (42P07); a ddx schedule is rewritten in place.
CREATE FUNCTION _ddx.schedule_table(name text, lrs float8[]) RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
  q text;
  t regclass;
  bad int;
BEGIN
  IF name IS NULL THEN
    RAISE EXCEPTION 'the name of a schedule must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT min(o - 1) INTO bad FROM unnest(lrs) WITH ORDINALITY AS u(lr, o) WHERE NOT _ddx.finite(lr) OR lr < 0;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'schedule "%" would have learning rate % at step %', name, lrs[bad + 1], bad
      USING ERRCODE = '22023', DETAIL = 'A learning rate is a finite number, at least 0.';
  END IF;
  q := quote_ident(current_schema()) || '.' || quote_ident(name);
  t := to_regclass(q);
  IF t IS NULL THEN
    EXECUTE format('CREATE TABLE %s (step int PRIMARY KEY, lr float8 NOT NULL)', q);
    t := q::regclass;
    EXECUTE format('COMMENT ON TABLE %s IS %L', t, 'ddx learning-rate schedule');
  ELSIF coalesce(obj_description(t, 'pg_class'), '') <> 'ddx learning-rate schedule' THEN
    RAISE EXCEPTION 'relation % already exists and is not a ddx schedule', t
      USING ERRCODE = '42P07', HINT = 'Give the schedule another name.';
  ELSE
    EXECUTE format('DELETE FROM %s', t);
  END IF;
  EXECUTE format('INSERT INTO %s SELECT o - 1, lr FROM unnest($1) WITH ORDINALITY AS u(lr, o)', t) USING lrs;
  RETURN t;
END $$;

-- A schedule's length or other count, refused where NULL or below `at_least`.
CREATE FUNCTION _ddx.check_count(name text, value int, at_least int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF value IS NULL OR value < at_least THEN
    RAISE EXCEPTION 'invalid value for %: %', name, coalesce(value::text, 'NULL')
      USING ERRCODE = CASE WHEN value IS NULL THEN '22004' ELSE '22023' END,
            DETAIL = format('%s is a whole number, at least %s.', name, at_least);
  END IF;
END $$;

-- nanoGPT's get_lr: linear warmup, cosine decay to min_lr at decay_steps,
-- min_lr after; `steps` rows (steps 0 .. steps - 1; by default
-- decay_steps + 2 rows). A run of N steps needs N rows.
CREATE FUNCTION _ddx.ddx_schedule_warmup_cosine(name text, warmup_steps int, decay_steps int, max_lr float8,
                                                min_lr float8, steps int DEFAULT NULL)
RETURNS regclass LANGUAGE plpgsql AS $$
BEGIN
  PERFORM _ddx.check_count('warmup_steps', warmup_steps, 0);
  PERFORM _ddx.check_count('decay_steps', decay_steps, warmup_steps + 1);
  PERFORM _ddx.check_count('steps', coalesce(steps, decay_steps + 2), 0);
  RETURN _ddx.schedule_table(name, ARRAY(
    SELECT CASE WHEN it < warmup_steps THEN max_lr * (it + 1) / (warmup_steps + 1)
                WHEN it > decay_steps THEN min_lr
                ELSE min_lr + 0.5 * (1 + cos(pi() * (it - warmup_steps)::float8 / (decay_steps - warmup_steps)))
                              * (max_lr - min_lr) END
      FROM generate_series(0, coalesce(steps, decay_steps + 2) - 1) it ORDER BY it));
END $$;

-- More schedules as tables of `steps` rows: a constant rate, PyTorch's
-- StepLR and ExponentialLR.
CREATE FUNCTION _ddx.ddx_schedule_constant(name text, lr float8, steps int) RETURNS regclass
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM _ddx.check_count('steps', steps, 0);
  RETURN _ddx.schedule_table(name, array_fill(lr, ARRAY[steps]));
END $$;

CREATE FUNCTION _ddx.ddx_schedule_step(name text, lr float8, step_size int, gamma float8, steps int) RETURNS regclass
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM _ddx.check_count('step_size', step_size, 1);
  PERFORM _ddx.check_count('steps', steps, 0);
  RETURN _ddx.schedule_table(name, ARRAY(SELECT lr * gamma ^ (it / step_size) FROM generate_series(0, steps - 1) it
                                          ORDER BY it));
END $$;

CREATE FUNCTION _ddx.ddx_schedule_exponential(name text, lr float8, gamma float8, steps int) RETURNS regclass
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM _ddx.check_count('steps', steps, 0);
  RETURN _ddx.schedule_table(name, ARRAY(SELECT lr * gamma ^ it FROM generate_series(0, steps - 1) it ORDER BY it));
END $$;

CREATE FUNCTION ddx_schedule_warmup_cosine(name text, warmup_steps int, decay_steps int, max_lr float8,
                                           min_lr float8, steps int DEFAULT NULL) RETURNS regclass
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_schedule_constant(name text, lr float8, steps int) RETURNS regclass
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_schedule_step(name text, lr float8, step_size int, gamma float8, steps int) RETURNS regclass
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_schedule_exponential(name text, lr float8, gamma float8, steps int) RETURNS regclass
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

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
-- log_every steps.
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
BEGIN
  IF optimizer IS NULL OR optimizer NOT IN ('adamw', 'adam', 'sgd') THEN
    RAISE EXCEPTION 'unknown optimizer "%"', optimizer USING ERRCODE = '22023', HINT = 'Use adamw, adam or sgd.';
  END IF;
  IF loss_sql IS NULL THEN
    RAISE EXCEPTION 'loss_sql must not be NULL' USING ERRCODE = '22004',
      HINT = 'Pass the loss as a query returning one row and one number, e.g. ''SELECT l FROM loss''.';
  END IF;
  PERFORM _ddx.check_count('steps', steps, 0);
  PERFORM _ddx.check_count('log_every', log_every, 1);
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
    IF done % log_every = 0 OR done = first + 1 OR done = steps THEN
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

-- --- explain -----------------------------------------------------------------

-- The gradient programs behind a statement, as grad's calls carry them
-- (EXPLAIN VERBOSE shows them in the calls' arguments), in order of first
-- appearance: each program, and its variant over Citus tables in place (the
-- runner's ProgramText, src/pg/runner) or NULL.
CREATE FUNCTION _ddx.statement_programs(statement text, OUT program text, OUT in_place text) RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
  plan jsonb;
  progs text[];
  places text[];
BEGIN
  IF statement IS NULL THEN
    RAISE EXCEPTION 'the statement to explain must not be NULL' USING ERRCODE = '22004';
  END IF;
  EXECUTE 'EXPLAIN (VERBOSE, FORMAT JSON) ' || statement INTO plan;
  SELECT array_agg(q.prog ORDER BY q.first), array_agg(q.place ORDER BY q.first) INTO progs, places FROM (
      SELECT replace(m[1], '''''', '''') AS prog, replace(m[2], '''''', '''') AS place, min(o.n) AS first
        FROM jsonb_path_query(plan, 'strict $.**.Output[*]') WITH ORDINALITY o(v, n),
             regexp_matches(o.v #>> '{}', '_ddx\.grad_(?:at|key)\(''((?:[^'']|'''')*)''::text, '
                                          '(?:''((?:[^'']|'''')*)''::text|NULL::text)', 'g') m
       GROUP BY 1, 2) q;
  progs := coalesce(progs, '{}');
  IF progs = '{}' THEN
    RAISE EXCEPTION 'the statement has no gradient program'
      USING ERRCODE = '22023',
            DETAIL = 'ddx_explain shows the programs of the grad, vjp, hvp and ddx_value calls written in the '
                     'statement itself, not of those inside the functions it calls (ddx_adamw_step, ddx_train, '
                     'ddx_backward, a function of yours).',
            HINT = 'SET ddx.show_sql = on and take a step: an error then shows the step''s statement, which '
                   'ddx_explain takes; or explain the loss''s own statement: WITH loss AS (...) SELECT '
                   'grad(''loss'', w.val) FROM w.';
  END IF;
  RETURN QUERY SELECT * FROM unnest(progs, places);
END $$;

-- EXPLAIN (options) of a program as the runner plans it: its settings, and
-- over Citus tables the variant it runs (src/pg/runner). Not for direct use.
CREATE FUNCTION _ddx.explain_program(program text, in_place text, options text) RETURNS SETOF text
  AS 'MODULE_PATHNAME', 'ddx_explain_program' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ddx_explain: the gradient programs behind a statement, step by step: each
-- step's name, kind (forward: a saved relation; backward: a cotangent or a
-- shared pass over a region) and SQL; with run_analyze, each step's rows and the
-- time until it was complete (ms, from the start of the program), measured by
-- running the program as the runner runs it (with every step stored: a
-- backward step that one later step reads is otherwise NOT MATERIALIZED,
-- planned inside its reader). Over Citus tables, Citus plans the program as
-- distributed subplans, not a plan node per step: rows and ms stay NULL
-- there, nothing runs, and ddx_explain_plan shows the subplans.
CREATE FUNCTION _ddx.ddx_explain(statement text, run_analyze boolean DEFAULT false)
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
      IF i = array_length(parts, 1) THEN  -- the last CTE and the final SELECT
        sql := split_part(parts[i], E'\nSELECT z.toid', 1);
      END IF;
      name := split_part(sql, ' ', 1);
      kind := CASE left(name, 1) WHEN 'f' THEN 'forward' WHEN 'b' THEN 'backward: cotangent'
                                 WHEN 'm' THEN 'backward: shared pass' ELSE 'forward' END;
      rows := NULL;
      ms := NULL;
      IF aplan IS NOT NULL THEN
        SELECT (n ->> 'Actual Rows')::float8, (n ->> 'Actual Total Time')::float8 INTO rows, ms
          FROM jsonb_path_query(aplan, 'strict $.**') n
         WHERE jsonb_typeof(n) = 'object' AND n ->> 'Subplan Name' = 'CTE ' || name
         LIMIT 1;
      END IF;
      RETURN NEXT;
    END LOOP;
  END LOOP;
END $$;

-- ddx_explain_plan: EXPLAIN of each gradient program behind a statement, as
-- the runner plans it (its planner settings; over Citus tables, the variant
-- that runs: in place or gathered), one row per line; with run_analyze, the
-- program runs (read-only) and the plan has its rows and times. On Citus it
-- shows where the work runs: each distributed subplan, its tasks and the
-- workers they ran on, and with run_analyze the bytes of each intermediate
-- result ("Intermediate Data Size"), which is what crosses the network.
CREATE FUNCTION _ddx.ddx_explain_plan(statement text, run_analyze boolean DEFAULT false)
RETURNS TABLE (program int, line text)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  p int := 0;
BEGIN
  FOR r IN SELECT * FROM _ddx.statement_programs(statement) LOOP
    p := p + 1;
    program := p;
    FOR line IN SELECT * FROM _ddx.explain_program(r.program, r.in_place,
                                                   CASE WHEN run_analyze THEN 'ANALYZE' ELSE 'COSTS' END) LOOP
      RETURN NEXT;
    END LOOP;
  END LOOP;
END $$;
CREATE FUNCTION ddx_explain(statement text, run_analyze boolean DEFAULT false)
RETURNS TABLE (program int, step int, name text, kind text, rows double precision, ms double precision, sql text)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION ddx_explain_plan(statement text, run_analyze boolean DEFAULT false)
RETURNS TABLE (program int, line text)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

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

-- --- what \df+ and \dv+ say --------------------------------------------------

COMMENT ON FUNCTION grad("any", "any") IS
  'grad(loss, t.col): the derivative of the loss (a CTE or view named as a string, or a scalar subquery) with respect to column col of this row of table t';
COMMENT ON FUNCTION vjp("any", "any", "any") IS
  'vjp(out, cotangent, t.col): the gradient of the sum over out''s rows of each value times its cotangent (relations named as strings), at this row of t';
COMMENT ON FUNCTION jvp("any", VARIADIC text[]) IS
  'jvp(o.v, ''w.val'', ''tangent_w'', ...): forward mode, the derivative of column v of this row of o along the tangent relations';
COMMENT ON FUNCTION hvp("any", "any", VARIADIC text[]) IS
  'hvp(loss, t.col, ''w.val'', ''tangent_w'', ...): the Hessian of the loss times the tangents, at this row of t';
COMMENT ON FUNCTION ddx_value("any") IS
  'ddx_value(loss): the value of a loss, from the same pass as the statement''s grad calls of it (alone: under ddx''s plan settings)';
COMMENT ON FUNCTION stop_gradient(float8) IS 'stop_gradient(x): x, held constant by every derivative (of every order)';
COMMENT ON FUNCTION ddx_stop_gradient(float8) IS 'ddx_stop_gradient(x): x, held constant by every derivative (alias of stop_gradient)';
COMMENT ON FUNCTION ddx_gradcheck(text, regclass, name, float8, int, int) IS
  'ddx_gradcheck(loss_sql, table, column [, eps, sample, step]): ddx''s gradient against central finite differences, row by row; step binds $1 of a training loss';
COMMENT ON FUNCTION ddx_backward(text, text[], text[]) IS
  'ddx_backward(loss_sql, params [, grad_tables]): one backward pass into a gradient table per parameter table (<table>_grad by default)';
COMMENT ON FUNCTION ddx_adamw_step(text, text[], float8, float8, float8, float8, float8, text[], float8, text, boolean) IS
  'ddx_adamw_step(loss_sql, params, lr, ...): one torch.optim.AdamW step (Adam with decoupled => false) of a training run, in the caller''s transaction';
COMMENT ON FUNCTION ddx_sgd_step(text, text[], float8, float8, float8, float8, boolean, float8, text, text[]) IS
  'ddx_sgd_step(loss_sql, params, lr, ...): one torch.optim.SGD step (momentum, dampening, Nesterov, weight decay) of a training run, in the caller''s transaction';
COMMENT ON PROCEDURE ddx_train(text, text[], int, regclass, text, float8, text[], float8, float8, text, int, float8, float8,
                               float8, float8, boolean) IS
  'CALL ddx_train(loss_sql, params, steps, schedule, ...): trains a run until it has taken steps, committing each step (resumable), with progress NOTICEs every log_every steps';
COMMENT ON FUNCTION ddx_schedule_constant(text, float8, int) IS
  'ddx_schedule_constant(name, lr, steps): a learning-rate schedule table (step, lr) of steps rows, all lr';
COMMENT ON FUNCTION ddx_schedule_step(text, float8, int, float8, int) IS
  'ddx_schedule_step(name, lr, step_size, gamma, steps): torch''s StepLR as a schedule table of steps rows';
COMMENT ON FUNCTION ddx_schedule_exponential(text, float8, float8, int) IS
  'ddx_schedule_exponential(name, lr, gamma, steps): torch''s ExponentialLR as a schedule table of steps rows';
COMMENT ON FUNCTION ddx_schedule_warmup_cosine(text, int, int, float8, float8, int) IS
  'ddx_schedule_warmup_cosine(name, warmup_steps, decay_steps, max_lr, min_lr [, steps]): nanoGPT''s get_lr as a schedule table';
COMMENT ON FUNCTION ddx_run_reset(text) IS 'ddx_run_reset(run): the run starts again from step 0 (its state, log and step count forgotten)';
COMMENT ON FUNCTION ddx_run_drop(text) IS 'ddx_run_drop(run): the run, its optimizer state and its log, dropped';
COMMENT ON FUNCTION ddx_run_copy(text, text) IS 'ddx_run_copy(source, target): a new run that continues from where source is';
COMMENT ON FUNCTION ddx_state(text, text) IS
  'ddx_state(run, ''table.column''): the optimizer state a run keeps per parameter row (key as jsonb, step, m, v, buf)';
COMMENT ON FUNCTION ddx_explain(text, boolean) IS
  'ddx_explain(statement [, run_analyze]): the gradient programs behind a statement, step by step (with rows and times)';
COMMENT ON FUNCTION ddx_explain_plan(text, boolean) IS
  'ddx_explain_plan(statement [, run_analyze]): EXPLAIN (ANALYZE) of each gradient program behind a statement, as ddx plans it';
COMMENT ON VIEW ddx_runs IS
  'ddx training runs the current role may see: step, parameters, last loss, and while one trains, its process, rate and ETA';
COMMENT ON VIEW ddx_train_log IS 'one row per step of every ddx training run the current role may see: loss, gradient norm, lr';

