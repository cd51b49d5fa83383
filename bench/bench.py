#!/usr/bin/python3
"""Forward time and gradient time of SQL models, side by side in one run.

For each workload: the median time of the forward loss query alone, of the
statement that returns every parameter's gradient (its forward included),
their ratio, the number of steps of the gradient program (forward and
backward CTEs) and the row count of its largest step (from EXPLAIN ANALYZE of
the program). With python3-torch, PyTorch (float64, one thread) times the
same model's forward and backward for scale.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "torch"))
import numpy as np  # noqa: E402
import test_models as tm  # noqa: E402

DB = "ddx_bench"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def timed(sql):
    """Median wall time (ms) of sql in one session, measured server-side."""
    times = []
    for i in range(REPEATS + 1):
        t0 = time.perf_counter()
        tm.psql(f"SELECT count(*) FROM ({sql}) q;", db=DB)
        if i:
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def program_stats(grad_sql):
    """(steps, largest step rows) of the gradient program behind grad_sql."""
    r = subprocess.run(["psql", "-X", "-At", "-d", DB, "-c", "EXPLAIN (VERBOSE, COSTS OFF) " + grad_sql],
                       capture_output=True, text=True)
    m = re.search(r"ddx_grad_at\('(.*?)'::text, \d", r.stdout, re.S)
    prog = m.group(1).replace("''", "'")
    steps = len(re.findall(r"\b[fgbm]\d+ AS MATERIALIZED", prog))
    plan = tm.psql("SET search_path = pg_catalog, pg_temp; SET jit = off; EXPLAIN (ANALYZE, FORMAT JSON) " + prog + ";",
                   db=DB)
    tree = json.loads("\n".join("|".join(row) for row in plan))[0]["Plan"]
    largest = 0

    def walk(n):
        nonlocal largest
        if n.get("Subplan Name", "").startswith("CTE "):
            largest = max(largest, n["Actual Rows"])
        for c in n.get("Plans", []):
            walk(c)

    walk(tree)
    return steps, largest


def torch_time(fn):
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def workload(name, ctes, params, torch_fn=None):
    forward = f"WITH {ctes} SELECT l FROM loss"
    parts = [f"SELECT '{p}' AS t, grad('loss', {p}.val) AS g FROM {p}" for p in params]
    grad_sql = f"WITH {ctes} " + " UNION ALL ".join(parts)
    fwd = timed(forward)
    grd = timed(grad_sql)
    steps, largest = program_stats(grad_sql)
    tt = f"{torch_time(torch_fn):9.2f}" if torch_fn else "        -"
    print(f"{name:<36} {fwd:9.1f} {grd:10.1f} {grd / fwd:6.2f} {steps:6d} {largest:10d} {tt}")


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    tm.psql("CREATE EXTENSION ddx;", db=DB)
    print(f"median of {REPEATS} runs, ms; ratio = gradient statement / forward loss query")
    print(f"{'workload':<36} {'forward':>9} {'gradient':>10} {'ratio':>6} {'steps':>6} {'largest':>10} {'torch f+b':>9}")

    import torch
    torch.set_num_threads(1)
    X, lab, W1, b1, W2, b2 = tm.mlp_data(4096, 16, 32, 4, 11)
    tm.psql(tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) + tm.vector("b1", b1) +
            tm.matrix("w2", W2) + tm.vector("b2", b2) + "ANALYZE;", db=DB)

    def mlp_torch():
        ps = [torch.tensor(a, requires_grad=True) for a in (W1, b1, W2, b2)]
        logits = torch.tanh(torch.tensor(X) @ ps[0] + ps[1]) @ ps[2] + ps[3]
        torch.nn.functional.cross_entropy(logits, torch.tensor(lab)).backward()

    workload("2-layer MLP, 4096 x 16 -> 32 -> 4", tm.MLP_SQL, ["w1", "b1", "w2", "b2"], mlp_torch)

    for T in (256,):
        d = 16
        X, G, Wq, Wk, Wv = tm.attention_data(T, d, 5)
        tm.psql(tm.matrix("x", X) + tm.matrix("tg", G) + tm.matrix("wq", Wq) + tm.matrix("wk", Wk) +
                tm.matrix("wv", Wv) + "ANALYZE;", db=DB)

        def attn_torch():
            tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (Wq, Wk, Wv))
            x = torch.tensor(X)
            att = (x @ tq) @ (x @ tk).T / math.sqrt(d)
            att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            ((torch.softmax(att, dim=-1) @ (x @ tv)) * torch.tensor(G)).sum().backward()

        workload(f"causal attention T={T} d={d} (q,k,v)", tm.ATTN_SQL.format(d=d), ["wq", "wk", "wv"], attn_torch)


if __name__ == "__main__":
    main()
