#!/usr/bin/python3
"""Gradients of small models written in SQL, against PyTorch (float64).

Each model is written once in SQL (the loss is a CTE chain) and once in
PyTorch; ddx's gradient of every parameter row must match autograd's within
1e-9 relative to the gradient's scale. A plpgsql loop also trains a linear
model to the least-squares solution computed by numpy.

Runs against the cluster of scripts/pg.sh (PGHOST/PGPORT/PGUSER from the
environment). Prints one line per check and closes with
"torch: N passed, N failed".
"""
import math
import subprocess
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)
DB = "ddx_torch"
TOL = 1e-9
results = []


def psql(sql, db=DB):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-F", "|", "-v", "ON_ERROR_STOP=1", "-d", db],
                       input=sql, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return [line.split("|") for line in r.stdout.splitlines() if line]


def table(name, cols, rows):
    """CREATE TABLE name(cols) filled with rows (ints stay ints, floats as repr)."""
    defs = ", ".join(f"{c} {t}" for c, t in cols)
    vals = ",\n".join("(" + ", ".join(repr(float(v)) if t == "float8" else str(int(v))
                                       for v, (c, t) in zip(row, cols)) + ")" for row in rows)
    return f"DROP TABLE IF EXISTS {name} CASCADE; CREATE TABLE {name} ({defs});\n" + \
           (f"INSERT INTO {name} VALUES {vals};\n" if rows else "")


def matrix(name, a):
    a = np.atleast_2d(a)
    return table(name, [("i", "int"), ("j", "int"), ("val", "float8")],
                 [(i, j, a[i, j]) for i in range(a.shape[0]) for j in range(a.shape[1])])


def vector(name, v):
    return table(name, [("j", "int"), ("val", "float8")], [(j, v[j]) for j in range(len(v))])


def ddx_grads(ctes, params, settings=""):
    """{param: {key tuple: gradient}} from one statement per parameter table
    (after `settings`, SQL such as SET ddx.contraction = off)."""
    out = {}
    for name, keys in params.items():
        k = ", ".join(f"p.{c}" for c in keys)
        rows = psql(f"{settings}WITH {ctes} SELECT {k}, grad('loss', p.val) FROM {name} p;")
        out[name] = {tuple(int(x) for x in r[:-1]): float(r[-1]) for r in rows}
    return out


def ddx_grads_together(ctes, params):
    """ddx_grads from one statement for every parameter table (one program,
    one backward pass for all of them, as ddx_adamw_step runs it)."""
    parts = []
    for name, keys in params.items():
        k = ", ".join(f"p.{c}::text" for c in keys)
        parts.append(f"SELECT '{name}' AS t, concat_ws(',', {k}) AS k, grad('loss', p.val) AS g FROM {name} p")
    out = {name: {} for name in params}
    for t, k, g in psql(f"WITH {ctes} " + " UNION ALL ".join(parts) + ";"):
        out[t][tuple(int(x) for x in k.split(","))] = float(g)
    return out


def check(model, ours, theirs):
    """theirs: {param: numpy array indexed like the keys}."""
    worst = 0.0
    for name, g in theirs.items():
        g = np.atleast_1d(g)
        scale = max(np.abs(g).max(), 1e-300)
        for key, v in ours[name].items():
            worst = max(worst, abs(v - g[key if len(key) > 1 else key[0]]) / scale)
        if len(ours[name]) != g.size:
            worst = float("inf")
    ok = worst <= TOL
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  {model:<34} max relative error {worst:.2e}")


def t(a):
    return torch.tensor(a, requires_grad=True)


rng = np.random.default_rng(20261130)


