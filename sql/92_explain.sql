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
-- shared pass over a region) and SQL; with run_analyze, each step's rows and its
-- own time (ms: not the time of the steps it reads, so that the steps' times add
-- up to no more than the program's), measured by
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
