-- The planner's estimates of a program's steps (src/pg/runner/estimates.cpp):
-- while ddx plans a program, a CTE's column that carries a table's column
-- (through plain columns and group keys) has that column's number of
-- distinct values; so does a user's statement under ddx.contraction = 'all'.
-- Other statements keep PostgreSQL's estimates.
-- The oracle is the actual row count of each plan node.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA estimates;
SET search_path = estimates, public;
\set VERBOSITY terse
-- (the plans of ddx's SQL programs: not the dense statement, ddx.dense)
SET ddx.dense = off;
-- t: 64 × 16 keys, each ten times (ANALYZE samples every row: the
-- statistics are exact, and PostgreSQL's estimate of t's 1,024 groups of
-- (i, j) is not clamped to a tenth of its rows); u: 64 keys
CREATE TABLE t (i int, j int, val float8);
INSERT INTO t SELECT i, j, (i * 3 + j + c) % 8 / 8.0
  FROM generate_series(1, 64) i, generate_series(1, 16) j, generate_series(1, 10) c;
CREATE TABLE u (i int, val float8);
INSERT INTO u SELECT i, i / 8.0 FROM generate_series(1, 64) i;
ANALYZE t;
ANALYZE u;
-- the estimated and actual rows of a statement's plan's joins (or nodes)
CREATE FUNCTION join_rows(stmt text, nodes text DEFAULT 'Join|Nested Loop') RETURNS TABLE (node text, est float8, act float8) LANGUAGE plpgsql AS $f$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || stmt INTO plan;
  RETURN QUERY WITH RECURSIVE n(p) AS (SELECT plan->0->'Plan' UNION ALL
                                       SELECT c FROM n, json_array_elements(n.p->'Plans') c)
    SELECT p->>'Node Type', (p->>'Plan Rows')::float8, (p->>'Actual Rows')::float8
      FROM n WHERE p->>'Node Type' ~ nodes;
END $f$;
-- Two grouped steps joined on their key i: 1,024 rows. PostgreSQL has no
-- statistics for a CTE's columns; a grouped CTE's key is unique only where it
-- is the only one: 1,024 × 64 / 200 (its default number of distinct values)
-- = 328. (The contraction node stays out: ddx.in_program would let it plan
-- the groupings.)
SET ddx.contraction = off;
CREATE VIEW joined AS SELECT $$
  WITH a AS MATERIALIZED (SELECT i, j, sum(val) AS s FROM t GROUP BY i, j),
       b AS MATERIALIZED (SELECT i, sum(val) AS s FROM u GROUP BY i)
  SELECT a.i, a.j, a.s + b.s FROM a JOIN b ON b.i = a.i$$ AS q;
SELECT * FROM join_rows((SELECT q FROM joined));
-- while a program is planned, the keys' statistics are t.i's and u.i's: 64
-- values each, 1,024 rows
BEGIN;
SET LOCAL ddx.in_program = on;
SELECT * FROM join_rows((SELECT q FROM joined));
-- the same through a grouped subquery in FROM, a CTE read from a subquery (a
-- level up), a key renamed and cast to its own type: the subquery's 64 groups
-- (PostgreSQL's estimate: 200), and the join
SELECT * FROM join_rows($$
  WITH a AS MATERIALIZED (SELECT i AS k, j, sum(val) AS s FROM t GROUP BY i, j)
  SELECT * FROM (SELECT k::int AS k, sum(s) AS s FROM a GROUP BY k) g
    JOIN a ON a.k = g.k$$, 'Join|Aggregate');
COMMIT;
-- ddx.contraction = 'all' asks for ddx's planning of a user's own
-- statements: the keys' statistics there too (the groupings on the node),
-- and PostgreSQL's estimate again under the default setting
SET ddx.contraction = 'all';
SELECT * FROM join_rows((SELECT q FROM joined));
SET ddx.contraction = programs;
SELECT * FROM join_rows((SELECT q FROM joined));
SET ddx.contraction = off;
-- What carries no table's column keeps PostgreSQL's estimate: an aggregate's
-- result, an expression, a set operation, grouping sets, a recursive CTE, a
-- whole row, a column without statistics (and none of them fails).
CREATE TABLE unanalyzed (i int, val float8);
INSERT INTO unanalyzed SELECT i, i FROM generate_series(1, 64) i;
CREATE VIEW declined AS SELECT $$
  WITH a AS MATERIALIZED (SELECT i, i + 0 AS e, sum(val) AS s FROM t GROUP BY i),
       o AS MATERIALIZED (SELECT i FROM t UNION ALL SELECT j FROM t),
       g AS MATERIALIZED (SELECT i, j, count(*) AS n FROM t GROUP BY GROUPING SETS ((i), (j))),
       r AS (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 64) SELECT * FROM r),
       n AS MATERIALIZED (SELECT i, sum(val) AS s FROM unanalyzed GROUP BY i)
  SELECT (SELECT count(*) FROM a a1 JOIN a a2 ON a2.s = a1.s),
         (SELECT count(*) FROM a a1 JOIN a a2 ON a2.e = a1.e),
         (SELECT count(*) FROM o JOIN u ON u.i = o.i),
         (SELECT count(*) FROM g JOIN u ON u.i = g.i),
         (SELECT count(*) FROM r JOIN u ON u.i = r.i),
         (SELECT count(*) FROM n JOIN u ON u.i = n.i),
         (SELECT count(DISTINCT a) FROM a)$$ AS q;
CREATE TABLE declined_rows AS SELECT row_number() OVER () AS k, * FROM join_rows((SELECT q FROM declined));
BEGIN;
SET LOCAL ddx.in_program = on;
SELECT count(*) AS joins, count(*) FILTER (WHERE d.est = j.est) AS same_estimate
  FROM declined_rows d JOIN (SELECT row_number() OVER () AS k, * FROM join_rows((SELECT q FROM declined))) j
    ON j.k = d.k;
COMMIT;
RESET ddx.contraction;
-- In a program: a matmul's backward. z's cotangent (per i, k) joined to t
-- (per i, j) on i and grouped by (j, k): w's gradient, the contraction
-- node's 16 × 8 groups, estimated so (without the keys' statistics, at a
-- default share of its pairs). (A node's actual count is its groups: under
-- Custom Scan (ddx fill), which joins them back to w, it forms no row.)
CREATE TABLE w (j int, k int, val float8);
INSERT INTO w SELECT j, k, ((j * 5 + k) % 7 - 3) / 8.0 FROM generate_series(1, 16) j, generate_series(1, 8) k;
ANALYZE w;
CREATE FUNCTION program_rows(stmt text) RETURNS TABLE (node text, est float8, act float8) LANGUAGE plpgsql AS $f$
DECLARE
  prog text;
  plan json;
