#!/usr/bin/python3
"""ALTER EXTENSION ddx UPDATE keeps users' runs: the oracle is the same
training without the upgrade.

Run by test/upgrade/run.sh in two phases around the installation of the
newer version and a restart of the server (and by test/upgrade/pg_upgrade.sh
around pg_upgrade from 15 to 18: phase after-pg_upgrade, the same checks with
the same version on both sides):

  before   database ddx_up, the previous release installed and created:
           a small MLP trained by two roles for STEPS steps each (AdamW with
           decoupled weight decay, no_decay, clipping and a warmup-cosine
           schedule through ddx_train; SGD with momentum through
           ddx_sgd_step), so that runs, per-role optimizer state, schedules
           and logs exist.
  after    ALTER EXTENSION ddx UPDATE in ddx_up, then STEPS more steps of
           both runs; database ddx_ref, the newer version created afresh,
           trains the same model for 2 x STEPS steps the same way. The
           parameters, each run's optimizer state, its log and ddx_runs must
           agree to 1e-12 relative; and the updated extension's objects must
           be those a fresh CREATE EXTENSION makes (database ddx_fresh):
           functions' definitions, tables' columns, constraints, indexes and
           policies, views, grants, comments and what pg_dump keeps.

Ends with one line "upgrade: N passed, M failed" (or "pg_upgrade: ...").
"""
import os
import re
import sys

import psycopg2

