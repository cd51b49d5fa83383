#!/usr/bin/python3
"""ddx on Citus (scripts/citus.sh start: a coordinator and two workers).

What holds: grad, vjp, ddx_backward, the optimizers (SGD with momentum,
AdamW), ddx_state and ddx_train give the numbers the same data gives in
plain tables (1e-10 relative), with the data in distributed tables
(co-located with each other or not, distributed by the sample or by the
feature) or reference tables, and the parameters in reference tables, in
plain tables of the coordinator or in tables Citus manages there. A linear
model's gradient is also checked against its closed form. Optimizer state is
placed like its parameters (a reference table's state is a reference table).
Parameters may also be in distributed tables (an embedding distributed by
its token), whose optimizer state is distributed alike and co-located.
What ddx cannot do yet on Citus is refused with 0A000 and a hint, nothing
written: grad in a statement that modifies or locks a distributed parameter
table, a Citus parameter table without a primary key, and forward mode
(jvp).

The plain tables are the oracle world: ddx's gradients there are checked
against finite differences and PyTorch by the other suites.

With ddx.citus_in_place on (the default) the checks run the programs with
the data in place (pushed down to the workers where Citus can plan it),
and check that they were, or that the runner fell back; with
PGOPTIONS="-c ddx.citus_in_place=off" the same checks run the programs
over the Citus tables gathered on the coordinator.

Closes with "citus: N passed, N failed".
"""
import collections
import os
import re
import subprocess
import sys
import threading
import time

import psycopg2

# The workers listen on the two ports after the coordinator's (scripts/citus.sh).
WORKER_PORTS = {str(int(os.environ.get("PGPORT", "54340")) + i) for i in (1, 2)}
CITUS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "citus.sh")

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
        got = cur.fetchall() if cur.description else None
        report(name, False, f"answered {str(got)[:200]}")
    except psycopg2.Error as e:
        ok = e.pgcode == "0A000" and mention in str(e.pgerror) and bool(e.diag.message_hint)
        report(name, ok, f"{e.pgcode}: {str(e.pgerror).strip()[:300]}")


def rel_err(got, want):
    """Largest |got - want| / max(1, |want|) over the union of keys (a key
    missing on one side counts as infinitely wrong)."""
    if set(got) != set(want):
        return float("inf")
    return max((abs(got[k] - want[k]) / max(1.0, abs(want[k])) for k in want), default=0.0)


# x(s, f, val) features, y(s, val) targets; a 2-layer MLP with weights
# w1(f, j, val) (a two-column key) and w2(j, val):
#   h(s, j) = tanh(sum_f x * w1),  z(s) = sum_j h * w2,  loss = avg((z - y)^2).
MLP = """WITH h AS (SELECT x.s, w1.j, tanh(sum(x.val * w1.val)) AS h
               FROM {x} x JOIN {w1} w1 ON w1.f = x.f GROUP BY x.s, w1.j),
  z AS (SELECT h.s, sum(h.h * w2.val) AS z FROM h JOIN {w2} w2 ON w2.j = h.j GROUP BY h.s),
  loss AS (SELECT avg((z.z - y.val) * (z.z - y.val)) AS l FROM z JOIN {y} y ON y.s = z.s)"""
# The MLP with its hidden layer read twice (its squares, a penalty beside
# the output): the hidden layer's cotangent sums two contributions.
MLP_TWICE = """WITH h AS (SELECT x.s, w1.j, tanh(sum(x.val * w1.val)) AS h
               FROM {x} x JOIN {w1} w1 ON w1.f = x.f GROUP BY x.s, w1.j),
  z AS (SELECT h.s, sum(h.h * w2.val) AS z FROM h JOIN {w2} w2 ON w2.j = h.j GROUP BY h.s),
  q AS (SELECT h.s, sum(h.h * h.h) AS q FROM h GROUP BY h.s),
  loss AS (SELECT avg((z.z + 0.1 * q.q - y.val) * (z.z + 0.1 * q.q - y.val)) AS l
           FROM z JOIN q ON q.s = z.s JOIN {y} y ON y.s = z.s)"""
# The README's linear regression over w2 as weights of x's features 1..3.
LINEAR = """WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM {x} x JOIN {w2} w ON w.j = x.f GROUP BY x.s),
  loss AS (SELECT sum((p.z - y.val) * (p.z - y.val)) AS l FROM pred p JOIN {y} y ON y.s = p.s)"""

NS, NF, NJ = 60, 3, 4


def make_world(cur, sfx):
    n = {k: k + sfx for k in ("x", "y", "w1", "w2", "cot")}
    cur.execute(f"""
      DROP TABLE IF EXISTS {n['x']}, {n['y']}, {n['w1']}, {n['w2']}, {n['cot']} CASCADE;
      CREATE TABLE {n['x']} (s int, f int, val float8);
      CREATE TABLE {n['y']} (s int, val float8);
      CREATE TABLE {n['w1']} (f int, j int, val float8, PRIMARY KEY (f, j));
      CREATE TABLE {n['w2']} (j int PRIMARY KEY, val float8);
      CREATE TABLE {n['cot']} (s int, z float8);
      INSERT INTO {n['x']} SELECT s, f, sin(s * 7 + f) FROM generate_series(1, {NS}) s, generate_series(1, {NF}) f;
      INSERT INTO {n['y']} SELECT s, cos(s) FROM generate_series(1, {NS}) s;
      INSERT INTO {n['w1']} SELECT f, j, 0.3 * sin(f * 5 + j * 3) FROM generate_series(1, {NF}) f, generate_series(1, {NJ}) j;
      INSERT INTO {n['w2']} SELECT j, 0.5 * cos(j * 2) FROM generate_series(1, {NJ}) j;
      INSERT INTO {n['cot']} SELECT s, sin(s) FROM generate_series(1, {NS}) s;""")
    return n


def grads(cur, model, n, table, key):
    cur.execute(model.format(**n) + f" SELECT {key}, grad('loss', t.val) FROM {n[table]} t")
    return {tuple(r[:-1]): r[-1] for r in cur.fetchall()}


def table_dict(cur, name, key, col="val"):
    cur.execute(f"SELECT {key}, {col} FROM {name}")
    return {tuple(r[:-1]): r[-1] for r in cur.fetchall()}


