-- vjp(out, cotangent, t.col): ∂/∂t.col of Σ out.v · cotangent.v, matched on
-- the output's keys. Checked against closed forms; grad is vjp seeded with 1.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA vjp;
SET search_path = vjp, public;
\set VERBOSITY terse
CREATE TABLE w (f int, val float8);
CREATE TABLE x (s int, f int, val float8);
INSERT INTO w VALUES (1, 0.5), (2, -1), (3, 2);
INSERT INTO x VALUES (1, 1, 2), (1, 2, 3), (2, 1, -1), (2, 2, 4), (NULL, 3, 5), (3, 3, 1);
-- out(s, z) = Σ_f x_sf w_f, so vjp_f = Σ_s cot_s x_sf; a NULL key matches a NULL key
WITH out AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s),
     cot AS (SELECT * FROM (VALUES (1, 10.0::float8), (2, 100.0), (NULL, 1000.0)) c(s, z))
SELECT f, vjp('out', 'cot', val) FROM w ORDER BY f;
SELECT x.f, sum(c.z * x.val) FROM x JOIN (VALUES (1, 10.0), (2, 100.0), (NULL, 1000.0)) c(s, z)
  ON c.s IS NOT DISTINCT FROM x.s GROUP BY x.f ORDER BY 1;
-- two value columns; a key that is a float column not depending on the parameter
WITH out AS (SELECT x.val AS key, x.val * w.val AS a, exp(w.val) AS b FROM x JOIN w ON x.f = w.f WHERE x.s = 1),
     cot AS (SELECT * FROM (VALUES (2.0::float8, 1.0::float8, 3.0::float8), (3.0, -1.0, 0.5)) c(key, a, b))
SELECT f, round(vjp('out', 'cot', val)::numeric, 12) FROM w ORDER BY f;
SELECT 1 AS f, round((2 * 1 + 3 * exp(0.5))::numeric, 12) UNION ALL SELECT 2, round((3 * -1 + 0.5 * exp(-1))::numeric, 12)
UNION ALL SELECT 3, 0 ORDER BY 1;
-- grad is vjp seeded with 1
WITH loss AS (SELECT sum(w.val * w.val * w.f) AS l FROM w), one AS (SELECT 1.0::float8 AS l)
SELECT f, grad('loss', val), vjp('loss', 'one', val), grad('loss', val) = vjp('loss', 'one', val) AS same FROM w ORDER BY f;
-- views, and the cotangent read from a table
CREATE VIEW outv AS SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s;
CREATE TABLE cott (s int, z float8);
INSERT INTO cott VALUES (1, 1), (2, 1);
CREATE VIEW cotv AS SELECT * FROM cott;
SELECT f, vjp('outv', 'cotv', val) FROM w ORDER BY f;
-- refusals
WITH out AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s), cot AS (SELECT 1 AS s, 2.0 AS y)
SELECT vjp('out', 'cot', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
WITH out AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
SELECT vjp('out', 'nope', val) FROM w;
\echo :LAST_ERROR_SQLSTATE
SELECT vjp('outv', (SELECT 1.0), val) FROM w;
\echo :LAST_ERROR_SQLSTATE
