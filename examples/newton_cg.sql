-- Logistic regression fitted by Newton–CG (truncated Newton) in plpgsql:
-- each outer step solves H d = -g by conjugate gradients, where every
-- H·p is one hvp statement (the gradient of the loss's jvp along p), and
-- takes w <- w + d. With an L2 term the loss is strongly convex: the
-- gradient norm falls quadratically, in a handful of outer steps.
--
--   psql -f examples/newton_cg.sql        (needs CREATE EXTENSION ddx)
--   SELECT * FROM newton_cg.fit(8, 20);   -- outer steps, CG iterations each
CREATE SCHEMA IF NOT EXISTS newton_cg;
DROP TABLE IF EXISTS newton_cg.x, newton_cg.y, newton_cg.w, newton_cg.p, newton_cg.r, newton_cg.d, newton_cg.hp CASCADE;
-- 200 samples of 5 features, labels from a noisy linear rule (seeded)
SELECT setseed(0.42) AS "seeded";
CREATE TABLE newton_cg.x AS
  SELECT i, j, CASE WHEN j = 0 THEN 1.0 ELSE random() * 4 - 2 END::float8 AS val
  FROM generate_series(1, 200) i, generate_series(0, 5) j;
CREATE TABLE newton_cg.y AS
  SELECT x.i, (sum(x.val * (ARRAY[0.3, 1.5, -2.0, 0.7, 0.0, -1.1])[x.j + 1]) + random() - 0.5 > 0)::int::float8 AS val
  FROM newton_cg.x x GROUP BY x.i;
CREATE TABLE newton_cg.w (j int PRIMARY KEY, val float8);
INSERT INTO newton_cg.w SELECT j, 0 FROM generate_series(0, 5) j;
-- CG's vectors, keyed like w: p (the tangent of every hvp), r, d, H·p
CREATE TABLE newton_cg.p (j int PRIMARY KEY, val float8);
CREATE TABLE newton_cg.r (j int PRIMARY KEY, val float8);
CREATE TABLE newton_cg.d (j int PRIMARY KEY, val float8);
CREATE TABLE newton_cg.hp (j int PRIMARY KEY, val float8);

-- mean log-loss + (1/2) 0.01 |w|^2
CREATE OR REPLACE VIEW newton_cg.loss AS
  WITH z AS (SELECT x.i, sum(x.val * w.val) AS z FROM newton_cg.x x JOIN newton_cg.w w ON w.j = x.j GROUP BY x.i)
  SELECT avg(ln(1 + exp(- z.z)) + (1 - y.val) * z.z) + 0.005 * (SELECT sum(w.val * w.val) FROM newton_cg.w w) AS l
  FROM z JOIN newton_cg.y y ON y.i = z.i;

CREATE OR REPLACE FUNCTION newton_cg.fit(outer_steps int, cg_steps int, tol float8 DEFAULT 1e-12)
RETURNS TABLE (step int, loss float8, grad_norm float8, cg_iterations int) LANGUAGE plpgsql AS $$
DECLARE
  rr float8; rr_new float8; php float8; alpha float8;
BEGIN
  FOR k IN 0 .. outer_steps LOOP
    step := k;
    -- g = ∇L; r = -g, p = r, d = 0
    DELETE FROM newton_cg.r;
    INSERT INTO newton_cg.r SELECT w.j, - grad('newton_cg.loss', w.val) FROM newton_cg.w w;
    SELECT sqrt(sum(val * val)) INTO grad_norm FROM newton_cg.r;
    SELECT l INTO loss FROM newton_cg.loss;
    cg_iterations := 0;
    IF step = outer_steps OR grad_norm < 1e-14 THEN RETURN NEXT; EXIT; END IF;
    DELETE FROM newton_cg.p; INSERT INTO newton_cg.p SELECT * FROM newton_cg.r;
    DELETE FROM newton_cg.d; INSERT INTO newton_cg.d SELECT j, 0 FROM newton_cg.w;
    rr := grad_norm * grad_norm;
    FOR it IN 1 .. cg_steps LOOP
      -- H·p: one statement, the gradient of the loss's jvp along p
      DELETE FROM newton_cg.hp;
      INSERT INTO newton_cg.hp SELECT w.j, hvp('newton_cg.loss', w.val, 'newton_cg.w.val', 'newton_cg.p') FROM newton_cg.w w;
      SELECT sum(p.val * h.val) INTO php FROM newton_cg.p p JOIN newton_cg.hp h ON h.j = p.j;
      alpha := rr / php;
      UPDATE newton_cg.d d SET val = d.val + alpha * p.val FROM newton_cg.p p WHERE p.j = d.j;
      UPDATE newton_cg.r r SET val = r.val - alpha * h.val FROM newton_cg.hp h WHERE h.j = r.j;
      SELECT sum(val * val) INTO rr_new FROM newton_cg.r;
      cg_iterations := it;
      EXIT WHEN sqrt(rr_new) < tol * grad_norm;
      UPDATE newton_cg.p p SET val = r.val + (rr_new / rr) * p.val FROM newton_cg.r r WHERE r.j = p.j;
      rr := rr_new;
    END LOOP;
    RETURN NEXT;
    UPDATE newton_cg.w w SET val = w.val + d.val FROM newton_cg.d d WHERE d.j = w.j;
  END LOOP;
END $$;
