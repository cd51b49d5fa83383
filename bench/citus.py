#!/usr/bin/python3
"""ddx on Citus beside plain tables, on the same cluster (scripts/citus.sh start).

    eval "$(scripts/citus.sh env)"; bench/citus.py [repeats] [--workers 1] [--gathered]

--workers 1 takes the second worker out of a freshly started cluster first
(scripts/citus.sh start), for the step's cost by the number of workers;
--gathered sets ddx.citus_in_place = off (the programs read the Citus tables
gathered on the coordinator; by default their data is read in place).

For the linear model and the 2-layer MLP over S samples: the forward loss
query under its best plan (default, nested loops off, or the contraction
node: ddx.contraction = 'all', on the workers too), one parameter
table's gradient, the statement with every parameter's gradient, and one
AdamW step, in plain tables of the
coordinator and with the data distributed by sample (co-located) and the
parameters in reference tables; the matmul of bench/contraction.py (its
10,000 x 16 data by row, its 16 x 8 weights a reference table); and a bag
of token embeddings, the
embedding distributed by token, its readout a reference table. Medians of interleaved runs, ms; then the
bytes of intermediate results the gradient program moved on Citus (EXPLAIN
ANALYZE's "Intermediate Data Size", summed over its distributed subplans).
"""
import argparse
import os
import re
import sys

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import interleaved  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("repeats", type=int, nargs="?", default=5)
ap.add_argument("--workers", type=int, choices=[1, 2], default=2)
ap.add_argument("--gathered", action="store_true")
ap.add_argument("--models", default="", help="comma-separated subset of linear,mlp,matmul,embed")
args = ap.parse_args()
REPEATS, WORKERS, IN_PLACE = args.repeats, args.workers, not args.gathered
S, F, H = 4096, 16, 16
MI, MK, MJ = 10000, 16, 8  # the matmul's shape

MODELS = {
    "linear": ("""WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x{k} x JOIN w{k} w ON w.f = x.f GROUP BY x.s),
      loss AS (SELECT avg((p.z - y.val) * (p.z - y.val)) AS l FROM pred p JOIN y{k} y ON y.s = p.s)""", ["w"]),
    "mlp": ("""WITH h AS (SELECT x.s, w1.j, tanh(sum(x.val * w1.val)) AS h FROM x{k} x JOIN w1{k} w1 ON w1.f = x.f
                GROUP BY x.s, w1.j),
      z AS (SELECT h.s, sum(h.h * w2.val) AS z FROM h JOIN w2{k} w2 ON w2.j = h.j GROUP BY h.s),
      loss AS (SELECT avg((z.z - y.val) * (z.z - y.val)) AS l FROM z JOIN y{k} y ON y.s = z.s)""", ["w1", "w2"]),
    # the matmul of bench/contraction.py: 10,000 x 16 data by sample, 16 x 8
    # weights a reference table
    "matmul": ("""WITH z AS (SELECT x.i AS s, w.j, sum(x.val * w.val) AS z FROM mx{k} x JOIN mw{k} w ON x.j = w.i
                GROUP BY x.i, w.j),
      loss AS (SELECT sum(power(tanh(z.z), 2)) AS l FROM z)""", ["mw"]),
    # a bag of token embeddings (emb distributed by token on Citus) read out
    # by r (a reference table)
    "embed": ("""WITH h AS (SELECT t.s, e.d, sum(e.val) AS h FROM tok{k} t JOIN emb{k} e ON e.tok = t.tok GROUP BY t.s, e.d),
      z AS (SELECT h.s, sum(tanh(h.h) * r.val) AS z FROM h JOIN r{k} r ON r.d = h.d GROUP BY h.s),
      loss AS (SELECT avg((z.z - y.val) * (z.z - y.val)) AS l FROM z JOIN y{k} y ON y.s = z.s)""", ["emb", "r"]),
}
V, D, T = 1000, 16, 4  # embedding: vocabulary, width, tokens per sample
KEYS = {"w": "t.f", "w1": "t.f, t.j", "w2": "t.j", "emb": "t.tok, t.d", "r": "t.d"}


