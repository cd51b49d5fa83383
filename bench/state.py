#!/usr/bin/python3
"""How an optimizer step writes its state rows, at a large parameter table.

    bench/state.py [rows] [repeats]

_ddx.step_table_sql updates the state rows a run has (UPDATE ... FROM
ddx_d) and inserts the rest with an INSERT anti-joined with the UPDATE's
RETURNING rows, which it runs only when the UPDATE missed rows (a count
guard). This times, for an Adam state of `rows` rows (default 800,000), all
of them stepped before, in one statement each as a step writes them:

  update+insert   the step's form: UPDATE, and the guarded anti-joined INSERT
  unguarded       the same without the count guard: the anti-join always runs
  on conflict     INSERT ... ON CONFLICT DO UPDATE, the one-statement form

Each statement is timed alone, in a transaction then rolled back (and the
table vacuumed, untimed), in round-robin rounds after a warm-up round;
medians of `repeats` (default 5), in ms. The three are checked to step
every row alike first.
"""
import os
import statistics
import sys
import time

import psycopg2

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 800000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 5

D = ("ddx_d AS MATERIALIZED (SELECT g AS k1, 'val'::text AS col, sin(g)::float8 AS d, 1 AS last "
     f"FROM generate_series(1, {ROWS}) g)")
RETURNING = "RETURNING s.col, s.k1, (0.01 / (1 - 0.9 ^ s.step)) * s.m / (sqrt(s.v) / sqrt(1 - 0.999 ^ s.step) + 1e-8) AS u"
UPDATE = ("ddx_so AS (UPDATE bench_state s SET step = CASE WHEN s.at = d.last THEN s.step + 1 ELSE 1 END, "
          "m = CASE WHEN s.at = d.last THEN 0.9 * s.m ELSE 0 END + 0.1 * d.d, "
          "v = CASE WHEN s.at = d.last THEN 0.999 * s.v ELSE 0 END + 0.001 * d.d * d.d, at = 2 "
          f"FROM ddx_d d WHERE s.run = 1 AND s.col = d.col AND s.k1 = d.k1 {RETURNING})")


def insert(guard):
    return ("ddx_sn AS (INSERT INTO bench_state AS s (run, col, k1, step, at, m, v) "
            "SELECT 1, d.col, d.k1, 1, 2, 0.1 * d.d, 0.001 * d.d * d.d FROM ddx_d d "
            "LEFT JOIN ddx_so o ON o.col = d.col AND o.k1 = d.k1 WHERE "
            + ("(SELECT count(*) FROM ddx_so) < (SELECT count(*) FROM ddx_d) AND " if guard else "")
            + f"o.col IS NULL {RETURNING})")


def split(guard):
    return (f"WITH {D}, {UPDATE}, {insert(guard)} "
            "SELECT count(*), sum(u) FROM (SELECT * FROM ddx_so UNION ALL SELECT * FROM ddx_sn) x")


ON_CONFLICT = (f"WITH {D}, ddx_s AS (INSERT INTO bench_state AS s (run, col, k1, step, at, m, v) "
               "SELECT 1, d.col, d.k1, 1, 2, 0.1 * d.d, 0.001 * d.d * d.d FROM ddx_d d "
               "ON CONFLICT (run, col, k1) DO UPDATE SET "
               "step = CASE WHEN s.at = 1 THEN s.step + 1 ELSE 1 END, "
               "m = CASE WHEN s.at = 1 THEN 0.9 * s.m ELSE 0 END + excluded.m, "
               "v = CASE WHEN s.at = 1 THEN 0.999 * s.v ELSE 0 END + excluded.v, at = 2 "
               f"{RETURNING}) SELECT count(*), sum(u) FROM ddx_s")


def main():
    conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS bench_state")
    # a state table as _ddx.state_table_for makes one (fillfactor 45: HOT updates)
    cur.execute("CREATE TABLE bench_state (run int, col text, k1 int, step int, at int, m float8, v float8, "
                "PRIMARY KEY (run, col, k1)) WITH (fillfactor = 45)")
    cur.execute(f"INSERT INTO bench_state SELECT 1, 'val', g, 3, 1, 0.01, 0.0001 FROM generate_series(1, {ROWS}) g")
    cur.execute("VACUUM ANALYZE bench_state")

    # (each form's result checked before timing: every row stepped, the same moves)
    sums = []
    for sql in (split(True), split(False), ON_CONFLICT):
        cur.execute("BEGIN")
        cur.execute(sql)
        sums.append(cur.fetchone())
        cur.execute("ROLLBACK")
    assert all(s[0] == ROWS and abs(s[1] - sums[0][1]) < 1e-6 * abs(sums[0][1]) for s in sums), sums
    names = ["update+insert", "unguarded", "on conflict"]
    times = [[] for _ in names]
    for i in range(REPEATS + 1):  # (a warm-up round first)
        for k, sql in enumerate((split(True), split(False), ON_CONFLICT)):
            cur.execute("BEGIN")
            t0 = time.perf_counter()
            cur.execute(sql)
            cur.fetchall()
            t = (time.perf_counter() - t0) * 1000
            cur.execute("ROLLBACK")
            cur.execute("VACUUM bench_state")
            if i:
                times[k].append(t)
    ms = [statistics.median(t) for t in times]
    print(f"{ROWS} state rows, all stepped before; medians of {REPEATS} (ms)")
    for name, t in zip(names, ms):
        print(f"  {name:14s} {t:9.0f}  {t / ms[0]:5.2f}x")
    cur.execute("DROP TABLE bench_state")


if __name__ == "__main__":
    main()
