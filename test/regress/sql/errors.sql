-- Refusals: an ERROR with a fitting SQLSTATE, the position of the call, and
-- the session usable afterwards with nothing left behind.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA errors;
SET search_path = errors, public;
\set VERBOSITY terse
CREATE TABLE w (f int, val float8, name text, n numeric);
INSERT INTO w VALUES (1, 1.0, 'a', 1), (2, 2.0, 'b', 2);
CREATE TABLE x (f int, val float8);
INSERT INTO x VALUES (1, 3.0), (2, 4.0);
-- unknown loss, not a CTE or view, wrong shape
SELECT grad('nope', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
SELECT grad('x', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT 1.0::float8 a, 2.0::float8 b) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT 'a'::text) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT w.val FROM w) SELECT grad('loss', val) FROM w;   -- two rows
\echo :LAST_ERROR_SQLSTATE
SELECT grad(42, val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- LATERAL beyond unpivoting a row
WITH loss AS (SELECT sum(q.v) FROM w, LATERAL (SELECT w.val * x.val AS v FROM x WHERE x.f = w.f) q) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(u.v) FROM w LEFT JOIN LATERAL (VALUES (w.val)) AS u(v) ON u.v > 1) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH a AS (SELECT ARRAY[val, val] AS arr FROM w),
     loss AS (SELECT sum(u.v) FROM a, unnest(a.arr) AS u(v)) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- parameter not a column of a table, or not float
WITH loss AS (SELECT sum(val) FROM w) SELECT grad('loss', val * 2) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(val) FROM w), s AS (SELECT val FROM w) SELECT grad('loss', s.val) FROM s;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(val) FROM w) SELECT grad('loss', f) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(val) FROM w) SELECT grad('loss', n) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(val) FROM w) SELECT grad('loss', name) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- constructs without a rule where gradient reaches them
WITH loss AS (SELECT sum(g.s) FROM (SELECT w.val AS k, sum(x.val) s FROM w JOIN x ON w.f = x.f GROUP BY w.val) g)
SELECT grad('loss', val) FROM w;   -- a GROUP BY key that depends on the parameter ...
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(g.k * g.s) FROM (SELECT w.val AS k, sum(x.val) s FROM w JOIN x ON w.f = x.f GROUP BY w.val) g)
SELECT grad('loss', val) FROM w;   -- ... and is used
\echo :LAST_ERROR_SQLSTATE
CREATE AGGREGATE fsum(float8) (SFUNC = float8pl, STYPE = float8);
WITH loss AS (SELECT fsum(val) FROM w) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(round(val)) FROM w) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(val * random()) FROM w) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(s) FROM (SELECT percent_rank() OVER (ORDER BY f) * val AS s FROM w) t) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH RECURSIVE r(i, v) AS (SELECT 1, 1.0::float8 UNION ALL SELECT i + 1, v FROM r WHERE i < 3),
     loss AS (SELECT sum(v) FROM r) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH d AS (DELETE FROM x RETURNING val), loss AS (SELECT sum(val) FROM d) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(a.val) FROM w a WHERE a.val > (SELECT avg(b.val) FROM w b WHERE b.f = a.f)) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum(val) FROM (SELECT val FROM w INTERSECT SELECT val FROM x) i) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- a statement parameter where the loss needs a constant (params.sql has the parameters that work)
PREPARE p(int) AS WITH loss AS (SELECT sum(s) FROM (SELECT sum(val) OVER (ORDER BY f ROWS $1 PRECEDING) AS s FROM w) q)
  SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- constructs the loss cannot contain are named as the user wrote them
WITH loss AS (SELECT sum((ARRAY[val, 2 * val])[1]) FROM w) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH loss AS (SELECT sum((ROW(val, f)::record = ROW(1.0::float8, 1))::int * val) FROM w) SELECT grad('loss', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
-- a refusal only where gradient reaches: the same constructs off the gradient path work
WITH loss AS (SELECT sum(val * (SELECT stddev(x.val) FROM x)) FROM w WHERE name = upper(name) OR f > 0)
SELECT f, round(grad('loss', val)::numeric, 12) FROM w ORDER BY f;
WITH loss AS (SELECT sum(g.s) FROM (SELECT round(w.val) AS k, sum(w.val) s FROM w GROUP BY round(w.val)) g)
SELECT f, grad('loss', val) FROM w ORDER BY f;
-- errors raised while the backward runs leave the transaction usable after ROLLBACK TO SAVEPOINT
BEGIN;
SAVEPOINT a;
WITH loss AS (SELECT sum(1 / (val - 1)) FROM w) SELECT grad('loss', val) FROM w;   -- division by zero in the forward
\echo :LAST_ERROR_SQLSTATE
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SELECT grad('nope', val) FROM w;
ROLLBACK TO SAVEPOINT b;
WITH loss AS (SELECT sum(val * val) FROM w) SELECT f, grad('loss', val) FROM w ORDER BY f;
COMMIT;
-- a row read in two places gets the sum of both places' gradients, summed
-- as sum(float8) sums: finite terms whose sum leaves float8's range are
-- PostgreSQL's overflow error (22003), and an exact sum otherwise
CREATE TABLE two_reads (id int PRIMARY KEY, val float8);
INSERT INTO two_reads VALUES (1, 1), (2, NULL);
WITH a AS (SELECT sum(val * 1e308) AS s FROM two_reads WHERE id = 1),
     b AS (SELECT sum((t.val - 1) * 1e308) AS s FROM two_reads t WHERE id = 1),
     loss AS (SELECT a.s + b.s AS l FROM a, b)
SELECT id, grad('loss', two_reads.val) FROM two_reads ORDER BY id;
\echo :LAST_ERROR_SQLSTATE
WITH a AS (SELECT sum(val * 1e307) AS s FROM two_reads WHERE id = 1),
     b AS (SELECT sum((t.val - 1) * 3e307) AS s FROM two_reads t),
     loss AS (SELECT a.s + b.s AS l FROM a, b)
SELECT id, grad('loss', two_reads.val) FROM two_reads ORDER BY id;
DROP TABLE two_reads;
-- nothing of ddx's left behind: no temporary relations, no open portals
SELECT count(*) FROM pg_class WHERE relpersistence = 't';
SELECT count(*) FROM pg_cursors;
