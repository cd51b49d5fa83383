-- A table joined on every column of a unique index matches at most one of
-- its rows: the backward then sums the other side's contributions by rid
-- no more (an MLP's hidden layer tanh(hp.z + b.val), b keyed by its unit).
-- Gradients against central finite differences (ddx_gradcheck); only
-- indexes that hold in every snapshot count: not a deferrable, partial or
-- expression one, nor a parent's over its children.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA uniq;
SET search_path = uniq, public;
\set VERBOSITY terse
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE w (f int, j int, val float8, PRIMARY KEY (f, j));
INSERT INTO x SELECT s, f, sin(s * 3 + f) FROM generate_series(1, 6) s, generate_series(1, 3) f;
INSERT INTO w SELECT f, j, cos(f * 2 + j) / 2 FROM generate_series(1, 3) f, generate_series(1, 4) j;
-- the bias tables: keyed by a primary key, by nothing, by a deferrable, a
-- partial and an expression unique index, by a parent's index over a child
CREATE TABLE b_pk (j int PRIMARY KEY, val float8);
CREATE TABLE b_none (j int, val float8);
CREATE TABLE b_deferred (j int, val float8, UNIQUE (j) DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE b_partial (j int, val float8);
CREATE UNIQUE INDEX ON b_partial (j) WHERE j > 0;
CREATE TABLE b_expr (j int, val float8);
CREATE UNIQUE INDEX ON b_expr ((j + 0));
CREATE TABLE b_parent (j int PRIMARY KEY, val float8);
CREATE TABLE b_child () INHERITS (b_parent);
INSERT INTO b_pk SELECT j, 0.1 * j - 0.2 FROM generate_series(1, 4) j;
INSERT INTO b_none SELECT * FROM b_pk;
INSERT INTO b_deferred SELECT * FROM b_pk;
INSERT INTO b_partial SELECT * FROM b_pk;
INSERT INTO b_expr SELECT * FROM b_pk;
INSERT INTO b_parent SELECT * FROM b_pk WHERE j <= 2;
INSERT INTO b_child SELECT * FROM b_pk WHERE j >= 2;  -- j = 2 twice under the parent

-- The loss over bias table `b`: its program's pass over the hidden layer, and
-- whether it still sums the layer's rows by rid (GROUPING SETS) or reads
-- them as they are.
CREATE FUNCTION loss_sql(b text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT sum(h.a * h.a * h.j) FROM (SELECT hp.s, hp.j, tanh(hp.z + b.val) AS a FROM '
                '(SELECT x.s, w.j, sum(x.val * w.val) AS z FROM uniq.x x JOIN uniq.w w ON w.f = x.f GROUP BY x.s, w.j) hp '
                'JOIN uniq.%I b ON b.j = hp.j) h', b)
$$;
CREATE FUNCTION check_bias(b text) RETURNS TABLE (b text, summed_by_rid boolean, w_grad text, b_grad text) LANGUAGE sql AS $$
  SELECT b,
         (SELECT bool_or(e.sql ~ 'GROUPING SETS')
            FROM ddx_explain(format('WITH loss AS (%s) SELECT grad(''loss'', t.val) FROM uniq.w t '
                                    'UNION ALL SELECT grad(''loss'', t.val) FROM uniq.%I t', uniq.loss_sql(b), b)) e),
         (SELECT format('%s rows, %s', rows_checked, CASE WHEN max_rel_error < 1e-6 OR max_abs_error < 1e-8 THEN 'ok'
                                                       ELSE 'FAILED: ' || max_rel_error END)
            FROM ddx_gradcheck(uniq.loss_sql(b), 'uniq.w', 'val')),
         (SELECT format('%s rows, %s', rows_checked, CASE WHEN max_rel_error < 1e-6 OR max_abs_error < 1e-8 THEN 'ok'
                                                       ELSE 'FAILED: ' || max_rel_error END)
            FROM ddx_gradcheck(uniq.loss_sql(b), format('uniq.%I', b), 'val'))
$$;
SELECT c.* FROM unnest(ARRAY['b_pk', 'b_none', 'b_deferred', 'b_partial', 'b_expr', 'b_parent']) b, check_bias(b) c;
-- A deferred constraint holds only at commit: two rows of one unit inside
-- the transaction, each summed into the hidden layer's unit.
BEGIN;
INSERT INTO b_deferred VALUES (3, 0.5);
SELECT * FROM check_bias('b_deferred');
ROLLBACK;
