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
