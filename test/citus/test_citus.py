#!/usr/bin/python3
"""ddx on Citus (scripts/citus.sh start: a coordinator and two workers).

What holds today: never silently wrong. A loss that reads a Citus table
(distributed, reference or managed by Citus), a parameter in one, and every
optimizer and ddx_train over them are refused with 0A000 and a hint, and
nothing is written or left behind; the same model over plain tables of the
coordinator, with Citus loaded, gives the closed-form gradient. (Before,
grad over a reference table's parameters returned 0 for every row.)

Closes with "citus: N passed, N failed".
"""
import os
import sys

import psycopg2

results = []


def report(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  {name}{'' if ok else ': ' + detail}", flush=True)


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "citus"))
    c.autocommit = True
    return c


def refused(cur, name, sql, args=None, mention="Citus"):
    """The statement fails with 0A000, naming Citus, with a hint."""
    try:
        cur.execute(sql, args)
        if cur.description:
            got = cur.fetchall()
        else:
            got = None
        report(name, False, f"answered {str(got)[:200]}")
    except psycopg2.Error as e:
        ok = e.pgcode == "0A000" and mention in str(e.pgerror) and bool(e.diag.message_hint)
        report(name, ok, f"{e.pgcode}: {str(e.pgerror).strip()[:300]}")


# The README's linear regression: x(s, f, val) features, y(s, val) targets,
# w(f, val) weights; loss = sum over s of (sum_f x.val * w.val - y.val)^2.
LOSS = """WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM {x} x JOIN {w} w ON w.f = x.f GROUP BY x.s),
  loss AS (SELECT sum((p.z - y.val) * (p.z - y.val)) AS l FROM pred p JOIN {y} y ON y.s = p.s)"""
TANH_LOSS = """WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM {x} x JOIN {w} w ON w.f = x.f GROUP BY x.s),
  loss AS (SELECT sum((tanh(p.z) - y.val) * (tanh(p.z) - y.val)) AS l FROM pred p JOIN {y} y ON y.s = p.s)"""


def make_tables(cur, suffix):
    cur.execute(f"""
      DROP TABLE IF EXISTS x{suffix}, y{suffix}, w{suffix} CASCADE;
      CREATE TABLE x{suffix} (s int, f int, val float8);
      CREATE TABLE y{suffix} (s int, val float8);
      CREATE TABLE w{suffix} (f int PRIMARY KEY, val float8);
      INSERT INTO x{suffix} SELECT s, f, sin(s * 7 + f) FROM generate_series(1, 40) s, generate_series(1, 3) f;
      INSERT INTO y{suffix} SELECT s, cos(s) FROM generate_series(1, 40) s;
      INSERT INTO w{suffix} VALUES (1, 0.5), (2, -0.25), (3, 0.75);""")


def closed_form(cur, suffix):
    """dL/dw_f = sum_s 2 (z_s - y_s) x_sf, from the plain tables."""
    cur.execute(f"""
      WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM x{suffix} x JOIN w{suffix} w ON w.f = x.f GROUP BY x.s)
      SELECT x.f, sum(2 * (z.z - y.val) * x.val) FROM x{suffix} x JOIN z ON z.s = x.s JOIN y{suffix} y ON y.s = x.s
      GROUP BY x.f ORDER BY x.f""")
    return dict(cur.fetchall())


