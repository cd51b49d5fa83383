-- Dense execution (ddx.dense): Custom Scan (ddx dense) computes a loss and
-- its gradient on arrays where every relation of the loss is keyed by
-- integer columns, and ddx's SQL program runs where the node refuses (a
-- NULL, two rows with the same keys, memory past work_mem x
-- hash_mem_multiplier, a float error). Gradients against closed forms in
-- plain SQL (values in eighths: the sums are exact, so every error is 0)
-- and central differences; which path ran, from ddx_explain_plan, which
-- plans a program as the runner runs it.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA dense;
SET search_path = dense, public;
\set VERBOSITY terse
SET ddx.dense = on;
CREATE TABLE x (i int, f int, val float8, PRIMARY KEY (i, f));
CREATE TABLE w (f int, j int, val float8, PRIMARY KEY (f, j));
INSERT INTO x SELECT i, f, ((i * 5 + f * 3) % 7 - 3) / 8.0 FROM generate_series(1, 6) i, generate_series(1, 3) f;
INSERT INTO w SELECT f, j, ((f * 3 + j) % 5 - 2) / 8.0 FROM generate_series(1, 3) f, generate_series(1, 4) j;
-- loss = 1/2 sum z^2 over z = x w; dloss/dw[f, j] = sum_i x[i, f] z[i, j]
CREATE VIEW z AS SELECT x.i, w.j, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.i, w.j;
CREATE VIEW loss AS SELECT sum(z * z) / 2 AS l FROM z;
CREATE VIEW want_w AS
  SELECT w.f, w.j, (SELECT sum(x.val * z.z) FROM x JOIN z ON z.i = x.i WHERE x.f = w.f AND z.j = w.j) AS g FROM w;
-- the dense node's lines of a statement's plan, as the runner runs it
CREATE FUNCTION dense_plan(statement text) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT regexp_replace(line, '\s+\((cost|actual).*$', '') FROM ddx_explain_plan(statement, true)
   WHERE line ~ 'ddx dense|Dense (Inputs|Products|Refused)'
$$;
CREATE FUNCTION w_error() RETURNS TABLE (rows bigint, max_error float8) LANGUAGE sql AS $$
  SELECT count(*), max(abs(g.g - want_w.g)) FROM (SELECT f, j, grad('dense.loss', w.val) AS g FROM dense.w) g
    JOIN dense.want_w USING (f, j)
$$;

-- a matrix product: the node runs it as one
SELECT * FROM dense_plan($$SELECT grad('loss', w.val) FROM w$$);
SELECT * FROM w_error();
SELECT ddx_value('loss') = (SELECT l FROM loss) AS loss_agrees;
-- the gradient of x: dloss/dx[i, f] = sum_j z[i, j] w[f, j]
SELECT count(*) AS rows,
       max(abs(grad('loss', x.val) - (SELECT sum(z.z * w.val) FROM z JOIN w ON w.j = z.j WHERE z.i = x.i AND w.f = x.f)))
         AS max_error
  FROM x;

-- both tables' gradients in one statement: one program, two parameters
SELECT (SELECT max(abs(grad('loss', w.val) - want_w.g)) FROM w JOIN want_w USING (f, j)) AS w_error,
       (SELECT max(abs(grad('loss', x.val) - (SELECT sum(z.z * w.val) FROM z JOIN w ON w.j = z.j
                                               WHERE z.i = x.i AND w.f = x.f))) FROM x) AS x_error;

-- missing rows: a cell without a row joins nothing, as in SQL
DELETE FROM x WHERE i = 2 AND f = 2;
DELETE FROM w WHERE f = 3 AND j = 1;
SELECT * FROM dense_plan($$SELECT grad('loss', w.val) FROM w$$);
SELECT * FROM w_error();

