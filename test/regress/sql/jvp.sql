-- jvp: forward mode. Every derivative is checked against an independent
-- oracle: a closed form, central finite differences of the same query
-- (parameters moved along the tangent inside a rolled-back transaction), or
-- the dot-product identity with reverse mode, <J t, c> = <t, J^T c> (vjp).
SET extra_float_digits = 0;
CREATE TABLE jw (k int PRIMARY KEY, val float8);
CREATE TABLE jb (k int PRIMARY KEY, val float8);
CREATE TABLE jx (s int, k int, v float8);
INSERT INTO jw VALUES (1, 0.5), (2, -0.3), (3, 0.8);
INSERT INTO jb VALUES (1, 0.1), (2, -0.2);
INSERT INTO jx SELECT s, k, sin(s * 3 + k) FROM generate_series(1, 4) s, generate_series(1, 3) k;
CREATE TABLE jtw (k int, val float8);
INSERT INTO jtw VALUES (1, 1.0), (2, -2.0), (3, 0.5);
CREATE TABLE jtb (k int, val float8);
INSERT INTO jtb VALUES (1, 0.7);  -- no row for k = 2: its tangent is 0

-- 1. A linear model: J t = Σ_k x.v · t_k (closed form).
WITH pred AS (SELECT x.s, sum(x.v * w.val) AS z FROM jx x JOIN jw w ON w.k = x.k GROUP BY x.s)
SELECT p.s, round(jvp(p.z, 'jw.val', 'jtw')::numeric, 12) AS jvp,
       round((SELECT sum(x.v * t.val) FROM jx x JOIN jtw t ON t.k = x.k WHERE x.s = p.s)::numeric, 12) AS closed
FROM pred p ORDER BY p.s;

-- 2. A nonlinear model of two parameter tables, each with its tangent,
-- against central finite differences along both tangents at once.
CREATE VIEW jmodel AS
  SELECT x.s, sum(tanh(x.v * w.val + coalesce(b.val, 0)) * exp(w.val / 2)) AS z
  FROM jx x JOIN jw w ON w.k = x.k LEFT JOIN jb b ON b.k = x.s
  GROUP BY x.s;
CREATE FUNCTION jfd_along(h float8) RETURNS TABLE (s int, z float8) LANGUAGE plpgsql AS $$
BEGIN
  UPDATE jw w SET val = w.val + h * t.val FROM jtw t WHERE t.k = w.k;
  UPDATE jb b SET val = b.val + h * t.val FROM jtb t WHERE t.k = b.k;
  RETURN QUERY SELECT m.s, m.z FROM jmodel m;
  UPDATE jw w SET val = w.val - h * t.val FROM jtw t WHERE t.k = w.k;
  UPDATE jb b SET val = b.val - h * t.val FROM jtb t WHERE t.k = b.k;
END $$;
CREATE TEMP TABLE jplus AS SELECT * FROM jfd_along(1e-5);
CREATE TEMP TABLE jminus AS SELECT * FROM jfd_along(-1e-5);
SELECT m.s, abs(jvp(m.z, 'jw.val', 'jtw', 'jb.val', 'jtb') - (p.z - n.z) / 2e-5) < 1e-7 AS matches_fd
FROM jmodel m JOIN jplus p ON p.s = m.s JOIN jminus n ON n.s = m.s ORDER BY m.s;

-- 3. The dot-product identity with vjp on the same model: Σ_s jvp(z_s) c_s
-- = Σ_k t_k · vjp(z, c)_k, with c a cotangent per output row.
CREATE VIEW jc AS SELECT s, cos(s) AS z FROM generate_series(1, 4) s;
SELECT abs((SELECT sum(jvp(m.z, 'jw.val', 'jtw', 'jb.val', 'jtb') * c.z) FROM jmodel m JOIN jc c ON c.s = m.s)
         - ((SELECT sum(t.val * vjp('jmodel', 'jc', w.val)) FROM jw w JOIN jtw t ON t.k = w.k)
            + (SELECT sum(t.val * vjp('jmodel', 'jc', b.val)) FROM jb b JOIN jtb t ON t.k = b.k))) < 1e-12
       AS dot_product_identity;