def citus_kind(cur, name):
    cur.execute("SELECT partmethod::text || repmodel::text FROM pg_dist_partition WHERE logicalrelid = %s::regclass",
                (name,))
    r = cur.fetchone()
    return r[0] if r else "plain"


FELL_BACK = "Citus cannot run the gradient program with its tables in place"




def setting(name):
    """A setting as this test's sessions have it (PGOPTIONS, or the default)."""
    c = connect()
    k = c.cursor()
    k.execute(f"SELECT current_setting('{name}')")
    value = k.fetchone()[0]
    c.close()
    return value


IN_PLACE = setting("ddx.citus_in_place") == "on"


def in_place(sql, setup=None, after=None):
    """Whether the runner ran sql's gradient program with the Citus tables in
    place (else it fell back to gathering them; it says so at DEBUG1). A
    session of its own: programs are planned once per session. setup runs
    first; after's one value is returned too (ran, value)."""
    if not IN_PLACE:
        return False
    c = connect()
    # every notice: psycopg2 trims a list (its own or one assigned) to the
    # last 50, which could drop the runner's DEBUG1 under the program's own
    c.notices = collections.deque()
    k = c.cursor()
    if setup:
        k.execute(setup)
    k.execute("SET client_min_messages = debug1")
    k.execute(sql)
    k.fetchall()
    value = None
    if after:
        k.execute(after)
        value = k.fetchone()[0]
    c.close()
    ran = not any(FELL_BACK in m for m in c.notices)
    return (ran, value) if after else ran


def check_world(cur, label, n, p, pushed=True):
    """Everything ddx does in reverse mode, on world n against the plain world p
    (pushed: whether Citus can run the program with the data in place)."""
    if IN_PLACE:
        ran = in_place(MLP.format(**n) + f" SELECT t.j, grad('loss', t.val) FROM {n['w2']} t")
        report(f"{label}: " + ("the gradient program runs with the data in place (pushed to the workers)" if pushed else
                               "a join Citus would repartition: the runner falls back to the gathered program"),
               ran == pushed)
        if not pushed:
            # with repartition joins on, as a user may set them for a
            # forward, the in-place program would repartition (an
            # embedding's gradient took ten times the gathered one's,
            # bench/RESULTS.md): they are
            # off for the program alone, and the gathered program runs
            ran, setting = in_place(MLP.format(**n) + f" SELECT t.j, grad('loss', t.val) FROM {n['w2']} t",
                                    "SET citus.enable_repartition_joins = on", "SHOW citus.enable_repartition_joins")
            report(f"{label}: ... also with repartition joins on, which stay on for the session",
                   not ran and setting == "on", f"in place {ran}, setting {setting}")
    for table, key in (("w1", "t.f, t.j"), ("w2", "t.j")):
        err = rel_err(grads(cur, MLP, n, table, key), grads(cur, MLP, p, table, key))
        report(f"{label}: MLP grad of {table}.val equals plain tables", err < 1e-10, f"error {err}")
    vjp = ("WITH h AS (SELECT x.s, w1.j, tanh(sum(x.val * w1.val)) AS h FROM {x} x JOIN {w1} w1 ON w1.f = x.f "
           "GROUP BY x.s, w1.j), z AS (SELECT h.s, sum(h.h * w2.val) AS z FROM h JOIN {w2} w2 ON w2.j = h.j GROUP BY h.s), "
           "c AS (SELECT s, z FROM {cot}) SELECT t.f, t.j, vjp('z', 'c', t.val) FROM {w1} t")
    cur.execute(vjp.format(**n))
    got = {tuple(r[:2]): r[2] for r in cur.fetchall()}
    cur.execute(vjp.format(**p))
    want = {tuple(r[:2]): r[2] for r in cur.fetchall()}
    err = rel_err(got, want)
    report(f"{label}: vjp equals plain tables", err < 1e-10, f"error {err}")
    loss = MLP + " SELECT l FROM loss"
    out = {}
    for world in (n, p):
        cur.execute("SELECT param, grad_table::text FROM ddx_backward(%s, %s)",
                    (loss.format(**world), [world["w1"] + ".val", world["w2"] + ".val"]))
        tabs = dict(cur.fetchall())
        out[world["w1"]] = {**{("w1",) + k: v for k, v in table_dict(cur, tabs[world["w1"] + ".val"], "f, j", "grad").items()},
                            **{("w2",) + k: v for k, v in table_dict(cur, tabs[world["w2"] + ".val"], "j", "grad").items()}}
    err = rel_err(out[n["w1"]], out[p["w1"]])
    report(f"{label}: ddx_backward's gradient tables equal plain tables", err < 1e-10, f"error {err}")


