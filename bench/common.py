"""What bench.py and steps.py share: the runner's settings, the program
behind a gradient statement (and with every step stored), and round-robin
timing."""
import re
import statistics
import subprocess
import sys
import time

import psycopg2

# the settings the runner (src/pg/runner.cpp) gives a program
RUNNER = ("SET jit = off; SET enable_nestloop = off; SET enable_mergejoin = off; SET enable_sort = off; "
          "SET join_collapse_limit = 1; SET plan_cache_mode = force_generic_plan")


def program_of(db, grad_sql, path=None):
    """The program text behind a gradient statement (EXPLAIN VERBOSE shows it)."""
    sql = (f"SET search_path = {path}; " if path else "") + "EXPLAIN (VERBOSE, COSTS OFF) " + grad_sql
    r = subprocess.run(["psql", "-X", "-At", "-d", db, "-c", sql], capture_output=True, text=True)
    # (the program, then its variant over Citus tables in place or NULL)
    m = re.search(r"_ddx\.grad_(?:at|key)\('((?:[^']|'')*)'::text, (?:'((?:[^']|'')*)'::text|NULL::text), \d",
                  r.stdout, re.S)
    if not m:
        sys.exit("no gradient program in the plan: " + r.stdout[:300] + r.stderr[:300])
    # over Citus data tables: the in-place program (src/pg/runner)
    return (m.group(2) or m.group(1)).replace("''", "'")


def all_stored(prog):
    """prog with every step stored, so that each step has its rows (a step
    that one later step reads is otherwise NOT MATERIALIZED, planned inside
    its reader; ddx_explain does the same)."""
    return prog.replace(" AS NOT MATERIALIZED (", " AS MATERIALIZED (")


def temp_bytes(db, sql):
    """Bytes one run of sql writes to temporary files (pg_stat_database's
    temp_bytes before and after, in a session of its own, after a first run:
    a CTE's rows past work_mem, a hash join's batches, an aggregate's spill).
    Issue 38 asks that a program write none at the default work_mem."""
    conn = psycopg2.connect(dbname=db)
    conn.autocommit = True
    cur = conn.cursor()

    def flushed():
        # (a backend reports its counts at a transaction's end once asked;
        # the snapshot is then read anew)
        cur.execute("SELECT pg_stat_force_next_flush()")
        cur.execute("SELECT 1")
        time.sleep(0.1)
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()")
        return cur.fetchone()[0]

    cur.execute(sql)
    cur.fetchall()
    before = flushed()
    cur.execute(sql)
    cur.fetchall()
    after = flushed()
    conn.close()
    return after - before


def node_session(db, setting):
    """An autocommit cursor of a session of its own with ddx.contraction =
    setting, set once: a changed setting plans the session's cached
    statements (ddx's programs among them) again, which a session that
    switched would time."""
    conn = psycopg2.connect(dbname=db)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute(f"SET ddx.contraction = '{setting}'")
    return cur


def round_robin(cur, queries, repeats):
    """Median wall times (ms) of each query, run in turn after one warm-up
    round, each fetching its rows: the machine's drift reaches them alike."""
    return interleaved([(cur, q) for q in queries], repeats)


def interleaved(runs, repeats):
    """round_robin over (cursor, sql) pairs: queries of several sessions. A
    run may instead be (None, fn), a Python function (PyTorch's step): each
    round times it as the median of 10 calls, so that its few milliseconds
    meet the same drift of the machine as the statements beside it."""
    times = [[] for _ in runs]
    for i in range(repeats + 1):
        for k, (cur, q) in enumerate(runs):
            if cur is None:
                t = torch_ms(q, 10)  # (its own warm-up call first)
            else:
                t0 = time.perf_counter()
                cur.execute(q)
                cur.fetchall()
                t = (time.perf_counter() - t0) * 1000
            if i:
                times[k].append(t)
    return [statistics.median(t) for t in times]


def torch_ms(fn, runs=20):
    """The median time of fn() in ms, over `runs` calls after one warm-up call
    (PyTorch's first call pays its allocator and lazy initialization: it
    raised the matmul's median of 5 from 2.0 to 5.2 ms)."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)
