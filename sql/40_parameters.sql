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
