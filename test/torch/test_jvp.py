#!/usr/bin/python3
"""Forward mode against PyTorch (float64): jvp of an MLP's logits, of causal
attention (GROUP BY and window spellings of its softmax) and of the 1-layer
GPT's loss, each along random tangents of every parameter table, against
torch.autograd.functional.jvp of the same model fed the same tables; and
H·v (hvp) of the MLP's and the GPT's loss against
torch.autograd.functional.hvp."""
import base64
import math
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_models as tm  # noqa: E402
import test_gpt as tg  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)
DB = "ddx_torch_jvp"
TOL = 1e-9
results = []
rng = np.random.default_rng(20261201)


def psql(sql):
    return tm.psql(sql, db=DB)


def check(name, got, want):
    scale = max(np.abs(want).max(), 1e-300)
    worst = np.abs(got - want).max() / scale if got.shape == want.shape else float("inf")
    ok = worst <= TOL
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  {name:<44} max relative error {worst:.2e}")


def tangent_args(params):
    return ", ".join(f"'{p}.val', 't_{p.split('.')[-1]}'" for p in params)


def mlp():
    X, lab, W1, b1, W2, b2 = tm.mlp_data(64, 8, 16, 4, 7)
    T = [rng.normal(size=a.shape) for a in (W1, b1, W2, b2)]
    psql(tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) + tm.vector("b1", b1) + tm.matrix("w2", W2) +
         tm.vector("b2", b2) + tm.matrix("t_w1", T[0]) + tm.vector("t_b1", T[1]) + tm.matrix("t_w2", T[2]) +
         tm.vector("t_b2", T[3]))
    args = tangent_args(["w1", "b1", "w2", "b2"])
    rows = psql(f"WITH {tm.MLP_SQL} SELECT l.s, l.c, jvp(l.z, {args}) FROM logits l")
    got = np.zeros((64, 4))
    for s, c, v in rows:
        got[int(s), int(c)] = float(v)

    def logits(w1, c1, w2, c2):
        return torch.tanh(torch.tensor(X) @ w1 + c1) @ w2 + c2

    primals = tuple(torch.tensor(a) for a in (W1, b1, W2, b2))
    _, want = torch.autograd.functional.jvp(logits, primals, tuple(torch.tensor(a) for a in T))
    check("2-layer MLP: jvp of the logits", got, want.numpy())
    loss = psql(f"WITH {tm.MLP_SQL} SELECT jvp(l.l, {args}) FROM loss l")
    _, want = torch.autograd.functional.jvp(
        lambda *p: torch.nn.functional.cross_entropy(logits(*p), torch.tensor(lab)), primals,
        tuple(torch.tensor(a) for a in T))
    check("2-layer MLP: jvp of the loss", np.array(float(loss[0][0])), want.numpy())
    # H·v of the loss in all four tables along the same tangents
    _, hv = torch.autograd.functional.hvp(
        lambda *p: torch.nn.functional.cross_entropy(logits(*p), torch.tensor(lab)), primals,
        tuple(torch.tensor(a) for a in T))
    for name, keys, want in (("w1", ["i", "j"], hv[0]), ("b1", ["j"], hv[1]), ("w2", ["i", "j"], hv[2]),
                             ("b2", ["j"], hv[3])):
        got = np.zeros(want.shape)
        for r in psql(f"WITH {tm.MLP_SQL} SELECT {', '.join('p.' + k for k in keys)}, hvp('loss', p.val, {args}) "
                      f"FROM {name} p"):
            got[tuple(int(x) for x in r[:-1])] = float(r[-1])
        check(f"2-layer MLP: H·v of the loss ({name})", got, want.numpy())


