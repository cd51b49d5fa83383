#!/usr/bin/python3
"""Forward mode: jvp of a model's loss along tangents of every parameter
table, beside the loss query itself, in one session.

    bench/jvp.py [repeats]

For each workload, medians of `repeats` interleaved runs (ms): the loss query
under PostgreSQL's default plan and with nested loops off (a user can have
either: the best is the denominator), and the statement SELECT jvp(loss, ...)
(its tangent query, the loss's values included), and one statement with
H·v of every parameter table (hvp, one gradient program of the jvp query).
Workloads: the MLP and the
causal attention of bench.py, and the GPT of examples/gpt at the first
demo's size (1 layer, 2 heads, 16 channels, context 16, batch 4).
"""
import os
import subprocess
import sys

import numpy as np
import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "torch"))
import test_gpt as tg  # noqa: E402
import test_models as tm  # noqa: E402
from common import round_robin  # noqa: E402

DB = "ddx_bench_jvp"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
rng = np.random.default_rng(4)


def row(cur, name, ctes_or_loss, params, gpt=False):
    """ctes_or_loss: the CTEs of a loss named `loss` (column l), or (gpt) a
    whole loss statement (column avg)."""
    args = ", ".join(f"'{p}.val', 't_{p.split('.')[-1]}'" for p in params)
    if gpt:
        fwd = ctes_or_loss
        jvp = f"SELECT jvp(q.avg, {args}) FROM ({ctes_or_loss}) q"
        ctes = f"loss AS ({ctes_or_loss})"
    else:
        fwd = f"WITH {ctes_or_loss} SELECT l FROM loss"
        jvp = f"WITH {ctes_or_loss} SELECT jvp(q.l, {args}) FROM loss q"
        ctes = ctes_or_loss
    hs = [f"h{i} AS (SELECT sum(hvp('loss', t.val, {args})) AS h FROM {p} t)" for i, p in enumerate(params)]
    hvp = f"WITH {ctes}, " + ", ".join(hs) + " SELECT " + " + ".join(f"(SELECT h FROM h{i})" for i in range(len(hs)))
    qs = ["RESET enable_nestloop; " + fwd, "SET enable_nestloop = off; " + fwd, "RESET enable_nestloop; " + jvp,
          "RESET enable_nestloop; " + hvp]
    d, nl, j, h = round_robin(cur, qs, REPEATS)
    best = min(d, nl)
    print(f"{name:<42} {d:9.0f} {nl:9.0f} {j:9.0f} {j / best:7.2f} {j / d:9.2f} {h:9.0f} {h / best:7.2f}", flush=True)


def tangents(names_shapes):
    sql = ""
    for name, a in names_shapes:
        t = rng.normal(size=np.shape(a))
        sql += tm.matrix("t_" + name, t) if np.ndim(a) == 2 else tm.vector("t_" + name, t)
    return sql


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    tm.psql("CREATE EXTENSION ddx;", db=DB)
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    cur = conn.cursor()
    print(f"median of {REPEATS} interleaved runs, ms; ratio = jvp statement / the loss query's best plan")
    print(f"{'workload':<42} {'default':>9} {'nl off':>9} {'jvp':>9} {'ratio':>7} {'/default':>9} {'hvp':>9} "
          f"{'ratio':>7}")

    X, lab, W1, b1, W2, b2 = tm.mlp_data(4096, 16, 32, 4, 11)
    ps = [("w1", W1), ("b1", b1), ("w2", W2), ("b2", b2)]
    tm.psql(tm.matrix("x", X) + tm.vector("lab", lab) + "".join(
        tm.matrix(n, a) if a.ndim == 2 else tm.vector(n, a) for n, a in ps) + tangents(ps) + "ANALYZE;", db=DB)
    row(cur, "2-layer MLP, 4096 x 16 -> 32 -> 4", tm.MLP_SQL, [n for n, _ in ps])

    T, d = 256, 16
    X, G, Wq, Wk, Wv = tm.attention_data(T, d, 5)
    ps = [("wq", Wq), ("wk", Wk), ("wv", Wv)]
    tm.psql("DROP TABLE x;" + tm.matrix("x", X) + tm.matrix("tg", G) + "".join(tm.matrix(n, a) for n, a in ps) +
            tangents(ps) + "ANALYZE;", db=DB)
    row(cur, f"causal attention T={T} d={d}", tm.ATTN_SQL.format(d=d), [n for n, _ in ps])

    for f in ("gpt.sql", "load_gpl3.sql"):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", os.path.join(tg.GPT, f)],
                       check=True, capture_output=True)
    cur.execute("SELECT gpt.setup(1, 2, 16, 16, 4, steps => 1); SELECT setseed(0.5)")
    for n, keys in tg.SHAPES.items():
        cur.execute(f"DROP TABLE IF EXISTS t_{n}; CREATE TABLE t_{n} AS SELECT {', '.join(keys)}, random() - 0.5 AS val FROM gpt.{n}")
    cur.execute("ANALYZE")
    cur.execute("SELECT gpt.loss_sql()")
    loss = cur.fetchone()[0].replace("$1", "1")
    row(cur, "GPT 1 layer, 2 heads, 16 channels, T 16, B 4", loss, [f"gpt.{n}" for n in tg.SHAPES], gpt=True)


if __name__ == "__main__":
    main()
