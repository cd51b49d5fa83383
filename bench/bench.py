#!/usr/bin/python3
"""Forward time and gradient time of SQL models, side by side in one run.

For each workload: the median time of the forward loss query alone, of the
statement that returns every parameter's gradient (its forward included),
their ratio, the number of steps of the gradient program (forward and
backward CTEs), the row count of its largest step (from EXPLAIN ANALYZE of
the program) and the kilobytes one gradient statement writes to temporary
files at the session's work_mem (issue 38: none at the default). With
python3-torch, PyTorch (float64, one thread) times the same model's forward
and backward for scale.
"""
import json
import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "torch"))
import numpy as np  # noqa: E402
import test_models as tm  # noqa: E402
from common import RUNNER, all_stored, program_of, round_robin, temp_bytes, torch_ms  # noqa: E402

DB = "ddx_bench"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def timed(*sqls):
    """Median wall times (ms) of each of sqls, round-robin (common.round_robin).
    Each runs as written and returns its rows: wrapped in SELECT count(*), the
    forward's loss column went unused and PostgreSQL pruned its computation
    (no exp, no tanh, no sums), which made the matmul's forward look 1.3x faster.
    One session for all, as an application holds one (a psql per statement
    added a backend's start-up to every timing)."""
    import psycopg2
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    medians = round_robin(conn.cursor(), sqls, REPEATS)
    conn.close()
    return medians


def program_stats(grad_sql):
    """(steps, largest step rows) of the gradient program behind grad_sql."""
    prog = program_of(DB, grad_sql)
    steps = len(re.findall(r"\b[fgbm][\d_]+ AS (?:NOT )?MATERIALIZED", prog))
    prog = all_stored(prog)
    plan = tm.psql(f"SET search_path = pg_catalog, pg_temp; {RUNNER}; EXPLAIN (ANALYZE, FORMAT JSON) {prog};", db=DB)
    tree = json.loads("\n".join("|".join(row) for row in plan))[0]["Plan"]
    largest = 0

    def walk(n):
        nonlocal largest
        if n.get("Subplan Name", "").startswith("CTE "):
            largest = max(largest, round(n["Actual Rows"]))  # (a float on 18: rows=1.00)
        for c in n.get("Plans", []):
            walk(c)

    walk(tree)
    return steps, largest




def agreement(ctes, params, torch_grads):
    """Largest |ddx - torch| / max |torch| over every parameter row."""
    worst = 0.0
    for name, keys in params.items():
        k = ", ".join(f"p.{c}" for c in keys)
        rows = tm.psql(f"WITH {ctes} SELECT {k}, grad('loss', p.val) FROM {name} p;", db=DB)
        g = np.asarray(torch_grads[name])
        scale = max(np.abs(g).max(), 1e-300)
        for r in rows:
            idx = tuple(int(x) for x in r[:-1])
            worst = max(worst, abs(float(r[-1]) - g[idx if len(idx) > 1 else idx[0]]) / scale)
    return worst


def workload(name, ctes, params, torch_fn=None):
    """params: {table: key columns}; torch_fn() -> {table: gradient array}."""
    forward = f"WITH {ctes} SELECT l FROM loss"
    parts = [f"SELECT '{p}' AS t, grad('loss', {p}.val) AS g FROM {p}" for p in params]
    grad_sql = f"WITH {ctes} " + " UNION ALL ".join(parts)
    fwd, grd = timed(forward, grad_sql)
    steps, largest = program_stats(grad_sql)
    temp = temp_bytes(DB, grad_sql) // 1024
    tt, agree = "        -", "      -"
    if torch_fn:
        tt = f"{torch_ms(torch_fn):9.2f}"
        agree = f"{agreement(ctes, params, torch_fn()):7.0e}"
    print(f"{name:<40} {fwd:9.1f} {grd:10.1f} {grd / fwd:6.2f} {steps:6d} {largest:10d} {temp:8d} {tt} {agree}",
          flush=True)