def check_pushdown(cur):
    """In place, the per-sample rows stay on the workers: with Citus's cap on
    an intermediate result (citus.max_intermediate_result_size) far below
    one per-sample relation, the linear model's gradient and the MLP's
    output layer's run in place and equal plain tables; the gathered
    programs, which move the data's rows through the coordinator, exceed it
    (the cap bites). The MLP's first layer too: its hidden layer's rows, per
    sample and unit, are matched to their cotangents on a rid of two keys,
    with the keys beside it, which Citus sees as the distribution column."""
    ns = 2000  # a per-sample relation: 2,000 rows, some 40 kB
    for k in ("_qp", "_q"):
        cur.execute(f"""DROP TABLE IF EXISTS x{k}, y{k}, w1{k}, w2{k} CASCADE;
          CREATE TABLE x{k} (s int, f int, val float8); CREATE TABLE y{k} (s int, val float8);
          CREATE TABLE w1{k} (f int, j int, val float8, PRIMARY KEY (f, j));
          CREATE TABLE w2{k} (j int PRIMARY KEY, val float8);
          INSERT INTO x{k} SELECT s, f, sin(s * 7 + f) FROM generate_series(1, {ns}) s, generate_series(1, {NF}) f;
          INSERT INTO y{k} SELECT s, cos(s) FROM generate_series(1, {ns}) s;
          INSERT INTO w1{k} SELECT f, j, 0.3 * sin(f * 5 + j * 3) FROM generate_series(1, {NF}) f,
            generate_series(1, {NJ}) j;
          INSERT INTO w2{k} SELECT j, 0.5 * cos(j * 2) FROM generate_series(1, {NJ}) j""")
    cur.execute("""SELECT create_distributed_table('x_q', 's');
      SELECT create_distributed_table('y_q', 's', colocate_with => 'x_q');
      SELECT create_reference_table('w1_q'); SELECT create_reference_table('w2_q')""")
    q, qp = ({k: k + sfx for k in ("x", "y", "w1", "w2")} for sfx in ("_q", "_qp"))
    # What must cross: each shard's partial sums per parameter row (w1's 12
    # rows from 32 shards, some 9 kB), and the parameters broadcast.
    cap = "SET citus.max_intermediate_result_size = '16kB'"
    # (both layers in one statement: the output's cotangent, which both
    # layers' steps read, is recomputed by each, not gathered)
    for name, model, tables in (("linear", LINEAR, [("w2", "t.j")]), ("MLP", MLP, [("w2", "t.j")]),
                                ("MLP", MLP, [("w1", "t.f, t.j")]), ("MLP", MLP, [("w1", "t.f, t.j"), ("w2", "0, t.j")]),
                                ("MLP, hidden layer read twice,", MLP_TWICE, [("w1", "t.f, t.j"), ("w2", "0, t.j")])):
        table = "+".join(t for t, _ in tables)
        sql = model.format(**q) + " " + " UNION ALL ".join(
            f"SELECT '{t}', {key}, grad('loss', t.val) FROM {q[t]} t" for t, key in tables)
        c = connect()
        k = c.cursor()
        k.execute(cap)
        try:
            k.execute("SET ddx.citus_in_place = on")
            k.execute(sql)
            got = {tuple(r[:-1]): r[-1] for r in k.fetchall()}
            want = {(t,) + key: g for t, kc in tables for key, g in grads(cur, model, qp, t, kc).items()}
            err = rel_err(got, want)
            ran = in_place(sql, cap)
            report(f"{name} grad of {table}.val in place within a 16 kB cap on intermediate results (2,000 samples), "
                   "equal to plain tables", ran and err < 1e-10, f"in place {ran}, error {err}")
        except psycopg2.Error as e:
            report(f"{name} grad of {table}.val in place within a 16 kB cap", False, str(e.pgerror).strip()[:300])
        try:
            k.execute("SET ddx.citus_in_place = off")
            k.execute(sql)
            k.fetchall()
            report("... the gathered program exceeds the cap", False, "it ran")
        except psycopg2.Error as e:
            report("... the gathered program exceeds the cap", "max_intermediate_result_size" in str(e.pgerror),
                   str(e.pgerror).strip()[:300])
        c.close()
    # The sample id a bigint: the hidden layer's rid packs its two keys into
    # a numeric, computed per row on the workers (row_number() had the layer
    # gathered, beyond the cap).
    for k in ("_qb", "_qbp"):
        cur.execute(f"""DROP TABLE IF EXISTS x{k}, y{k} CASCADE;
          CREATE TABLE x{k} (s bigint, f int, val float8); CREATE TABLE y{k} (s bigint, val float8);
          INSERT INTO x{k} SELECT s + 5000000000, f, sin(s * 7 + f) FROM generate_series(1, {ns}) s,
            generate_series(1, {NF}) f;
          INSERT INTO y{k} SELECT s + 5000000000, cos(s) FROM generate_series(1, {ns}) s""")
    cur.execute("""SELECT create_distributed_table('x_qb', 's');
      SELECT create_distributed_table('y_qb', 's', colocate_with => 'x_qb')""")
    qb, qbp = dict(q, x="x_qb", y="y_qb"), dict(qp, x="x_qbp", y="y_qbp")
    sql = MLP.format(**qb) + f" SELECT t.f, t.j, grad('loss', t.val) FROM {qb['w1']} t"
    c = connect()
    k = c.cursor()
    k.execute(cap)
    try:
        k.execute(sql)
        got = {tuple(r[:-1]): r[-1] for r in k.fetchall()}
        err = rel_err(got, grads(cur, MLP, qbp, "w1", "t.f, t.j"))
        ran = in_place(sql, cap)
        report("MLP grad of w1.val, bigint sample ids, in place within the 16 kB cap, equal to plain tables",
               ran and err < 1e-10, f"in place {ran}, error {err}")
    except psycopg2.Error as e:
        report("MLP grad of w1.val, bigint sample ids, in place within the 16 kB cap", False,
               str(e.pgerror).strip()[:300])
    c.close()
    # What a user reads: ddx_explain_plan's EXPLAIN ANALYZE of the program as
    # the runner runs it. In place, the per-sample sums run as Citus tasks,
    # one per shard, on the workers, and the intermediate results (what
    # crosses the network) are a few partial sums; gathered, the data's rows.
    sql = MLP.format(**q) + f" SELECT t.f, t.j, grad('loss', t.val) FROM {q['w1']} t"
    for mode in ("on", "off"):
        c = connect()
        k = c.cursor()
        k.execute(f"SET ddx.citus_in_place = {mode}")
        k.execute("SET citus.explain_all_tasks = on")  # (else one task of each subplan is shown)
        k.execute("SELECT line FROM ddx_explain_plan(%s, true)", (sql,))
        plan = [r[0] for r in k.fetchall()]
        # (ddx_explain lists the steps; over Citus tables it runs nothing: no
        # plan node per step to read rows from)
        k.execute("SELECT count(*), count(rows) FROM ddx_explain(%s, true)", (sql,))
        steps, measured = k.fetchone()
        report(f"ddx_explain over Citus tables ({mode}): its steps, no rows measured", steps > 0 and measured == 0,
               f"{steps} steps, {measured} measured")
        c.close()
        unit = {"bytes": 1, "kB": 1024, "MB": 1024 ** 2}
        sizes = [float(m.group(1)) * unit[m.group(2)] for m in
                 (re.search(r"Intermediate Data Size: ([\d.]+) (bytes|kB|MB)", line) for line in plan) if m]
        shards = sum(1 for line in plan if re.search(r"Task Count: 32$", line))
        workers = {m.group(1) for m in (re.search(r"Node: host=\S+ port=(\d+)", line) for line in plan) if m}
        if mode == "on":
            report("ddx_explain_plan, in place: per-shard tasks on both workers, intermediate results under 16 kB "
                   "(the MLP's first layer)", shards >= 2 and WORKER_PORTS <= workers and 0 < sum(sizes) < 16384,
                   f"{shards} subplans of 32 tasks, nodes {sorted(workers)}, {len(sizes)} results, {sum(sizes):.0f} bytes")
        else:
            report("ddx_explain_plan, gathered: the data's rows cross (intermediate results over the 16 kB cap)",
                   sum(sizes) > 16384, f"{len(sizes)} results, {sum(sizes):.0f} bytes")