def setup(cur):
    for k in ("_p", "_c"):
        cur.execute(f"""
          DROP TABLE IF EXISTS x{k}, y{k}, w{k}, w1{k}, w2{k} CASCADE;
          CREATE TABLE x{k} (s int, f int, val float8); CREATE TABLE y{k} (s int, val float8);
          CREATE TABLE w{k} (f int PRIMARY KEY, val float8);
          CREATE TABLE w1{k} (f int, j int, val float8, PRIMARY KEY (f, j));
          CREATE TABLE w2{k} (j int PRIMARY KEY, val float8);
          INSERT INTO x{k} SELECT s, f, sin(s * 7 + f) FROM generate_series(1, {S}) s, generate_series(1, {F}) f;
          INSERT INTO y{k} SELECT s, cos(s) FROM generate_series(1, {S}) s;
          INSERT INTO w{k} SELECT f, 0.1 * cos(f) FROM generate_series(1, {F}) f;
          INSERT INTO w1{k} SELECT f, j, 0.3 * sin(f * 5 + j * 3) FROM generate_series(1, {F}) f, generate_series(1, {H}) j;
          INSERT INTO w2{k} SELECT j, 0.5 * cos(j * 2) FROM generate_series(1, {H}) j;
          DROP TABLE IF EXISTS tok{k}, emb{k}, r{k} CASCADE;
          CREATE TABLE tok{k} (s int, tok int); CREATE TABLE emb{k} (tok int, d int, val float8, PRIMARY KEY (tok, d));
          CREATE TABLE r{k} (d int PRIMARY KEY, val float8);
          INSERT INTO tok{k} SELECT s, (s * 37 + i * 101) % {V} FROM generate_series(1, {S}) s, generate_series(1, {T}) i;
          INSERT INTO emb{k} SELECT t, d, 0.2 * sin(t * 3 + d) FROM generate_series(0, {V - 1}) t, generate_series(1, {D}) d;
          INSERT INTO r{k} SELECT d, 0.5 * cos(d) FROM generate_series(1, {D}) d;
          DROP TABLE IF EXISTS mx{k}, mw{k} CASCADE;
          CREATE TABLE mx{k} (i int, j int, val float8); CREATE TABLE mw{k} (i int, j int, val float8, PRIMARY KEY (i, j));
          INSERT INTO mx{k} SELECT i, j, sin(i * 3 + j * 7) FROM generate_series(1, {MI}) i, generate_series(1, {MK}) j;
          INSERT INTO mw{k} SELECT i, j, 0.3 * cos(i * 5 + j) FROM generate_series(1, {MK}) i, generate_series(1, {MJ}) j;
          ANALYZE x{k}, y{k}, w{k}, w1{k}, w2{k}, tok{k}, emb{k}, r{k}, mx{k}, mw{k};""")
    cur.execute("""SELECT create_distributed_table('x_c', 's'); SELECT create_distributed_table('y_c', 's', colocate_with => 'x_c');
      SELECT create_reference_table('w_c'); SELECT create_reference_table('w1_c'); SELECT create_reference_table('w2_c');
      SELECT create_distributed_table('tok_c', 's', colocate_with => 'x_c'); SELECT create_distributed_table('emb_c', 'tok');
      SELECT create_reference_table('r_c');
      SELECT create_distributed_table('mx_c', 'i', colocate_with => 'x_c'); SELECT create_reference_table('mw_c')""")
    # (the embedding's forward joins tokens by sample to vectors by token:
    # Citus runs it only by repartitioning)
    cur.execute("SET citus.enable_repartition_joins = on")


