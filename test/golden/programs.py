#!/usr/bin/python3
"""Golden snapshots of the gradient programs of every bench workload and of
the GPT (examples/gpt, 1 and 2 layers), as the hook builds them from
PostgreSQL's own Query trees: the text must equal test/golden/programs/<name>.sql.
A program depends on the tables' definitions, not on their rows: tiny data.

    test/golden/programs.py            compare (ends "golden: N passed, N failed")
    test/golden/programs.py --update   rewrite the snapshots (after a change meant to alter programs)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "test", "torch"))
import numpy as np  # noqa: E402
import test_models as tm  # noqa: E402
from common import program_of  # noqa: E402

DB = "ddx_golden"
OUT = os.path.join(HERE, "programs")
UPDATE = "--update" in sys.argv
def psql(sql):
    return tm.psql(sql, db=DB)


def grad_sql(ctes, params):
    return f"WITH {ctes} " + " UNION ALL ".join(f"SELECT '{p}' AS t, grad('loss', {p}.val) AS g FROM {p}" for p in params)


def programs():
    """(name, program text) of each workload."""
    r = np.random.default_rng(1)
    psql(tm.matrix("x", r.normal(size=(4, 3))) + tm.matrix("w", r.normal(size=(3, 2))))
    yield "matmul", program_of(DB, grad_sql(tm.MATMUL_SQL, ["w"]))
    psql("ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE w ADD PRIMARY KEY (i, j);")
    yield "matmul_keys", program_of(DB, grad_sql(tm.MATMUL_SQL, ["w"]))
    X, lab, W1, b1, W2, b2 = tm.mlp_data(8, 4, 4, 3, 1)
    psql("DROP TABLE x, w;" + tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) + tm.vector("b1", b1) +
         tm.matrix("w2", W2) + tm.vector("b2", b2))
    yield "mlp", program_of(DB, grad_sql(tm.MLP_SQL, ["w1", "b1", "w2", "b2"]))
    # (with keys: b1 determines the hidden layer's rows, whose cotangent
    # carries hp's saved columns to w1's transpose: OnlyRoot)
    psql("ALTER TABLE x ADD PRIMARY KEY (i, j); ALTER TABLE lab ADD PRIMARY KEY (j); "
         "ALTER TABLE w1 ADD PRIMARY KEY (i, j); ALTER TABLE b1 ADD PRIMARY KEY (j); "
         "ALTER TABLE w2 ADD PRIMARY KEY (i, j); ALTER TABLE b2 ADD PRIMARY KEY (j);")
    yield "mlp_keys", program_of(DB, grad_sql(tm.MLP_SQL, ["w1", "b1", "w2", "b2"]))
    # (without the hidden bias: tanh(hp.z), the second contraction's side, saved)
    yield "mlp_no_bias", program_of(DB, grad_sql(tm.MLP_NO_BIAS_SQL, ["w1", "w2", "b2"]))
    # (LLaMA's MLP: a and b joined one to one, each cotangent carrying its saved columns)
    psql(tm.matrix("w3", W1) + tm.vector("g1", b1[:4]) + "ALTER TABLE w3 ADD PRIMARY KEY (i, j); "
         "ALTER TABLE g1 ADD PRIMARY KEY (j);")
    yield "swiglu", program_of(DB, grad_sql(tm.SWIGLU_SQL, ["w1", "w3", "w2", "g1"]))
    # (matrix factorization: the ratings r, unique on (u, i), left out of the transposes: KeyLeaves)
    psql(tm.matrix("uu", r.normal(size=(3, 2))) + tm.matrix("vv", r.normal(size=(4, 2))) +
         tm.table("r", [("u", "int"), ("i", "int"), ("val", "float8")], [(0, 1, 1.0), (2, 3, -1.0)]) +
         "ALTER TABLE r ADD PRIMARY KEY (u, i); ALTER TABLE uu ADD PRIMARY KEY (i, j); "
         "ALTER TABLE vv ADD PRIMARY KEY (i, j);")
    yield "matrix_factorization", program_of(DB, grad_sql(tm.MF_SQL, ["uu", "vv"]))
    X, G, Wq, Wk, Wv = tm.attention_data(6, 4, 5)
    psql("DROP TABLE x;" + tm.matrix("x", X) + tm.matrix("tg", G) + tm.matrix("wq", Wq) + tm.matrix("wk", Wk) +
         tm.matrix("wv", Wv))
    yield "attention", program_of(DB, grad_sql(tm.ATTN_SQL.format(d=4), ["wq", "wk", "wv"]))
    yield "attention_windows", program_of(DB, grad_sql(tm.ATTN_WINDOW_SQL.format(d=4), ["wq", "wk", "wv"]))
    psql("DROP TABLE x, tg, wq, wk, wv;"
         "CREATE TABLE x (s int, t int, f int, val float8); CREATE TABLE tg (s int, h int, t int, j int, val float8);"
         "CREATE TABLE wq (h int, i int, j int, val float8); CREATE TABLE wk (h int, i int, j int, val float8);"
         "CREATE TABLE wv (h int, i int, j int, val float8);")
    yield "multihead", program_of(DB, grad_sql(tm.MULTIHEAD_SQL.format(dh=8), ["wq", "wk", "wv"]))
    for layers in (1, 2):
        psql(f"SELECT gpt.setup({layers}, 2, 8, 4, 2, steps => 1);")
        def scalar(sql):  # the whole text of one value (psql's rows split it at newlines)
            r = subprocess.run(["psql", "-X", "-q", "-At", "-d", DB, "-c", sql], capture_output=True, text=True,
                               check=True)
            return r.stdout.rstrip("\n")
        loss = scalar("SELECT gpt.loss_sql()").replace("$1", "1")
        params = scalar("SELECT array_to_string(gpt.params(), ',')").split(",")
        parts = [f"g{i} AS (SELECT sum(grad('ddx_loss', t.{p.split('.')[2]})) AS g FROM {'.'.join(p.split('.')[:2])} t)"
                 for i, p in enumerate(params)]
        stmt = (f"WITH ddx_loss AS ({loss}), " + ", ".join(parts) + " SELECT " +
                " + ".join(f"(SELECT g FROM g{i})" for i in range(len(params))))
        yield f"gpt_{layers}_layer", program_of(DB, stmt)


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    psql("CREATE EXTENSION ddx;")
    for f in ("gpt.sql", "load_gpl3.sql"):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f",
                        os.path.join(ROOT, "examples", "gpt", f)], check=True, capture_output=True)
    os.makedirs(OUT, exist_ok=True)
    ok = bad = 0
    for name, prog in programs():
        path = os.path.join(OUT, name + ".sql")
        if UPDATE:
            with open(path, "w") as f:
                f.write(prog)
            print(f"wrote {path} ({len(prog)} characters)")
            ok += 1
            continue
        want = open(path).read() if os.path.exists(path) else None
        if want == prog:
            ok += 1
            print(f"ok  {name} ({len(prog)} characters)")
        else:
            bad += 1
            print(f"FAILED  {name}: the program differs from {path} (--update rewrites it if the change is meant)")
    print(f"golden: {ok} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