def remake_and_restart(conn, cur, c, p):
    """The parameter tables dropped and made again, as a user reruns a
    notebook: the runs start again from step 0, clearing only their own
    state. (They cleared every state table of the role once: after a
    distributed one's DELETE over a connection per shard, Citus refused the
    step's in-place program, which reads co-located placements over others:
    25001, "placements that were modified over multiple connections".)
    c: Citus-managed local parameters, p: its plain twin; run after the
    worlds with distributed and reference state."""
    for world, manage in ((c, True), (p, False)):
        cur.execute(f"""DROP TABLE {world['w1']}, {world['w2']};
          CREATE TABLE {world['w1']} (f int, j int, val float8, PRIMARY KEY (f, j));
          CREATE TABLE {world['w2']} (j int PRIMARY KEY, val float8);
          INSERT INTO {world['w1']} SELECT f, j, 0.3 * sin(f * 5 + j * 3) FROM generate_series(1, {NF}) f,
            generate_series(1, {NJ}) j;
          INSERT INTO {world['w2']} SELECT j, 0.5 * cos(j * 2) FROM generate_series(1, {NJ}) j""")
        if manage:
            cur.execute(f"SELECT citus_add_local_table_to_metadata('{world['w1']}'); "
                        f"SELECT citus_add_local_table_to_metadata('{world['w2']}')")
    try:
        conn.notices = collections.deque()  # (psycopg2 trims a list to its last 50)
        losses = []
        for world in (c, p):
            cur.execute("SELECT loss FROM ddx_sgd_step(%s, %s, 0.05, momentum => 0.9, state_name => %s)",
                        ((MLP + " SELECT l FROM loss").format(**world), [world["w1"] + ".val", world["w2"] + ".val"],
                         "sgd" + world["w1"]))
            losses.append(cur.fetchone()[0])
        restarted = sum("starts again from step 0" in m for m in conn.notices)
        err = max(rel_err(table_dict(cur, c["w1"], "f, j"), table_dict(cur, p["w1"], "f, j")),
                  abs(losses[0] - losses[1]) / max(1.0, abs(losses[1])))
        report("parameter tables made again: the run starts again from step 0 and equals plain tables",
               restarted == 2 and err < 1e-10, f"restarted {restarted}, error {err}")
    except psycopg2.Error as e:
        report("parameter tables made again: the run starts again from step 0", False, str(e.pgerror).strip()[:300])


def train_both(cur, label, n, p):
    """The same optimizer steps on both worlds: losses, parameters and state equal."""
    steps = [
        ("SGD with momentum", "SELECT loss FROM ddx_sgd_step(%s, %s, 0.05, momentum => 0.9, state_name => %s)", "sgd"),
        ("SGD with momentum", "SELECT loss FROM ddx_sgd_step(%s, %s, 0.05, momentum => 0.9, state_name => %s)", "sgd"),
        ("AdamW", "SELECT loss FROM ddx_adamw_step(%s, %s, 0.01, state_name => %s)", "adamw"),
        ("AdamW", "SELECT loss FROM ddx_adamw_step(%s, %s, 0.01, state_name => %s)", "adamw"),
    ]
    for i, (name, sql, run) in enumerate(steps):
        losses = []
        for world in (n, p):
            cur.execute(sql, ((MLP + " SELECT l FROM loss").format(**world), [world["w1"] + ".val", world["w2"] + ".val"],
                              run + world["w1"]))
            losses.append(cur.fetchone()[0])
        err = max(rel_err(table_dict(cur, n["w1"], "f, j"), table_dict(cur, p["w1"], "f, j")),
                  rel_err(table_dict(cur, n["w2"], "j"), table_dict(cur, p["w2"], "j")),
                  abs(losses[0] - losses[1]) / max(1.0, abs(losses[1])))
        report(f"{label}: {name} step {i % 2 + 1}: loss and parameters equal plain tables", err < 1e-10,
               f"error {err}")
    states = []
    for world in (n, p):
        cur.execute("SELECT key::text, step, m, v FROM ddx_state(%s, %s)", ("adamw" + world["w1"], world["w1"] + ".val"))
        states.append({r[0]: r[1:] for r in cur.fetchall()})
    ok = set(states[0]) == set(states[1]) and len(states[0]) == NF * NJ and all(
        states[0][k][0] == states[1][k][0] and
        all(abs(a - b) <= 1e-10 * max(1.0, abs(b)) for a, b in zip(states[0][k][1:], states[1][k][1:]))
        for k in states[1])
    report(f"{label}: ddx_state (AdamW's moments) equals plain tables", ok, f"{str(states)[:300]}")
    cur.execute("SELECT s.state::text FROM _ddx.state_table s WHERE s.param = %s::regclass", (n["w1"],))
    st = cur.fetchone()[0]
    kind, want = citus_kind(cur, st), citus_kind(cur, n["w1"])
    report(f"{label}: optimizer state placed like its parameters ({want})", kind == want, f"state {kind}")
    cur.execute(f"SELECT ddx_schedule_constant('lr{n['w1']}', 0.02, 3)")
    for world in (n, p):
        cur.execute(f"CALL ddx_train(%s, %s, 3, 'lr{n['w1']}', state_name => %s, log_every => 1)",
                    ((MLP + " SELECT l FROM loss").format(**world), [world["w1"] + ".val", world["w2"] + ".val"],
                     "train" + world["w1"]))
    err = max(rel_err(table_dict(cur, n["w1"], "f, j"), table_dict(cur, p["w1"], "f, j")),
              rel_err(table_dict(cur, n["w2"], "j"), table_dict(cur, p["w2"], "j")))
    cur.execute("SELECT run, array_agg(loss ORDER BY step) FROM ddx_train_log WHERE run IN (%s, %s) GROUP BY run",
                ("train" + n["w1"], "train" + p["w1"]))
    logs = dict(cur.fetchall())
    a, b = logs.get("train" + n["w1"], []), logs.get("train" + p["w1"], [])
    ok = err < 1e-10 and len(a) == 3 and len(a) == len(b) and all(abs(u - v) <= 1e-10 * max(1, abs(v)) for u, v in zip(a, b))
    report(f"{label}: ddx_train (3 committed steps) equals plain tables", ok, f"error {err}, logs {a} {b}")


