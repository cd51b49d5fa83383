#!/usr/bin/python3
"""Differential fuzz of dense execution (ddx.dense): random model losses over
random tables, each gradient statement run with ddx.dense on and off, whose
answers must agree, and the loss's value (ddx_value) against PostgreSQL's own
plan of the loss query.

Usage: dense_fuzz.py [--queries N] [--seed S] [--verbose]

The losses are what the dense path takes (a grouped sum of a product of two
tables, a bias joined by its key, a scalar function of the result, a softmax
over rows with max and log-sum-exp, a label chosen by a key, masks that
compare keys, avg, one table read twice) and what it does not (a count),
drawn from a small grammar. The data is drawn per round in one of these
modes: plain (values in eighths, keys 1..n), missing (rows deleted),
nulls (some values and keys NULL), duplicates (tables without a primary
key, some rows twice), sparse (keys far apart and negative), extreme
(values near 1e300 and 1e-300: products overflow and underflow), huge keys
(bigint keys past 2^53: two keys that are one double). Where the loss is a
polynomial of the values (products, sums, halves) over eighths, every sum
is exact whatever the order of the additions: on and off are compared by
repr. Otherwise within 1e-12 of the largest gradient. Both settings must
raise the same error class where either raises (which row raises first is
the plan's; with extreme values, the loss query alone may raise where the
program's plan does not evaluate the row). Closes with "dense fuzz: N passed, N failed" and how many
statements the dense node ran (from ddx_explain_plan): a generator that
stopped reaching the node would test nothing, so fewer than a third fails.
"""
import argparse
import math
import random
import sys

import psycopg2

ap = argparse.ArgumentParser()
ap.add_argument("--queries", type=int, default=200)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--verbose", action="store_true")
args = ap.parse_args()
R = random.Random(args.seed)
DB = "ddx_dense_fuzz"
MODES = ["plain", "plain", "missing", "nulls", "duplicates", "sparse", "extreme", "huge"]


def value(mode):
    if mode == "nulls" and R.random() < 0.1:
        return "NULL"
    if mode == "extreme" and R.random() < 0.3:
        return repr(R.choice([1e300, -1e300, 1e-300, 3e-200, 2e200]))
    return repr(R.randint(-12, 12) / 8)


def key(mode, k):
    if mode == "nulls" and R.random() < 0.03:
        return "NULL"
    if mode == "sparse":
        return str(k * 1000 - 7000)
    if mode == "huge":
        return str(2 ** 53 + k)  # (2^53 + 1 is 2^53 as a double)
    return str(k)


def load(cur, mode):
    """a(i, k, val) . b(k, j, val) + c(j, val); lab(i, val): a class per row."""
    ni, nk, nj = R.randint(2, 9), R.randint(1, 5), R.randint(1, 6)
    kt = "bigint" if mode == "huge" else "int"
    pk = mode not in ("duplicates", "nulls")
    cur.execute("DROP TABLE IF EXISTS a, b, c, lab")
    cur.execute(f"CREATE TABLE a (i {kt}, k {kt}, val float8{', PRIMARY KEY (i, k)' if pk else ''})")
    cur.execute(f"CREATE TABLE b (k {kt}, j {kt}, val float8{', PRIMARY KEY (k, j)' if pk else ''})")
    cur.execute(f"CREATE TABLE c (j {kt}, val float8{', PRIMARY KEY (j)' if pk else ''})")
    cur.execute(f"CREATE TABLE lab (i {kt}, val {kt})")

    def rows(table, keys):
        out = []
        for ks in keys:
            if mode == "missing" and R.random() < 0.2:
                continue
            out.append("(" + ", ".join([key(mode, k) for k in ks] + [value(mode)]) + ")")
            if mode == "duplicates" and R.random() < 0.1:
                out.append(out[-1])
        if out:
            cur.execute(f"INSERT INTO {table} VALUES " + ", ".join(out))

    rows("a", [(i, k) for i in range(1, ni + 1) for k in range(1, nk + 1)])
    rows("b", [(k, j) for k in range(1, nk + 1) for j in range(1, nj + 1)])
    rows("c", [(j,) for j in range(1, nj + 1)])
    labs = [f"({key(mode, i)}, {key(mode, R.randint(1, nj))})" for i in range(1, ni + 1)]
    cur.execute("INSERT INTO lab VALUES " + ", ".join(labs))
    cur.execute("ANALYZE a, b, c, lab")


