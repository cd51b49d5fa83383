#!/usr/bin/python3
"""Differential fuzz of the contraction node: random grouped queries over
joins, each run with ddx.contraction = 'all' and = 'off', whose answers must
be the same.

Usage: contraction_fuzz.py [--queries N] [--seed S] [--verbose]

The values are small multiples of 1/8 (and NULLs, and -0, compared by
repr so that a zero's sign counts): every product and every
sum of them is exact in float8 and in float4, whatever the order of the
additions, so the node's answer and PostgreSQL's are compared exactly, row
by row, as multisets. In the "extreme" data mode values near 1e300 and
1e-300 make products overflow and underflow: then both settings must raise
(22003 as float8mul does; where several errors may come first, any data
exception of class 22), or both answer the same. In the "infinite" mode
some values are Infinity, -Infinity or NaN among the small ones: no sum then
overflows, and a sum is NaN, an infinity or the exact finite sum whatever
the order of its additions, so these too compare exactly (by repr: nan,
inf). An infinite value under a guard tells a guarded value's constant from
a product with 0 (Infinity * 0 is NaN).

Each query draws the sides (tables, a filtered subquery, a CTE, a join of
two tables), the join's equalities (integer, text, int4 = int8, two keys),
an extra condition on keys (a.i <= b.i), the GROUP BY keys (either side,
expressions of one side, none, a column that depends on a primary key),
the aggregates (sum, avg, count(*), count(e), max and min of products, of
one side's expressions, of expressions of each side, of terms of both sides
that are no product, some of which divide by zero on
rows that join nothing, COALESCE(f * g, 0), products with the NULL guard
ddx's backward writes, values so guarded), expressions of the sums in the
output, and ORDER BY; groupings of one relation, some by GROUPING SETS. Some run as prepared statements with a $1 (in a filter
or a factor) under a generic plan, some once per row of another table
(LATERAL: the node rescanned with changed parameters). Closes with "contraction fuzz: N passed, N
failed" and how many queries the node ran (a generator that stopped
reaching the node would test nothing: fewer than a third fails).
"""
import argparse
import math
import random
import sys

import psycopg2

ap = argparse.ArgumentParser()
ap.add_argument("--queries", type=int, default=300)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--verbose", action="store_true")
args = ap.parse_args()
R = random.Random(args.seed)
DB = "ddx_contraction_fuzz"


def value(mode):
    if R.random() < 0.15:
        return None
    if R.random() < 0.05:  # (-0: a sum of -0s is -0, a guarded value's 0 is +0; compared by repr)
        return -0.0
    if mode == "extreme" and R.random() < 0.3:
        return R.choice([1e300, -1e300, 1e-300, 3e-200, 2e200])
    if mode == "infinite" and R.random() < 0.2:  # (NaN rarer: a NaN sum hides the rest of its group)
        return R.choice([float("inf"), float("-inf"), float("inf"), float("-inf"), float("nan")])
    return R.randint(-16, 16) / 8


def load(cur, mode):
    """Tables a and b (i, k, t, v float8, f float4), and pk (k primary key,
    g, name, v). Keys small, with NULLs and duplicates."""
    cur.execute("DROP TABLE IF EXISTS a, b, pk")
    for t in ("a", "b"):
        cur.execute(f"CREATE TABLE {t} (i int, k int, t text, v float8, f float4)")
        n = R.choice([0, 1, 5, 20, 60, 200])
        keys = R.choice([1, 3, 8, 30])
        rows = []
        for _ in range(n):
            k = None if R.random() < 0.1 else R.randrange(keys)
            i = None if R.random() < 0.05 else R.randrange(6)
            tx = None if R.random() < 0.05 else R.choice(["x", "y", "zz", ""])
            v = value(mode)
            # (float4: None where float8's value is out of its range; its
            # infinities and NaN stay)
            f = None if v is None or (math.isfinite(v) and (abs(v) > 1e30 or (v != 0 and abs(v) < 1e-30))) else v
            rows.append((i, k, tx, v, f))
        cur.executemany(f"INSERT INTO {t} VALUES (%s, %s, %s, %s, %s)", rows)
    cur.execute("CREATE TABLE pk (k int PRIMARY KEY, g int, name text, v float8)")
    cur.executemany("INSERT INTO pk VALUES (%s, %s, %s, %s)",
                    [(k, None if R.random() < 0.2 else R.randrange(3), R.choice(["p", "q", None]), value(mode))
                     for k in range(R.choice([1, 4, 12]))])
    cur.execute("ANALYZE a; ANALYZE b; ANALYZE pk")


