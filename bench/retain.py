#!/usr/bin/python3
"""The GPT's gradient under users' memory settings: does freed memory stay?

    bench/retain.py [repeats]

In the database bench/gpt.py leaves (ddx_bench_gpt, at the last size it ran:
run bench/gpt.py without --small for the 2-layer GPT), bench/gpt.py's
gradient statement in four sessions, executed in turn (medians of `repeats`,
default 5, after one warm-up execution each), ms, with each backend's peak
and resident memory after its last execution (/proc/<pid>/status):

  default            work_mem and ddx.retain_memory as they are
  work_mem 64MB      the program's CTEs in memory instead of spilled
  64MB + retain 1GB  the same, every freed byte kept
  retain 1GB         the default work_mem, every freed byte kept

A program that uses more memory than ddx.retain_memory should still keep
that much of it between executions (src/pg/runner/settings.cpp,
RetainMemory): "work_mem 64MB" within the noise of the others. Before it
kept none (glibc trimmed the heap's top to its 128 kB M_TOP_PAD), and the
program faulted its memory in at every execution.
"""
import statistics
import sys
import time

import psycopg2

from gpt import gradient_sql

DB = "ddx_bench_gpt"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
VARIANTS = [("default", ""), ("work_mem 64MB", "SET work_mem = '64MB'"),
            ("64MB + retain 1GB", "SET work_mem = '64MB'; SET ddx.retain_memory = '1GB'"),
            ("retain 1GB", "SET ddx.retain_memory = '1GB'")]


def main():
    conn = psycopg2.connect(dbname=DB)
    cur = conn.cursor()
    cur.execute("SET search_path = gpt, public")
    grad = gradient_sql(cur)[1]
    conn.close()
    curs = {}
    for name, setting in VARIANTS:
        c = psycopg2.connect(dbname=DB)
        c.autocommit = True
        k = c.cursor()
        k.execute("SET search_path = gpt, public")
        if setting:
            k.execute(setting)
        k.execute(grad)
        k.fetchall()
        curs[name] = k
    times = {name: [] for name in curs}
    for _ in range(REPEATS):
        for name, k in curs.items():
            t = time.perf_counter()
            k.execute(grad)
            k.fetchall()
            times[name].append((time.perf_counter() - t) * 1000)
    print(f"the GPT's gradient statement, medians of {REPEATS} in turn (ms); backend memory after (MB)")
    for name, k in curs.items():
        k.execute("SELECT pg_backend_pid()")
        pid = k.fetchone()[0]
        mem = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS")):
                    mem[line.split(":")[0]] = int(line.split()[1]) // 1024
        print(f"  {name:18s} {statistics.median(times[name]):8.1f}   peak {mem['VmHWM']:4d}  resident {mem['VmRSS']:4d}")


if __name__ == "__main__":
    main()