def main():
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
    print("Citus", cur.fetchone()[0], flush=True)
    cur.execute("SELECT count(*) FROM citus_get_active_worker_nodes()")
    report("two active workers", cur.fetchone()[0] == 2)

    # Plain tables of the coordinator, with Citus loaded: right.
    make_tables(cur, "_plain")
    want = closed_form(cur, "_plain")
    q = LOSS.format(x="x_plain", y="y_plain", w="w_plain") + " SELECT w.f, grad('loss', w.val) FROM w_plain w ORDER BY w.f"
    cur.execute(q)
    got = dict(cur.fetchall())
    err = max(abs(got[f] - want[f]) / max(1.0, abs(want[f])) for f in want)
    report("plain tables beside Citus: grad equals the closed form", err < 1e-12, f"error {err}")

    # Data distributed by s and co-located, parameters a reference table.
    make_tables(cur, "")
    cur.execute("SELECT create_distributed_table('x', 's'); SELECT create_distributed_table('y', 's', colocate_with => 'x');"
                "SELECT create_reference_table('w')")
    cur.execute(LOSS.format(x="x_plain", y="y_plain", w="w_plain") + " SELECT l FROM loss")
    plain_loss = cur.fetchone()[0]
    cur.execute(LOSS.format(x="x", y="y", w="w") + " SELECT l FROM loss")
    report("the loss itself evaluates on Citus as on plain tables", abs(cur.fetchone()[0] - plain_loss) < 1e-9)

    refused(cur, "grad over a reference table's parameters (was 0 for every row)",
            LOSS.format(x="x", y="y", w="w") + " SELECT w.f, grad('loss', w.val) FROM w")
    refused(cur, "grad with tanh (Citus refused the program's correlated subquery)",
            TANH_LOSS.format(x="x", y="y", w="w") + " SELECT w.f, grad('loss', w.val) FROM w")
    cur.execute("CREATE TABLE w_local (f int PRIMARY KEY, val float8); INSERT INTO w_local SELECT * FROM w_plain")
    refused(cur, "parameters in a local table, data distributed",
            LOSS.format(x="x", y="y", w="w_local") + " SELECT w.f, grad('loss', w.val) FROM w_local w")
    cur.execute("CREATE TABLE w_dist (f int PRIMARY KEY, val float8); INSERT INTO w_dist SELECT * FROM w_plain;"
                "SELECT create_distributed_table('w_dist', 'f')")
    refused(cur, "parameters distributed by their key, data plain",
            LOSS.format(x="x_plain", y="y_plain", w="w_dist") + " SELECT w.f, grad('loss', w.val) FROM w_dist w")
    refused(cur, "parameters a reference table, data plain",
            LOSS.format(x="x_plain", y="y_plain", w="w") + " SELECT w.f, grad('loss', w.val) FROM w")
    cur.execute("CREATE VIEW xv AS SELECT * FROM x")
    refused(cur, "a view over a distributed table",
            LOSS.format(x="xv", y="y_plain", w="w_local") + " SELECT w.f, grad('loss', w.val) FROM w_local w")
    cur.execute("CREATE TABLE cot (s int, z float8); INSERT INTO cot SELECT s, 1 FROM generate_series(1, 40) s")
    refused(cur, "vjp",
            "WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON w.f = x.f GROUP BY x.s) "
            "SELECT w.f, vjp('pred', 'cot', w.val) FROM w")
    cur.execute("CREATE TABLE tw (f int, val float8); INSERT INTO tw VALUES (1, 1), (2, 0), (3, -1)")
    refused(cur, "jvp",
            "WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x JOIN w ON w.f = x.f GROUP BY x.s) "
            "SELECT p.s, jvp(p.z, 'w.val', 'tw') FROM pred p")
    refused(cur, "jvp of a reference table's parameter, the loss over plain tables",
            "WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM x_plain x JOIN w_plain w ON w.f = x.f GROUP BY x.s) "
            "SELECT p.s, jvp(p.z, 'w.val', 'tw') FROM pred p")

    # Optimizers and ddx_train: refused before anything is written.
    loss_sql = LOSS.format(x="x", y="y", w="w") + " SELECT l FROM loss"
    cur.execute("SELECT array_agg(val ORDER BY f) FROM w")
    before = cur.fetchone()[0]
    cur.execute("SELECT count(*) FROM pg_class WHERE relnamespace = '_ddx'::regnamespace")
    rels_before = cur.fetchone()[0]
    refused(cur, "ddx_sgd_step", "SELECT * FROM ddx_sgd_step(%s, ARRAY['w.val'], 0.1)", (loss_sql,))
    refused(cur, "ddx_adamw_step", "SELECT * FROM ddx_adamw_step(%s, ARRAY['w.val'], 0.1)", (loss_sql,))
    cur.execute("SELECT ddx_schedule_constant('citus_lr', 0.1, 5)")
    refused(cur, "ddx_train", "CALL ddx_train(%s, ARRAY['w.val'], 3, 'citus_lr')", (loss_sql,))
    cur.execute("SELECT array_agg(val ORDER BY f) FROM w")
    report("the parameters are untouched", cur.fetchone()[0] == before)
    cur.execute("SELECT count(*) FROM pg_class WHERE relnamespace = '_ddx'::regnamespace")
    rels_after = cur.fetchone()[0]
    cur.execute("SELECT count(*) FROM ddx_runs")
    runs = cur.fetchone()[0]
    report("no state table and no run left behind", rels_after == rels_before and runs == 0,
           f"relations {rels_before} -> {rels_after}, runs {runs}")

    # The hint's way out: the same tables undistributed give the closed form.
    cur.execute("SELECT undistribute_table('x'); SELECT undistribute_table('y'); SELECT undistribute_table('w')")
    cur.execute(LOSS.format(x="x", y="y", w="w") + " SELECT w.f, grad('loss', w.val) FROM w ORDER BY w.f")
    got = dict(cur.fetchall())
    err = max(abs(got[f] - want[f]) / max(1.0, abs(want[f])) for f in want)
    report("after undistribute_table: grad equals the closed form", err < 1e-12, f"error {err}")

    print(f"citus: {sum(results)} passed, {len(results) - sum(results)} failed", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