def side(name, alias):
    """A relation named alias with columns (i, k, t, v, f)."""
    c = R.random()
    if c < 0.45:
        return f"{name} {alias}", None
    if c < 0.55:  # a fence with the columns in another order, as ddx's programs write sides
        # (@LAT@: under LATERAL, a condition on pk's row inside the fence;
        # sorted, its plan stays at its end unless rescanned)
        cond = R.choice(["TRUE", "TRUE", "v > -1"])
        order = R.choice(["", " ORDER BY i"])
        return f"(SELECT f, v, t, k, i FROM {name} WHERE {cond}@LAT@{order} OFFSET 0) {alias}", None
    if c < 0.7:
        cond = R.choice(["k IS NOT NULL", "v > -1", "i <> 2", "t <> 'y'"])
        return f"(SELECT * FROM {name} WHERE {cond}) {alias}", None
    if c < 0.85:
        cte = f"c_{alias}"
        mat = R.choice(["", "MATERIALIZED ", "NOT MATERIALIZED "])
        return f"{cte} {alias}", f"{cte} AS {mat}(SELECT i, k, t, v * 0.5 AS v, f FROM {name})"
    # a join of two tables as one side
    return (f"(SELECT s1.i, s2.k, s1.t, s1.v, s1.f FROM {name} s1 JOIN pk s2 ON s1.k = s2.k) {alias}", None)


def factor(x, f4=False):
    col = f"{x}.f" if f4 else f"{x}.v"
    if f4:
        return R.choice([col, col, f"abs({col})", f"(- {col})"])
    # (the last two divide by zero on rows that join nothing, a NULL key, or
    # on some rows that join: PostgreSQL raises only for the latter, and the
    # node must compute such a factor as late)
    return R.choice([col, col, f"abs({col})", f"({col} * 2)", f"({col} + 0.5)", f"(- {col})",
                     f"coalesce({col}, 0.25)", f"greatest({col}, 0)", f"CAST({x}.i AS float8)",
                     f"({col} / (CASE WHEN {x}.k IS NULL THEN 0 ELSE 1 END))",
                     f"({col} / (CASE WHEN {x}.i = 5 THEN 0 ELSE 1 END))", f"({col} * $1)"])


def guarded():
    """(CASE WHEN c(S) THEN NULL ELSE e(T) END) * g(S), the NULL guard ddx's
    backward writes: the node splits it where e cannot raise; or a value
    guarded so, CASE WHEN c(S) THEN k ELSE e(T) END."""
    s, t = R.choice([("x", "y"), ("y", "x")])
    cond = R.choice([f"{s}.v IS NULL", f"{s}.v IS NULL OR {s}.i IS NULL", f"{s}.i = 5", f"{s}.k IS NULL"])
    cot = R.choice([f"{t}.v", f"{t}.v", f"abs({t}.v)", f"({t}.v * 2)", f"{t}.f", f"{s}.v"])
    if R.random() < 0.4:  # a guarded value: the constant where the guard holds, else the value
        k = R.choice(["0::float8", "0::float8", "-1.5::float8"])
        sel = (f"CASE WHEN {cond} THEN {k} ELSE {cot} END" if R.random() < 0.7
               else f"CASE WHEN {cond} THEN {cot} ELSE {k} END")
        return R.choice([f"sum({sel})", f"avg({sel})", f"sum(COALESCE({sel}, 0))"])
    guard = f"(CASE WHEN {cond} THEN NULL ELSE {cot} END)"
    # (g raises on rows where i = 5, where the guard may hold: PostgreSQL
    # evaluates g for every pair all the same, and so must the node)
    g = R.choice([factor(s), f"({s}.v / (CASE WHEN {s}.i = 5 THEN 0 ELSE 1 END))"])
    prod = f"{guard} * {g}" if R.random() < 0.5 else f"{g} * {guard}"
    return R.choice([f"sum({prod})", f"sum(COALESCE({prod}, 0))", f"avg({prod})"])