def linear_and_logistic():
    n, f = 40, 5
    X = rng.normal(size=(n, f))
    y = rng.normal(size=n)
    lab = (rng.random(n) < 0.5).astype(float)
    w = rng.normal(size=f) * 0.5
    psql(matrix("x", X) + vector("y", y) + vector("lab", lab) + vector("w", w) + vector("b", [0.1]))
    ctes = """z AS (SELECT x.i AS s, sum(x.val * w.val) + max(b.val) AS z FROM x JOIN w ON x.j = w.j CROSS JOIN b GROUP BY x.i),
              loss AS (SELECT avg(power(z.z - y.val, 2)) AS l FROM z JOIN y ON y.j = z.s)"""
    ours = ddx_grads(ctes, {"w": ["j"], "b": ["j"]})
    tw, tb = t(w), t(np.array([0.1]))
    ((torch.tensor(X) @ tw + tb - torch.tensor(y)) ** 2).mean().backward()
    check("linear regression", ours, {"w": tw.grad.numpy(), "b": tb.grad.numpy()})

    ctes = """z AS (SELECT x.i AS s, sum(x.val * w.val) + max(b.val) AS z FROM x JOIN w ON x.j = w.j CROSS JOIN b GROUP BY x.i),
              p AS (SELECT z.s, 1 / (1 + exp(- z.z)) AS p FROM z),
              loss AS (SELECT - avg(lab.val * ln(p.p) + (1 - lab.val) * ln(1 - p.p)) AS l FROM p JOIN lab ON lab.j = p.s)"""
    ours = ddx_grads(ctes, {"w": ["j"], "b": ["j"]})
    tw, tb = t(w), t(np.array([0.1]))
    torch.nn.functional.binary_cross_entropy(torch.sigmoid(torch.tensor(X) @ tw + tb), torch.tensor(lab)).backward()
    check("logistic regression", ours, {"w": tw.grad.numpy(), "b": tb.grad.numpy()})


MLP_SQL = """
  hp AS (SELECT x.i AS s, w1.j, sum(x.val * w1.val) AS z FROM x JOIN w1 ON x.j = w1.i GROUP BY x.i, w1.j),
  h AS (SELECT hp.s, hp.j, tanh(hp.z + b1.val) AS a FROM hp JOIN b1 ON b1.j = hp.j),
  op AS (SELECT h.s, w2.j AS c, sum(h.a * w2.val) AS z FROM h JOIN w2 ON h.j = w2.i GROUP BY h.s, w2.j),
  logits AS (SELECT op.s, op.c, op.z + b2.val AS z FROM op JOIN b2 ON b2.j = op.c),
  m AS (SELECT s, max(z) AS m FROM logits GROUP BY s),
  se AS (SELECT l.s, sum(exp(l.z - m.m)) AS se FROM logits l JOIN m ON m.s = l.s GROUP BY l.s),
  ce AS (SELECT l.s, m.m + ln(se.se) - l.z AS ce FROM logits l JOIN m ON m.s = l.s JOIN se ON se.s = l.s
         JOIN lab ON lab.j = l.s AND lab.val = l.c),
  loss AS (SELECT avg(ce) AS l FROM ce)"""


# The same without the hidden layer's bias: its side of the second
# contraction, tanh(hp.z), is one relation's costly value.
MLP_NO_BIAS_SQL = MLP_SQL.replace("tanh(hp.z + b1.val) AS a FROM hp JOIN b1 ON b1.j = hp.j", "tanh(hp.z) AS a FROM hp")


# LLaMA's MLP on an RMSNorm: w2 · (silu(xn · w1) * (xn · w3)), xn = x /
# sqrt(mean(x²) + eps) * g1; no biases. (silu(a) * b joins a and b one to
# one on all their keys: each one's cotangent carries its saved columns.)
SWIGLU_SQL = """
  ms AS (SELECT x.i AS s, avg(x.val * x.val) AS ms FROM x GROUP BY x.i),
  xn AS (SELECT x.i AS s, x.j, x.val / sqrt(ms.ms + 1e-6) * g1.val AS v FROM x JOIN ms ON ms.s = x.i
         JOIN g1 ON g1.j = x.j),
  a AS (SELECT xn.s, w1.j, sum(xn.v * w1.val) AS z FROM xn JOIN w1 ON xn.j = w1.i GROUP BY xn.s, w1.j),
  b AS (SELECT xn.s, w3.j, sum(xn.v * w3.val) AS z FROM xn JOIN w3 ON xn.j = w3.i GROUP BY xn.s, w3.j),
  h AS (SELECT a.s, a.j, a.z / (1 + exp(-a.z)) * b.z AS a FROM a JOIN b ON b.s = a.s AND b.j = a.j),
  op AS (SELECT h.s, w2.j AS c, sum(h.a * w2.val) AS z FROM h JOIN w2 ON h.j = w2.i GROUP BY h.s, w2.j),
  m AS (SELECT s, max(z) AS m FROM op GROUP BY s),
  se AS (SELECT l.s, sum(exp(l.z - m.m)) AS se FROM op l JOIN m ON m.s = l.s GROUP BY l.s),
  ce AS (SELECT l.s, m.m + ln(se.se) - l.z AS ce FROM op l JOIN m ON m.s = l.s JOIN se ON se.s = l.s
         JOIN lab ON lab.j = l.s AND lab.val = l.c),
  loss AS (SELECT avg(ce) AS l FROM ce)"""