def placements(cur, table):
    """Every placement's rows of a reference table: {port: sorted rows}."""
    cur.execute("SELECT s.shardid, n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) "
                "JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = %s::regclass", (table,))
    out = {}
    for shard, port in cur.fetchall():
        c = psycopg2.connect(dbname="citus", port=port, host=os.environ.get("PGHOST", "/tmp"))
        k = c.cursor()
        schema, _, name = table.rpartition(".")
        k.execute(f"SELECT * FROM {schema + '.' if schema else ''}{name}_{shard} ORDER BY 1, 2")
        out[port] = k.fetchall()
        c.close()
    return out


def node(action, n):
    """scripts/citus.sh node-stop|node-start n, bounded (the script gives up
    after 30 s, and this after 120): whether it worked; where not, a failed
    check with what the script said, not a crash of the harness."""
    try:
        # (DDX_IN_MAJOR: the command that runs it where the major's programs
        # run, scripts/pgmajor.sh 17 run)
        prefix = os.environ.get("DDX_IN_MAJOR", "").split()
        r = subprocess.run(prefix + [CITUS_SH, action, str(n)], capture_output=True, text=True, timeout=120)
        ok, said = r.returncode == 0, (r.stdout + r.stderr).strip()
    except subprocess.TimeoutExpired as e:
        ok, said = False, f"timed out after {e.timeout} s"
    if not ok:
        report(f"{action} {n}", False, said[-2000:])
    return ok


def fault_run(cur):
    """A worker stopped (as by a crash) in the middle of a committing
    training run: the step fails, what was committed is consistent on every
    placement, and after the worker returns the run resumes and ends where
    the same run on plain tables, never interrupted, ends. Every step is
    bounded, and a step that fails is reported as a failed check; the worker
    is started again whatever happened."""
    worker = {"down": False}
    try:
        fault_steps(cur, worker)
    except Exception as e:  # (a failed check, not a crash: the other checks have run)
        report("the fault run", False, f"{type(e).__name__}: {str(e).strip()[:500]}")
    finally:
        if worker["down"]:
            node("node-start", 2)


def fault_steps(cur, worker):
    """The fault run's steps (see fault_run); worker["down"] while worker 2 is."""
    steps = 80
    cur.execute("SELECT ddx_run_drop(r.name) FROM ddx_runs r WHERE r.name IN ('fault', 'faultplain')")  # a rerun
    f, pf = make_world(cur, "_f"), make_world(cur, "_pf")
    cur.execute(f"""SELECT create_distributed_table('{f['x']}', 's');
      SELECT create_distributed_table('{f['y']}', 's', colocate_with => '{f['x']}');
      SELECT create_reference_table('{f['w1']}'); SELECT create_reference_table('{f['w2']}');
      SELECT ddx_schedule_constant('lr_fault', 0.01, {steps})""")
    call = f"CALL ddx_train(%s, %s, {steps}, 'lr_fault', state_name => %s, log_every => 1000)"
    args = lambda w, run: ((MLP + " SELECT l FROM loss").format(**w), [w["w1"] + ".val", w["w2"] + ".val"], run)
    failure = []

    def train():
        c = connect()
        try:
            c.cursor().execute(call, args(f, "fault"))
        except psycopg2.Error as e:
            failure.append(e)
        c.close()

    th = threading.Thread(target=train)
    th.start()
    deadline = time.time() + 120
    while time.time() < deadline:
        cur.execute("SELECT count(*) FROM ddx_train_log WHERE run = 'fault'")
        if cur.fetchone()[0] >= 3:
            break
        time.sleep(0.05)
    worker["down"] = True  # (also where the stop failed: the script killed it)
    if not node("node-stop", 2):
        th.join(180)
        return
    th.join(180)
    e = failure[0] if failure else None
    # (Citus's SQLSTATE: 08006 where it finds the connection gone, XX000
    # where libpq lost it in the middle of a command)
    report("a worker stopped mid-run: the training step fails with an error, the coordinator stays up",
           e is not None and e.pgcode is not None and not th.is_alive(),
           "finished before the worker stopped" if e is None else f"{e.pgcode}: {str(e.pgerror).strip()[:200]}")
    if e is not None:
        print(f"   (the error: {e.pgcode} {str(e.pgerror).strip().splitlines()[0]})", flush=True)
    cur.execute("SELECT step FROM ddx_runs WHERE name = 'fault'")
    committed = cur.fetchone()[0]
    cur.execute("SELECT count(*), max(step) FROM ddx_train_log WHERE run = 'fault'")
    logged = cur.fetchone()
    report(f"the run's committed steps ({committed}) are the steps logged", logged == (committed, committed) and
           0 < committed < steps, f"run step {committed}, log {logged}")
    if not node("node-start", 2):
        return
    worker["down"] = False
    # a new session: this one's cached connection to the worker died with it
    for attempt in range(50):
        try:
            cur = connect().cursor()
            cur.execute("SELECT recover_prepared_transactions()")
            break
        except psycopg2.Error:
            if attempt == 49:
                raise
            time.sleep(0.2)
    cur.execute("SELECT s.state::text FROM _ddx.state_table s WHERE s.param IN (%s::regclass, %s::regclass)",
                (f["w1"], f["w2"]))
    tables = [f["w1"], f["w2"]] + [r[0] for r in cur.fetchall()]
    same = {t: placements(cur, t) for t in tables}
    ok = all(len(p) == 3 and all(rows == next(iter(p.values())) for rows in p.values()) for p in same.values())
    report("parameters and optimizer state are the same on all three placements", ok,
           str({t: {k: len(v) for k, v in p.items()} for t, p in same.items()}))
    cur.execute(call, args(f, "fault"))
    cur.execute(call, args(pf, "faultplain"))
    err = max(rel_err(table_dict(cur, f["w1"], "f, j"), table_dict(cur, pf["w1"], "f, j")),
              rel_err(table_dict(cur, f["w2"], "j"), table_dict(cur, pf["w2"], "j")))
    cur.execute("SELECT count(*) FROM ddx_train_log WHERE run = 'fault'")
    n = cur.fetchone()[0]
    report(f"resumed after the worker returned: {steps} steps, ending where an uninterrupted run on plain tables ends",
           err < 1e-10 and n == steps, f"error {err}, {n} steps logged")