def aggregate():
    if R.random() < 0.2:
        return guarded()
    c = R.random()
    if c < 0.35:
        return f"sum({factor('x')} * {factor('y')})"
    if c < 0.45:
        return f"sum({factor('x', True)} * {factor('y', True)})"
    if c < 0.55:
        return f"avg({factor('x')} * {factor('y')})"
    if c < 0.63:
        return "count(*)"
    if c < 0.7:
        return f"count({R.choice(['x.v', 'y.v', 'x.t', 'y.k'])})"
    if c < 0.8:
        return f"{R.choice(['sum', 'avg'])}({factor(R.choice(['x', 'y']))})"
    if c < 0.87:
        return f"sum(COALESCE({factor('x')} * {factor('y')}, 0))"
    if c < 0.89:
        return f"sum({factor('y')} * {factor('x')})"
    if c < 0.94:
        # a pair term: a float8 term of both sides that is no product, the
        # node's to evaluate for each pair (the division raises where y.v is
        # 1; its quotients are not multiples of 1/8, so only their max)
        return R.choice([f"sum({factor('x')} - {factor('y')})", f"avg({factor('x')} + {factor('y')} * 2)",
                         f"sum(COALESCE({factor('x')} + {factor('y')}, 0))", f"(min({factor('x')} - {factor('y')}) + 0)",
                         f"(max({factor('x')} / ({factor('y')} - 1)) + 0)"])
    if c < 0.97:
        # max and min over a join: of 0 and -0 each plan keeps the one its
        # order of pairs meets last (so does PostgreSQL's, by its join
        # method), so the zero's sign is dropped (-0 + 0 is 0)
        arg = R.choice([f"{factor('x')} * {factor('y')}", factor(R.choice(["x", "y"])),
                        f"COALESCE({factor('x')} * {factor('y')}, 0)"])
        return f"({R.choice(['max', 'min'])}({arg}) + 0)"
    return f"sum(x.v * y.v) FILTER (WHERE x.i > 1)"  # (PostgreSQL's plan: FILTER)


ONE = [0]  # queries that group one relation (no join)


def one_relation(a, ctes):
    """A grouping of one relation (the node with a one-row build side and no
    join key): keys of x, sums, averages and counts of x's expressions; some
    by grouping sets."""
    ONE[0] += 1
    keys = R.choice([["x.i"], ["x.t"], ["x.i % 3"], ["x.k", "x.i"], ["coalesce(x.k, -1)"], ["x.t", "x.i"], ["x.k"]])
    # (max and min exactly: the rows come in the relation's order to both
    # plans, and of 0 and -0 the later is kept)
    aggs = [R.choice([f"sum({factor('x')})", f"avg({factor('x')})", "count(*)", "count(x.v)",
                      f"sum(COALESCE({factor('x')}, 0))", f"sum({factor('x', True)})", f"sum({factor('x')} * 3)",
                      f"max({factor('x')})", f"min({factor('x')})"])
            for _ in range(R.randint(1, 3))]
    exprs = [f"{ag} AS a{k}" if R.random() < 0.8 else f"abs({ag}) AS a{k}" for k, ag in enumerate(aggs)]
    where = R.choice(["", "", " WHERE x.v IS NOT NULL", " WHERE x.k <> $1", " WHERE x.i < 4"])
    frm = a
    if R.random() < 0.3:  # a UNION ALL of two relations, as a program adds a cotangent's parts
        b, cb = side("b", "z")
        ctes += [cb] if cb else []
        frm = f"(SELECT i, k, t, v, f FROM {a[:-len(' x')]} x0 UNION ALL SELECT i, k, t, v, f FROM {b}) x"
    group = ", ".join(keys)
    if R.random() < 0.35:
        # GROUPING SETS, as a backward sums a cotangent into each input's
        # rows in one pass: each row in a group of every set, the keys a set
        # does not group by NULL, GROUPING() by set (an empty set, ROLLUP's
        # or written: PostgreSQL's plan)
        keys = R.sample(["x.i", "x.t", "x.k", "x.i % 3", "coalesce(x.k, -1)"], 2)
        a0, a1 = keys
        group = R.choice([f"GROUPING SETS (({a0}), ({a1}))", f"GROUPING SETS (({a0}), ({a0}, {a1}), ({a1}))",
                          f"{a0}, ROLLUP ({a1})", f"GROUPING SETS (({a0}), ({a1}), ({a0}))",
                          f"GROUPING SETS (({a0}), ({a1}), ())"])
        exprs.append(R.choice([f"GROUPING({a0}, {a1}) AS g", f"GROUPING({a1}) * 10 AS g"]))
    sel = ", ".join([f"{o} AS k{n}" for n, o in enumerate(keys)] + exprs)
    with_ = f"WITH {', '.join(ctes)} " if ctes else ""
    sql = f"{with_}SELECT {sel} FROM {frm}{where} GROUP BY {group}"
    sql = sql.replace("@LAT@", "")
    return sql, "$1" in sql


