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