STEPS = 4
TOL = 1e-12
PHASE = sys.argv[1]
VERSION = sys.argv[2] if len(sys.argv) > 2 else None  # the newer version
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok  ", what, detail if detail.startswith("(") else "")
    else:
        failed += 1
        print("FAIL", what, detail)


def connect(db, user=None):
    kw = {"dbname": db}
    if user:
        kw["user"] = user
    c = psycopg2.connect(**kw)
    c.autocommit = True
    return c


def rows(c, sql, args=None):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else []


MODEL = """
CREATE TABLE x (i int, f int, val float8);
INSERT INTO x SELECT i, f, sin(i * 1.3 + f * 0.7) FROM generate_series(1, 24) i, generate_series(1, 3) f;
CREATE TABLE y (i int PRIMARY KEY, val float8);
INSERT INTO y SELECT i, cos(i * 0.9) FROM generate_series(1, 24) i;
CREATE TABLE w1 (f int, h int, val float8, PRIMARY KEY (f, h));
INSERT INTO w1 SELECT f, h, 0.3 * sin(f * 5 + h * 2) FROM generate_series(1, 3) f, generate_series(1, 4) h;
CREATE TABLE b1 (h int PRIMARY KEY, val float8);
INSERT INTO b1 SELECT h, 0.05 * h FROM generate_series(1, 4) h;
CREATE TABLE w2 (h int PRIMARY KEY, val float8);
INSERT INTO w2 SELECT h, 0.2 * cos(h * 3) FROM generate_series(1, 4) h;
CREATE TABLE v (f int PRIMARY KEY, val float8);
INSERT INTO v SELECT f, 0.1 * f FROM generate_series(1, 3) f;
GRANT SELECT ON x, y TO ddx_alice;
GRANT SELECT, UPDATE ON w1, b1, w2 TO ddx_alice;
GRANT CREATE ON SCHEMA public TO ddx_alice;
"""
MLP = """WITH z AS (SELECT x.i, w1.h, sum(x.val * w1.val) AS z FROM x JOIN w1 ON w1.f = x.f GROUP BY x.i, w1.h),
     h AS (SELECT z.i, z.h, tanh(z.z + b1.val) AS a FROM z JOIN b1 ON b1.h = z.h),
     p AS (SELECT h.i, sum(h.a * w2.val) AS p FROM h JOIN w2 ON w2.h = h.h GROUP BY h.i)
SELECT avg(power(p.p - y.val, 2)) FROM p JOIN y ON y.i = p.i"""
LINEAR = """SELECT avg(power(s.p - y.val, 2))
  FROM (SELECT x.i, sum(x.val * v.val) AS p FROM x JOIN v ON v.f = x.f GROUP BY x.i) s JOIN y ON y.i = s.i"""


def setup(db, version=None):
    """The database, the extension (its default version, or `version`), the
    model, the schedule."""
    admin = connect("postgres")
    rows(admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    if not rows(admin, "SELECT 1 FROM pg_roles WHERE rolname = 'ddx_alice'"):
        rows(admin, "CREATE ROLE ddx_alice LOGIN")
    rows(admin, f"CREATE DATABASE {db}")
    c = connect(db)
    rows(c, "CREATE EXTENSION ddx" + (f" VERSION '{version}'" if version else ""))
    rows(c, "SET client_min_messages = warning")
    rows(c, MODEL)
    sched = rows(c, "SELECT ddx_schedule_warmup_cosine('sched', 2, 8, 0.05, 0.005, 10)")[0][0]
    rows(c, f"GRANT SELECT ON {sched} TO ddx_alice")
    return c


def train(db, upto):
    """STEPS steps of both runs: alice's AdamW run of the MLP to step `upto`
    (ddx_train's steps are the run's, so that a call resumes), the owner's
    SGD-with-momentum run of the linear model."""
    a = connect(db, "ddx_alice")
    rows(a, "SET client_min_messages = warning")
    rows(a, "CALL ddx_train(%s, ARRAY['w1.val', 'b1.val', 'w2.val'], %s, 'sched', weight_decay => 0.01, "
         "no_decay => ARRAY['b1.val'], max_grad_norm => 0.5, state_name => 'mlp')", (MLP, upto))
    o = connect(db)
    rows(o, "SET client_min_messages = warning")
    for _ in range(STEPS):
        rows(o, "SELECT ddx_sgd_step(%s, ARRAY['v.val'], 0.1, momentum => 0.9, state_name => 'lin')", (LINEAR,))


def state(db):
    """What training left, by role: parameters, runs, logs, optimizer state."""
    out = {}
    a = connect(db, "ddx_alice")
    o = connect(db)
    for t in ("w1", "b1", "w2", "v"):
        out["param " + t] = rows(o, f"SELECT * FROM {t} ORDER BY 1, 2")
    for who, c, run, params in (("alice", a, "mlp", ("w1.val", "b1.val", "w2.val")), ("owner", o, "lin", ("v.val",))):
        out[f"runs {who}"] = rows(c, "SELECT name, step, last_loss FROM ddx_runs WHERE name = %s", (run,))
        out[f"log {who}"] = rows(c, "SELECT step, loss, grad_norm, lr FROM ddx_train_log WHERE run = %s ORDER BY step",
                                 (run,))
        for p in params:
            out[f"state {who} {p}"] = rows(c, "SELECT key::text, step, m, v, buf FROM ddx_state(%s, %s) ORDER BY 1",
                                           (run, p))
    return out


def close(a, b):
    """Rows equal, floats to TOL relative."""
    if len(a) != len(b):
        return False, f"{len(a)} rows against {len(b)}"
    worst = 0.0
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False, f"{ra} against {rb}"
        for x, y in zip(ra, rb):
            if isinstance(x, float) and isinstance(y, float):
                d = abs(x - y) / max(1.0, abs(x), abs(y))
                worst = max(worst, d)
                if d > TOL:
                    return False, f"{x!r} against {y!r}"
            elif x != y:
                return False, f"{x!r} against {y!r}"
    return True, f"(largest relative difference {worst:.1e})"


def difference(a, b):
    """What differs between two descriptions: the parts of each that the
    other lacks."""
    pa, pb = set(re.split(r", |\n", a or "")), set(re.split(r", |\n", b or ""))
    return f"{sorted(pa - pb)} against {sorted(pb - pa)}"


# The extension's objects, each described by what a user or pg_dump sees.
OBJECTS = """
WITH m AS (
  SELECT d.classid, d.objid FROM pg_depend d
   WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
     AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ddx'))
SELECT pg_describe_object(m.classid, m.objid, 0) AS object,
       concat_ws(E'\\n',
         CASE WHEN m.classid = 'pg_proc'::regclass THEN
           (SELECT CASE WHEN p.prokind = 'a'
                        THEN (SELECT a::text FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
                        ELSE pg_get_functiondef(p.oid) END || coalesce(p.proacl::text, '')
              FROM pg_proc p WHERE p.oid = m.objid) END,
         CASE WHEN m.classid = 'pg_class'::regclass THEN (
           SELECT concat_ws(' ', c.relkind, c.relacl::text, c.reloptions::text, c.relrowsecurity, c.relforcerowsecurity,
                            CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
                            (SELECT string_agg(concat_ws(' ', a.attname, format_type(a.atttypid, a.atttypmod),
                                                         a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid), a.attacl::text),
                                               ', ' ORDER BY a.attnum)
                               FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                            (SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), ', ' ORDER BY conname)
                               FROM pg_constraint WHERE conrelid = c.oid),
                            (SELECT string_agg(pg_get_indexdef(indexrelid), ', ' ORDER BY pg_get_indexdef(indexrelid))
                               FROM pg_index WHERE indrelid = c.oid),
                            (SELECT string_agg(concat_ws(' ', polname, polcmd, polpermissive, polroles::text,
                                                         pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)),
                                               ', ' ORDER BY polname) FROM pg_policy WHERE polrelid = c.oid),
                            (SELECT string_agg(pg_get_triggerdef(oid), ', ' ORDER BY tgname) FROM pg_trigger
                              WHERE tgrelid = c.oid AND NOT tgisinternal))
             FROM pg_class c WHERE c.oid = m.objid) END,
         CASE WHEN m.classid = 'pg_type'::regclass THEN (
           SELECT concat_ws(' ', t.typtype, t.typacl::text,
                            (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                               FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0))
             FROM pg_type t WHERE t.oid = m.objid) END,
         CASE WHEN m.classid = 'pg_namespace'::regclass THEN
           (SELECT nspacl::text FROM pg_namespace WHERE oid = m.objid) END,
         obj_description(m.objid, (SELECT relname FROM pg_class WHERE oid = m.classid))) AS definition
  FROM m
UNION ALL
SELECT 'extension configuration',
       (SELECT string_agg(c::regclass::text || ' ' || coalesce(w, ''), ', ' ORDER BY c::regclass::text)
          FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, w) WHERE e.extname = 'ddx')
ORDER BY 1
"""


def main():
    if PHASE == "before":
        c = setup("ddx_up")
        print("ddx", rows(c, "SELECT extversion FROM pg_extension WHERE extname = 'ddx'")[0][0],
              "created in ddx_up; training", STEPS, "steps")
        train("ddx_up", STEPS)
        return
    up = connect("ddx_up")
    old = rows(up, "SELECT extversion FROM pg_extension WHERE extname = 'ddx'")[0][0]
    if PHASE == "after-pg_upgrade":
        check(old == VERSION and rows(up, "SELECT current_setting('server_version_num')::int >= 180000")[0][0],
              f"pg_upgrade: ddx {old} on PostgreSQL {rows(up, 'SHOW server_version')[0][0]}")
    else:
        rows(up, "ALTER EXTENSION ddx UPDATE")
        new = rows(up, "SELECT extversion FROM pg_extension WHERE extname = 'ddx'")[0][0]
        check(old != new and new == VERSION, f"ALTER EXTENSION ddx UPDATE: {old} -> {new}")
    check(rows(up, "SELECT library, extension FROM ddx_version()") == [(VERSION, VERSION)],
          "ddx_version(): library and SQL objects of the same version")
    kept = state("ddx_up")
    train("ddx_up", 2 * STEPS)
    up_state = state("ddx_up")
    setup("ddx_ref", VERSION)
    train("ddx_ref", STEPS)
    train("ddx_ref", 2 * STEPS)
    ref_state = state("ddx_ref")
    for k in sorted(ref_state):
        ok, why = close(up_state[k], ref_state[k])
        check(ok and len(ref_state[k]) > 0, f"{k}: trained across the upgrade = trained without it", why)
    check(kept["runs alice"][0][1] == STEPS and up_state["runs alice"][0][1] == 2 * STEPS,
          f"alice's run continued from step {STEPS} to {2 * STEPS}", f"{kept['runs alice']} {up_state['runs alice']}")
    setup("ddx_fresh", VERSION)
    updated = dict(rows(up, OBJECTS))
    fresh = dict(rows(connect("ddx_fresh"), OBJECTS))
    differ = sorted(k for k in set(updated) | set(fresh) if updated.get(k) != fresh.get(k))
    check(not differ and len(fresh) > 50,
          f"the updated extension's {len(updated)} objects are those CREATE EXTENSION makes ({len(fresh)})",
          "; ".join(f"{k}: {difference(updated.get(k), fresh.get(k))}" for k in differ[:5]))
    admin = connect("postgres")
    for db in ("ddx_up", "ddx_ref", "ddx_fresh"):
        rows(admin, f"DROP DATABASE {db} WITH (FORCE)")
    rows(admin, "DROP ROLE ddx_alice")


if __name__ == "__main__":
    os.environ.setdefault("PGDATABASE", "postgres")
    main()
    if PHASE != "before":
        print(f"{'pg_upgrade' if PHASE == 'after-pg_upgrade' else 'upgrade'}: {passed} passed, {failed} failed")
