#!/usr/bin/python3
"""Where a gradient program spends its time, step by step.

    bench/steps.py DB 'WITH ... SELECT grad(...) ...' [repeats] [search_path]

Fetches the program behind the gradient statement (EXPLAIN VERBOSE shows it),
then times its prefixes: the first k steps, each forced to run by counting its
rows, for every k, interleaved round-robin under the runner's settings
(ddx.in_program included: the contraction node and the programs' estimates). A
step's cost is the growth of the median from the prefix before it. EXPLAIN
ANALYZE's per-node timing inflates big joins several-fold on this machine;
this does not, but its figures are still medians of a noisy machine: use 5+
repeats and read differences under ~10 ms as noise. Each prefix is prepared
once under its generic plan, as the runner keeps a program's plan, and only
its executions are timed: timing the statements' text put each step's share
of planning (~60 ms for the GPT's program) into the step, which made a
grouping of 4,096 rows into 32 look like 39 ms (it takes 0.7).
"""
import re
import sys

import psycopg2

from common import RUNNER, all_stored, program_of, round_robin


def main():
    db, grad_sql = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    path = sys.argv[4] if len(sys.argv) > 4 else "public"
    prog = program_of(db, grad_sql, path)
    # (the steps, without the gradient rows' SELECT that follows them on
    # lines of its own; a prefix counts each step's rows)
    head = all_stored(prog[:prog.index("\nSELECT ")])
    ctes = re.split(r",\n(?=[fbm][0-9_]+ AS MATERIALIZED)", head[len("WITH "):])
    names = [c.split(" ")[0] for c in ctes]
    queries = []
    for k in range(1, len(ctes) + 1):
        count = " + ".join(f"(SELECT count(*) FROM {n})" for n in names[:k])
        queries.append("WITH " + ",\n".join(ctes[:k]) + "\nSELECT " + count)
    queries.append(prog)
    conn = psycopg2.connect(dbname=db)
    conn.autocommit = True
    cur = conn.cursor()
    # (ddx.in_program as the runner sets it: the contraction node and the
    # CTE key statistics of programs, under ddx.contraction's default)
    cur.execute(f"SET search_path = {path}; {RUNNER}; SET ddx.in_program = on")
    for i, q in enumerate(queries):
        cur.execute(f"PREPARE p{i} AS {q}")
    medians = round_robin(cur, [f"EXECUTE p{i}" for i in range(len(queries))], repeats)
    prev = 0.0
    print(f"{'step':<8} {'prefix ms':>10} {'step ms':>8}   (median of {repeats})")
    for name, m in zip(names + ["(all)"], medians):
        print(f"{name:<8} {m:10.0f} {m - prev:8.0f}")
        prev = m


if __name__ == "__main__":
    main()
