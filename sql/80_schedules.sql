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