def mlp_data(n, f, hid, cls, seed):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, f))
    lab = r.integers(0, cls, size=n)
    W1, b1 = r.normal(size=(f, hid)) / math.sqrt(f), r.normal(size=hid) * 0.1
    W2, b2 = r.normal(size=(hid, cls)) / math.sqrt(hid), r.normal(size=cls) * 0.1
    return X, lab, W1, b1, W2, b2


def mlp():
    X, lab, W1, b1, W2, b2 = mlp_data(64, 8, 16, 4, 7)
    psql(matrix("x", X) + vector("lab", lab) + matrix("w1", W1) + vector("b1", b1) + matrix("w2", W2) + vector("b2", b2))
    ours = ddx_grads(MLP_SQL, {"w1": ["i", "j"], "b1": ["j"], "w2": ["i", "j"], "b2": ["j"]})
    tw1, tb1, tw2, tb2 = t(W1), t(b1), t(W2), t(b2)
    logits = torch.tanh(torch.tensor(X) @ tw1 + tb1) @ tw2 + tb2
    torch.nn.functional.cross_entropy(logits, torch.tensor(lab)).backward()
    want = {"w1": tw1.grad.numpy(), "b1": tb1.grad.numpy(), "w2": tw2.grad.numpy(), "b2": tb2.grad.numpy()}
    check("2-layer MLP, softmax cross-entropy", ours, want)
    # Primary keys, as a user who trains has them: b1 then determines the
    # hidden layer's rows, and hp's cotangent carries hp's saved columns to
    # w1's transpose (OnlyRoot) instead of joining them again.
    psql("ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE lab ADD PRIMARY KEY (j); "
         "ALTER TABLE w1 ADD PRIMARY KEY (i, j); ALTER TABLE b1 ADD PRIMARY KEY (j); "
         "ALTER TABLE w2 ADD PRIMARY KEY (i, j); ALTER TABLE b2 ADD PRIMARY KEY (j);")
    shapes = {"w1": ["i", "j"], "b1": ["j"], "w2": ["i", "j"], "b2": ["j"]}
    check("2-layer MLP, primary keys", ddx_grads(MLP_SQL, shapes), want)
    # (all four in one program: hp and b1 both receive the hidden layer's
    # terms, hp the only root)
    check("2-layer MLP, primary keys, one statement", ddx_grads_together(MLP_SQL, shapes), want)
    # without the hidden bias: the node saves tanh(hp.z) (one relation's
    # costly value) as it saves tanh(hp.z + b1.val), so that its derivative
    # is taken once per hidden unit, not once per pair of the second
    # contraction (src/core/graph.cpp, SaveContractionSides)
    tw1, tw2, tb2 = t(W1), t(W2), t(b2)
    logits = torch.tanh(torch.tensor(X) @ tw1) @ tw2 + tb2
    torch.nn.functional.cross_entropy(logits, torch.tensor(lab)).backward()
    want = {"w1": tw1.grad.numpy(), "w2": tw2.grad.numpy(), "b2": tb2.grad.numpy()}
    shapes = {"w1": ["i", "j"], "w2": ["i", "j"], "b2": ["j"]}
    check("2-layer MLP without the hidden bias", ddx_grads(MLP_NO_BIAS_SQL, shapes), want)
    check("2-layer MLP without the hidden bias, one statement", ddx_grads_together(MLP_NO_BIAS_SQL, shapes), want)


