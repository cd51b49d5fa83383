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
