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
