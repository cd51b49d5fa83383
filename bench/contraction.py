#!/usr/bin/python3
"""The contraction node on and off (ddx.contraction), one session, medians.

    bench/contraction.py [repeats] [--fill]

For each workload: the forward loss query under PostgreSQL's default plan and
with nested loops off (node off; the best is the honest denominator), the
forward with the node (ddx.contraction = all), and the statement with every
parameter's gradient with the node off and on; the speedups node on / off;
and, for the matmul, PyTorch's forward+backward (float64, one thread; timed
in the same rounds as the statements, each round the median of 10 calls)
beside ddx's: the statement that returns the loss and its gradient from one pass
(ddx_value and grad, what ddx_adamw_step runs), and, the stricter count, the
forward statement and the gradient statement added.
Workloads: the matmul, the 2-layer MLP (its tables without keys, as
bench.py has them, and again with primary keys, as a user who trains with
ddx_adamw_step has them, and with keys but without the hidden layer's
bias, and LLaMA's SwiGLU MLP on an RMSNorm), matrix factorization over
ratings, and causal attention of bench.py.
With --fill: also the gradient with the node on and ddx.contraction_fill
off (a third session), and the ratio to it: what Custom Scan (ddx fill)
saves.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "torch"))
import numpy as np  # noqa: E402
import test_models as tm  # noqa: E402
from common import interleaved, node_session  # noqa: E402

DB = "ddx_bench_contraction"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 5
FILL = "--fill" in sys.argv


def row(off, on, name, ctes, params, torch_step=None, nofill=None):
    forward = f"WITH {ctes} SELECT l FROM loss"
    grad = f"WITH {ctes} " + " UNION ALL ".join(f"SELECT '{p}' AS t, grad('loss', {p}.val) AS g FROM {p}" for p in params)
    nl, dflt = "SET enable_nestloop = off; ", "RESET enable_nestloop; "
    value_grad = (f"WITH {ctes} SELECT '{params[0]}' AS t, grad('loss', {params[0]}.val) AS g, ddx_value('loss') AS l "
                  f"FROM {params[0]}")
    runs = [(off, dflt + forward), (off, nl + forward), (on, dflt + forward), (on, nl + forward), (off, dflt + grad),
            (on, dflt + grad)] + ([(on, dflt + value_grad), (None, torch_step)] if torch_step else [])
    if nofill:
        runs.append((nofill, dflt + grad))
    # two sessions, one per setting, each set once: a changed setting plans
    # cached statements (ddx's programs among them) again, which a session
    # that switched would time; PyTorch's step is timed in the same rounds
    times = interleaved(runs, REPEATS)
    gnofill = times.pop() if nofill else None
    d, nloff, fon_d, fon_nl, goff, gon, *vg = times
    best, fon = min(d, nloff), min(fon_d, fon_nl)
    t = (f"{vg[1]:9.2f} {vg[0]:8.0f} {vg[0] / vg[1]:8.0f}x {(fon + gon) / vg[1]:8.0f}x" if torch_step
         else f"{'-':>9} {'-':>8} {'-':>9} {'-':>9}")
    f = f" {gnofill:8.0f} {gnofill / gon:6.2f}x" if nofill else ""
    print(f"{name:<36} {d:8.0f} {nloff:8.0f} {fon:8.0f} {best / fon:6.1f}x {goff:8.0f} {gon:8.0f} {goff / gon:6.1f}x {t}{f}",
          flush=True)


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    tm.psql("CREATE EXTENSION ddx;", db=DB)
    off, on = node_session(DB, "off"), node_session(DB, "all")
    nofill = None
    if FILL:
        nofill = node_session(DB, "all")
        nofill.execute("SET ddx.contraction_fill = off")
    print(f"median of {REPEATS} interleaved runs, ms; forward speedup = best forward without the node / with it")
    print(f"{'workload':<36} {'default':>8} {'nl off':>8} {'node':>8} {'fwd':>7} {'grad off':>8} {'grad on':>8} "
          f"{'grad':>7} {'torch f+b':>9} {'value+g':>8} {'vg/torch':>9} {'f+g/torch':>9}" +
          (f" {'no fill':>8} {'fill':>7}" if FILL else ""))
    X = np.random.default_rng(1).normal(size=(10000, 16))
    W = np.random.default_rng(2).normal(size=(16, 8)) / 4
    tm.psql(tm.matrix("x", X) + tm.matrix("w", W) + "ANALYZE;", db=DB)
    step = None
    try:
        import torch
        torch.set_num_threads(1)

        def step():
            w = torch.tensor(W, requires_grad=True)
            (torch.tanh(torch.tensor(X) @ w) ** 2).sum().backward()
    except ImportError:
        pass
    row(off, on, "matmul 10000x16 . 16x8 (w)", tm.MATMUL_SQL, ["w"], step, nofill=nofill)

    X, lab, W1, b1, W2, b2 = tm.mlp_data(4096, 16, 32, 4, 11)
    tm.psql("DROP TABLE x, w;" + tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) +
            tm.vector("b1", b1) + tm.matrix("w2", W2) + tm.vector("b2", b2) + "ANALYZE;", db=DB)
    row(off, on, "2-layer MLP, 4096 x 16 -> 32 -> 4", tm.MLP_SQL, ["w1", "b1", "w2", "b2"], nofill=nofill)
    # The same with primary keys, as a user who trains has them (ddx_adamw_step
    # requires one on each parameter table): ddx then knows that b1 matches
    # one row per hidden unit, and sums no 131k-group GROUPING SET for it.
    tm.psql("ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE lab ADD PRIMARY KEY (j); "
            "ALTER TABLE w1 ADD PRIMARY KEY (i, j); ALTER TABLE b1 ADD PRIMARY KEY (j); "
            "ALTER TABLE w2 ADD PRIMARY KEY (i, j); ALTER TABLE b2 ADD PRIMARY KEY (j); ANALYZE;", db=DB)
    row(off, on, "  the same, with primary keys", tm.MLP_SQL, ["w1", "b1", "w2", "b2"], nofill=nofill)
    row(off, on, "  the same, no hidden bias", tm.MLP_NO_BIAS_SQL, ["w1", "w2", "b2"], nofill=nofill)
    W3 = np.random.default_rng(12).normal(size=W1.shape) / 4
    tm.psql(tm.matrix("w3", W3) + tm.vector("g1", 1 + 0.1 * np.random.default_rng(13).normal(size=16)) +
            "ALTER TABLE w3 ADD PRIMARY KEY (i, j); ALTER TABLE g1 ADD PRIMARY KEY (j); ANALYZE;", db=DB)
    row(off, on, "  SwiGLU on an RMSNorm, 16 -> 32 -> 4", tm.SWIGLU_SQL, ["w1", "w3", "w2", "g1"], nofill=nofill)

    # matrix factorization: ~20k ratings of 1,000 users and 500 items, k = 16
    rg = np.random.default_rng(14)
    pairs = np.argwhere(rg.random((1000, 500)) < 0.04)
    tm.psql(tm.matrix("uu", rg.normal(size=(1000, 16)) / 4) + tm.matrix("vv", rg.normal(size=(500, 16)) / 4) +
            tm.table("r", [("u", "int"), ("i", "int"), ("val", "float8")],
                     [(u, i, v) for (u, i), v in zip(pairs, rg.normal(size=len(pairs)))]) +
            "ALTER TABLE r ADD PRIMARY KEY (u, i); ALTER TABLE uu ADD PRIMARY KEY (i, j); "
            "ALTER TABLE vv ADD PRIMARY KEY (i, j); ANALYZE;", db=DB)
    row(off, on, f"matrix factorization, {len(pairs)} ratings, k 16", tm.MF_SQL, ["uu", "vv"], nofill=nofill)

    T, d = 256, 16
    X, G, Wq, Wk, Wv = tm.attention_data(T, d, 5)
    tm.psql("DROP TABLE x;" + tm.matrix("x", X) + tm.matrix("tg", G) + tm.matrix("wq", Wq) + tm.matrix("wk", Wk) +
            tm.matrix("wv", Wv) + "ANALYZE;", db=DB)
    row(off, on, f"causal attention T={T} d={d}", tm.ATTN_SQL.format(d=d), ["wq", "wk", "wv"], nofill=nofill)


if __name__ == "__main__":
    main()