def intermediate_bytes(cur, grad_sql):
    """{setting: (bytes, results)}: the intermediate results of the gradient
    program as the runner runs it with ddx.citus_in_place on and off
    (ddx_explain_plan's EXPLAIN ANALYZE, "Intermediate Data Size" summed
    over its distributed subplans; on: in place where Citus can plan it,
    else gathered)."""
    out = {}
    for setting in ("on", "off"):
        cur.execute(f"SET ddx.citus_in_place = {setting}")
        try:
            cur.execute("SELECT line FROM ddx_explain_plan(%s, true)", (grad_sql,))
            text = "\n".join(r[0] for r in cur.fetchall())
        except psycopg2.Error as e:
            out[setting] = str(e).splitlines()[0]
            continue
        unit = {"bytes": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
        sizes = [float(n) * unit[u] for n, u in re.findall(r"Intermediate Data Size: ([\d.]+) (bytes|kB|MB|GB)", text)]
        out[setting] = (sum(sizes), len(sizes))
    cur.execute(f"SET ddx.citus_in_place = {'on' if IN_PLACE else 'off'}")
    return out


class WithNode:
    """A cursor whose statements run with ddx.contraction = 'all', on the
    workers too (a SET LOCAL that Citus sends with its tasks): the forward
    with the contraction node, a plan its user can always have. In a session
    of its own: a change of ddx.contraction plans a session's cached
    statements again (the runner's programs among them), and on Citus that
    added 8-10 ms to each gradient that followed (the linear model's 37 ->
    47 ms)."""

    def __init__(self):
        conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "citus"))
        conn.autocommit = True
        self.cur, self.rows = conn.cursor(), None
        self.cur.execute("SET citus.enable_repartition_joins = on")  # as the main session (setup)

    def execute(self, q):
        # (each statement a query of its own: Citus sends a propagated SET's
        # whole query string to the workers, a forward that follows included)
        for sql in ("BEGIN", "SET LOCAL citus.propagate_set_commands = 'local'", "SET LOCAL ddx.contraction = 'all'"):
            self.cur.execute(sql)
        self.cur.execute(q)
        self.rows = self.cur.fetchall()
        self.cur.execute("COMMIT")

    def fetchall(self):
        return self.rows


def main():
    conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "citus"))
    conn.autocommit = True
    cur = conn.cursor()
    if WORKERS == 1:
        cur.execute("SELECT count(*) FROM pg_dist_node WHERE nodeport = 54342")
        if cur.fetchone()[0]:
            cur.execute("SELECT citus_remove_node('localhost', 54342)")
    cur.execute(f"SET ddx.citus_in_place = {'on' if IN_PLACE else 'off'}")
    cur.execute("SELECT count(*) FROM citus_get_active_worker_nodes()")
    print(f"{cur.fetchone()[0]} worker(s), ddx.citus_in_place = {'on' if IN_PLACE else 'off'}")
    setup(cur)
    print(f"S = {S} samples, {F} features, MLP hidden {H}; median of {REPEATS} interleaved runs, ms")
    # grad1: one parameter table's gradient (one run of the program); grad:
    # every parameter's, in one statement (on Citus, each table's part is a
    # subplan of its own, which runs the program again)
    print(f"{'model':<8} {'tables':<7} {'forward':>8} {'grad1':>8} {'/fwd':>9} {'grad':>8} {'/fwd':>9} {'step':>8} "
          f"{'/fwd':>9}")
    for name, (ctes, params) in MODELS.items():
        if args.models and name not in args.models.split(","):
            continue
        rows = {}
        runs = []
        for k in ("_p", "_c"):
            c = ctes.format(k=k)
            fwd = f"{c} SELECT l FROM loss"
            grad = f"{c} " + " UNION ALL ".join(
                f"SELECT '{p}', grad('loss', t.val) FROM {p}{k} t" for p in params)
            step = ("SELECT loss FROM ddx_adamw_step(%s, %s, 0.001, state_name => %s)" %
                    tuple(psycopg2.extensions.adapt(v).getquoted().decode() for v in
                          (fwd, [p + k + ".val" for p in params], "bench_" + name + k)))
            one = f"{c} SELECT '{params[-1]}', grad('loss', t.val) FROM {params[-1]}{k} t"
            runs += [(cur, "RESET enable_nestloop; " + fwd), (cur, "SET enable_nestloop = off; " + fwd),
                     (WithNode(), fwd),
                     (cur, "RESET enable_nestloop; " + grad), (cur, "RESET enable_nestloop; " + step),
                     (cur, "RESET enable_nestloop; " + one)]
            rows[k] = grad
        t = interleaved(runs, REPEATS)
        for i, k in enumerate(("_p", "_c")):
            d, nl, node, g, st, g1 = t[6 * i: 6 * i + 6]
            fwd = min(d, nl, node)
            label = "plain" if k == "_p" else "Citus"
            print(f"{name:<8} {label:<7} {fwd:8.0f} {g1:8.0f} {g1 / fwd:8.2f}x {g:8.0f} {g / fwd:8.2f}x {st:8.0f} "
                  f"{st / fwd:8.2f}x", flush=True)
        for setting, r in intermediate_bytes(cur, rows["_c"]).items():
            what = r if isinstance(r, str) else f"{r[1]} intermediate results, {r[0] / 1024:.0f} kB"
            print(f"{name:<8} Citus gradient program, ddx.citus_in_place = {setting}: {what}", flush=True)


if __name__ == "__main__":
    main()
