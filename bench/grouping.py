#!/usr/bin/python3
"""A grouping of one relation: the contraction node (Join Keys: 0) against
PostgreSQL's hash aggregate, on the same rows, in the same rounds.

    bench/grouping.py [repeats]

`SELECT k, sum(x) FROM g GROUP BY k` (and with avg and count beside the
sum, and max and min) over a table of N rows in G groups, each timed as
`SELECT * FROM (q) s OFFSET 100000000` (every group formed, none sent),
and `SELECT count(*) FROM g`, the scan alone: the grouping's own cost is
each's time above the scan. Two sessions: one with ddx.contraction = 'all'
(the node, which its cost puts below the hash aggregate; the script stops
where it does not), one with it off (PostgreSQL's hash aggregate). Parallel
workers off in both (a parallel hash aggregate is PostgreSQL's answer to a
large table; the node is never partial). Before timing, each query's groups
are checked equal.
Prints medians (ms) and the grouping's ns a row.
"""
import sys

import psycopg2

from common import interleaved

DB = "ddx_bench_grouping"
SIZES = [(400_000, 4_096), (400_000, 64), (100_000, 100_000), (12_288, 4_096)]


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    admin = psycopg2.connect(dbname="postgres")
    admin.autocommit = True
    a = admin.cursor()
    a.execute(f"DROP DATABASE IF EXISTS {DB}")
    a.execute(f"CREATE DATABASE {DB}")
    sessions = []
    for setting in ("node", "hashagg"):
        c = psycopg2.connect(dbname=DB)
        c.autocommit = True
        cur = c.cursor()
        cur.execute("CREATE EXTENSION IF NOT EXISTS ddx")
        cur.execute("SET max_parallel_workers_per_gather = 0; SET work_mem = '64MB'")
        cur.execute("SET ddx.contraction = 'all'" if setting == "node" else "SET ddx.contraction = 'off'")
        sessions.append(cur)
    node, hashagg = sessions
    print("rows     groups  query        scan   node  hashagg   node ns/row  hashagg ns/row")
    for n, g in SIZES:
        node.execute("DROP TABLE IF EXISTS g")
        node.execute(f"CREATE TABLE g AS SELECT (i % {g})::int8 AS k, random() AS x, random() AS y "
                     f"FROM generate_series(1, {n}) i")
        node.execute("VACUUM ANALYZE g")
        for name, q in (("sum", "SELECT k, sum(x) FROM g GROUP BY k"),
                        ("sum,avg,cnt", "SELECT k, sum(x), avg(y), count(*) FROM g GROUP BY k"),
                        ("max,min", "SELECT k, max(x), min(y) FROM g GROUP BY k")):
            node.execute("EXPLAIN (COSTS OFF) " + q)
            plan = "\n".join(r[0] for r in node.fetchall())
            if "Join Keys: 0" not in plan:
                sys.exit("the node did not take " + q + ":\n" + plan)
            node.execute(f"CREATE TEMP TABLE a AS {q}")
            hashagg.execute(f"CREATE TABLE b AS {q}")
            node.execute("SELECT count(*) FROM pg_temp.a a FULL JOIN b USING (k) WHERE a IS DISTINCT FROM b")
            bad = node.fetchone()[0]
            node.execute("DROP TABLE pg_temp.a; DROP TABLE b")
            if bad:
                sys.exit(f"{bad} groups differ: {q}")
            # (every column of the groups read, none sent: a count(*) over the
            # grouping lets PostgreSQL drop its unread sums, and a GROUP BY
            # without them is not the node's)
            timed = f"SELECT * FROM ({q}) s OFFSET 100000000"
            for cur in (node, hashagg):
                cur.execute("EXPLAIN (COSTS OFF) " + timed)
                plan = "\n".join(r[0] for r in cur.fetchall())
                if ("Join Keys: 0" in plan) != (cur is node):
                    sys.exit("the timed query is not planned as meant:\n" + plan)
            scan, t_node, t_hash = interleaved([(node, "SELECT count(*) FROM g"), (node, timed), (hashagg, timed)],
                                               repeats)
            print("%-8d %-7d %-11s %6.1f %6.1f %8.1f %13.1f %15.1f" %
                  (n, g, name, scan, t_node, t_hash, (t_node - scan) * 1e6 / n, (t_hash - scan) * 1e6 / n))
    for cur in sessions:
        cur.connection.close()
    a.execute(f"DROP DATABASE {DB}")


if __name__ == "__main__":
    main()
