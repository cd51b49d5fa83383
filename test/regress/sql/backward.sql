-- ddx_backward: one backward pass, one gradient table per parameter table,
-- keyed by its primary key. Closed forms as the oracle.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA backward;
SET search_path = backward, public;
\set VERBOSITY terse
CREATE TABLE w1 (i int, j int, val float8, PRIMARY KEY (i, j));
CREATE TABLE b1 (j int PRIMARY KEY, val float8);
INSERT INTO w1 SELECT i, j, i - j * 0.5 FROM generate_series(1, 2) i, generate_series(1, 3) j;
INSERT INTO b1 SELECT j, j * 0.25 FROM generate_series(1, 3) j;
-- loss = Σ w1² · i + Σ_j b1_j³ · (Σ_i w1_ij)  =>  ∂w1_ij = 2 w1_ij i + b1_j³,  ∂b1_j = 3 b1_j² Σ_i w1_ij
SELECT * FROM ddx_backward($$
  SELECT (SELECT sum(val * val * i) FROM w1) + (SELECT sum(b1.val ^ 3 * s.s) FROM b1 JOIN (SELECT j, sum(val) AS s FROM w1 GROUP BY j) s ON s.j = b1.j)
$$, ARRAY['w1.val', 'backward.b1.val']);
SELECT g.i, g.j, g.grad, abs(g.grad - (2 * w.val * w.i + b.val ^ 3)) < 1e-12 AS ok
  FROM w1_grad g JOIN w1 w USING (i, j) JOIN b1 b ON b.j = g.j ORDER BY 1, 2;
SELECT g.j, g.grad, abs(g.grad - 3 * b.val ^ 2 * (SELECT sum(val) FROM w1 WHERE j = g.j)) < 1e-12 AS ok
  FROM b1_grad g JOIN b1 b USING (j) ORDER BY 1;
-- a second call refills the same tables (b1's gradient is 0: it is read,
-- times 0); a loss that does not read b1 at all has no gradient of it
UPDATE w1 SET val = val + 1;
SELECT param, grad_rows FROM ddx_backward($$SELECT sum(val * val * i) FROM w1$$, ARRAY['w1.val', 'b1.val']);
\echo :LAST_ERROR_SQLSTATE
SELECT param, grad_rows FROM ddx_backward($$SELECT sum(val * val * i) + 0 * (SELECT sum(val) FROM b1) FROM w1$$,
                                          ARRAY['w1.val', 'b1.val']);
SELECT count(*) FILTER (WHERE abs(g.grad - 2 * w.val * w.i) < 1e-12) AS right, count(*) FROM w1_grad g JOIN w1 w USING (i, j);
SELECT j, grad FROM b1_grad ORDER BY j;
-- no primary key: one row is one parameter (a gradient table without key); more is an error
CREATE TABLE nopk (val float8);
INSERT INTO nopk VALUES (3);
SELECT * FROM ddx_backward($$SELECT sum(val * val) FROM nopk$$, ARRAY['nopk.val']);
SELECT grad FROM nopk_grad;
INSERT INTO nopk VALUES (4);
SELECT * FROM ddx_backward($$SELECT sum(val) FROM nopk$$, ARRAY['nopk.val']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ddx_backward($$SELECT sum(val) FROM nopk$$, ARRAY['val']);
\echo :LAST_ERROR_SQLSTATE