-- 4. Aggregates: avg, min and max (a tie shares: the average tangent of the
-- rows that attain it), count (no tangent); windows: a running sum, lag.
CREATE TABLE ja (g int, k int, val float8);
INSERT INTO ja VALUES (1, 1, 2.0), (1, 2, 5.0), (1, 3, 5.0), (2, 4, -1.0), (2, 5, 3.0);
CREATE TABLE jta (k int, val float8);
INSERT INTO jta VALUES (1, 1.0), (2, 10.0), (3, 20.0), (4, 100.0), (5, 1000.0);
WITH agg AS (SELECT g, avg(val) AS a, max(val) AS mx, min(val) AS mn, count(val)::float8 AS n FROM ja GROUP BY g)
SELECT g, jvp(a.a, 'ja.val', 'jta') AS d_avg, jvp(a.mx, 'ja.val', 'jta') AS d_max,
       jvp(a.mn, 'ja.val', 'jta') AS d_min, jvp(a.n, 'ja.val', 'jta') AS d_count
FROM agg a ORDER BY g;
WITH win AS (SELECT k, sum(val) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS rs,
                    lag(val, 1, 0.0) OVER (ORDER BY k) AS prev FROM ja)
SELECT k, jvp(w.rs, 'ja.val', 'jta') AS d_running, jvp(w.prev, 'ja.val', 'jta') AS d_lag FROM win w ORDER BY k;
-- max and min over a frame: the tangent of the frame's row that attains it,
-- averaged over a tie (closed forms: values 2, 5, 5, -1, 3; tangents 1, 10,
-- 20, 100, 1000). A ROWS frame, a partition's running min (RANGE, the
-- default frame), and a RANGE frame with offsets (which reverse mode refuses).
WITH win AS (SELECT k, max(val) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS mx2,
                    min(val) OVER (PARTITION BY g ORDER BY k) AS run_min,
                    max(val) OVER (ORDER BY k RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS mx_range,
                    min(val) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS mn_ex
             FROM ja)
SELECT k, jvp(w.mx2, 'ja.val', 'jta') AS d_max2, jvp(w.run_min, 'ja.val', 'jta') AS d_run_min,
       jvp(w.mx_range, 'ja.val', 'jta') AS d_max_range, jvp(w.mn_ex, 'ja.val', 'jta') AS d_min_excl
FROM win w ORDER BY k;

-- 5. UNION ALL, LIMIT and a scalar subquery; a subquery in FROM.
WITH u AS (SELECT k, 2 * val AS v FROM ja WHERE g = 1 UNION ALL SELECT k, val * val FROM ja WHERE g = 2),
     top AS (SELECT k, v FROM u ORDER BY k DESC LIMIT 2),
     sc AS (SELECT (SELECT max(v) FROM u) AS m)
SELECT 'u' AS rel, k, jvp(u.v, 'ja.val', 'jta') AS d FROM u
UNION ALL SELECT 'top', k, jvp(t.v, 'ja.val', 'jta') FROM top t
UNION ALL SELECT 'scalar', 0, jvp(sc.m, 'ja.val', 'jta') FROM sc
ORDER BY 1, 2;
SELECT q.g, jvp(q.t, 'ja.val', 'jta') AS d FROM (SELECT g, sum(val * val) AS t FROM ja GROUP BY g) q ORDER BY q.g;

-- ReLU written GREATEST(x, 0): tangent 0 at the tie (k = 1: 0.5 - 0.5 = 0), as in reverse mode.
WITH o AS (SELECT k, greatest(val - 0.5, 0) AS v FROM jw)
SELECT k, jvp(o.v, 'jw.val', 'jtw') + 0 AS d FROM o ORDER BY k;  -- (+ 0: -0 is 0)
-- GREATEST ignores a NULL argument: GREATEST(n.v * w.val, w.val + 0.5) with n.v NULL
-- is w.val + 0.5, and so is its tangent (it was NULL: the NULL argument's
-- partial, 0, times its tangent, NULL). Closed form: t_k where the first
-- argument is NULL, else t_k times the partial of the larger one.
CREATE TABLE jn (s int, k int, v float8);
INSERT INTO jn VALUES (1, 1, NULL), (1, 2, 2.0), (2, 3, NULL), (2, 1, 0.1);
WITH o AS (SELECT n.s, n.k, greatest(n.v * w.val, w.val + 0.5) AS g FROM jn n JOIN jw w ON w.k = n.k)
SELECT o.s, o.k, jvp(o.g, 'jw.val', 'jtw') = (SELECT t.val * CASE WHEN n.v * w.val > w.val + 0.5 THEN n.v ELSE 1 END
                                              FROM jn n JOIN jw w ON w.k = n.k JOIN jtw t ON t.k = n.k
                                              WHERE n.s = o.s AND n.k = o.k) AS matches
FROM o ORDER BY o.s, o.k;

-- A LEFT join whose right side is a saved step (an aggregate): missing rows
-- have NULL values and NULL tangents. Closed form: x.v · t of w's row k + 1.
WITH agg AS (SELECT k, sum(val) AS s FROM jw GROUP BY k),
     o AS (SELECT x.s, x.k, x.v * a.s AS v FROM jx x LEFT JOIN agg a ON a.k = x.k + 1)
SELECT o.s, o.k, jvp(o.v, 'jw.val', 'jtw') IS NOT DISTINCT FROM (SELECT x.v * t.val FROM jx x JOIN jtw t ON t.k = x.k + 1
                                                               WHERE x.s = o.s AND x.k = o.k) AS matches
FROM o WHERE o.s = 1 ORDER BY o.k;

-- A wide parameter table: two columns of one row, each with its own tangent
-- relation (keyless: the table has one row). Closed form: d(a·b + a²) =
-- (b + 2a)·ta + a·tb.
CREATE TABLE jwide (a float8, b float8);
INSERT INTO jwide VALUES (1.5, -2.0);
WITH o AS (SELECT a * b + a * a AS v FROM jwide), ta AS (SELECT 0.3::float8 AS a), tb AS (SELECT -0.7::float8 AS b)
SELECT round(jvp(o.v, 'jwide.a', 'ta', 'jwide.b', 'tb')::numeric, 12) AS jvp,
       round(((-2.0 + 2 * 1.5) * 0.3 + 1.5 * -0.7)::numeric, 12) AS closed FROM o;
DROP TABLE jwide;

-- 6. Tangent relations: a CTE; NULL values have NULL tangents; a tangent
-- relation with two rows for one key is refused when it is read.
UPDATE ja SET val = NULL WHERE k = 5;
WITH tt AS (SELECT k, 1.0::float8 AS val FROM ja), o AS (SELECT k, 3 * val AS v FROM ja)
SELECT k, jvp(o.v, 'ja.val', 'tt') AS d FROM o ORDER BY k;
INSERT INTO jta VALUES (1, 2.0);
\set VERBOSITY terse
WITH o AS (SELECT k, 3 * val AS v FROM ja) SELECT k, jvp(o.v, 'ja.val', 'jta') FROM o;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM jta WHERE k = 1 AND val = 2.0;

-- 7. Statement parameters in the output: each execution's values.
PREPARE jp(float8) AS
  WITH o AS (SELECT k, $1 * val * val AS v FROM jw) SELECT k, jvp(o.v, 'jw.val', 'jtw') FROM o ORDER BY k;
EXECUTE jp(1);
EXECUTE jp(10);
DEALLOCATE jp;

-- 8. Refusals.
SELECT jvp(w.val, 'jw.val', 'jtw') FROM jw w;
\echo :LAST_ERROR_SQLSTATE
WITH o AS (SELECT k, val AS v FROM jw) SELECT jvp(o.v, 'jw.val') FROM o;
\echo :LAST_ERROR_SQLSTATE
WITH o AS (SELECT k, val AS v FROM jw) SELECT jvp(o.v, 'jw.val', 'no_such_tangent') FROM o;
\echo :LAST_ERROR_SQLSTATE
WITH o AS (SELECT k, val AS v FROM jw), bad AS (SELECT k, val AS other FROM jtw)
SELECT jvp(o.v, 'jw.val', 'bad') FROM o;
\echo :LAST_ERROR_SQLSTATE
WITH o AS (SELECT k, val AS v FROM jw) SELECT jvp(o.v, 'jw.nope', 'jtw') FROM o;
\echo :LAST_ERROR_SQLSTATE
WITH o AS (SELECT k, val AS v FROM jw), m AS (SELECT sum(mv * mv) AS l FROM (SELECT max(v) OVER (ORDER BY k) AS mv FROM o) q)
SELECT hvp('m', w.val, 'jw.val', 'jtw') FROM jw w;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default

-- 9. H·v, the gradient of a jvp. Closed form: L = Σ w³ has H = diag(6 w).
WITH loss AS (SELECT sum(val * val * val) AS l FROM jw)
SELECT w.k, round(hvp('loss', w.val, 'jw.val', 'jtw')::numeric, 12) AS hv,
       round((6 * w.val * t.val)::numeric, 12) AS closed
FROM jw w JOIN jtw t ON t.k = w.k ORDER BY w.k;
-- The nonlinear model's loss: H·v against central differences of the
-- gradient along v, and the symmetry uᵀHv = vᵀHu (H over both tables).
CREATE VIEW jloss AS SELECT sum(m.z * m.z * c.z) AS l FROM jmodel m JOIN jc c ON c.s = m.s;
CREATE TABLE jtu (k int, val float8);
INSERT INTO jtu VALUES (1, -0.4), (2, 0.9), (3, 0.3);
CREATE TABLE jtbu (k int, val float8);
INSERT INTO jtbu VALUES (1, 0.2), (2, -1.1);
CREATE FUNCTION jgrad_along(h float8) RETURNS TABLE (k int, g float8) LANGUAGE plpgsql AS $$
BEGIN
  UPDATE jw w SET val = w.val + h * t.val FROM jtw t WHERE t.k = w.k;
  RETURN QUERY SELECT w.k, grad('jloss', w.val) FROM jw w;
  UPDATE jw w SET val = w.val - h * t.val FROM jtw t WHERE t.k = w.k;
END $$;
CREATE TEMP TABLE jgplus AS SELECT * FROM jgrad_along(1e-5);
CREATE TEMP TABLE jgminus AS SELECT * FROM jgrad_along(-1e-5);
SELECT w.k, abs(hvp('jloss', w.val, 'jw.val', 'jtw') - (p.g - n.g) / 2e-5) < 1e-6 AS matches_fd
FROM jw w JOIN jgplus p ON p.k = w.k JOIN jgminus n ON n.k = w.k ORDER BY w.k;
SELECT abs(((SELECT sum(u.val * hvp('jloss', w.val, 'jw.val', 'jtw', 'jb.val', 'jtb')) FROM jw w JOIN jtu u ON u.k = w.k)
          + (SELECT sum(u.val * hvp('jloss', b.val, 'jw.val', 'jtw', 'jb.val', 'jtb')) FROM jb b JOIN jtbu u ON u.k = b.k))
         - ((SELECT sum(t.val * hvp('jloss', w.val, 'jw.val', 'jtu', 'jb.val', 'jtbu')) FROM jw w JOIN jtw t ON t.k = w.k)
          + (SELECT sum(t.val * hvp('jloss', b.val, 'jw.val', 'jtu', 'jb.val', 'jtbu')) FROM jb b JOIN jtb t ON t.k = b.k)))
       < 1e-10 AS symmetric;
DROP VIEW jloss;
DROP FUNCTION jgrad_along(float8);
DROP TABLE jtu, jtbu;
DROP VIEW jmodel, jc;

-- 10. examples/newton_cg.sql: logistic regression by Newton–CG, every H·p one
-- hvp statement; the gradient norm falls quadratically to ~0 in a handful of
-- outer steps.
SET client_min_messages = warning;
\set ECHO none
\o /dev/null
-- (pg_regress's input folder is test/regress, wherever the build runs)
\getenv regress PG_ABS_SRCDIR
\set example :regress '/../../examples/newton_cg.sql'
\i :example
\o
\set ECHO all
RESET client_min_messages;
SELECT count(*) - 1 AS newton_steps, min(grad_norm) < 1e-12 AS converged,
       bool_and(cg_iterations <= 6) AS cg_within_dimension
FROM newton_cg.fit(8, 20);
SET client_min_messages = warning;
DROP SCHEMA newton_cg CASCADE;
RESET client_min_messages;
DROP FUNCTION jfd_along(float8);
DROP TABLE jw, jb, jx, jtw, jtb, ja, jta, jn;
