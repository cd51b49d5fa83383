#!/usr/bin/python3
"""The matmul's loss and gradient against PyTorch, and the least that any
program of PostgreSQL statements over the heap can take for them.

    bench/floor.py [repeats]

Issue 16 asks for the matmul's forward+gradient (10,000x16 . 16x8, loss
sum(tanh(x w)^2)) within 20x of PyTorch's forward+backward (float64, one
thread). Timed in the same rounds (medians of `repeats`, ms; PyTorch's each
round the median of 10 calls), node on (ddx.contraction = all) under the
runner's settings where they are programs:

  torch        PyTorch's step: tanh(x @ w)^2 summed, backward
  value+grad   the one statement that returns the loss and its gradient
               from one pass (ddx_value beside grad, what ddx_adamw_step
               runs), x and w without keys, and with primary keys
  scan         SELECT sum(val) FROM x: one read of x through the heap, the
               least work per row any statement that reads x does
  forward      the forward contraction with the node and the loss over it,
               z not stored
  transpose    the transposed contraction x^T . dZ alone, with the node,
               dZ a table of its 80,000 values (so not computed)
  floor        forward + transpose: only the two contractions and the loss,
               nothing stored, no derivative computed, no row ids or NULL
               guards. A gradient must read x twice (z = x w, then
               dW = x^T dZ, dZ a nonlinear function of all of z), so no
               program of statements over the heap is faster than this.

and each one's multiple of PyTorch's step. Before timing, the gradients of
the two ddx statements and of the transpose are checked against PyTorch's.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "torch"))
import numpy as np  # noqa: E402
import test_models as tm  # noqa: E402
from common import RUNNER, interleaved, node_session  # noqa: E402

DB = "ddx_bench_floor"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 7


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    X = np.random.default_rng(1).normal(size=(10000, 16))
    W = np.random.default_rng(2).normal(size=(16, 8)) / 4
    T = np.tanh(X @ W)
    dZ = 2 * T * (1 - T * T)
    tm.psql("CREATE EXTENSION ddx;" + tm.matrix("x", X) + tm.matrix("w", W) + tm.matrix("dz", dZ) +
            "CREATE SCHEMA k; SET search_path = k;" + tm.matrix("x", X) + tm.matrix("w", W) +
            "ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE w ADD PRIMARY KEY (i, j); VACUUM ANALYZE;", db=DB)

    import torch
    torch.set_num_threads(1)

    def step():
        w = torch.tensor(W, requires_grad=True)
        (torch.tanh(torch.tensor(X) @ w) ** 2).sum().backward()

    stmt, keyed, prog = node_session(DB, "all"), node_session(DB, "all"), node_session(DB, "all")
    keyed.execute("SET search_path = k, public")  # the same statement over x and w with primary keys
    prog.execute(RUNNER)
    vg = ("WITH " + tm.MATMUL_SQL + " SELECT w.i, w.j, grad('loss', w.val) AS g, ddx_value('loss') AS l FROM w")
    forward = ("WITH z AS (SELECT x.i, w.j, sum(x.val * w.val) AS z FROM x JOIN w ON x.j = w.i GROUP BY x.i, w.j) "
               "SELECT sum(power(tanh(z), 2)) FROM z")
    transpose = "SELECT x.j, d.j, sum(x.val * d.val) FROM x JOIN dz d ON d.i = x.i GROUP BY x.j, d.j"
    for q in (forward, transpose):  # the node must be in both, or the floor is not the node's
        prog.execute("EXPLAIN " + q)
        if "ddx contraction" not in "\n".join(r[0] for r in prog.fetchall()):
            sys.exit("the contraction node is not in the plan of: " + q)
    # What is timed computes the gradient: ddx's statements and the transpose
    # alone against PyTorch's dW (and x^T dZ in numpy), to 1e-12 relative.
    w = torch.tensor(W, requires_grad=True)
    (torch.tanh(torch.tensor(X) @ w) ** 2).sum().backward()
    want = w.grad.numpy()
    for name, cur, q in (("value+grad", stmt, vg), ("value+grad, keys", keyed, vg), ("transpose", prog, transpose)):
        cur.execute(q)
        got = np.zeros_like(want)
        for i, j, g, *_ in cur.fetchall():
            got[i, j] = g
        err = np.abs(got - want).max() / np.abs(want).max()
        if not err < 1e-12:
            sys.exit(f"{name}: gradient off by {err:.2e} relative to PyTorch's")
    runs = [(None, step), (stmt, vg), (keyed, vg), (prog, "SELECT sum(val) FROM x"), (prog, forward),
            (prog, transpose)]
    t, v, vk, scan, fwd, tr = interleaved(runs, REPEATS)
    print(f"median of {REPEATS} interleaved runs, ms, and the multiple of PyTorch's step")
    rows = [("torch f+b (float64, 1 thread)", t), ("value+grad, no keys", v), ("value+grad, primary keys", vk),
            ("scan: sum(val) FROM x", scan), ("forward contraction + loss", fwd), ("transpose x^T . dZ", tr),
            ("floor: forward + transpose", fwd + tr)]
    for name, ms in rows:
        print(f"{name:<32} {ms:8.2f} {ms / t:7.1f}x")
    print(f"20x PyTorch's step: {20 * t:.1f} ms")


if __name__ == "__main__":
    main()