def swiglu():
    X, lab, W1, _, W2, _ = mlp_data(48, 8, 12, 4, 9)
    W3 = rng.normal(size=W1.shape) / math.sqrt(8)
    G1 = 1 + 0.1 * rng.normal(size=8)
    psql(matrix("x", X) + vector("lab", lab) +
         matrix("w1", W1) + matrix("w3", W3) + matrix("w2", W2) + vector("g1", G1) +
         "ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE lab ADD PRIMARY KEY (j); "
         "ALTER TABLE w1 ADD PRIMARY KEY (i, j); ALTER TABLE w3 ADD PRIMARY KEY (i, j); "
         "ALTER TABLE w2 ADD PRIMARY KEY (i, j); ALTER TABLE g1 ADD PRIMARY KEY (j);")
    tw1, tw3, tw2, tg1 = t(W1), t(W3), t(W2), t(G1)
    x = torch.tensor(X)
    xn = x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * tg1
    a, b = xn @ tw1, xn @ tw3
    torch.nn.functional.cross_entropy((torch.nn.functional.silu(a) * b) @ tw2, torch.tensor(lab)).backward()
    want = {"w1": tw1.grad.numpy(), "w3": tw3.grad.numpy(), "w2": tw2.grad.numpy(), "g1": tg1.grad.numpy()}
    shapes = {"w1": ["i", "j"], "w3": ["i", "j"], "w2": ["i", "j"], "g1": ["j"]}
    check("SwiGLU MLP on an RMSNorm (LLaMA's)", ddx_grads(SWIGLU_SQL, shapes), want)
    check("SwiGLU MLP on an RMSNorm, one statement", ddx_grads_together(SWIGLU_SQL, shapes), want)


# Matrix factorization over the ratings r (u, i, val): a user's factors
# uu (i: the user, j: k) times an item's vv (i: the item, j: k), summed over
# k, for each rating. r only ties the group keys (u, i) to U and V: where it
# is unique on them, the transposes leave it out (src/core/ops/contraction.cpp,
# KeyLeaves).
MF_SQL = """
  p AS (SELECT r.u, r.i, r.val, sum(uu.val * vv.val) AS p FROM r JOIN uu ON uu.i = r.u
        JOIN vv ON vv.i = r.i AND vv.j = uu.j GROUP BY r.u, r.i, r.val),
  loss AS (SELECT sum(power(p - val, 2)) AS l FROM p)"""
# the same with the rating read again by a join on (u, i)
MF_JOIN_SQL = """
  p AS (SELECT r.u, r.i, sum(uu.val * vv.val) AS p FROM r JOIN uu ON uu.i = r.u
        JOIN vv ON vv.i = r.i AND vv.j = uu.j GROUP BY r.u, r.i),
  loss AS (SELECT sum(power(p.p - r.val, 2)) AS l FROM p JOIN r ON r.u = p.u AND r.i = p.i)"""


def matrix_factorization():
    nu, ni, k = 9, 7, 3
    U, V = rng.normal(size=(nu, k)), rng.normal(size=(ni, k))
    pairs = [(u, i) for u in range(nu) for i in range(ni) if rng.random() < 0.5]
    vals = rng.normal(size=len(pairs))
    shapes = {"uu": ["i", "j"], "vv": ["i", "j"]}

    def oracle(ratings, join):
        """PyTorch over the ratings as SQL groups them: a (u, i) rated m times (same value) has
        p = m U_u·V_i (MF_SQL: one group; MF_JOIN_SQL: one group, joined again with each rating)."""
        tU, tV = t(U), t(V)
        groups = {}
        for u, i, v in ratings:
            groups.setdefault((u, i) if join else (u, i, v), []).append(v)
        loss = 0
        for key, vs in groups.items():
            p = len(vs) * (tU[key[0]] * tV[key[1]]).sum()
            loss = loss + sum((p - v) ** 2 for v in (vs if join else vs[:1]))
        loss.backward()
        return {"uu": tU.grad.numpy(), "vv": tV.grad.numpy()}

    ratings = [(u, i, v) for (u, i), v in zip(pairs, vals)]
    setup = matrix("uu", U) + matrix("vv", V) + \
        "ALTER TABLE uu ADD PRIMARY KEY (i, j); ALTER TABLE vv ADD PRIMARY KEY (i, j);"
    rtable = table("r", [("u", "int"), ("i", "int"), ("val", "float8")], ratings)
    psql(setup + rtable + "ALTER TABLE r ADD PRIMARY KEY (u, i);")
    for label in ("default", "all", "off"):
        setting = "" if label == "default" else f"SET ddx.contraction = '{label}'; "
        check(f"matrix factorization (node {label})", ddx_grads(MF_SQL, shapes, setting), oracle(ratings, False))
        check(f"matrix factorization, r joined again (node {label})", ddx_grads(MF_JOIN_SQL, shapes, setting),
              oracle(ratings, True))
    # Without the primary key, some ratings twice (r is then no tie of the
    # keys: each group has two of its rows) and one with a NULL user (it
    # joins nothing).
    dup = ratings + ratings[:4]
    psql(table("r", [("u", "int"), ("i", "int"), ("val", "float8")], dup) + "INSERT INTO r VALUES (NULL, 1, 0.5);")
    check("matrix factorization, repeated ratings", ddx_grads(MF_SQL, shapes), oracle(dup, False))
    check("matrix factorization, repeated ratings, r joined again", ddx_grads(MF_JOIN_SQL, shapes), oracle(dup, True))
    # Grouped by a tag that may be NULL, unique on (u, i, tag): two rows
    # (u, i, NULL) are one group of two rows, and r no tie of the keys.
    tagged = [(u, i, v, 1) for u, i, v in ratings] + [(u, i, v, None) for u, i, v in ratings[:3] * 2]
    psql(table("r", [("u", "int"), ("i", "int"), ("val", "float8")], []) + "ALTER TABLE r ADD tag int; " +
         "CREATE UNIQUE INDEX ON r (u, i, tag); INSERT INTO r VALUES " +
         ", ".join(f"({u}, {i}, {v!r}, {'NULL' if g is None else g})" for u, i, v, g in tagged) + ";")
    tU, tV = t(U), t(V)
    groups = {}
    for u, i, v, g in tagged:
        groups[(u, i, g)] = groups.get((u, i, g), 0) + 1
    sum(((m * tU[u] * tV[i]).sum()) ** 2 for (u, i, g), m in groups.items()).backward()
    tag_sql = """
  p AS (SELECT r.u, r.i, r.tag, sum(uu.val * vv.val) AS p FROM r JOIN uu ON uu.i = r.u
        JOIN vv ON vv.i = r.i AND vv.j = uu.j GROUP BY r.u, r.i, r.tag),
  loss AS (SELECT sum(p * p) AS l FROM p)"""
    check("matrix factorization, a tag that may be NULL", ddx_grads(tag_sql, shapes),
          {"uu": tU.grad.numpy(), "vv": tV.grad.numpy()})


