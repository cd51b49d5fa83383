#!/usr/bin/python3
"""Dense execution (ddx.dense) against the SQL program, the forward and
PyTorch, in the same rounds (issue 38's table).

For each workload, medians (ms) of: the forward loss query under its best
plan of the settings a user can set (default; ddx.contraction = all; nested
loops off), the gradient statement with ddx's SQL program (ddx.dense off),
the same statement with ddx.dense = on (work_mem 64MB: the node refuses
arrays past work_mem x hash_mem_multiplier, 8 MB by default), and PyTorch's
forward and backward (float64, one thread), all interleaved; then the dense
node's peak memory (EXPLAIN ANALYZE through ddx_explain_plan) and the
largest difference between the dense gradient and PyTorch's.

Usage: bench/dense.py [repeats]   (PGHOST etc. as for psql)
"""
import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "torch"))
import numpy as np  # noqa: E402
import psycopg2  # noqa: E402
import test_models as tm  # noqa: E402
from common import interleaved  # noqa: E402

DB = "ddx_bench_dense"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 7


def session(*settings):
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    cur = conn.cursor()
    for s in settings:
        cur.execute(f"SET {s}")
    return cur


def workload(name, ctes, params, torch_fn):
    import torch  # noqa: F401
    forward = f"WITH {ctes} SELECT l FROM loss"
    parts = [f"SELECT '{p}' AS t, ({', '.join(k)})::text AS key, grad('loss', {p}.val) AS g FROM {p}"
             for p, k in params.items()]
    grad_sql = f"WITH {ctes} " + " UNION ALL ".join(parts)
    fwd = [session(), session("ddx.contraction = 'all'"), session("enable_nestloop = off")]
    sql = session("ddx.dense = off")
    dense = session("ddx.dense = on", "work_mem = '64MB'")
    runs = [(c, forward) for c in fwd] + [(sql, grad_sql), (dense, grad_sql), (None, torch_fn)]
    t = interleaved(runs, REPEATS)
    best = min(range(3), key=lambda i: t[i])
    dense.execute("SELECT line FROM ddx_explain_plan(%s, true)", (grad_sql,))
    plan = "\n".join(r[0] for r in dense.fetchall())
    mem = re.search(r"Dense Memory: (\d+) kB", plan)
    ran = "ran" if mem else ("refused: " + (re.search(r"Dense Refused: (.*)", plan) or [None, "no program"])[1])
    dense.execute(grad_sql)
    got = {(r[0], r[1]): r[2] for r in dense.fetchall()}
    want = torch_fn()
    worst = 0.0
    for p, keys in params.items():
        g = np.asarray(want[p])
        scale = max(np.abs(g).max(), 1e-300)
        for (tab, key), v in got.items():
            if tab != p:
                continue
            idx = tuple(int(x) for x in key.strip("()").split(","))
            worst = max(worst, abs(v - g[idx if len(idx) > 1 else idx[0]]) / scale)
    print(f"{name:<38} {t[best]:8.1f} {['default', 'node', 'no nl'][best]:>7} {t[3]:8.1f} {t[4]:8.1f} "
          f"{t[4] / t[best]:6.2f} {t[5]:7.2f} {t[4] / t[5]:6.1f} {t[3] / t[5]:6.1f} "
          f"{int(mem.group(1)) if mem else 0:8d} {worst:7.0e}  {ran if not mem else ''}", flush=True)


def main():
    import torch
    torch.set_num_threads(1)
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    tm.psql("CREATE EXTENSION ddx;", db=DB)
    print(f"median of {REPEATS} rounds, ms; forward: the loss query under its best plan (default, the contraction "
          "node everywhere, nested loops off); sql / dense: the gradient statement with ddx.dense off / on "
          "(work_mem 64MB); torch: PyTorch float64 forward + backward, one thread; mem: the dense node's arrays; "
          "agree: max |dense - torch| / max |torch|")
    print(f"{'workload':<38} {'forward':>8} {'plan':>7} {'sql':>8} {'dense':>8} {'d/fwd':>6} {'torch':>7} "
          f"{'d/tch':>6} {'s/tch':>6} {'mem kB':>8} {'agree':>7}")
    tt = torch.tensor

    X = np.random.default_rng(1).normal(size=(10000, 16))
    W = np.random.default_rng(2).normal(size=(16, 8)) / 4
    tm.psql(tm.matrix("x", X) + tm.matrix("w", W) + "ALTER TABLE x ADD PRIMARY KEY (i, j); "
            "ALTER TABLE w ADD PRIMARY KEY (i, j); ANALYZE;", db=DB)

    def matmul():
        w = tt(W, requires_grad=True)
        (torch.tanh(tt(X) @ w) ** 2).sum().backward()
        return {"w": w.grad.numpy()}

    workload("matmul 10000x16 . 16x8, sum tanh^2", tm.MATMUL_SQL, {"w": ["i", "j"]}, matmul)

    X, lab, W1, b1, W2, b2 = tm.mlp_data(4096, 16, 32, 4, 11)
    tm.psql("DROP TABLE x, w;" + tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) +
            tm.vector("b1", b1) + tm.matrix("w2", W2) + tm.vector("b2", b2) + "ANALYZE;", db=DB)

    def mlp():
        ps = [tt(a, requires_grad=True) for a in (W1, b1, W2, b2)]
        logits = torch.tanh(tt(X) @ ps[0] + ps[1]) @ ps[2] + ps[3]
        torch.nn.functional.cross_entropy(logits, tt(lab)).backward()
        return {n: p.grad.numpy() for n, p in zip(("w1", "b1", "w2", "b2"), ps)}

    workload("MLP 4096 x 16 -> 32 -> 4, softmax CE", tm.MLP_SQL,
             {"w1": ["i", "j"], "b1": ["j"], "w2": ["i", "j"], "b2": ["j"]}, mlp)

    T, d = 256, 16
    X, G, Wq, Wk, Wv = tm.attention_data(T, d, 5)
    tm.psql("DROP TABLE IF EXISTS x, tg, wq, wk, wv;" + tm.matrix("x", X) + tm.matrix("tg", G) +
            tm.matrix("wq", Wq) + tm.matrix("wk", Wk) + tm.matrix("wv", Wv) + "ANALYZE;", db=DB)

    def attn():
        tq, tk, tv = (tt(a, requires_grad=True) for a in (Wq, Wk, Wv))
        x = tt(X)
        att = (x @ tq) @ (x @ tk).T / math.sqrt(d)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        ((torch.softmax(att, dim=-1) @ (x @ tv)) * tt(G)).sum().backward()
        return {"wq": tq.grad.numpy(), "wk": tk.grad.numpy(), "wv": tv.grad.numpy()}

    workload(f"causal attention T={T} d={d}", tm.ATTN_SQL.format(d=d),
             {"wq": ["i", "j"], "wk": ["i", "j"], "wv": ["i", "j"]}, attn)
    workload(f"  the same, softmax by windows", tm.ATTN_WINDOW_SQL.format(d=d),
             {"wq": ["i", "j"], "wk": ["i", "j"], "wv": ["i", "j"]}, attn)


if __name__ == "__main__":
    main()