def attention():
    T, d = 12, 4
    X, G, Wq, Wk, Wv = tm.attention_data(T, d, 3)
    Tq, Tk, Tv = (rng.normal(size=(d, d)) for _ in range(3))
    psql(tm.matrix("x", X) + tm.matrix("tg", G) + tm.matrix("wq", Wq) + tm.matrix("wk", Wk) + tm.matrix("wv", Wv) +
         tm.matrix("t_wq", Tq) + tm.matrix("t_wk", Tk) + tm.matrix("t_wv", Tv))
    x = torch.tensor(X)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)

    def out(q, k, v):
        att = ((x @ q) @ (x @ k).T / math.sqrt(d)).masked_fill(mask, float("-inf"))
        return torch.softmax(att, dim=-1) @ (x @ v)

    _, want = torch.autograd.functional.jvp(out, tuple(torch.tensor(a) for a in (Wq, Wk, Wv)),
                                            tuple(torch.tensor(a) for a in (Tq, Tk, Tv)))
    args = tangent_args(["wq", "wk", "wv"])
    for name, sql in (("causal attention: jvp of the output", tm.ATTN_SQL),
                      ("attention, softmax by windows: jvp", tm.ATTN_WINDOW_SQL)):
        got = np.zeros((T, d))
        for i, c, v in psql(f"WITH {sql.format(d=d)} SELECT o.i, o.c, jvp(o.o, {args}) FROM o"):
            got[int(i), int(c)] = float(v)
        check(name, got, want.numpy())


def gpt():
    own = tg.psql
    tg.psql = lambda sql, db=DB: own(sql, db=DB)  # test_gpt's readers, on this database
    L, H, C, T, B = 1, 2, 16, 16, 4
    for f in ("gpt.sql", "load_gpl3.sql"):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", os.path.join(tg.GPT, f)],
                       check=True, capture_output=True)
    psql(f"SELECT gpt.setup({L}, {H}, {C}, {T}, {B}, steps => 1)")
    # a tangent per parameter table, keyed like it (SQL draws it: setseed)
    sql = "SELECT setseed(0.25);"
    for n, keys in tg.SHAPES.items():
        sql += (f"DROP TABLE IF EXISTS t_{n}; CREATE TABLE t_{n} AS SELECT {', '.join(keys)}, random() - 0.5 AS val "
                f"FROM gpt.{n} ORDER BY {', '.join(keys)};")
    psql(sql)
    p = {n: torch.tensor(tg.weights(n)) for n in tg.SHAPES}
    tans = {n: torch.tensor(tg.table(n, f"SELECT {', '.join(keys)}, val FROM t_{n}")) for n, keys in tg.SHAPES.items()}
    batch = psql("SELECT b, t, tok, tgt FROM gpt.batches WHERE step = 1 ORDER BY b, t")
    tok = torch.tensor([int(r[2]) for r in batch]).reshape(B, T)
    tgt = torch.tensor([int(r[3]) for r in batch]).reshape(B, T)
    names = list(tg.SHAPES)
    _, want = torch.autograd.functional.jvp(lambda *ts: tg.forward(dict(zip(names, ts)), tok, tgt, L, H),
                                            tuple(p[n] for n in names), tuple(tans[n] for n in names))
    # (the text spans lines, which psql's rows would split: read it as base64)
    b64 = psql("SELECT translate(encode(convert_to(gpt.loss_sql(), 'UTF8'), 'base64'), E'\\n', '')")[0][0]
    loss = base64.b64decode(b64).decode().replace("$1", "1")
    args = ", ".join(f"'gpt.{n}.val', 't_{n}'" for n in names)
    got = psql(f"SELECT jvp(q.avg, {args}) FROM ({loss}) q")
    check("GPT 1 layer: jvp of the loss (20 tangents)", np.array(float(got[0][0])), want.numpy())
    _, hv = torch.autograd.functional.hvp(lambda *ts: tg.forward(dict(zip(names, ts)), tok, tgt, L, H),
                                          tuple(p[n] for n in names), tuple(tans[n] for n in names))
    worst_got, worst_want = [], []
    for n, want_n in zip(names, hv):
        keys = tg.SHAPES[n]
        ours = tg.table(n, f"WITH loss AS ({loss}) SELECT {', '.join('p.' + k for k in keys)}, "
                           f"hvp('loss', p.val, {args}) FROM gpt.{n} p")
        worst_got.append(ours.ravel())
        worst_want.append(want_n.numpy().ravel())
    check("GPT 1 layer: H·v of the loss (20 tables)", np.concatenate(worst_got), np.concatenate(worst_want))


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    psql("CREATE EXTENSION ddx;")
    for test in (mlp, attention, gpt):
        try:
            test()
        except Exception as e:  # a failing test is reported, the others still run
            results.append(False)
            print(f"FAILED  {test.__name__}: {e}")
    passed = sum(results)
    print(f"jvp: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