def layer_norm_and_gelu():
    n, f = 12, 6
    X, T = rng.normal(size=(n, f)), rng.normal(size=(n, f))
    w, g, b = rng.normal(size=f), 1 + 0.1 * rng.normal(size=f), 0.1 * rng.normal(size=f)
    psql(matrix("x", X) + matrix("tg", T) + vector("w", w) + vector("g", g) + vector("b", b))
    ctes = """h AS (SELECT x.i AS s, x.j, x.val * w.val AS h FROM x JOIN w ON w.j = x.j),
              st AS (SELECT s, avg(h) AS mu, avg(h * h) - avg(h) * avg(h) AS var FROM h GROUP BY s),
              y AS (SELECT h.s, h.j, (h.h - st.mu) / sqrt(st.var + 1e-5) * g.val + b.val AS y
                    FROM h JOIN st ON st.s = h.s JOIN g ON g.j = h.j JOIN b ON b.j = h.j),
              loss AS (SELECT sum(y.y * tg.val) AS l FROM y JOIN tg ON tg.i = y.s AND tg.j = y.j)"""
    ours = ddx_grads(ctes, {"w": ["j"], "g": ["j"], "b": ["j"]})
    tw, tg_, tb = t(w), t(g), t(b)
    y = torch.nn.functional.layer_norm(torch.tensor(X) * tw, (f,), tg_, tb, eps=1e-5)
    (y * torch.tensor(T)).sum().backward()
    want = {"w": tw.grad.numpy(), "g": tg_.grad.numpy(), "b": tb.grad.numpy()}
    check("layer norm", ours, want)
    # the same with var_pop, and with stddev_pop, as users write them
    for spread, norm in (("var_pop(h) AS var", "sqrt(st.var + 1e-5)"),
                         ("stddev_pop(h) AS sd", "sqrt(st.sd * st.sd + 1e-5)")):
        spelled = ctes.replace("avg(h * h) - avg(h) * avg(h) AS var", spread).replace("sqrt(st.var + 1e-5)", norm)
        check(f"layer norm, {spread.split('(')[0]}", ddx_grads(spelled, {"w": ["j"], "g": ["j"], "b": ["j"]}), want)
    # a mean over the even features only, FILTER (WHERE ...)
    ctes = """h AS (SELECT x.i AS s, x.j, x.val * w.val AS h FROM x JOIN w ON w.j = x.j),
              m AS (SELECT s, avg(h * h) FILTER (WHERE j % 2 = 0) AS m FROM h GROUP BY s),
              loss AS (SELECT sum(m.m * tg.val) AS l FROM m JOIN tg ON tg.i = m.s AND tg.j = 0)"""
    tw = t(w)
    h = torch.tensor(X) * tw
    ((h[:, 0::2] ** 2).mean(dim=1) * torch.tensor(T[:, 0])).sum().backward()
    check("mean with FILTER", ddx_grads(ctes, {"w": ["j"]}), {"w": tw.grad.numpy()})

    ctes = """h AS (SELECT x.i AS s, x.j, x.val * w.val AS h FROM x JOIN w ON w.j = x.j),
              y AS (SELECT s, j, 0.5 * h * (1 + tanh(sqrt(2 / pi()) * (h + 0.044715 * power(h, 3)))) AS y FROM h),
              loss AS (SELECT sum(y.y * tg.val) AS l FROM y JOIN tg ON tg.i = y.s AND tg.j = y.j)"""
    ours = ddx_grads(ctes, {"w": ["j"]})
    tw = t(w)
    y = torch.nn.functional.gelu(torch.tensor(X) * tw, approximate="tanh")
    (y * torch.tensor(T)).sum().backward()
    check("tanh-GELU", ours, {"w": tw.grad.numpy()})
    # the same as a user's SQL helper that PostgreSQL inlines, calling another
    psql("""CREATE OR REPLACE FUNCTION cube3(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT x * x * x';
            CREATE OR REPLACE FUNCTION gelu(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE
              AS 'SELECT 0.5 * x * (1 + tanh(sqrt(2 / pi()) * (x + 0.044715 * cube3(x))))';""")
    helper = ctes.replace("0.5 * h * (1 + tanh(sqrt(2 / pi()) * (h + 0.044715 * power(h, 3))))", "gelu(h)")
    check("tanh-GELU as an inlined SQL helper", ddx_grads(helper, {"w": ["j"]}), {"w": tw.grad.numpy()})


