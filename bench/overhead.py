#!/usr/bin/python3
"""The fixed cost of a replayed gradient: the same tiny gradient statement
run N times in one session (its program prepared once and kept), against
running the program's own SQL N times. The difference per run is what ddx
adds on top of the program: finding the cached plan, SPI, the GUC switch,
and the per-row hash lookups. Usage: bench/overhead.py [runs]"""
import re
import subprocess
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
DB = "ddx_overhead"


def psql(sql):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", DB], input=sql,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return r.stdout


subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                f"CREATE DATABASE {DB}"], check=True, capture_output=True)
psql("CREATE EXTENSION ddx; CREATE TABLE w (f int PRIMARY KEY, val float8);"
     "INSERT INTO w SELECT f, f * 0.1 FROM generate_series(1, 8) f;")
stmt = "WITH loss AS (SELECT sum(val * val) AS l FROM w) SELECT sum(grad('loss', val)) FROM w"
out = psql("EXPLAIN (VERBOSE, COSTS OFF) " + stmt)
prog = re.search(r"_ddx\.grad_at\('(.*?)'::text, NULL::text, \d", out, re.S).group(1).replace("''", "'")
body = prog.replace("'", "''")
res = psql(f"""
CREATE FUNCTION run_grad(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); g float8;
BEGIN
  FOR i IN 1 .. n LOOP
    {stmt} INTO g;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000 / n;
END $$;
CREATE FUNCTION run_program(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; c bigint;
BEGIN
  PERFORM set_config('search_path', 'pg_catalog, pg_temp', true);
  PERFORM set_config('jit', 'off', true);
  PERFORM set_config('enable_nestloop', 'off', true);
  PERFORM set_config('enable_mergejoin', 'off', true);
  t0 := clock_timestamp();
  FOR i IN 1 .. n LOOP
    SELECT count(*) INTO c FROM ({prog}) q;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000 / n;
END $$;
SELECT run_grad(20), run_program(20);
SELECT run_grad({N}), run_program({N});
""")
g, p = (float(x) for x in res.strip().splitlines()[-1].split("|"))
print(f"{N} runs: gradient statement {g:.3f} ms, its program alone {p:.3f} ms, ddx's fixed cost {g - p:.3f} ms per run")
