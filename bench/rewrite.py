#!/usr/bin/python3
"""An optimizer step rewrites a whole parameter table. Four ways, for a table
of N rows, median of 3, ms: UPDATE in place (fillfactor 100, and 45 so that
updates can stay on their page: HOT, no index entry); writing a new table
(CREATE TABLE AS, primary key, swap names: a new OID); and writing the new
values into the same table (new values into a temporary table, TRUNCATE,
INSERT: same OID, new relfilenode). Usage: bench/rewrite.py [rows]"""
import statistics
import subprocess
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 800000
DB = "ddx_rewrite"


def psql(sql):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", DB], input=sql,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)


subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                f"CREATE DATABASE {DB}"], check=True, capture_output=True)
psql(f"CREATE TABLE w (k int PRIMARY KEY, val float8); INSERT INTO w SELECT k, sin(k) FROM generate_series(1, {N}) k;"
     f"CREATE TABLE w_grad (k int PRIMARY KEY, grad float8); INSERT INTO w_grad SELECT k, cos(k) FROM generate_series(1, {N}) k;"
     "VACUUM ANALYZE;")
ways = {
    "UPDATE in place": "UPDATE w SET val = w.val - 0.01 * g.grad FROM w_grad g WHERE g.k = w.k;",
    "UPDATE, fillfactor 45": "UPDATE w SET val = w.val - 0.01 * g.grad FROM w_grad g WHERE g.k = w.k;",
    "TRUNCATE + INSERT": "BEGIN; CREATE TEMP TABLE w_next ON COMMIT DROP AS SELECT w.k, w.val - 0.01 * g.grad AS val "
                         "FROM w JOIN w_grad g USING (k); TRUNCATE w; INSERT INTO w SELECT * FROM w_next; COMMIT;",
    "new table + swap": "BEGIN; CREATE TABLE w_new AS SELECT w.k, w.val - 0.01 * g.grad AS val FROM w JOIN w_grad g USING (k);"
                        "ALTER TABLE w_new ADD PRIMARY KEY (k); DROP TABLE w; ALTER TABLE w_new RENAME TO w;"
                        "ALTER INDEX w_new_pkey RENAME TO w_pkey; COMMIT;",
}
for name, sql in ways.items():
    if name == "UPDATE, fillfactor 45":
        psql("ALTER TABLE w SET (fillfactor = 45); VACUUM FULL w;")
    if name == "TRUNCATE + INSERT":
        psql("ALTER TABLE w RESET (fillfactor); VACUUM FULL w;")
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        psql(sql)
        times.append((time.perf_counter() - t0) * 1000)
        psql("VACUUM w;")
    print(f"{N} rows, {name:<18} {statistics.median(times):8.0f} ms")
