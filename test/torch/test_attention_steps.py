#!/usr/bin/python3
"""Batched multi-head causal attention (S sequences, H heads, T positions), in
the GROUP BY spelling and in the window spelling: gradients of q, k and v
against PyTorch (float64), with some value rows missing (their gradient is 0)
and NULL keys in the value table, and no step of the gradient program (read
with ddx_explain(..., run_analyze)) larger than 2·S·H·T² rows.

Closes with "attention: N passed, N failed".
"""
import math
import sys

import numpy as np
import torch

import test_models as tm

torch.set_default_dtype(torch.float64)
DB = "ddx_attention"
S, H, T, DH = 3, 2, 6, 4
D = H * DH
results = []

COMMON = """
  q AS (SELECT x.s, x.t, wq.h, wq.j, sum(x.val * wq.val) AS v FROM x JOIN wq ON x.f = wq.i GROUP BY x.s, x.t, wq.h, wq.j),
  k AS (SELECT x.s, x.t, wk.h, wk.j, sum(x.val * wk.val) AS v FROM x JOIN wk ON x.f = wk.i GROUP BY x.s, x.t, wk.h, wk.j),
  v AS (SELECT x.s, x.t, wv.h, wv.j, sum(x.val * wv.val) AS v FROM x JOIN wv ON x.f = wv.i GROUP BY x.s, x.t, wv.h, wv.j),
  sc AS (SELECT q.s, q.h, q.t AS i, k.t AS j, sum(q.v * k.v) / sqrt({dh}) AS a FROM q
         JOIN k ON k.s = q.s AND k.h = q.h AND k.j = q.j AND k.t <= q.t GROUP BY q.s, q.h, q.t, k.t),"""
GROUPBY = COMMON + """
  mx AS (SELECT s, h, i, max(a) AS m FROM sc GROUP BY s, h, i),
  e AS (SELECT sc.s, sc.h, sc.i, sc.j, exp(sc.a - mx.m) AS e FROM sc JOIN mx ON mx.s = sc.s AND mx.h = sc.h AND mx.i = sc.i),
  z AS (SELECT s, h, i, sum(e) AS z FROM e GROUP BY s, h, i),
  p AS (SELECT e.s, e.h, e.i, e.j, e.e / z.z AS p FROM e JOIN z ON z.s = e.s AND z.h = e.h AND z.i = e.i),"""
WINDOW = COMMON + """
  e AS (SELECT s, h, i, j, exp(a - max(a) OVER (PARTITION BY s, h, i)) AS e FROM sc),
  p AS (SELECT s, h, i, j, e / sum(e) OVER (PARTITION BY s, h, i) AS p FROM e),"""
TAIL = """
  o AS (SELECT p.s, p.h, p.i, v.j AS c, sum(p.p * v.v) AS o FROM p JOIN v ON v.s = p.s AND v.h = p.h AND v.t = p.j
        GROUP BY p.s, p.h, p.i, v.j),
  loss AS (SELECT sum(o.o * tg.val) AS l FROM o JOIN tg ON tg.s = o.s AND tg.h = o.h AND tg.t = o.i AND tg.j = o.c)"""


def main():
    import subprocess
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    r = np.random.default_rng(4)
    X, G = r.normal(size=(S, T, D)), r.normal(size=(S, H, T, DH))
    Wq, Wk, Wv = (r.normal(size=(H, D, DH)) / math.sqrt(D) for _ in range(3))
    rows3 = lambda a: [(i, j, k, a[i, j, k]) for i in range(a.shape[0]) for j in range(a.shape[1]) for k in range(a.shape[2])]
    w3 = lambda name, a: tm.table(name, [("h", "int"), ("i", "int"), ("j", "int"), ("val", "float8")], rows3(a))
    # Wv has an extra row with a NULL head (no gradient reaches it) and Wk lacks one row (a missing parameter row)
    tm.psql("CREATE EXTENSION ddx;" +
            tm.table("x", [("s", "int"), ("t", "int"), ("f", "int"), ("val", "float8")], rows3(X)) +
            tm.table("tg", [("s", "int"), ("h", "int"), ("t", "int"), ("j", "int"), ("val", "float8")],
                     [(s, h, t, j, G[s, h, t, j]) for s in range(S) for h in range(H) for t in range(T) for j in range(DH)]) +
            w3("wq", Wq) + w3("wk", Wk) + w3("wv", Wv) +
            "INSERT INTO wv VALUES (NULL, 0, 0, 9.0); DELETE FROM wk WHERE h = 1 AND i = 2 AND j = 3;", db=DB)
    Wk_used = Wk.copy()
    Wk_used[1, 2, 3] = 0.0  # the deleted row contributes nothing

    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (Wq, Wk_used, Wv))
    x = torch.tensor(X)
    q, k, v = (torch.einsum("std,hde->shte", x, w) for w in (tq, tk, tv))
    att = q @ k.transpose(-1, -2) / math.sqrt(DH)
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    ((torch.softmax(att, dim=-1) @ v) * torch.tensor(G)).sum().backward()
    want = {"wq": tq.grad.numpy(), "wk": tk.grad.numpy(), "wv": tv.grad.numpy()}
    bound = 2 * S * H * T * T
    for name, body in (("GROUP BY spelling", GROUPBY), ("window spelling", WINDOW)):
        ctes = (body + TAIL).format(dh=DH)
        worst = 0.0
        for tbl in ("wq", "wk", "wv"):
            got = tm.psql(f"WITH {ctes} SELECT h, i, j, grad('loss', p.val) FROM {tbl} p;", db=DB)
            scale = np.abs(want[tbl]).max()
            for h, i, j, g in got:
                if h == "":
                    worst = max(worst, abs(float(g)) / scale)  # the NULL-head row: no gradient
                else:
                    worst = max(worst, abs(float(g) - want[tbl][int(h), int(i), int(j)]) / scale)
        steps = tm.psql(f"SELECT coalesce(max(rows), 0), count(*) FROM ddx_explain($s$WITH {ctes} "
                        f"SELECT grad('loss', wq.val) FROM wq$s$, true);", db=DB)
        largest, nsteps = int(float(steps[0][0])), int(steps[0][1])
        ok = worst <= 1e-9 and largest <= bound
        results.append(ok)
        print(f"{'ok' if ok else 'FAILED'}  multi-head attention, {name:<18} max relative error {worst:.1e}, "
              f"{nsteps} steps, largest {largest} rows (bound 2SHT^2 = {bound})")
    print(f"attention: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