def main():
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
    print("Citus", cur.fetchone()[0], flush=True)
    cur.execute("SELECT count(*) FROM citus_get_active_worker_nodes()")
    report("two active workers", cur.fetchone()[0] == 2)

    # Each Citus world beside its own plain one (the oracle: plain tables of
    # the coordinator), trained alike.
    p = make_world(cur, "_pa")
    # 1. Data distributed by sample and co-located; parameters reference tables.
    a = make_world(cur, "_a")
    cur.execute(f"""SELECT create_distributed_table('{a['x']}', 's');
      SELECT create_distributed_table('{a['y']}', 's', colocate_with => '{a['x']}');
      SELECT create_distributed_table('{a['cot']}', 's', colocate_with => '{a['x']}');
      SELECT create_reference_table('{a['w1']}'); SELECT create_reference_table('{a['w2']}')""")
    # the closed form, an oracle of its own: dL/dw_f = sum_s 2 (z_s - y_s) x_sf
    cur.execute(f"""WITH z AS (SELECT x.s, sum(x.val * w.val) AS z FROM {p['x']} x JOIN {p['w2']} w ON w.j = x.f GROUP BY x.s)
      SELECT x.f, sum(2 * (z.z - y.val) * x.val) FROM {p['x']} x JOIN z ON z.s = x.s JOIN {p['y']} y ON y.s = x.s
      GROUP BY x.f""")
    want = {(f,): g for f, g in cur.fetchall()}
    got = {k: v for k, v in grads(cur, LINEAR, a, "w2", "t.j").items() if k[0] <= NF}
    err = rel_err(got, want)
    report("distributed data, reference parameters: linear grad equals the closed form (was 0 for every row)",
           err < 1e-10, f"error {err}")
    check_world(cur, "co-located data, reference parameters", a, p)
    train_both(cur, "co-located data, reference parameters", a, p)
    if IN_PLACE:
        check_pushdown(cur)

    # 2. Data distributed by sample but not co-located (other shard counts);
    #    parameters in plain tables of the coordinator.
    p = make_world(cur, "_pb")
    b = make_world(cur, "_b")
    cur.execute(f"""SELECT create_distributed_table('{b['x']}', 's', shard_count => 4, colocate_with => 'none');
      SELECT create_distributed_table('{b['y']}', 's', shard_count => 6, colocate_with => 'none');
      SELECT create_distributed_table('{b['cot']}', 's', shard_count => 3, colocate_with => 'none')""")
    check_world(cur, "non-co-located data, local parameters", b, p)
    # a join Citus cannot distribute (non-co-located tables, not on their
    # distribution columns): the program over the tables gathered instead
    joined = ("WITH pred AS (SELECT x.s, sum(x.val * w.val * y.val) AS z FROM {x} x JOIN {y} y ON y.s = x.f "
              "JOIN {w2} w ON w.j = x.f GROUP BY x.s), loss AS (SELECT sum(q.z * q.z) AS l FROM pred q)")
    if IN_PLACE:
        report("a join Citus cannot distribute: the runner falls back to the gathered program",
               not in_place(joined.format(**b) + f" SELECT t.j, grad('loss', t.val) FROM {b['w2']} t"))
    err = rel_err(grads(cur, joined, b, "w2", "t.j"), grads(cur, joined, p, "w2", "t.j"))
    report("... and its gradient equals plain tables", err < 1e-10, f"error {err}")
    train_both(cur, "non-co-located data, local parameters", b, p)

    # 3. Features distributed by feature, targets a reference table;
    #    parameters in tables Citus manages on the coordinator.
    p = make_world(cur, "_pc")
    c = make_world(cur, "_c")
    cur.execute(f"""SELECT create_distributed_table('{c['x']}', 'f');
      SELECT create_reference_table('{c['y']}'); SELECT create_reference_table('{c['cot']}');
      SELECT citus_add_local_table_to_metadata('{c['w1']}');
      SELECT citus_add_local_table_to_metadata('{c['w2']}')""")
    check_world(cur, "data by feature, Citus-managed local parameters", c, p)
    train_both(cur, "data by feature, Citus-managed local parameters", c, p)
    pc = p

    # Keys users pick: text with a comma, a quote and a space, in a column
    # named v; a parameter row added between two steps.
    for sfx in ("_tp", "_t"):
        cur.execute(f"""DROP TABLE IF EXISTS xt{sfx}, yt{sfx}, wt{sfx} CASCADE;
          CREATE TABLE xt{sfx} (s int, v text, val float8); CREATE TABLE yt{sfx} (s int, val float8);
          CREATE TABLE wt{sfx} (v text PRIMARY KEY, val float8);
          INSERT INTO wt{sfx} VALUES ('a,"b', 0.5), ('c d', -0.25), ('(e)', 0.75);
          INSERT INTO xt{sfx} SELECT s, n, sin(s * 7 + length(n)) FROM generate_series(1, {NS}) s,
            unnest(ARRAY['a,"b', 'c d', '(e)', 'f''g']) n;
          INSERT INTO yt{sfx} SELECT s, cos(s) FROM generate_series(1, {NS}) s""")
    cur.execute("SELECT create_distributed_table('xt_t', 's'); SELECT create_distributed_table('yt_t', 's');"
                "SELECT create_reference_table('wt_t')")
    text_loss = ("WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM xt{k} x JOIN wt{k} w ON w.v = x.v GROUP BY x.s), "
                 "loss AS (SELECT sum((p.z - y.val) * (p.z - y.val)) AS l FROM pred p JOIN yt{k} y ON y.s = p.s)")
    tg = {}
    for k in ("_t", "_tp"):
        cur.execute(text_loss.format(k=k) + f" SELECT t.v, grad('loss', t.val) FROM wt{k} t")
        tg[k] = {(r[0],): r[1] for r in cur.fetchall()}
    err = rel_err(tg["_t"], tg["_tp"])
    report("text keys with a comma, a quote and a space: grad equals plain tables", err < 1e-10, f"error {err}")
    for i in (1, 2):
        for k in ("_t", "_tp"):
            cur.execute("SELECT loss FROM ddx_adamw_step(%s, %s, 0.05, state_name => %s)",
                        (text_loss.format(k=k) + " SELECT l FROM loss", [f"wt{k}.val"], "text" + k))
        err = rel_err(table_dict(cur, "wt_t", "v"), table_dict(cur, "wt_tp", "v"))
        report(f"text keys: AdamW step {i} equals plain tables"
               + (" (a parameter row added after step 1)" if i == 2 else ""), err < 1e-10 and
               len(table_dict(cur, "wt_t", "v")) == 3 + (i == 2), f"error {err}")
        if i == 1:
            for k in ("_t", "_tp"):
                cur.execute(f"INSERT INTO wt{k} VALUES ('f''g', 0.1)")

    # 4. Parameters in distributed tables: w1 by its feature, w2 by its
    #    unit (co-located with nothing); their optimizer state distributed
    #    alike, co-located with them.
    p = make_world(cur, "_pd")
    d = make_world(cur, "_d")
    cur.execute(f"""SELECT create_distributed_table('{d['x']}', 's');
      SELECT create_distributed_table('{d['y']}', 's', colocate_with => '{d['x']}');
      SELECT create_distributed_table('{d['cot']}', 's', colocate_with => '{d['x']}');
      SELECT create_distributed_table('{d['w1']}', 'f', colocate_with => 'none');
      SELECT create_distributed_table('{d['w2']}', 'j', shard_count => 5, colocate_with => 'none')""")
    # (w1 is distributed by f, the data by s: read in place, as the data of
    # w2's gradient, their join is one Citus would repartition)
    check_world(cur, "distributed data, distributed parameters", d, p, pushed=False)
    train_both(cur, "distributed data, distributed parameters", d, p)
    cur.execute("SELECT s.state::text, (SELECT q.colocationid FROM pg_dist_partition q WHERE q.logicalrelid = s.state) = "
                "(SELECT q.colocationid FROM pg_dist_partition q WHERE q.logicalrelid = s.param) "
                "FROM _ddx.state_table s WHERE s.param IN (%s::regclass, %s::regclass)", (d["w1"], d["w2"]))
    rows = cur.fetchall()
    report("a distributed parameter table's state is co-located with it", len(rows) == 2 and all(r[1] for r in rows),
           str(rows))

    # 5. An embedding: a token's vector in a table distributed by the token,
    #    looked up by the samples (distributed by sample); the loss reads a
    #    nonlinearity of it. Gradients, AdamW steps and their state against
    #    plain tables, and against finite differences of the loss.
    emb_loss = ("WITH z AS (SELECT x.s, sum(tanh(e.val) * e.val) AS z FROM tok{k} x JOIN emb{k} e "
                "ON e.tok = x.tok AND e.d = x.d GROUP BY x.s), "
                "loss AS (SELECT sum((z.z - y.val) * (z.z - y.val)) AS l FROM z JOIN ty{k} y ON y.s = z.s)")
    for k in ("_ep", "_e"):
        cur.execute(f"""DROP TABLE IF EXISTS tok{k}, ty{k}, emb{k} CASCADE;
          CREATE TABLE tok{k} (s int, tok int, d int); CREATE TABLE ty{k} (s int, val float8);
          CREATE TABLE emb{k} (tok int, d int, val float8, PRIMARY KEY (tok, d));
          INSERT INTO tok{k} SELECT s, (s * 7) % 23, d FROM generate_series(1, {NS}) s, generate_series(1, 2) d;
          INSERT INTO ty{k} SELECT s, cos(s) FROM generate_series(1, {NS}) s;
          INSERT INTO emb{k} SELECT t, d, 0.4 * sin(t * 3 + d) FROM generate_series(0, 29) t, generate_series(1, 2) d""")
    cur.execute("SELECT create_distributed_table('tok_e', 's'); SELECT create_distributed_table('ty_e', 's', "
                "colocate_with => 'tok_e'); SELECT create_distributed_table('emb_e', 'tok')")
    eg = {}
    for k in ("_e", "_ep"):
        cur.execute(emb_loss.format(k=k) + f" SELECT e.tok, e.d, grad('loss', e.val) FROM emb{k} e")
        eg[k] = {tuple(r[:2]): r[2] for r in cur.fetchall()}
    err = rel_err(eg["_e"], eg["_ep"])
    report("an embedding distributed by its token: grad equals plain tables (every row, unused ones 0)",
           err < 1e-10 and len(eg["_e"]) == 60 and eg["_e"][(29, 1)] == 0.0, f"error {err}")
    # finite differences of the loss, at three rows (of the plain tables:
    # Citus runs the loss itself, a join of tokens by sample to vectors by
    # token, only by repartitioning, seconds a time)
    h, worst = 1e-6, 0.0
    for key in ((0, 1), (7, 2), (14, 1)):
        ls = []
        for sign in (1, -1):
            cur.execute("UPDATE emb_ep SET val = val + %s WHERE tok = %s AND d = %s", (sign * h, key[0], key[1]))
            cur.execute(emb_loss.format(k="_ep") + " SELECT l FROM loss")
            ls.append(cur.fetchone()[0])
            cur.execute("UPDATE emb_ep SET val = val - %s WHERE tok = %s AND d = %s", (sign * h, key[0], key[1]))
        fd = (ls[0] - ls[1]) / (2 * h)
        worst = max(worst, abs(fd - eg["_e"][key]) / max(1.0, abs(fd)))
    report("... and finite differences of the loss", worst < 1e-6, f"error {worst}")
    cur.execute("SELECT ddx_schedule_constant('lr_emb', 0.05, 4)")
    for k in ("_e", "_ep"):
        cur.execute("CALL ddx_train(%s, %s, 4, 'lr_emb', state_name => %s, log_every => 1)",
                    (emb_loss.format(k=k) + " SELECT l FROM loss", [f"emb{k}.val"], "emb" + k))
    err = rel_err(table_dict(cur, "emb_e", "tok, d"), table_dict(cur, "emb_ep", "tok, d"))
    states = []
    for k in ("_e", "_ep"):
        cur.execute("SELECT key::text, step, m, v FROM ddx_state(%s, %s)", ("emb" + k, f"emb{k}.val"))
        states.append({r[0]: r[1:] for r in cur.fetchall()})
    ok = set(states[0]) == set(states[1]) and len(states[1]) == 60 and all(
        states[0][q][0] == states[1][q][0] and
        all(abs(a - b) <= 1e-10 * max(1.0, abs(b)) for a, b in zip(states[0][q][1:], states[1][q][1:]))
        for q in states[1])
    report("the embedding: ddx_train (4 AdamW steps), parameters and moments equal plain tables",
           err < 1e-10 and ok, f"error {err}, states {str(states)[:200]}")
    # A token added between two AdamW steps of another run (a sample reads
    # it): its state row is inserted beside the updated ones, on its worker.
    for i in (1, 2):
        for k in ("_e", "_ep"):
            cur.execute("SELECT loss FROM ddx_adamw_step(%s, %s, 0.05, state_name => %s)",
                        (emb_loss.format(k=k) + " SELECT l FROM loss", [f"emb{k}.val"], "emb_add" + k))
        if i == 1:
            for k in ("_e", "_ep"):
                cur.execute(f"INSERT INTO emb{k} VALUES (30, 1, 0.3), (30, 2, -0.2); INSERT INTO tok{k} VALUES (1, 30, 1)")
    err = rel_err(table_dict(cur, "emb_e", "tok, d"), table_dict(cur, "emb_ep", "tok, d"))
    cur.execute("SELECT key::text, step, m, v FROM ddx_state('emb_add_e', 'emb_e.val')")
    st = {r[0]: r[1:] for r in cur.fetchall()}
    report("the embedding: a token added between two AdamW steps, parameters equal plain tables, its state at step 1",
           err < 1e-10 and len(st) == 62 and st.get('{"d": 1, "tok": 30}', (0,))[0] == 1 and
           table_dict(cur, "emb_e", "tok, d")[(30, 1)] != 0.3, f"error {err}, {len(st)} state rows")

    # Statements that read grad beside distributed tables: Citus would run
    # them, and grad's calls, on the workers; ddx gathers their distributed
    # tables so that the calls run on the coordinator.
    cur.execute("DROP VIEW IF EXISTS tokv_e, tokv_ep; CREATE VIEW tokv_e AS SELECT * FROM tok_e;"
                "CREATE VIEW tokv_ep AS SELECT * FROM tok_ep")
    for what, tail in (
            ("joined to the distributed samples", " SELECT x.s, x.d, e.tok, grad('loss', e.val) FROM emb{k} e "
             "JOIN tok{k} x ON x.tok = e.tok AND x.d = e.d"),
            ("through a view over them", " SELECT x.s, x.d, e.tok, grad('loss', e.val) FROM emb{k} e "
             "JOIN tokv{k} x ON x.tok = e.tok AND x.d = e.d"),
            ("ddx_value beside them", " SELECT x.s, x.d, x.tok, ddx_value('loss') FROM tok{k} x")):
        rows = {}
        for k in ("_e", "_ep"):
            cur.execute(emb_loss.format(k=k) + tail.format(k=k))
            rows[k] = {tuple(r[:-1]): r[-1] for r in cur.fetchall()}
        err = rel_err(rows["_e"], rows["_ep"])
        # (2 NS samples' tokens, and the one added above)
        report(f"grad's statement {what}: equals plain tables", err < 1e-10 and len(rows["_e"]) == 2 * NS + 1,
               f"error {err}, {len(rows['_e'])} rows")
    # an UPDATE from the gradients computed in a MATERIALIZED CTE
    for k in ("_e", "_ep"):
        cur.execute(emb_loss.format(k=k) + f", g AS MATERIALIZED (SELECT e.tok, e.d, grad('loss', e.val) AS g "
                    f"FROM emb{k} e) UPDATE emb{k} e SET val = e.val - 0.1 * g.g FROM g WHERE g.tok = e.tok AND g.d = e.d")
    err = rel_err(table_dict(cur, "emb_e", "tok, d"), table_dict(cur, "emb_ep", "tok, d"))
    report("an UPDATE of the embedding from its gradients in a MATERIALIZED CTE equals plain tables", err < 1e-10,
           f"error {err}")

    # What is not done yet is refused, nothing written.
    refused(cur, "grad in an UPDATE of a reference parameter table",
            LINEAR.format(**a) + f" UPDATE {a['w2']} t SET val = t.val - 0.1 * grad('loss', t.val)")
    cur.execute("SELECT array_agg(val ORDER BY j) FROM " + d["w2"])
    before = cur.fetchone()[0]
    refused(cur, "grad in an UPDATE of its distributed parameter table",
            LINEAR.format(**d) + f" UPDATE {d['w2']} t SET val = t.val - 0.1 * grad('loss', t.val)",
            mention="distributed")
    refused(cur, "grad over a distributed parameter table's rows locked FOR UPDATE",
            LINEAR.format(**d) + f" SELECT t.j, grad('loss', t.val) FROM {d['w2']} t FOR UPDATE", mention="distributed")
    refused(cur, "grad beside a distributed parameter table's ctid",
            LINEAR.format(**d) + f" SELECT t.ctid, grad('loss', t.val) FROM {d['w2']} t", mention="distributed")
    cur.execute("SELECT array_agg(val ORDER BY j) FROM " + d["w2"])
    report("the refused UPDATE wrote nothing", cur.fetchone()[0] == before)
    cur.execute("DROP TABLE IF EXISTS w_nokey; CREATE TABLE w_nokey (j int, val float8);"
                "INSERT INTO w_nokey SELECT j, 0.1 * j FROM generate_series(1, 3) j;"
                "SELECT create_reference_table('w_nokey')")
    refused(cur, "a reference table of parameters without a primary key",
            LINEAR.format(x=a["x"], y=a["y"], w2="w_nokey") + " SELECT t.j, grad('loss', t.val) FROM w_nokey t")
    cur.execute(f"DROP TABLE IF EXISTS tw; CREATE TABLE tw (j int, val float8);"
                f"INSERT INTO tw SELECT j, 1 FROM generate_series(1, {NJ}) j")
    refused(cur, "jvp over Citus tables",
            f"WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM {a['x']} x JOIN {p['w2']} w ON w.j = x.f GROUP BY x.s) "
            f"SELECT q.s, jvp(q.z, '{p['w2']}.val', 'tw') FROM pred q")
    refused(cur, "jvp of a reference table's parameter",
            f"WITH pred AS (SELECT x.s, sum(x.val * w.val) AS z FROM {p['x']} x JOIN {a['w2']} w ON w.j = x.f GROUP BY x.s) "
            f"SELECT q.s, jvp(q.z, '{a['w2']}.val', 'tw') FROM pred q")

    remake_and_restart(conn, cur, c, pc)
    fault_run(cur)

    print(f"citus: {sum(results)} passed, {len(results) - sum(results)} failed", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
