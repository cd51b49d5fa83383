#!/usr/bin/python3
"""What the second core could give a training step: the GPT's gradient over
its whole batch in one session, against half the batch in each of two
sessions at once (data parallelism, as PyTorch's DistributedDataParallel
splits a batch).

    bench/shards.py DB [rounds]

DB has examples/gpt set up (gpt.setup(...), any size; its batch even).
Three statements, each the gradient of every parameter table (their rows
by ctid) at batch 1 of gpt.batches: the whole batch, and shards 0 and 1
(sequences b % 2 = 0 and 1). The loss is the mean cross-entropy of the
batch's tokens and the shards have as many tokens each, so the whole
batch's gradient is the mean of the shards': checked first, row by row
(the largest difference relative to the largest gradient), so that the
timing compares equal work. Then `rounds` rounds (default 9, after a warm
one): the whole batch alone, then both shards at once in two sessions
(wall time of the pair), medians in ms. Nothing is written: the shards'
gradients are not summed or applied (that is what a sharded step would add).
"""
import statistics
import sys
import threading
import time

import psycopg2

DB = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 9


def statements(cur):
    """For the whole batch and each shard: the gradient rows (checked) and
    a statement that computes them and returns their sum per table (timed:
    no rows to the client, as bench/gpt.py times the gradient)."""
    cur.execute("SELECT gpt.loss_sql(), gpt.params()")
    loss, params = cur.fetchone()
    batch = "WHERE g.step = $1"
    if loss.count(batch) != 1:
        sys.exit("gpt.loss_sql() does not select its batch as bench/shards.py expects: " + batch)
    tables = [('.'.join(p.split('.')[:2]), p.split('.')[2]) for p in params]
    rows = " UNION ALL ".join(f"SELECT '{t}.{c}' AS p, t.ctid::text AS k, grad('ddx_loss', t.{c}) AS g FROM {t} t"
                              for t, c in tables)
    sums = ", ".join(f"g{i} AS (SELECT sum(grad('ddx_loss', t.{c})) AS g FROM {t} t)"
                     for i, (t, c) in enumerate(tables))
    total = " + ".join(f"(SELECT g FROM g{i})" for i in range(len(tables)))
    out = []
    for shard in ("", " AND g.b % 2 = 0", " AND g.b % 2 = 1"):
        head = f"WITH ddx_loss AS ({loss.replace(batch, 'WHERE g.step = 1' + shard)})"
        out.append((f"{head} {rows}", f"{head}, {sums} SELECT {total}"))
    return out


def run(cur, sql, out=None):
    cur.execute(sql)
    rows = cur.fetchall()
    if out is not None:
        out.append(rows)


def main():
    # (a session of its own per statement: the whole batch's statement and a
    # shard's taken in turn in one session measured 266 ms for the whole
    # batch against 147 in a session of its own; not understood, since the
    # runner keeps up to 64 programs' plans per session)
    conns = [psycopg2.connect(dbname=DB) for _ in range(3)]
    curs = [c.cursor() for c in conns]
    for c in conns:
        c.autocommit = True
    (rows, whole), (rows0, s0), (rows1, s1) = statements(curs[0])
    got = []
    for cur, sql in ((curs[2], rows), (curs[0], rows0), (curs[1], rows1)):
        run(cur, sql, got)
    g = [{(p, k): v for p, k, v in rows} for rows in got]
    if not (g[0].keys() == g[1].keys() == g[2].keys()):
        sys.exit("the shards' gradients have other rows than the whole batch's")
    top = max(abs(v) for v in g[0].values())
    diff = max(abs(v - (g[1][key] + g[2][key]) / 2) for key, v in g[0].items())
    print(f"{len(g[0])} gradient rows; whole batch against the mean of the shards: "
          f"max difference {diff:.3g} ({diff / top:.3g} of the largest gradient)")
    if diff > 1e-12 * top:
        sys.exit("the shards do not add up to the whole batch")
    alone, pair = [], []
    for r in range(ROUNDS + 1):
        t = time.perf_counter()
        run(curs[2], whole)
        alone.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        th = threading.Thread(target=run, args=(curs[1], s1))
        th.start()
        run(curs[0], s0)
        th.join()
        pair.append((time.perf_counter() - t) * 1000)
    a, p = statistics.median(alone[1:]), statistics.median(pair[1:])
    print(f"whole batch, one session: {a:.1f} ms; its halves in two sessions at once: {p:.1f} ms "
          f"({p / a:.2f}); medians of {ROUNDS}")


if __name__ == "__main__":
    main()