def main():
    import torch
    torch.set_num_threads(1)
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    tm.psql("CREATE EXTENSION ddx;", db=DB)
    print(f"median of {REPEATS} runs, ms; ratio = gradient statement / forward loss query; "
          f"temp kB = temporary files of one gradient statement; "
          f"torch = PyTorch float64 forward+backward, one thread; agree = max |ddx - torch| / max |torch|")
    print(f"{'workload':<40} {'forward':>9} {'gradient':>10} {'ratio':>6} {'steps':>6} {'largest':>10} "
          f"{'temp kB':>8} {'torch f+b':>9} {'agree':>7}")

    # matmul 10,000 x 16 . 16 x 8, loss sum tanh^2, gradient of the weight
    X = np.random.default_rng(1).normal(size=(10000, 16))
    W = np.random.default_rng(2).normal(size=(16, 8)) / 4
    tm.psql(tm.matrix("x", X) + tm.matrix("w", W) + "ANALYZE;", db=DB)

    def matmul_torch():
        w = torch.tensor(W, requires_grad=True)
        (torch.tanh(torch.tensor(X) @ w) ** 2).sum().backward()
        return {"w": w.grad.numpy()}

    workload("matmul 10000x16 . 16x8, sum tanh^2 (w)", tm.MATMUL_SQL, {"w": ["i", "j"]}, matmul_torch)
    # the same with primary keys: the group keys are known not to be NULL, so
    # the backward pairs rows with their groups by plain equality
    tm.psql("ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE w ADD PRIMARY KEY (i, j); ANALYZE;", db=DB)
    workload("  the same, x and w with primary keys", tm.MATMUL_SQL, {"w": ["i", "j"]}, matmul_torch)

    X, lab, W1, b1, W2, b2 = tm.mlp_data(4096, 16, 32, 4, 11)
    tm.psql("DROP TABLE x, w;" + tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) +
            tm.vector("b1", b1) + tm.matrix("w2", W2) + tm.vector("b2", b2) + "ANALYZE;", db=DB)

    def mlp_torch():
        ps = [torch.tensor(a, requires_grad=True) for a in (W1, b1, W2, b2)]
        logits = torch.tanh(torch.tensor(X) @ ps[0] + ps[1]) @ ps[2] + ps[3]
        torch.nn.functional.cross_entropy(logits, torch.tensor(lab)).backward()
        return {n: p.grad.numpy() for n, p in zip(("w1", "b1", "w2", "b2"), ps)}

    workload("2-layer MLP, 4096 x 16 -> 32 -> 4", tm.MLP_SQL, {"w1": ["i", "j"], "b1": ["j"], "w2": ["i", "j"],
                                                                 "b2": ["j"]}, mlp_torch)

    for T in (256, 512):
        d = 16
        X, G, Wq, Wk, Wv = tm.attention_data(T, d, 5)
        tm.psql("DROP TABLE IF EXISTS x, tg, wq, wk, wv;" + tm.matrix("x", X) + tm.matrix("tg", G) +
                tm.matrix("wq", Wq) + tm.matrix("wk", Wk) + tm.matrix("wv", Wv) + "ANALYZE;", db=DB)

        def attn_torch():
            tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (Wq, Wk, Wv))
            x = torch.tensor(X)
            att = (x @ tq) @ (x @ tk).T / math.sqrt(d)
            att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            ((torch.softmax(att, dim=-1) @ (x @ tv)) * torch.tensor(G)).sum().backward()
            return {"wq": tq.grad.numpy(), "wk": tk.grad.numpy(), "wv": tv.grad.numpy()}

        workload(f"causal attention T={T} d={d} (q, k, v)", tm.ATTN_SQL.format(d=d),
                 {"wq": ["i", "j"], "wk": ["i", "j"], "wv": ["i", "j"]}, attn_torch)

    # batched multi-head causal attention: S sequences, H heads of width dh, model width d = H * dh
    S, H, T, dh = 4, 2, 32, 8
    d = H * dh
    r = np.random.default_rng(9)
    X, G = r.normal(size=(S, T, d)), r.normal(size=(S, H, T, dh))
    Wq, Wk, Wv = (r.normal(size=(H, d, dh)) / math.sqrt(d) for _ in range(3))
    rows3 = lambda a: [(i, j, k, a[i, j, k]) for i in range(a.shape[0]) for j in range(a.shape[1]) for k in range(a.shape[2])]
    def w3(name, a):
        return tm.table(name, [("h", "int"), ("i", "int"), ("j", "int"), ("val", "float8")], rows3(a))
    tm.psql("DROP TABLE IF EXISTS x, tg, wq, wk, wv;" +
            tm.table("x", [("s", "int"), ("t", "int"), ("f", "int"), ("val", "float8")], rows3(X)) +
            tm.table("tg", [("s", "int"), ("h", "int"), ("t", "int"), ("j", "int"), ("val", "float8")],
                     [(s, h, t, j, G[s, h, t, j]) for s in range(S) for h in range(H) for t in range(T) for j in range(dh)]) +
            w3("wq", Wq) + w3("wk", Wk) + w3("wv", Wv) + "ANALYZE;", db=DB)

    def mh_torch():
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (Wq, Wk, Wv))
        x = torch.tensor(X)
        q, k, v = (torch.einsum("std,hde->shte", x, w) for w in (tq, tk, tv))
        att = q @ k.transpose(-1, -2) / math.sqrt(dh)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        ((torch.softmax(att, dim=-1) @ v) * torch.tensor(G)).sum().backward()
        return {"wq": tq.grad.numpy(), "wk": tk.grad.numpy(), "wv": tv.grad.numpy()}

    workload(f"multi-head attention S={S} H={H} T={T} dh={dh}", tm.MULTIHEAD_SQL.format(dh=dh),
             {"wq": ["h", "i", "j"], "wk": ["h", "i", "j"], "wv": ["h", "i", "j"]}, mh_torch)
    print(f"2*S*H*T^2 = {2 * S * H * T * T} (issue 4's bound on a backward step for the multi-head row)")


if __name__ == "__main__":
    main()
