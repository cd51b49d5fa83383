#!/usr/bin/python3
"""A 1,000-step training loop in a plpgsql PROCEDURE that commits every step
(ddx_adamw_step on a linear model):
step time early vs late, catalog size, backend memory. Run through
bench/run.sh's cluster: PGHOST/PGPORT/PGUSER from the environment.
Usage: bench/loop.py [steps]"""
import statistics
import subprocess
import sys

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
DB = "ddx_loop"


def psql(sql):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", DB], input=sql,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return [l.split("|") for l in r.stdout.splitlines() if l]


subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                f"CREATE DATABASE {DB}"], check=True, capture_output=True)
out = psql(f"""
CREATE EXTENSION ddx;
CREATE TABLE x (s int, f int, val float8);
CREATE TABLE y (s int PRIMARY KEY, val float8);
CREATE TABLE w (f int PRIMARY KEY, val float8);
INSERT INTO x SELECT s, f, sin(s * 13 + f * 7) FROM generate_series(1, 200) s, generate_series(1, 8) f;
INSERT INTO y SELECT s, cos(s) FROM generate_series(1, 200) s;
INSERT INTO w SELECT f, 0 FROM generate_series(1, 8) f;
CREATE TABLE times (step int, ms float8, catalog bigint, mem bigint);
-- a PROCEDURE that COMMITs every step: an interrupted run keeps every
-- finished step, and dead row versions can be pruned as the loop goes
CREATE PROCEDURE train(n int) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN
  FOR i IN 1 .. {STEPS} LOOP
    t0 := clock_timestamp();
    PERFORM ddx_adamw_step($l$WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON x.f = w.f GROUP BY x.s)
                             SELECT avg(power(z.z - y.val, 2)) FROM z JOIN y ON y.s = z.s$l$, ARRAY['w.val'], 0.01);
    INSERT INTO times SELECT i, extract(epoch FROM clock_timestamp() - t0) * 1000,
      (SELECT count(*) FROM pg_class) + (SELECT count(*) FROM pg_attribute),
      (SELECT sum(total_bytes) FROM pg_backend_memory_contexts);
    COMMIT;
  END LOOP;
END $$;
CALL train({STEPS});
SELECT step, ms, catalog, mem FROM times ORDER BY step;
""")
rows = [(int(a), float(b), int(c), int(d)) for a, b, c, d in out]
early = statistics.median(ms for s, ms, _, _ in rows if 11 <= s <= 110)
late = statistics.median(ms for s, ms, _, _ in rows[-100:])
print(f"{STEPS} steps: median step {early:.1f} ms (steps 11-110) vs {late:.1f} ms (last 100): "
      f"{100 * (late - early) / early:+.1f}%")
print(f"pg_class + pg_attribute rows: {rows[9][2]} at step 10, {rows[-1][2]} at step {STEPS}")
print(f"backend memory: {rows[9][3] / 1e6:.1f} MB at step 10, {rows[-1][3] / 1e6:.1f} MB at step {STEPS}")
