#!/usr/bin/python3
"""Two gradient programs of one statement, timed in turn in one session.

    bench/program_ab.py DB A.sql B.sql [rounds]

A.sql and B.sql are the program texts of the same statement as two builds of
ddx write them (`SELECT program FROM _ddx.statement_programs($$...$$)`, at
each commit in turn: a program depends on the tables' definitions and the
statement, not on the build that runs it). Each is prepared once under the
settings the runner gives programs (and ddx.contraction = all), checked to
return the same rows (the largest relative difference of the gradients is
printed), then executed in turn for `rounds` rounds (default 7): the medians
(ms), so that a change of a rule is measured without the machine's drift
between two separate runs.
"""
import statistics
import sys
import time

import psycopg2

from common import RUNNER

if len(sys.argv) < 4:
    sys.exit(__doc__)
DB, A, B = sys.argv[1:4]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 7


def main():
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute(RUNNER + "; SET ddx.contraction = 'all'; SET ddx.in_program = on")
    cur.execute("SELECT current_setting('search_path')")
    cur.execute(f"SET search_path = pg_catalog, {cur.fetchone()[0]}")
    rows = {}
    for name, path in (("a", A), ("b", B)):
        with open(path) as fh:
            cur.execute(f"PREPARE {name} AS " + fh.read())
        cur.execute(f"EXECUTE {name}")
        # (toid, tid, pidx, gradient, key): in a stable order
        rows[name] = sorted(cur.fetchall(), key=lambda r: tuple(str(x) for x in (r[0], r[1], r[2], r[4])))
    if len(rows["a"]) != len(rows["b"]):
        sys.exit(f"the programs return {len(rows['a'])} and {len(rows['b'])} rows")
    diff = max((abs((x[3] or 0) - (y[3] or 0)) / max(abs(x[3] or 0), 1e-300) for x, y in zip(rows["a"], rows["b"])),
               default=0.0)
    times = {"a": [], "b": []}
    for _ in range(ROUNDS):
        for name in times:
            t = time.perf_counter()
            cur.execute(f"EXECUTE {name}")
            cur.fetchall()
            times[name].append((time.perf_counter() - t) * 1000)
    a, b = statistics.median(times["a"]), statistics.median(times["b"])
    print(f"{len(rows['a'])} rows, gradients' largest relative difference {diff:.1e}; "
          f"A {a:.1f} ms, B {b:.1f} ms (A / B {a / b:.2f}), medians of {ROUNDS} rounds in turn")


if __name__ == "__main__":
    main()