def query():
    """(CTEs, parameter tables, exact): a loss named loss."""
    mask = R.choice(["", "", " AND a.i <= b.j", " AND a.i > b.j", " AND a.k >= 2"])
    z = f"z AS (SELECT a.i, b.j, sum(a.val * b.val) AS z FROM a JOIN b ON a.k = b.k{mask} GROUP BY a.i, b.j)"
    params = ["a", "b"]
    exact = True
    if R.random() < 0.4:
        z += ", y AS (SELECT z.i, z.j, z.z + c.val AS z FROM z JOIN c ON c.j = z.j)"
        params.append("c")
    else:
        z += ", y AS (SELECT i, j, z FROM z)"
    shape = R.choice(["poly", "poly", "scalar", "softmax", "avg", "maxmin", "gram", "count"])
    if shape == "poly":
        loss = R.choice(["sum(z * z) / 2", "sum(z * z * z)", "sum(z) * 2", "sum(z * 0.5 - z * z)"])
        ctes = f"{z}, loss AS (SELECT {loss} AS l FROM y)"
    elif shape == "scalar":
        exact = False
        f = R.choice(["tanh(z)", "power(tanh(z), 2)", "exp(z)", "sin(z) * cos(z)", "sqrt(z * z + 1)",
                      "ln(z * z + 1)", "z / (z * z + 1)"])
        ctes = f"{z}, loss AS (SELECT sum({f}) AS l FROM y)"
    elif shape == "softmax":
        exact = False
        ctes = (f"{z}, m AS (SELECT i, max(z) AS m FROM y GROUP BY i), "
                "se AS (SELECT y.i, sum(exp(y.z - m.m)) AS se FROM y JOIN m ON m.i = y.i GROUP BY y.i), "
                "ce AS (SELECT y.i, m.m + ln(se.se) - y.z AS ce FROM y JOIN m ON m.i = y.i JOIN se ON se.i = y.i "
                "JOIN lab ON lab.i = y.i AND lab.val = y.j), "
                "loss AS (SELECT avg(ce) AS l FROM ce)")
    elif shape == "avg":
        exact = False  # (avg divides: exact only where the count is a power of 2)
        ctes = f"{z}, r AS (SELECT i, avg(z * z) AS r FROM y GROUP BY i), loss AS (SELECT sum(r) AS l FROM r)"
    elif shape == "maxmin":
        agg = R.choice(["max", "min"])
        ctes = f"{z}, r AS (SELECT i, {agg}(z) AS r FROM y GROUP BY i), loss AS (SELECT sum(r * r) AS l FROM r)"
    elif shape == "gram":
        params = ["a"]
        ctes = ("g AS (SELECT p.i, q.i AS i2, sum(p.val * q.val) AS g FROM a p JOIN a q ON p.k = q.k "
                "GROUP BY p.i, q.i), loss AS (SELECT sum(g * g) AS l FROM g)")
    else:  # not dense: a count
        ctes = f"{z}, loss AS (SELECT sum(z * z) + count(*) AS l FROM y)"
    return ctes, params, exact


def statement(ctes, params):
    keys = {"a": "i, k", "b": "k, j", "c": "j"}
    parts = [f"SELECT '{p}' AS t, ({keys[p]})::text AS key, grad('loss', {p}.val) AS g FROM {p}" for p in params]
    return f"WITH {ctes} " + " UNION ALL ".join(parts) + " UNION ALL SELECT 'loss', '', ddx_value('loss')"


def run(cur, sql, dense):
    cur.execute(f"SET ddx.dense = {'on' if dense else 'off'}")
    try:
        cur.execute(sql)
        return None, cur.fetchall()
    except psycopg2.Error as e:
        return e.pgcode or "connection", None


def ran_dense(cur, sql):
    """'ran', 'refused' or 'none' (no dense program) for the statement's program."""
    cur.execute("SET ddx.dense = on")
    try:
        cur.execute("SELECT line FROM ddx_explain_plan(%s, true)", (sql,))
        lines = "\n".join(r[0] for r in cur.fetchall())
    except psycopg2.Error:
        return "error"
    return "ran" if "Dense Products" in lines else "refused" if "Dense Refused" in lines else "none"