def query():
    ctes = []
    a, ca = side("a", "x")
    b, cb = side("b", "y")
    ctes += [c for c in (ca, cb) if c]
    if R.random() < 0.15:
        return one_relation(a, [ca] if ca else [])
    on = R.choice(["x.k = y.k", "x.k = y.k", "x.k = y.k AND x.i = y.i", "x.t = y.t", "x.k::int8 = y.k",
                   "x.i = y.k", "x.k = y.k AND x.i <= y.i"])
    keys = R.choice([[], ["x.i"], ["y.i"], ["x.i", "y.i"], ["x.t", "y.k"], ["y.t"], ["x.i % 3"],
                     ["x.i", "y.i", "x.t"], ["coalesce(y.k, -1)"]])
    join_pk = R.random() < 0.2
    if join_pk:
        keys = ["p.k"] + keys
    outs = list(keys)
    if join_pk and R.random() < 0.6:
        outs += R.sample(["p.g", "p.name"], R.randint(1, 2))  # depend on p.k
    aggs = [aggregate() for _ in range(R.randint(1, 3))]
    exprs = []
    for k, ag in enumerate(aggs):
        c = R.random()
        if c < 0.7:
            exprs.append(f"{ag} AS a{k}")
        elif c < 0.85:
            exprs.append(f"({ag}) * 2 + 1 AS a{k}")
        else:
            exprs.append(f"abs({ag}) AS a{k}")
    frm = f"{a} JOIN {b} ON {on}"
    if join_pk:
        frm += " JOIN pk p ON p.k = x.k" if R.random() < 0.5 else " JOIN pk p ON p.k = y.i"
    where = R.choice(["", "", f" WHERE x.v IS NOT NULL", " WHERE y.i < $1", " WHERE x.k <> $1"])
    # LATERAL: the query once per row of pk, its scans filtered by that row
    # (PARAM_EXEC below the node): the node rescanned with changed parameters
    lateral = R.random() < 0.15
    if lateral:
        where += (" AND " if where else " WHERE ") + R.choice(["x.i = o.g", "y.k = o.k", "x.k <> o.k"])
    written_keys = keys + ([o for o in outs if o not in keys] if R.random() < 0.5 else [])
    group = f" GROUP BY {', '.join(written_keys)}" if keys else ""
    sel = ", ".join([f"{o} AS k{n}" for n, o in enumerate(outs)] + exprs)
    order = R.choice(["", "", " ORDER BY 1", f" ORDER BY a0 DESC NULLS LAST"])
    with_ = f"WITH {', '.join(ctes)} " if ctes else ""
    sql = f"{with_}SELECT {sel} FROM {frm}{where}{group}{order}"
    if keys and R.random() < 0.3:
        # joined back by its keys to rows that have them (ddx's backward
        # joins each contraction so: Custom Scan (ddx fill)): the groups'
        # keys, some twice, some not at all, and rows of NULL keys; under
        # LATERAL below, computed again for each row of pk
        ks = [f"k{n}" for n in range(len(outs))]
        t = sql
        if R.random() < 0.4:
            # a sum of contractions (a program's summed transposes: a
            # HashAggregate over an Append of nodes), each group's arms
            # added in the Append's order
            arm = f"{with_}SELECT {sel} FROM {frm}{where}{group}"  # (no ORDER BY: a UNION ALL keeps none)
            t = (f"SELECT {', '.join(ks)}, sum(u.a0) AS a0 FROM (({arm}) UNION ALL ({arm})) u "
                 f"GROUP BY {', '.join(ks)}")
        fill = (f"(SELECT {', '.join(ks)} FROM ({sql}) f0 UNION ALL SELECT {', '.join(ks)} FROM ({sql}) f1 "
                f"WHERE f1.a0 IS NOT NULL UNION ALL SELECT {', '.join('NULL' for _ in ks)} OFFSET 0)")
        on = " AND ".join(f"f.{k} = s.{k}" for k in ks) + R.choice(["", "", " AND s.a0 IS NOT NULL"])
        sql = f"SELECT s.*, f.{ks[0]} AS fk FROM ({t}) s JOIN {fill} f ON {on}"
    sql = sql.replace("@LAT@", " AND k IS DISTINCT FROM o.k" if lateral else "")
    if lateral:
        sql = f"SELECT o.k AS ok, o.g AS og, s.* FROM pk o CROSS JOIN LATERAL ({sql}) s"
    return sql, "$1" in sql


SUMMED = [0]  # queries whose answer a fill over a sum of contractions gave


