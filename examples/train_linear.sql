-- A small training run: linear regression fitted by gradient descent in
-- plpgsql, every step `UPDATE w SET val = val - lr * grad('loss', val)`.
-- The data is noiseless, so the least-squares solution is the generating
-- weights (2, -1, 0.5), and the loss goes to zero.
\set ON_ERROR_STOP 1
CREATE EXTENSION IF NOT EXISTS ddx;
DROP VIEW IF EXISTS loss;
DROP TABLE IF EXISTS x, y, w;
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int PRIMARY KEY, val float8);
CREATE TABLE w (f int PRIMARY KEY, val float8);
SELECT setseed(0.42);
INSERT INTO x SELECT s, f, random() * 2 - 1 FROM generate_series(1, 200) s, generate_series(1, 3) f;
INSERT INTO y SELECT s, sum(val * (ARRAY[2.0, -1.0, 0.5])[f]) FROM x GROUP BY s;
INSERT INTO w VALUES (1, 0), (2, 0), (3, 0);

CREATE VIEW loss AS
  WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
  SELECT avg(power(pred.z - y.val, 2)) AS l FROM pred JOIN y ON pred.s = y.s;

DO $$
DECLARE
  cur float8;
  t0 timestamptz := clock_timestamp();
BEGIN
  FOR step IN 1 .. 150 LOOP
    UPDATE w SET val = val - 0.5 * grad('loss', val);
    IF step % 25 = 0 THEN
      SELECT l INTO cur FROM loss;
      RAISE NOTICE 'step % loss % (% ms/step)', step, to_char(cur, '9.99EEEE'),
        round((extract(epoch FROM clock_timestamp() - t0) * 1000 / step)::numeric, 1);
    END IF;
  END LOOP;
END $$;

SELECT f, round(val::numeric, 6) AS weight FROM w ORDER BY f;