-- a NULL value: the node refuses, the SQL program runs (sum skips the NULL
-- product, as the closed form's does)
UPDATE x SET val = NULL WHERE i = 3 AND f = 1;
SELECT * FROM dense_plan($$SELECT grad('loss', w.val) FROM w$$);
SELECT * FROM w_error();
UPDATE x SET val = 0.25 WHERE i = 3 AND f = 1;

-- two rows with the same keys (no primary key): refused
CREATE TABLE xd (i int, f int, val float8);
INSERT INTO xd SELECT * FROM x;
INSERT INTO xd VALUES (1, 1, 0.5);
CREATE VIEW zd AS SELECT xd.i, w.j, sum(xd.val * w.val) AS z FROM xd JOIN w ON xd.f = w.f GROUP BY xd.i, w.j;
CREATE VIEW lossd AS SELECT sum(z * z) / 2 AS l FROM zd;
SELECT * FROM dense_plan($$SELECT grad('lossd', w.val) FROM w$$);
SELECT count(*) AS rows,
       max(abs(grad('lossd', w.val) -
               (SELECT sum(xd.val * zd.z) FROM xd JOIN zd ON zd.i = xd.i WHERE xd.f = w.f AND zd.j = w.j))) AS max_error
  FROM w;

-- a float error on a row (exp(-1500) underflows): the node refuses and
-- the SQL program raises it where PostgreSQL does
CREATE VIEW big AS SELECT sum(exp(x.val * 4000)) AS l FROM x;
SELECT * FROM dense_plan($$SELECT grad('big', x.val) FROM x$$);
SELECT grad('big', x.val) FROM x;
\echo :LAST_ERROR_SQLSTATE

-- memory past work_mem x hash_mem_multiplier: refused
CREATE TABLE bx (i int, f int, val float8, PRIMARY KEY (i, f));
INSERT INTO bx SELECT i, f, ((i * 5 + f * 3) % 7 - 3) / 8.0 FROM generate_series(1, 4000) i, generate_series(1, 3) f;
CREATE VIEW bz AS SELECT bx.i, w.j, sum(bx.val * w.val) AS z FROM bx JOIN w ON bx.f = w.f GROUP BY bx.i, w.j;
CREATE VIEW bloss AS SELECT sum(z * z) / 2 AS l FROM bz;
SET work_mem = 64;
SET hash_mem_multiplier = 1;
CREATE FUNCTION bw_error() RETURNS TABLE (rows bigint, max_error float8) LANGUAGE sql AS $$
  SELECT count(*), max(abs(grad('dense.bloss', w.val) -
                           (SELECT sum(bx.val * bz.z) FROM dense.bx JOIN dense.bz ON bz.i = bx.i
                             WHERE bx.f = w.f AND bz.j = w.j)))
    FROM dense.w
$$;
SELECT * FROM dense_plan($$SELECT grad('bloss', w.val) FROM w$$);
SELECT * FROM bw_error();
RESET work_mem;
RESET hash_mem_multiplier;
SELECT * FROM dense_plan($$SELECT grad('bloss', w.val) FROM w$$);
SELECT * FROM bw_error();
-- few rows, arrays past the limit: the Gram matrix of 1000 rows is 8 MB
CREATE TABLE gx (i int PRIMARY KEY, val float8);
INSERT INTO gx SELECT i, (i % 5 - 2) / 8.0 FROM generate_series(1, 1000) i;
CREATE VIEW ggloss AS SELECT sum(g * g) AS l FROM (SELECT a.i, b.i AS k, sum(a.val * b.val) AS g FROM gx a, gx b
                                                  GROUP BY a.i, b.i) gram;
SET work_mem = '1MB';
SELECT * FROM dense_plan($$SELECT grad('ggloss', gx.val) FROM gx$$);
-- dloss/dx[i] = 4 x[i] sum_k x[k]^2 (G = x x', its square summed)
SELECT count(*) AS rows, max(abs(grad('ggloss', gx.val) - 4 * gx.val * (SELECT sum(val * val) FROM gx))) AS max_error
  FROM gx;
RESET work_mem;

-- one table read twice (a Gram matrix): loss = sum_ik G[i, k]^2 with
-- G = x x'; dloss/dx[i, f] = 4 sum_k G[i, k] x[k, f]
CREATE VIEW gram AS SELECT a.i, b.i AS k, sum(a.val * b.val) AS g FROM x a JOIN x b ON a.f = b.f GROUP BY a.i, b.i;
CREATE VIEW gloss AS SELECT sum(g * g) AS l FROM gram;
SELECT * FROM dense_plan($$SELECT grad('gloss', x.val) FROM x$$);
SELECT count(*) AS rows,
       max(abs(grad('gloss', x.val) - 4 * (SELECT sum(gram.g * b.val) FROM gram JOIN x b ON b.i = gram.k
                                            WHERE gram.i = x.i AND b.f = x.f))) AS max_error
  FROM x;

-- columns beside the model's (text, a timestamp, a float8 that is NULL)
-- and an aggregate the loss does not read (a count): not read, so no
-- refusal; the same closed form as the plain tables'
CREATE TABLE xw (i int, f int, val float8, note text, at timestamptz, spare float8, PRIMARY KEY (i, f));
INSERT INTO xw SELECT i, f, val, 'row ' || i, now(), NULL FROM x;
CREATE VIEW lossw AS SELECT sum(z * z) / 2 AS l FROM (SELECT xw.i, w.j, sum(xw.val * w.val) AS z, count(*) AS n
                                                      FROM xw JOIN w ON xw.f = w.f GROUP BY xw.i, w.j) q;
SELECT * FROM dense_plan($$SELECT grad('lossw', w.val) FROM w$$);
SELECT count(*) AS rows, max(abs(grad('lossw', w.val) - want_w.g)) AS max_error FROM w JOIN want_w USING (f, j);

-- a parameter table with a child: rows of both, told apart by their
-- tableoid (the first row of each is at ctid (0,1))
CREATE TABLE wp (f int, j int, val float8);
CREATE TABLE wc () INHERITS (wp);
INSERT INTO wp SELECT f, j, val FROM w WHERE f < 3;
INSERT INTO wc SELECT f, j, val FROM w WHERE f = 3;
CREATE VIEW zp AS SELECT x.i, wp.j, sum(x.val * wp.val) AS z FROM x JOIN wp ON x.f = wp.f GROUP BY x.i, wp.j;
CREATE VIEW lossp AS SELECT sum(z * z) / 2 AS l FROM zp;
SELECT * FROM dense_plan($$SELECT grad('lossp', wp.val) FROM wp$$);
SELECT wp.tableoid::regclass AS tab, count(*) AS rows,
       max(abs(grad('lossp', wp.val) -
               (SELECT sum(x.val * zp.z) FROM x JOIN zp ON zp.i = x.i WHERE x.f = wp.f AND zp.j = wp.j))) AS max_error
  FROM wp GROUP BY 1 ORDER BY 1;

-- a cached plan of the calling statement, executed again after the
-- parameters change, and inside a transaction that changes them: the
-- program reads the rows the statement sees
PREPARE gw AS SELECT count(*) AS rows, max(abs(g.g - want_w.g)) AS max_error
  FROM (SELECT f, j, grad('loss', w.val) AS g FROM w) g JOIN want_w USING (f, j);
EXECUTE gw;
UPDATE w SET val = val * 2;
EXECUTE gw;
BEGIN;
UPDATE w SET val = -val WHERE j = 2;
EXECUTE gw;
ROLLBACK;
EXECUTE gw;

-- a loss whose text stays the same while its columns' types change is not
-- the same loss: the program compiled for integer keys must not read
-- float8 ones (that read 1.25 as 1). A statement parsed again compiles the
-- loss again (its types differ), and the runner checks the columns' types
-- before it runs a kept program.
CREATE TABLE tx (i int, f int, val float8);
CREATE TABLE tw (f int PRIMARY KEY, val float8);
INSERT INTO tx SELECT i, f, (i - f) / 8.0 FROM generate_series(1, 4) i, generate_series(1, 3) f;
INSERT INTO tw SELECT f, f / 4.0 FROM generate_series(1, 3) f;
CREATE VIEW tl AS SELECT sum(p * p) AS l FROM (SELECT tx.i, sum(tx.val * tw.val) AS p FROM tx JOIN tw ON tx.f = tw.f
                                               GROUP BY tx.i) q;
CREATE VIEW tl_want AS SELECT tw.f, (SELECT coalesce(sum(2 * p.p * tx.val), 0) FROM tx JOIN (
    SELECT tx.i, sum(tx.val * tw2.val) AS p FROM tx JOIN tw tw2 ON tx.f = tw2.f GROUP BY tx.i) p ON p.i = tx.i
  WHERE tx.f = tw.f) AS g FROM tw;
PREPARE gt AS SELECT f::float8 AS f, grad('tl', tw.val) AS g FROM tw;
CREATE TEMP TABLE got AS EXECUTE gt;
SELECT count(*) AS rows, max(abs(got.g - tl_want.g)) AS max_error FROM got JOIN tl_want USING (f);
SELECT * FROM dense_plan($$SELECT grad('tl', tw.val) FROM tw$$);
DROP VIEW tl, tl_want;
ALTER TABLE tx ALTER f TYPE float8;
ALTER TABLE tw ALTER f TYPE float8;
UPDATE tx SET f = f + 0.25 WHERE i > 2;
CREATE VIEW tl AS SELECT sum(p * p) AS l FROM (SELECT tx.i, sum(tx.val * tw.val) AS p FROM tx JOIN tw ON tx.f = tw.f
                                               GROUP BY tx.i) q;
CREATE VIEW tl_want AS SELECT tw.f, (SELECT coalesce(sum(2 * p.p * tx.val), 0) FROM tx JOIN (
    SELECT tx.i, sum(tx.val * tw2.val) AS p FROM tx JOIN tw tw2 ON tx.f = tw2.f GROUP BY tx.i) p ON p.i = tx.i
  WHERE tx.f = tw.f) AS g FROM tw;
DROP TABLE got;
CREATE TEMP TABLE got AS EXECUTE gt;
SELECT count(*) AS rows, max(abs(got.g - tl_want.g)) AS max_error FROM got JOIN tl_want USING (f);
SELECT count(*) AS rows, max(abs(grad('tl', tw.val) - tl_want.g)) AS max_error FROM tw JOIN tl_want USING (f);
SELECT * FROM dense_plan($$SELECT grad('tl', tw.val) FROM tw$$);

-- a loss whose CTEs each read the one before twice: a DAG of 22 levels,
-- each relation one Rel read by two readers. Keeping its program is linear
-- in its relations (a review found the types' signature spelled each
-- relation once per path to it: 2^22 times, minutes and gigabytes, with
-- ddx.dense off too). PREPARE parses it: the hook runs, nothing executes.
CREATE TABLE w2 (i int PRIMARY KEY, val float8);
SELECT format('PREPARE chain AS WITH c0 AS (SELECT i, val AS v FROM dense.w2), %s, '
              'loss AS (SELECT sum(v) AS l FROM c22) SELECT grad(''loss'', w2.val) FROM dense.w2',
              string_agg(format('c%s AS (SELECT a.i, a.v * b.v AS v FROM c%s a JOIN c%s b ON a.i = b.i)', n, n - 1, n - 1),
                         ', ' ORDER BY n)) AS chain
  FROM generate_series(1, 22) n \gset
SELECT clock_timestamp() AS t0 \gset
:chain;
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS parsed_quickly;
DEALLOCATE chain;

-- against central differences too
SELECT rows_checked, max_rel_error < 1e-6 AS close FROM ddx_gradcheck('SELECT l FROM dense.loss', 'dense.w', 'val');

-- privileges: the node's scans are the statement's, checked as any
CREATE ROLE regress_ddx_dense;
GRANT USAGE ON SCHEMA dense TO regress_ddx_dense;
GRANT SELECT ON w, z, loss TO regress_ddx_dense;
SET ROLE regress_ddx_dense;
SELECT grad('loss', w.val) FROM w;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- with ddx.dense off: the SQL program, no node
SET ddx.dense = off;
SELECT count(*) AS node_lines FROM dense_plan($$SELECT grad('loss', w.val) FROM w$$);
SELECT * FROM w_error();

DROP OWNED BY regress_ddx_dense;
DROP ROLE regress_ddx_dense;
DROP SCHEMA dense CASCADE;