def run(cur, sql, param, setting):
    cur.execute(f"SET ddx.contraction = '{setting}'")
    # (a sum of contractions aggregated by hashing, as in ddx's programs,
    # whose settings turn sorts off: the fill takes no sorted aggregate)
    cur.execute(f"SET enable_sort = {'off' if 'sum(u.a0)' in sql else 'on'}")
    plan = ""
    try:
        if param:
            cur.execute("DEALLOCATE ALL")
            cur.execute("SET plan_cache_mode = force_generic_plan")
            cur.execute(f"PREPARE q(int) AS {sql}")
            cur.execute("EXPLAIN (COSTS OFF) EXECUTE q(1)")
            plan = "\n".join(r[0] for r in cur.fetchall())
            cur.execute("EXECUTE q(1)")
        else:
            cur.execute(f"EXPLAIN (COSTS OFF) {sql}")
            plan = "\n".join(r[0] for r in cur.fetchall())
            cur.execute(sql)
        rows = cur.fetchall()
        SUMMED[0] += setting == "all" and "Summed Contractions" in plan
        return None, rows, "ddx contraction" in plan
    except psycopg2.Error as e:
        return e.pgcode or "connection", None, "ddx contraction" in plan
    finally:
        cur.execute("RESET plan_cache_mode")


def canon(rows, exact):
    """Rows as a sorted multiset; floats exact (their products and sums are),
    or only whether they are NULL (extreme: 1e300 - 1e300 + 1 is 1 or 0 by
    the order of the additions)."""
    def one(v):
        if v is None:
            return (0, "")
        if isinstance(v, float):
            return (1, repr(v) if exact else "a number")
        return (1, repr(v))
    return sorted(tuple(one(v) for v in r) for r in rows)


def main():
    admin = psycopg2.connect(dbname="postgres")
    admin.autocommit = True
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.cursor().execute(f"CREATE DATABASE {DB}")
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION ddx")
    cur.execute("SET statement_timeout = '20s'")
    passed = failed = used = raised = 0
    mode = "plain"
    for n in range(args.queries):
        if n % 10 == 0:
            mode = R.choice(["plain", "plain", "plain", "extreme", "infinite"])
            load(cur, mode)
        sql, param = query()
        try:
            e_on, r_on, node = run(cur, sql, param, "all")
            e_off, r_off, _ = run(cur, sql, param, "off")
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            failed += 1
            print(f"query {n} [{mode}] FAILED connection lost (crash?): {str(e).splitlines()[0]}\n  {sql}", flush=True)
            conn = psycopg2.connect(dbname=DB)
            conn.autocommit = True
            cur = conn.cursor()
            mode = "plain"
            load(cur, mode)
            continue
        used += node
        problem = None
        if e_on or e_off:
            # Where several pairs raise, which raises first depends on the
            # order of the pairs, which no plan fixes (PostgreSQL's own hash
            # join and merge join differ): an overflow (22003) against a
            # division by zero (22012) is not a difference; raising against
            # answering is.
            if e_on != e_off and not (e_on and e_off and e_on[:2] == "22" and e_off[:2] == "22"):
                problem = f"errors differ: node {e_on}, PostgreSQL {e_off}"
            elif e_on[:2] == "XX" or e_on == "connection":
                problem = f"internal error {e_on}"
            elif e_on not in ("22003", "22012", "57014"):
                problem = f"unexpected error {e_on}"
            raised += node and not problem
        elif canon(r_on, mode != "extreme") != canon(r_off, mode != "extreme"):
            c_on, c_off = canon(r_on, mode != "extreme"), canon(r_off, mode != "extreme")
            only_on = [r for r in c_on if r not in c_off][:3]
            only_off = [r for r in c_off if r not in c_on][:3]
            problem = f"answers differ ({len(r_on)} rows vs {len(r_off)}): node {only_on} vs {only_off}"
        if problem:
            failed += 1
            print(f"query {n} [{mode}] FAILED {problem}\n  {sql}", flush=True)
        else:
            passed += 1
            if args.verbose:
                print(f"query {n} [{mode}] ok{' (node)' if node else ''}{' ' + e_on if e_on else ''}: {sql}")
    share = used / max(1, args.queries)
    print(f"contraction fuzz: {args.queries} queries (seed {args.seed}), the node ran {used} "
          f"({share:.0%}; {raised} of them raised as PostgreSQL did; a fill over a sum of contractions {SUMMED[0]}; "
          f"{ONE[0]} groupings of one relation), "
          "each compared with PostgreSQL's own plan")
    if share < 1 / 3:
        failed += 1
        print("FAILED: the node ran fewer than a third of the queries: the generator no longer reaches it")
    print(f"contraction fuzz: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