BEGIN
  SELECT program INTO prog FROM _ddx.statement_programs(stmt) LIMIT 1;
  SELECT string_agg(l, E'\n')::json INTO plan FROM _ddx.explain_program(prog, NULL, 'ANALYZE, FORMAT JSON') l;
  RETURN QUERY WITH RECURSIVE n(p) AS (SELECT plan->0->'Plan' UNION ALL
                                       SELECT c FROM n, json_array_elements(n.p->'Plans') c)
    SELECT p->>'Node Type' || coalesce(' ' || (p->>'Custom Plan Provider'), ''), (p->>'Plan Rows')::float8,
           coalesce((p->>'Groups')::float8, (p->>'Actual Rows')::float8)
      FROM n;
END $f$;
SET ddx.contraction = programs;
SELECT node, est, act FROM program_rows($$
  WITH z AS (SELECT t.i, w.k, sum(t.val * w.val) AS z FROM t JOIN w ON w.j = t.j GROUP BY t.i, w.k),
       loss AS (SELECT sum(tanh(z) * tanh(z)) AS l FROM z)
  SELECT grad('loss', val) FROM w$$)
  WHERE node = 'Custom Scan ddx contraction' AND act = 128;
RESET ddx.contraction;
-- outside a program nothing is left set
SHOW ddx.in_program;
DROP SCHEMA estimates CASCADE;