def embedding():
    vocab, d, n = 10, 4, 25
    E, u = rng.normal(size=(vocab, d)), rng.normal(size=d)
    toks = rng.integers(0, vocab, size=n)
    toks[:3] = 2  # a token used several times
    psql(matrix("emb", E) + vector("u", u) + vector("tok", toks))
    ctes = """e AS (SELECT tok.j AS pos, sum(emb.val * u.val) AS z FROM tok JOIN emb ON emb.i = tok.val JOIN u ON u.j = emb.j
                    GROUP BY tok.j),
              loss AS (SELECT sum(z * z) AS l FROM e)"""
    ours = ddx_grads(ctes, {"emb": ["i", "j"], "u": ["j"]})
    tE, tu = t(E), t(u)
    ((torch.nn.functional.embedding(torch.tensor(toks), tE) @ tu) ** 2).sum().backward()
    check("embedding lookup", ours, {"emb": tE.grad.numpy(), "u": tu.grad.numpy()})


ATTN_SQL = """
  q AS (SELECT x.i AS t, wq.j, sum(x.val * wq.val) AS v FROM x JOIN wq ON x.j = wq.i GROUP BY x.i, wq.j),
  k AS (SELECT x.i AS t, wk.j, sum(x.val * wk.val) AS v FROM x JOIN wk ON x.j = wk.i GROUP BY x.i, wk.j),
  v AS (SELECT x.i AS t, wv.j, sum(x.val * wv.val) AS v FROM x JOIN wv ON x.j = wv.i GROUP BY x.i, wv.j),
  sc AS (SELECT q.t AS i, k.t AS j, sum(q.v * k.v) / sqrt({d}) AS s FROM q JOIN k ON k.j = q.j AND k.t <= q.t
         GROUP BY q.t, k.t),
  mx AS (SELECT i, max(s) AS m FROM sc GROUP BY i),
  e AS (SELECT sc.i, sc.j, exp(sc.s - mx.m) AS e FROM sc JOIN mx ON mx.i = sc.i),
  z AS (SELECT i, sum(e) AS z FROM e GROUP BY i),
  p AS (SELECT e.i, e.j, e.e / z.z AS p FROM e JOIN z ON z.i = e.i),
  o AS (SELECT p.i, v.j AS c, sum(p.p * v.v) AS o FROM p JOIN v ON v.t = p.j GROUP BY p.i, v.j),
  loss AS (SELECT sum(o.o * tg.val) AS l FROM o JOIN tg ON tg.i = o.i AND tg.j = o.c)"""