def compare(on, off, exact):
    """None, or what differs."""
    if len(on) != len(off):
        return f"{len(on)} rows against {len(off)}"
    key = lambda r: (r[0], r[1] or "")  # noqa: E731
    on, off = sorted(on, key=key), sorted(off, key=key)
    scale = max([abs(r[2]) for r in off if r[2] is not None and math.isfinite(r[2])] + [1e-300])
    for x, y in zip(on, off):
        if key(x) != key(y):
            return f"rows {x} against {y}"
        if (x[2] is None) != (y[2] is None):
            return f"{x} against {y}"
        if x[2] is None:
            continue
        if exact or not (math.isfinite(x[2]) and math.isfinite(y[2])):
            if repr(x[2]) != repr(y[2]) and not (x[2] == 0 and y[2] == 0):
                return f"{x} against {y} (exact)"
        elif abs(x[2] - y[2]) > 1e-12 * scale:
            return f"{x} against {y} (scale {scale})"
    return None


def main():
    boot = psycopg2.connect(dbname="postgres")
    boot.autocommit = True
    boot.cursor().execute(f"DROP DATABASE IF EXISTS {DB}")
    boot.cursor().execute(f"CREATE DATABASE {DB}")
    boot.close()
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION ddx")
    passed = failed = 0
    paths = {"ran": 0, "refused": 0, "none": 0, "error": 0}
    mode = "plain"
    for n in range(args.queries):
        if n % 8 == 0:
            mode = R.choice(MODES)
            load(cur, mode)
        ctes, params, exact = query()
        exact = exact and mode not in ("extreme",)
        sql = statement(ctes, params)
        try:
            e_on, r_on = run(cur, sql, True)
            e_off, r_off = run(cur, sql, False)
            path = ran_dense(cur, sql)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            failed += 1
            print(f"query {n} [{mode}] FAILED connection lost (crash?): {str(e).splitlines()[0]}\n  {sql}", flush=True)
            conn = psycopg2.connect(dbname=DB)
            conn.autocommit = True
            cur = conn.cursor()
            mode = "plain"
            load(cur, mode)
            continue
        paths[path] += 1
        problem = None
        if e_on or e_off:
            if e_on != e_off and not (e_on and e_off and e_on[:2] == "22" and e_off[:2] == "22"):
                problem = f"errors differ: dense {e_on}, SQL program {e_off}"
            elif e_on[:2] == "XX":
                problem = f"internal error {e_on}"
        else:
            problem = compare(r_on, r_off, exact)
            if not problem:  # the loss's value against PostgreSQL's own plan of it
                cur.execute("SET ddx.dense = off")
                try:
                    cur.execute(f"WITH {ctes} SELECT l FROM loss")
                    want = cur.fetchone()[0]
                    got = [r[2] for r in r_on if r[0] == "loss"][0]
                    if (want is None) != (got is None) or (
                            want is not None and math.isfinite(want) and
                            abs(want - got) > 1e-12 * max(abs(want), 1e-300)):
                        problem = f"loss {got} against PostgreSQL's {want}"
                except psycopg2.Error as e:
                    # (extreme values: which rows a plan evaluates decides
                    # whether it raises, and the loss query's plan is not
                    # the program's; PostgreSQL's own plans differ so)
                    if not (mode == "extreme" and (e.pgcode or "")[:2] == "22"):
                        problem = f"the loss query raised {e.pgcode} where the gradient did not"
        if problem:
            failed += 1
            print(f"query {n} [{mode}, {path}] FAILED {problem}\n  {sql}", flush=True)
        else:
            passed += 1
            if args.verbose:
                print(f"query {n} [{mode}, {path}] ok", flush=True)
    share = paths["ran"] / max(args.queries, 1)
    print(f"dense node: ran {paths['ran']}, refused {paths['refused']}, no program {paths['none']}, "
          f"explain failed {paths['error']}")
    if share < 1 / 3:
        failed += 1
        print(f"FAILED the dense node ran {paths['ran']} of {args.queries} statements: the generator no longer "
              "reaches it")
    print(f"dense fuzz: {passed} passed, {failed} failed")
    conn.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
