-- Why a grouping of a join keeps PostgreSQL's plan: under ddx.contraction =
-- all, EXPLAIN adds one line "Contraction Refused: <reasons>" per grouping of
-- a join the node does not compute (src/pg/contraction/explain.cpp), after
-- the plan; the reasons are the values the shape checks return
-- (src/pg/contraction/shape.cpp, path.cpp), each once, in the order they came.
CREATE TABLE ra (i int, k int, v float8);
CREATE TABLE rb (k int, j int, v float8);
CREATE TABLE rc (j int, v float8);
INSERT INTO ra SELECT i, k, i + k FROM generate_series(1, 20) i, generate_series(1, 4) k;
INSERT INTO rb SELECT k, j, k * j FROM generate_series(1, 4) k, generate_series(1, 3) j;
INSERT INTO rc SELECT j, j FROM generate_series(1, 3) j;
ANALYZE ra, rb, rc;

-- The lines of EXPLAIN (COSTS OFF) of q that say whether the node ran or why
-- not (the plans around them are PostgreSQL's, and not what this tests).
CREATE FUNCTION refusals(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    IF line LIKE 'Contraction Refused: %' OR line LIKE '%Custom Scan (ddx contraction)%' THEN
      RETURN NEXT btrim(line);
    END IF;
  END LOOP;
END $$;

SET ddx.contraction = 'all';
-- The line follows the plan.
EXPLAIN (COSTS OFF) SELECT ra.i, stddev(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i;
-- The grouping itself.
SELECT refusals($$SELECT ra.i, sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i HAVING count(*) > 1$$);
SELECT refusals($$SELECT ra.i, rb.j, sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY GROUPING SETS ((ra.i), (rb.j))$$);
SELECT refusals($$SELECT ra.i, sum(ra.v * rb.v), generate_series(1, 2) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, sum(ra.v * rb.v) FROM ra LEFT JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
-- The join's conditions and the group keys.
SELECT refusals($$SELECT ra.i, sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k AND ra.v < rb.v GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i + rb.j AS g, sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i + rb.j$$);
SELECT refusals($$SELECT ra.i / (ra.k - 1) AS g, rb.j / (rb.k - 1) AS h, sum(ra.v * rb.v)
                  FROM ra JOIN rb ON ra.k = rb.k GROUP BY 1, 2$$);
-- The aggregates and the output. (A float8 term of both sides that is no
-- product is the node's, evaluated for each pair: not a float4 one.)
SELECT refusals($$SELECT ra.i, sum(ra.v + rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, sum(ra.v::float4 + rb.v::float4) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
-- (nor a term with a volatile function: evaluated for each pair, it is
-- PostgreSQL's to call)
SELECT refusals($$SELECT ra.i, sum(ra.v + rb.v * random()) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, sum(ra.v::float4 * rb.v::float4 * ra.v::float4) FROM ra JOIN rb ON ra.k = rb.k
                  GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, sum(coalesce(ra.v * rb.v, 1)) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, count(ra.v + rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, sum(ra.v * rb.v) + random() AS r FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
-- A join of three: each split's reason, once.
SELECT refusals($$SELECT rb.j + rc.j AS g, sum((ra.v + rb.v)::float4 * rc.v::float4) FROM ra JOIN rb ON ra.k = rb.k
                  JOIN rc ON rc.j = rb.j GROUP BY rb.j + rc.j$$);
-- One line per grouping of a join, in planning order: a CTE's, an
-- InitPlan's, the statement's own; none for the one the node computes, or
-- for a grouping of one table.
SELECT refusals($$WITH c AS MATERIALIZED (SELECT ra.i, stddev(ra.v * rb.v) AS x FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i)
                  SELECT c.i, sum(c.x * ra.v) FROM c JOIN ra ON ra.i = c.i
                  WHERE c.x > (SELECT sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k HAVING count(*) > 0)
                  GROUP BY c.i HAVING sum(c.x) > 0$$);
SELECT refusals($$SELECT ra.i, sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals($$SELECT ra.i, stddev(ra.v) FROM ra GROUP BY ra.i$$);
-- In the structured formats: one more object beside the statement's.
CREATE FUNCTION refusals_json(q text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (COSTS OFF, FORMAT JSON) ' || q INTO plan;
  RETURN plan -> 1;
END $$;
SELECT refusals_json($$SELECT ra.i, stddev(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SELECT refusals_json($$SELECT ra.i, sum(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$) IS NULL AS none;
-- Only the statement explained: not those a function it runs plans (EXPLAIN
-- ANALYZE runs it), whose own EXPLAIN has its own.
CREATE FUNCTION refused_inside() RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  r float8;
BEGIN
  SELECT max(x) INTO r FROM (SELECT ra.i, stddev(ra.v * rb.v) AS x FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i) q;
  RETURN r;
END $$;
-- EXPLAIN ANALYZE's lines, the same on every major (18 counts buffers by
-- default and shows rows with two decimals).
CREATE FUNCTION explain_analyzed(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    RETURN NEXT regexp_replace(line, 'rows=(\d+)\.00 ', 'rows=\1 ', 'g');
  END LOOP;
END $$;
SELECT explain_analyzed('SELECT refused_inside()');
CREATE FUNCTION explained_inside() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT refusals($q$SELECT ra.i, stddev(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$q$);
END $$;
SELECT explained_inside();
-- EXPLAIN EXECUTE shows none: the prepared statement's plan may be one the
-- plan cache kept, planned before, and its planning is not EXPLAIN's.
PREPARE refused AS SELECT ra.i, stddev(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i;
SELECT count(*) FROM refusals('EXECUTE refused');
DEALLOCATE refused;
-- Not under 'programs' (outside a program) or 'off'.
SET ddx.contraction = 'programs';
SELECT count(*) FROM refusals($$SELECT ra.i, stddev(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
SET ddx.contraction = 'off';
SELECT count(*) FROM refusals($$SELECT ra.i, stddev(ra.v * rb.v) FROM ra JOIN rb ON ra.k = rb.k GROUP BY ra.i$$);
RESET ddx.contraction;
DROP FUNCTION refusals, refusals_json, refused_inside, explained_inside, explain_analyzed;
DROP TABLE ra, rb, rc;