# the same attention with its softmax written with window functions
ATTN_WINDOW_SQL = ATTN_SQL.replace("""  mx AS (SELECT i, max(s) AS m FROM sc GROUP BY i),
  e AS (SELECT sc.i, sc.j, exp(sc.s - mx.m) AS e FROM sc JOIN mx ON mx.i = sc.i),
  z AS (SELECT i, sum(e) AS z FROM e GROUP BY i),
  p AS (SELECT e.i, e.j, e.e / z.z AS p FROM e JOIN z ON z.i = e.i),""", """  e AS (SELECT i, j, exp(s - max(s) OVER (PARTITION BY i)) AS e FROM sc),
  p AS (SELECT i, j, e / sum(e) OVER (PARTITION BY i) AS p FROM e),""")
assert ATTN_WINDOW_SQL != ATTN_SQL


# batched multi-head causal attention (bench/bench.py, test/golden/programs.py):
# S sequences, H heads of width dh
MULTIHEAD_SQL = """
  q AS (SELECT x.s, x.t, wq.h, wq.j, sum(x.val * wq.val) AS v FROM x JOIN wq ON x.f = wq.i GROUP BY x.s, x.t, wq.h, wq.j),
  k AS (SELECT x.s, x.t, wk.h, wk.j, sum(x.val * wk.val) AS v FROM x JOIN wk ON x.f = wk.i GROUP BY x.s, x.t, wk.h, wk.j),
  v AS (SELECT x.s, x.t, wv.h, wv.j, sum(x.val * wv.val) AS v FROM x JOIN wv ON x.f = wv.i GROUP BY x.s, x.t, wv.h, wv.j),
  sc AS (SELECT q.s, q.h, q.t AS i, k.t AS j, sum(q.v * k.v) / sqrt({dh}) AS a FROM q
         JOIN k ON k.s = q.s AND k.h = q.h AND k.j = q.j AND k.t <= q.t GROUP BY q.s, q.h, q.t, k.t),
  mx AS (SELECT s, h, i, max(a) AS m FROM sc GROUP BY s, h, i),
  e AS (SELECT sc.s, sc.h, sc.i, sc.j, exp(sc.a - mx.m) AS e FROM sc JOIN mx ON mx.s = sc.s AND mx.h = sc.h AND mx.i = sc.i),
  z AS (SELECT s, h, i, sum(e) AS z FROM e GROUP BY s, h, i),
  p AS (SELECT e.s, e.h, e.i, e.j, e.e / z.z AS p FROM e JOIN z ON z.s = e.s AND z.h = e.h AND z.i = e.i),
  o AS (SELECT p.s, p.h, p.i, v.j AS c, sum(p.p * v.v) AS o FROM p JOIN v ON v.s = p.s AND v.h = p.h AND v.t = p.j
        GROUP BY p.s, p.h, p.i, v.j),
  loss AS (SELECT sum(o.o * tg.val) AS l FROM o JOIN tg ON tg.s = o.s AND tg.h = o.h AND tg.t = o.i AND tg.j = o.c)"""

MATMUL_SQL = """
  z AS (SELECT x.i AS s, w.j, sum(x.val * w.val) AS z FROM x JOIN w ON x.j = w.i GROUP BY x.i, w.j),
  loss AS (SELECT sum(power(tanh(z), 2)) AS l FROM z)"""


def attention_data(T, d, seed):
    r = np.random.default_rng(seed)
    X, G = r.normal(size=(T, d)), r.normal(size=(T, d))
    Wq, Wk, Wv = (r.normal(size=(d, d)) / math.sqrt(d) for _ in range(3))
    return X, G, Wq, Wk, Wv


def attention():
    T, d = 12, 4
    X, G, Wq, Wk, Wv = attention_data(T, d, 3)
    psql(matrix("x", X) + matrix("tg", G) + matrix("wq", Wq) + matrix("wk", Wk) + matrix("wv", Wv))
    tq, tk, tv = t(Wq), t(Wk), t(Wv)
    x = torch.tensor(X)
    att = (x @ tq) @ (x @ tk).T / math.sqrt(d)
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    ((torch.softmax(att, dim=-1) @ (x @ tv)) * torch.tensor(G)).sum().backward()
    want = {"wq": tq.grad.numpy(), "wk": tk.grad.numpy(), "wv": tv.grad.numpy()}
    for name, sql in (("single-head causal attention", ATTN_SQL), ("attention, softmax by windows", ATTN_WINDOW_SQL)):
        ours = ddx_grads(sql.format(d=d), {"wq": ["i", "j"], "wk": ["i", "j"], "wv": ["i", "j"]})
        check(name, ours, want)


