#!/usr/bin/python3
"""PostgreSQL's own results for ddx's scalar rules: the oracle of the dense
path's numeric rules (include/ddx/dense/scalar.h).

    test/soak/scalar_cases.py           check: PostgreSQL against the file
    test/soak/scalar_cases.py --write   make test/fixtures/scalar_cases.tsv

For each case, a rule at float8 arguments: its value as PostgreSQL computes
the SQL a program writes for it (`a * b`, `power(a, b)`, `log(a)`, ...), and
each argument's partial as ddx's SQL program computes it: the gradient of
`sum(<expr>)` over a table of one row (the sum's adjoint is 1, and 1 * p is p
exactly). An error is its SQLSTATE. The unit tests (test/unit/scalar_test.cpp)
check the numeric rules against the same file, so that both sides agree with
PostgreSQL, never with each other's output. Run against the cluster of
PGHOST/PGPORT (database PGDATABASE, default postgres: a database of its own is
made and dropped).
Line format (tab-separated): rule, arguments (comma-separated), value,
partials (comma-separated; "-" where the value raised or is NULL).
"""
import os
import sys

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
FILE = os.path.join(HERE, "..", "fixtures", "scalar_cases.tsv")
DB = "ddx_scalar_cases"

SQL = {
    "add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b", "neg": "- a", "pos": "+ a",
    "exp": "exp(a)", "ln": "ln(a)", "log10": "log(a)", "sqrt": "sqrt(a)", "pow": "power(a, b)",
    "abs": "abs(a)", "sin": "sin(a)", "cos": "cos(a)", "tan": "tan(a)", "asin": "asin(a)", "acos": "acos(a)",
    "atan": "atan(a)", "sinh": "sinh(a)", "cosh": "cosh(a)", "tanh": "tanh(a)", "sign": "sign(a)",
    "greatest": "greatest(a, b, c)", "least": "least(a, b, c)",
}
ARITY = {r: 3 if r in ("greatest", "least") else 2 if r in ("add", "sub", "mul", "div", "pow") else 1 for r in SQL}
NO_GRADIENT = {"sign"}

TINY, HUGE = "1e-200", "1e200"
ONE_ARG = ["0", "-0", "0.5", "-1.25", "3", "1", "-1", TINY, "-" + TINY, HUGE, "1000", "-1000", "800", "1.5e-310",
           "Infinity", "-Infinity", "NaN", "2", "1e-170", "-745.5", "710", "1.0000000000000002", "0.999999999999"]
TWO_ARGS = [("3", "0.5"), ("-2", "3"), ("0", "0"), ("0", "2"), ("0", "-1"), ("0", "0.5"), ("2", "0"), ("-8", "1.5"),
            ("-8", "3"), ("1.5", "-2"), (HUGE, HUGE), ("-" + HUGE, HUGE), (TINY, TINY), (TINY, HUGE), ("1", "0"),
            ("NaN", "0"), ("1", "NaN"), ("NaN", "2"), ("Infinity", "2"), ("2", "Infinity"), ("0.5", "-Infinity"),
            ("-Infinity", "3"), ("-Infinity", "-2"), ("Infinity", "Infinity"), ("1e-300", "1e10"), ("10", "400"),
            ("10", "-400"), ("0.25", "0.25"), ("-0", "5"), ("7", "-0")]
THREE_ARGS = [("1", "2", "3"), ("3", "2", "1"), ("2", "2", "1"), ("1", "NULL", "1"), ("NULL", "NULL", "NULL"),
              ("NaN", "1", "NaN"), ("-0", "0", "-1"), ("NULL", "5", "NULL"), ("Infinity", "-Infinity", "0")]


def cases():
    for rule, n in ARITY.items():
        for args in (ONE_ARG if n == 1 else TWO_ARGS if n == 2 else THREE_ARGS):
            yield rule, [args] if n == 1 else list(args)


def lit(x):
    return "NULL::float8" if x == "NULL" else f"'{x}'::float8"


def run(cur, sql):
    cur.execute("SAVEPOINT c")
    try:
        cur.execute(sql)
        v = cur.fetchone()[0]
        cur.execute("RELEASE SAVEPOINT c")
        return "NULL" if v is None else repr(float(v))
    except psycopg2.Error as e:
        cur.execute("ROLLBACK TO SAVEPOINT c")
        return "E:" + e.pgcode


def outcome(cur, rule, args):
    cols = "abc"[:len(args)]
    cur.execute("DROP TABLE IF EXISTS t")
    cur.execute(f"CREATE TABLE t ({', '.join(c + ' float8' for c in cols)})")
    cur.execute(f"INSERT INTO t VALUES ({', '.join(lit(x) for x in args)})")
    value = run(cur, f"SELECT {SQL[rule]} FROM t")
    partials = []
    for c in cols:
        if value.startswith("E:") or value == "NULL" or rule in NO_GRADIENT:
            partials.append("-")
        else:
            partials.append(run(cur, f"WITH loss AS (SELECT sum({SQL[rule]}) AS l FROM t) "
                                     f"SELECT grad('loss', t.{c}) FROM t"))
    return value, partials


def line(rule, args, value, partials):
    return "\t".join([rule, ",".join(args), value, ",".join(partials)])


def main():
    admin = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {DB}")
    admin.cursor().execute(f"CREATE DATABASE {DB}")
    try:
        conn = psycopg2.connect(dbname=DB)
        cur = conn.cursor()
        cur.execute("CREATE EXTENSION ddx")
        cur.execute("SET extra_float_digits = 3")
        got = [line(r, a, *outcome(cur, r, a)) for r, a in cases()]
        conn.close()
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {DB}")
    if "--write" in sys.argv:
        with open(FILE, "w") as f:
            f.write("# rule\targuments\tvalue\tpartials: PostgreSQL's (test/soak/scalar_cases.py --write)\n")
            f.write("\n".join(got) + "\n")
        print(f"wrote {len(got)} cases to {FILE}")
        return
    with open(FILE) as f:
        want = [x.rstrip("\n") for x in f if not x.startswith("#")]
    passed = failed = 0
    for w, g in zip(want, got):
        if w == g:
            passed += 1
        else:
            failed += 1
            print(f"PostgreSQL: {g}\n    file: {w}")
    if len(want) != len(got):
        failed += 1
        print(f"{len(want)} cases in the file, {len(got)} made")
    print(f"scalar cases: {passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