def training_loop():
    """A plpgsql loop trains a noisy linear model to numpy's least-squares solution."""
    n, f = 50, 3
    X = rng.normal(size=(n, f))
    y = X @ np.array([1.5, -2.0, 0.7]) + 0.3 + 0.1 * rng.normal(size=n)
    psql(matrix("x", X) + vector("y", y) + vector("w", np.zeros(f)) + vector("b", [0.0]) + """
      CREATE OR REPLACE VIEW lsq AS
        WITH z AS (SELECT x.i AS s, sum(x.val * w.val) AS z FROM x JOIN w ON x.j = w.j GROUP BY x.i)
        SELECT avg(power(z.z + b.val - y.val, 2)) AS l FROM z JOIN y ON y.j = z.s CROSS JOIN b;
      DO $$ BEGIN
        FOR step IN 1 .. 400 LOOP
          UPDATE w SET val = val - 0.3 * grad('lsq', val);
          UPDATE b SET val = val - 0.3 * grad('lsq', val);
        END LOOP;
      END $$;""")
    got = np.array([float(r[0]) for r in psql("SELECT val FROM w ORDER BY j")] + [float(psql("SELECT val FROM b")[0][0])])
    A = np.hstack([X, np.ones((n, 1))])
    want = np.linalg.lstsq(A, y, rcond=None)[0]
    err = np.abs(got - want).max()
    ok = err < 1e-8
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  {'plpgsql loop reaches least squares':<34} max abs error {err:.2e}")


def sequence_windows():
    """Windows with ORDER BY: a running mean, a LAG difference and a sliding
    ROWS sum over each sequence, against the same model in PyTorch."""
    S, T, F = 3, 9, 4
    X, Y, w = rng.normal(size=(S, T, F)), rng.normal(size=(S, T)), rng.normal(size=F)
    psql(table("x", [("s", "int"), ("t", "int"), ("f", "int"), ("val", "float8")],
               [(a, b, c, X[a, b, c]) for a in range(S) for b in range(T) for c in range(F)]) +
         table("y", [("s", "int"), ("t", "int"), ("val", "float8")], [(a, b, Y[a, b]) for a in range(S) for b in range(T)]) +
         vector("w", w))
    ctes = """h AS (SELECT x.s, x.t, sum(x.val * w.val) AS h FROM x JOIN w ON x.f = w.j GROUP BY x.s, x.t),
              f AS (SELECT s, t, avg(h) OVER (PARTITION BY s ORDER BY t) AS cm,
                           h - lag(h, 1, 0.0) OVER (PARTITION BY s ORDER BY t) AS d,
                           sum(h) OVER (PARTITION BY s ORDER BY t ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS sw
                    FROM h),
              loss AS (SELECT sum(power(f.cm - y.val, 2) + 0.1 * f.d * f.d + 0.01 * f.sw * f.sw) AS l
                       FROM f JOIN y ON y.s = f.s AND y.t = f.t)"""
    ours = ddx_grads(ctes, {"w": ["j"]})
    tw = t(w)
    H = torch.einsum("stf,f->st", torch.tensor(X), tw)
    cm = torch.cumsum(H, dim=1) / torch.arange(1, T + 1, dtype=torch.float64)
    zero = torch.zeros(S, 1, dtype=torch.float64)
    prev, nxt = torch.cat([zero, H[:, :-1]], 1), torch.cat([H[:, 1:], zero], 1)
    d, sw = H - prev, prev + H + nxt
    ((cm - torch.tensor(Y)) ** 2 + 0.1 * d * d + 0.01 * sw * sw).sum().backward()
    check("running mean, lag, sliding ROWS sum", ours, {"w": tw.grad.numpy()})


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    psql("CREATE EXTENSION ddx;")
    for test in (linear_and_logistic, mlp, swiglu, matrix_factorization, layer_norm_and_gelu, embedding, attention,
                 sequence_windows, training_loop):
        try:
            test()
        except Exception as e:  # a failing test is reported, the others still run
            results.append(False)
            print(f"FAILED  {test.__name__}: {e}")
    passed = sum(results)
    print(f"torch: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
