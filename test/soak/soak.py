#!/usr/bin/python3
"""A soak of generated loss queries: ddx's gradient against central finite
differences of the same query, plus metamorphic relations.

Usage: soak.py [--queries N] [--seed S] [--verbose]

Each case makes small random tables p (the parameters) and d (data) in one of
several data modes (plain, ties, a third NULLs, duplicate rows, extreme
values, thousands of rows), generates a random loss over them (joins on shared
keys, filters, GROUP BY aggregates (with FILTER; var_pop, var_samp),
CTEs read once or twice, UNION ALL, inlinable SQL helpers (scalar, with
named and default arguments, and set-returning over p), a plpgsql filter,
EXISTS, CASE/GREATEST kinks, softmax by GROUP BY and by windows, window
aggregates over partitions, ORDER BY frames (ROWS, RANGE, GROUPS, EXCLUDE), lag/lead,
top-k by row_number/rank/dense_rank, sums, averages and counts over joins) and
asks for grad('loss', p.val).

Allowed outcomes: a correct gradient, or a refusal whose SQLSTATE is outside
class XX. A crash, an internal error or a wrong number fails the soak.
Finite differences are screened at kinks: a row whose differences at two step
sizes disagree is not compared. Metamorphic relations checked on every
answered case: ∇(cL) = c∇L, ∇(L + c) = ∇L, ∇(L²) = 2L∇L, the loss spelled as
a scalar subquery = the loss spelled as a CTE name, NOT MATERIALIZED =
MATERIALIZED, every join spelled with its sides swapped (LEFT as RIGHT), and
a different physical row order of the tables, grad = vjp seeded with 1, and
forward mode: jvp of the loss along a random tangent = <grad, tangent>.

Closes with "soak: N passed, N failed" (passed = cases answered correctly or
refused cleanly).
"""
import argparse
import math
import random
import sys
import time

import psycopg2
import psycopg2.errors

ap = argparse.ArgumentParser()
ap.add_argument("--queries", type=int, default=200)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--verbose", action="store_true")
args = ap.parse_args()
R = random.Random(args.seed)


def connect():
    c = psycopg2.connect(dbname="ddx_soak")
    c.autocommit = True
    # a generated join chain can explode; such a case is skipped, not failed
    c.cursor().execute("SET statement_timeout = '20s'")
    return c


# --- data -------------------------------------------------------------------

MODES = ["plain", "ties", "nulls", "duplicates", "extreme", "large", "unique"]


def make_rows(mode, n, keys):
    rows = []
    for _ in range(n):
        k = R.randrange(keys)
        g = R.randrange(3)
        if mode == "ties":
            v = R.choice([-1.0, 0.5, 0.5, 2.0])
        elif mode == "extreme":
            v = R.choice([1e-6, -1e-6, 3e3, -2e3, 0.7]) * R.uniform(0.9, 1.1)
        else:
            v = round(R.uniform(-2, 2), 3)
        if mode == "nulls":
            if R.random() < 0.33:
                v = None
            if R.random() < 0.2:
                k = None
        rows.append((k, g, v))
    if mode == "duplicates":
        rows += [rows[i] for i in range(0, len(rows), 2)]
    if mode == "unique":  # one row per k (a unique index on it: load), a NULL k among them
        ks = R.sample(range(keys + 3), min(n, keys + 3))
        rows = [(None if i == 0 and R.random() < 0.3 else k, g, v) for i, (k, (_, g, v)) in enumerate(zip(ks, rows))]
    return rows


def load(cur, mode):
    n = 1000 if mode == "large" else R.randint(3, 7)
    keys = 300 if mode == "large" else 4
    p = make_rows(mode, n, keys)
    d = make_rows(mode if mode != "extreme" else "plain", 1000 if mode == "large" else R.randint(3, 8), keys)
    cur.execute("DROP TABLE IF EXISTS p, d CASCADE; CREATE TABLE p (k int, g int, val float8); "
                "CREATE TABLE d (k int, g int, val float8);")
    cur.executemany("INSERT INTO p VALUES (%s, %s, %s)", p)
    cur.executemany("INSERT INTO d VALUES (%s, %s, %s)", d)
    if mode == "unique":
        # joins on k then match one row of each (the backward's Roots): a
        # primary key on p, a unique index on d
        cur.execute("DELETE FROM p WHERE k IS NULL; ALTER TABLE p ADD PRIMARY KEY (k); CREATE UNIQUE INDEX ON d (k)")
    cur.execute("ANALYZE p; ANALYZE d;")


# --- queries ----------------------------------------------------------------
# Every relation has columns (k int, g int, v float8).

def scalar(a, b, depth=0):
    """A differentiable expression over SQL expressions a and b."""
    if depth > 1 or R.random() < 0.3:
        return R.choice([a, b, f"({a} * {b})", f"({a} + 0.5)"])
    x, y = scalar(a, b, depth + 1), scalar(a, b, depth + 1)
    return R.choice([
        f"({x} + {y})", f"({x} - {y})", f"({x} * {y})", f"({x} / (2 + {y} * {y}))",
        f"tanh({x})", f"sin({x})", f"power({x}, 2)", f"sqrt(1 + {x} * {x})", f"ln(1 + {x} * {x})",
        f"abs({x})", f"greatest({x}, {y})", f"least({x}, 0.3)",
        f"CASE WHEN {x} > {y} THEN {x} * 2 ELSE {y} END", f"coalesce({x}, 0.25)", f"exp(tanh({x}))",
        # SQL helpers that PostgreSQL inlines (HELPERS), named and default arguments
        f"soak_sq({x})", f"soak_mix({x}, {y})", f"soak_mix(b => {y}, a => {x})", f"soak_mix({x})",
    ])


SWAP = False  # spell every join with its sides swapped (the join-order relation)

# A user's helper functions: SQL ones that PostgreSQL inlines (a helper
# calling a helper, a default argument; a set-returning one reading p, whose
# body names p unqualified), and a plpgsql filter ddx calls as it is.
HELPERS = """
SET check_function_bodies = off;  -- (soak_rows reads p, which each case makes)
CREATE FUNCTION soak_sq(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT x * x';
CREATE FUNCTION soak_mix(a float8, b float8 DEFAULT 0.5) RETURNS float8 LANGUAGE sql IMMUTABLE
  AS 'SELECT soak_sq(a) / (1 + soak_sq(b)) + a';
CREATE FUNCTION soak_rows(c float8) RETURNS TABLE (k int, g int, v float8) LANGUAGE sql STABLE
  AS 'SELECT k, g, val * c FROM p';
CREATE FUNCTION soak_keep(k int) RETURNS boolean LANGUAGE plpgsql STABLE AS 'BEGIN RETURN k IS DISTINCT FROM 2; END';
"""


def relation(depth):
    if depth <= 0 or R.random() < 0.25:
        t = R.choice(["p", "p", "d", "soak_rows"])
        if t == "soak_rows":  # a set-returning SQL function over p, inlined
            return "SELECT t.k, t.g, t.v FROM soak_rows(1.5) t", True
        return f"SELECT {t}.k, {t}.g, {t}.val AS v FROM {t}", t == "p"
    kind = R.choice(["join", "join", "filter", "group", "group", "union", "cte2", "exists", "softmax", "left",
                     "window", "wsoftmax", "wlse", "glse", "frame", "shift", "topk", "contract", "contract"])
    a, pa = relation(depth - 1)
    if kind == "filter":
        cond = R.choice(["r.k > 0", "r.v > 0.1", "r.g <> 1", "r.k IS NOT NULL", "soak_keep(r.k)"])
        return f"SELECT r.k, r.g, {scalar('r.v', 'r.v')} AS v FROM ({a}) r WHERE {cond}", pa
    if kind == "group":
        agg = R.choice(["sum", "avg", "max", "min", "sum", "var_pop", "var_samp"])
        key = R.choice(["k", "g"])
        filt = R.choice(["", "", "", " FILTER (WHERE r.g <> 1)", " FILTER (WHERE r.v > 0)", " FILTER (WHERE soak_keep(r.k))"])
        return (f"SELECT r.{key} AS k, 0 AS g, {agg}({scalar('r.v', 'r.v')}){filt} AS v FROM ({a}) r "
                f"GROUP BY r.{key}"), pa
    if kind == "window":
        agg = R.choice(["sum", "avg", "max", "min", "count"])
        part = R.choice(["PARTITION BY r.g", "PARTITION BY r.k", ""])
        arg = "*" if agg == "count" else scalar("r.v", "r.v")
        return f"SELECT r.k, r.g, {scalar('r.v', f'{agg}({arg}) OVER ({part})')} AS v FROM ({a}) r", pa
    if kind in ("frame", "shift"):
        # ORDER BY windows. The rows have no unique column: orders that leave
        # ties make row_number, lag/lead and ROWS frames refuse (42P20).
        part = R.choice(["PARTITION BY r.g ", "PARTITION BY r.k ", ""])
        order = R.choice(["r.k", "r.v DESC", "r.g, r.k NULLS FIRST", "r.k, r.v"])
        if kind == "shift":
            fn = R.choice(["lag", "lead"])
            extra = R.choice(["", ", 2", ", 1, r.v * 0.5", ", 1, 0.25"])
            w = f"{fn}(r.v{extra}) OVER ({part}ORDER BY {order})"
        else:
            agg = R.choice(["sum", "avg", "max", "min", "count"])
            frames = ["", "", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING",
                      "GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING",
                      "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW",
                      "GROUPS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE GROUP"]
            if order == "r.k" and agg not in ("max", "min"):
                frames.append("RANGE BETWEEN 1 PRECEDING AND 2 FOLLOWING")
            arg = "*" if agg == "count" else scalar("r.v", "r.v")
            w = f"{agg}({arg}) OVER ({part}ORDER BY {order} {R.choice(frames)})"
        return f"SELECT r.k, r.g, {scalar('r.v', w)} AS v FROM ({a}) r", pa
    if kind == "topk":
        fn = R.choice(["row_number", "rank", "dense_rank"])
        order = R.choice(["r.v DESC", "r.k, r.v", "r.v NULLS FIRST"])
        return (f"SELECT q.k, q.g, q.v FROM (SELECT r.k, r.g, r.v, {fn}() OVER (PARTITION BY r.g ORDER BY {order}) "
                f"AS rn FROM ({a}) r) q WHERE q.rn <= 2"), pa
    if kind == "wsoftmax":
        return (f"SELECT q.k, q.g, q.e / sum(q.e) OVER (PARTITION BY q.g) AS v FROM "
                f"(SELECT r.k, r.g, exp(r.v - max(r.v) OVER (PARTITION BY r.g)) AS e FROM ({a}) r) q"), pa
    if kind == "wlse":
        # a max that the loss cannot see (log-softmax: held constant, shift.h),
        # and two it can (exp not normalized; normalized over other groups)
        inner = f"SELECT r.k, r.g, r.v, {R.choice(['max', 'min'])}(r.v) OVER (PARTITION BY r.g) AS m FROM ({a}) r"
        body = R.choice(["q.v - q.m - ln(sum(exp(q.v - q.m)) OVER (PARTITION BY q.g))", "exp(q.v - q.m)",
                         "q.m + ln(sum(exp(q.v - q.m)) OVER (PARTITION BY q.k))"])
        return f"SELECT q.k, q.g, {body} AS v FROM ({inner}) q", pa
    if kind == "glse":
        # the same by GROUP BY, one max read twice (a CTE): log-softmax holds it
        # constant; exp(v - m) / z over other groups (by k) does not
        body, zkey = R.choice([("r.v - m.m - ln(z.z)", "g"), ("exp(r.v - m.m) / z.z", "g"),
                               ("exp(r.v - m.m) / z.z", "k")])
        return (f"WITH m AS (SELECT q.g, {R.choice(['max', 'min'])}(q.v) AS m FROM ({a}) q GROUP BY q.g), "
                f"e AS (SELECT r.k, r.g, r.v, exp(r.v - m.m) AS e FROM ({a}) r JOIN m ON m.g = r.g) "
                f"SELECT r.k, r.g, {body} AS v FROM ({a}) r JOIN m ON m.g = r.g "
                f"JOIN (SELECT e.{zkey}, sum(e.e) AS z FROM e GROUP BY e.{zkey}) z ON z.{zkey} = r.{zkey}"), pa
    if kind == "exists":
        return (f"SELECT r.k, r.g, r.v FROM ({a}) r WHERE "
                f"{R.choice(['', 'NOT '])}EXISTS (SELECT 1 FROM d WHERE d.k = r.k AND d.val > -1)"), pa
    if kind == "softmax":
        return (f"SELECT r.k, r.g, exp(r.v - m.m) / s.s AS v FROM ({a}) r "
                f"JOIN (SELECT g, max(v) AS m FROM ({a}) q GROUP BY g) m ON m.g = r.g "
                f"JOIN (SELECT q.g, sum(exp(q.v - m2.m)) AS s FROM ({a}) q "
                f"JOIN (SELECT g, max(v) AS m FROM ({a}) q2 GROUP BY g) m2 ON m2.g = q.g GROUP BY q.g) s "
                f"ON s.g = r.g"), pa
    b, pb = relation(depth - 1)
    if kind == "join":
        on = R.choice(["x.k = y.k", "x.g = y.g", "x.k = y.k AND x.g = y.g", "x.k IS NOT DISTINCT FROM y.k"])
        sel = f"SELECT x.k, y.g, {scalar('x.v', 'y.v')} AS v"
        if SWAP:
            return f"{sel} FROM ({b}) y JOIN ({a}) x ON {on}", pa or pb
        return f"{sel} FROM ({a}) x JOIN ({b}) y ON {on}", pa or pb
    if kind == "left":
        sel = f"SELECT x.k, x.g, {scalar('x.v', 'coalesce(y.v, 1)')} AS v"
        if SWAP:
            return f"{sel} FROM ({b}) y RIGHT JOIN ({a}) x ON x.k = y.k AND x.g = y.g", pa or pb
        return f"{sel} FROM ({a}) x LEFT JOIN ({b}) y ON x.k = y.k AND x.g = y.g", pa or pb
    if kind == "contract":
        # a product summed over a join (a matmul): with one side free of p, the
        # contraction transpose sums the other side's adjoint before joining it
        on = R.choice(["x.k = y.k", "x.g = y.g", "x.k IS NOT DISTINCT FROM y.k", "x.g <= y.g",
                       "x.k = y.k AND x.g = y.g"])
        k1, k2 = R.choice([("x.k", "y.g"), ("x.k", "x.g"), ("y.k", "y.g"), ("y.k", "x.k"), ("x.g", "y.k")])
        agg = R.choice(["sum", "sum", "avg"])
        # and one side's value summed over the pairs (the other side's 1), a
        # count of the pairs or of one side's non-NULL values beside it: the
        # contraction node's shapes (ddx.contraction)
        arg = R.choice(["x.v * y.v", "x.v * y.v", "x.v * (y.v + 1)", "(x.v - y.v) * 2", "y.v", "x.v"])
        val = R.choice([f"{agg}({arg})", f"{agg}({arg})", f"{agg}({arg})", f"{agg}({arg}) + 0.1 * count(*)",
                        f"sum({arg}) / (1 + count(y.v))", f"{agg}({arg}) * count(x.v)"])
        sel = f"SELECT {k1} AS k, {k2} AS g, {val} AS v"
        tail = f" ON {on} GROUP BY {k1}, {k2}"
        if SWAP:
            return f"{sel} FROM ({b}) y JOIN ({a}) x{tail}", pa or pb
        return f"{sel} FROM ({a}) x JOIN ({b}) y{tail}", pa or pb
    if kind == "union":
        return f"SELECT k, g, v FROM ({a}) u1 UNION ALL SELECT k, g, v FROM ({b}) u2", pa or pb
    # cte2: a relation read twice, written as a subquery twice
    return f"SELECT x.k, x.g, {scalar('x.v', 'y.v')} AS v FROM ({a}) x JOIN ({a}) y ON x.k = y.k", pa


def loss_query():
    """The loss, and the same loss with every join's sides swapped."""
    global SWAP
    state = R.getstate()
    SWAP = False
    plain = one_loss()
    R.setstate(state)
    SWAP = True
    swapped = one_loss()
    SWAP = False
    return plain, swapped


def one_loss():
    while True:
        rel, uses_p = relation(R.randint(1, 3))
        if uses_p:
            break
    outer = R.choice(["sum", "avg", "sum"])
    return f"SELECT {outer}({scalar('r.v', 'r.v')}) AS l FROM ({rel}) r"


# --- oracles -----------------------------------------------------------------

def grads(cur, loss, spelling="cte", materialized=""):
    if spelling == "vjp":
        cur.execute(f"WITH loss AS ({loss}), one AS (SELECT 1::float8 AS l) "
                    f"SELECT p.ctid::text, vjp('loss', 'one', p.val) FROM p")
    elif spelling == "cte":
        cur.execute(f"WITH loss AS {materialized} ({loss}) "
                    f"SELECT p.ctid::text, grad('loss', p.val) FROM p")
    else:
        cur.execute(f"SELECT p.ctid::text, grad(({loss}), p.val) FROM p")
    return dict(cur.fetchall())


def loss_value(cur, loss):
    cur.execute(loss)
    v = cur.fetchone()[0]
    return None if v is None else float(v)  # a numeric loss (e.g. a sum of counts) arrives as Decimal


def fd(cur, loss, ctid, h, L0):
    """Central difference at step h; None where the loss is NULL nearby or the
    one-sided differences disagree (a kink, e.g. tied MIN/MAX values, where the
    central difference averages two one-sided slopes)."""
    vals = []
    for s in (h, -h):
        cur.execute("BEGIN")
        cur.execute("UPDATE p SET val = val + %s WHERE ctid = %s::tid", (s, ctid))
        vals.append(loss_value(cur, loss))
        cur.execute("ROLLBACK")
    if None in vals or L0 is None:
        return None
    forward, backward = (vals[0] - L0) / h, (L0 - vals[1]) / h
    if not close(forward, backward, 1e-3, 1e-5):
        return None
    return (vals[0] - vals[1]) / (2 * h)


def close(a, b, rtol=1e-6, atol=1e-8):
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


STATS = {"fd_rows": 0, "kink_rows": 0, "jvp_checked": 0, "jvp_refused": 0, "ill": 0}


def ill_conditioned(cur, loss, L):
    """Whether rounding alone moves this loss far: two programs that sum in
    different orders then give gradients further apart than the relations'
    tolerances, and no verdict can come of comparing them. Two probes, each in
    a transaction rolled back: the same rows in reverse physical order
    (PostgreSQL sums in scan order) moving the loss by more than 1e-10
    relative, and every value scaled by 1 + 2^-40 (which keeps ties) moving it
    by more than 1e-8 (a condition number above ~1e4). sin(v⁴) of a sum v ~
    3e7 of extreme values (seed 13, case 110) came out 2.5e26 and -1.2e26
    with the node on and off, and L²'s gradient 0.7% from 2L∇L; sin(v²) of v
    ~ 2e4 moved jvp against <grad, t> by 1e-7 (seed 9, case 54)."""
    if L is None:
        return False
    if not math.isfinite(L):
        return True
    probes = [("CREATE TEMP TABLE {t}_rev ON COMMIT DROP AS SELECT * FROM {t} ORDER BY ctid DESC; "
               "TRUNCATE {t}; INSERT INTO {t} SELECT * FROM {t}_rev", 1e-10),
              ("UPDATE {t} SET val = val * (1 + 2 ^ (-40))", 1e-8)]
    for sql, tol in probes:
        cur.execute("BEGIN")
        try:
            for t in ("p", "d"):
                cur.execute(sql.format(t=t))
            L2 = loss_value(cur, loss)
        except psycopg2.errors.QueryCanceled:
            cur.execute("ROLLBACK")
            raise
        except psycopg2.Error:
            L2 = None  # (overflowed: as ill-conditioned as it gets)
        cur.execute("ROLLBACK")
        if L2 is None or not math.isfinite(L2) or abs(L - L2) > tol * max(abs(L), abs(L2)):
            return True
    return False


def run_case(conn, i):
    try:
        return run_checks(conn, i)
    except psycopg2.errors.QueryCanceled:
        # a check after the gradient (finite differences, a metamorphic
        # variant) ran into statement_timeout: no verdict on this case
        conn.rollback() if not conn.autocommit else None
        return "skipped (statement timeout)", CURRENT[0], CURRENT[1]


CURRENT = ["?", "?"]  # the loss and mode of the running case


def run_checks(conn, i):
    cur = conn.cursor()
    mode = R.choice(MODES)
    load(cur, mode)
    loss, swapped_loss = loss_query()
    CURRENT[:] = [loss, mode]
    try:
        g = grads(cur, loss)
    except psycopg2.Error as e:
        code = e.pgcode or "connection"
        if code == "57014":
            return "skipped (statement timeout)", loss, mode
        ok = code[:2] != "XX" and code != "connection"
        return ("refused " + code) if ok else ("FAILED " + code + ": " + str(e).splitlines()[0]), loss, mode
    L = loss_value(cur, loss)
    ill = ill_conditioned(cur, loss, L)
    STATS["ill"] += ill
    problems = []
    # finite differences, screened at kinks; skipped for the large mode (cost)
    if mode != "large":
        cur.execute("SELECT ctid::text, val FROM p")
        for ctid, val in cur.fetchall():
            if val is None:
                if g[ctid] is not None:
                    problems.append(f"NULL value with gradient {g[ctid]}")
                continue
            h = 1e-5 * max(1.0, abs(val))
            f1, f2 = fd(cur, loss, ctid, h, L), fd(cur, loss, ctid, h / 8, L)
            if f1 is None or f2 is None or not close(f1, f2, 1e-4, 1e-6):
                STATS["kink_rows"] += 1
                continue  # a kink or a NULL nearby: no finite-difference oracle here
            STATS["fd_rows"] += 1
            if not close(g[ctid], f2, 1e-4, 1e-6 * max(1.0, abs(L or 0))):
                problems.append(f"row {ctid}: ddx {g[ctid]} vs finite differences {f2}")
    # metamorphic relations. Two programs sum the same terms in different
    # orders; over the 10^5-row joins of the large mode that costs up to
    # ~1e-8 relative.
    rtol = 1e-6 if mode == "large" else 1e-9
    scaled = grads(cur, f"SELECT 3 * l AS l FROM ({loss}) q")
    shifted = grads(cur, f"SELECT l + 5 AS l FROM ({loss}) q")
    try:
        squared = grads(cur, f"SELECT l * l AS l FROM ({loss}) q")
    except psycopg2.errors.NumericValueOutOfRange:
        # L^2 of an extreme loss: its gradient 2L∇L underflows or overflows,
        # which PostgreSQL raises (22003) where PyTorch rounds: no verdict
        squared = None
    sub = grads(cur, loss, spelling="subquery")
    nomat = grads(cur, loss, materialized="NOT MATERIALIZED")
    swapped = grads(cur, swapped_loss)
    seeded = grads(cur, loss, spelling="vjp")
    # Absolute tolerance: relative to the size of what the gradients are
    # computed from, the largest gradient and the largest value of p or d (a
    # norm-wise error). A gradient that is exactly 0 comes out as a
    # cancellation of terms of that size: Σ over one-row groups of
    # log-softmax has d/dv = 1 - p = 0 for every row, computed as -1.8e-12 by
    # one program and 0.0 by 3L's, through products of values of 3e3 (seed
    # 123, case 15, extreme mode; the build before this check gave the same).
    cur.execute("SELECT coalesce(max(abs(val)), 0) FROM (SELECT val FROM p UNION ALL SELECT val FROM d) v")
    gmax = max([abs(x) for x in g.values() if x is not None] + [float(cur.fetchone()[0])])
    for ctid, v in g.items():
        if v is None or ill:
            continue
        checks = [("3L", scaled[ctid], 3 * v), ("L+5", shifted[ctid], v), ("subquery", sub[ctid], v),
                  ("not materialized", nomat[ctid], v), ("join order", swapped[ctid], v),
                  ("vjp seeded with 1", seeded[ctid], v)]
        if L is not None and squared is not None:
            checks.append(("L^2", squared[ctid], 2 * L * v))
        for name, got, want in checks:
            # ∇(L²) = 2L∇L: its error is 2|L| times ∇L's (a row's gradient of
            # -6.4e-7 beside others of 1.3e13, a cancellation, came out
            # -5.6e6 against 2L∇L = -3.2e6 with L = 2.5e12: seed 7, case 15)
            scale = 2 * abs(L) if name == "L^2" else 1.0
            if not close(got, want, rtol, 1e-12 * scale * max(1.0, abs(L or 0), gmax)):
                problems.append(f"{name}: {got} vs {want}")
    # the contraction node (ddx.contraction) gives PostgreSQL's answer: the
    # gradient and the loss's value with the node switched the other way
    # (off where it is on, 'all' where it is off), row by row. Only the
    # summation order differs: 1e-12 relative, and absolutely 1e-12 of the
    # largest value the sums add (the large mode's 10^5-row joins as above).
    cur.execute("SHOW ddx.contraction")
    setting = cur.fetchone()[0]
    other = "all" if setting == "off" else "off"
    cur.execute(f"SET ddx.contraction = '{other}'")
    try:
        g_other, L_other = grads(cur, loss), loss_value(cur, loss)
    finally:
        cur.execute(f"SET ddx.contraction = '{setting}'")
    ntol = rtol if mode == "large" else 1e-12
    if not ill and not close(L_other, L, ntol, 1e-12 * max(1.0, abs(L or 0))):
        problems.append(f"loss with ddx.contraction = {other}: {L_other} vs {L}")
    for ctid, v in g.items():
        if not ill and not close(g_other.get(ctid), v, ntol, 1e-12 * max(1.0, abs(L or 0), gmax)):
            problems.append(f"ddx.contraction = {other}: row {ctid}: {g_other.get(ctid)} vs {v}")
            break
    # forward mode: the jvp of the loss along a tangent of p's rows (keyed by
    # (k, g): rows with equal keys share a tangent; a NULL key has none) is
    # the gradient's inner product with that tangent, <J t, 1> = <t, J^T 1>.
    cur.execute("DROP TABLE IF EXISTS tp; CREATE TEMP TABLE tp (k int, g int, val float8)")
    cur.execute("SELECT DISTINCT k, g FROM p WHERE k IS NOT NULL AND g IS NOT NULL ORDER BY k, g")
    tan = {(k, gg): R.uniform(-1, 1) for k, gg in cur.fetchall()}
    cur.executemany("INSERT INTO tp VALUES (%s, %s, %s)", [(k, gg, t) for (k, gg), t in tan.items()])
    try:
        cur.execute(f"SELECT jvp(q.l, 'p.val', 'tp') FROM ({loss}) q")
        jv = cur.fetchone()[0]
    except psycopg2.Error as e:
        code = e.pgcode or "connection"
        # grad answered this loss, and forward mode takes every construct
        # reverse mode takes: jvp may refuse only a value out of range
        # (22xxx); anything else (a 0A000, a 42703 of a column the tangent
        # query lacks, an internal error) is a bug
        if code != "57014" and code[:2] != "22":
            problems.append(f"jvp: {code}: {str(e).splitlines()[0]}")
        elif code != "57014":
            STATS["jvp_refused"] += 1
        jv = "refused"
    if jv != "refused" and not ill:
        cur.execute("SELECT ctid::text, k, g FROM p")
        inner = sum((g[ctid] or 0) * tan.get((k, gg), 0.0) for ctid, k, gg in cur.fetchall())
        STATS["jvp_checked"] += 1
        if L is None:
            if jv is not None:
                problems.append(f"jvp of a NULL loss: {jv}")
        elif not close(jv, inner, rtol, 1e-12 * max(1.0, abs(L), gmax) * max(1, len(g))):
            problems.append(f"jvp vs <grad, t>: {jv} vs {inner}")
    # physical row order: rewrite the tables in reverse order, compare by content
    cur.execute("SELECT k, g, val, ctid::text FROM p ORDER BY ctid")
    rows = cur.fetchall()
    by_content = sorted((r[0] if r[0] is not None else -99, r[1], r[2] if r[2] is not None else -99, g[r[3]] or 0)
                        for r in rows)
    cur.execute("CREATE TEMP TABLE p2 AS SELECT * FROM p ORDER BY ctid DESC; TRUNCATE p; "
                "INSERT INTO p SELECT * FROM p2; DROP TABLE p2;")
    g2 = grads(cur, loss)
    cur.execute("SELECT k, g, val, ctid::text FROM p")
    by_content2 = sorted((r[0] if r[0] is not None else -99, r[1], r[2] if r[2] is not None else -99,
                          g2[r[3]] or 0) for r in cur.fetchall())
    # Another physical order reorders floating-point sums (PostgreSQL sums in
    # scan order), which moves an ill-conditioned gradient by more than
    # rounding: sin of a window sum of extreme values differed by 3e-9
    # relative between the two orders, with the build before and after.
    for a, b in zip(by_content, by_content2):
        if a[:3] != b[:3] or not ill and not close(a[3], b[3], max(rtol, 1e-7), 1e-12):
            # equal rows may legitimately swap gradients only if they are equal too; the sorted
            # lists compare multisets, so any difference here is a real one
            problems.append(f"row order: {a} vs {b}")
            break
    if problems:
        return "FAILED " + "; ".join(problems[:3]), loss, mode
    return "ok", loss, mode


def main():
    admin = psycopg2.connect(dbname="postgres")
    admin.autocommit = True
    admin.cursor().execute("DROP DATABASE IF EXISTS ddx_soak WITH (FORCE)")
    admin.cursor().execute("CREATE DATABASE ddx_soak")
    conn = connect()
    conn.cursor().execute("CREATE EXTENSION ddx")
    conn.cursor().execute(HELPERS)
    passed = failed = refused = 0
    t0 = time.time()
    for i in range(args.queries):
        try:
            verdict, loss, mode = run_case(conn, i)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            verdict, loss, mode = "FAILED connection lost (crash?): " + str(e).splitlines()[0], "?", "?"
            time.sleep(3)
            conn = connect()
        except psycopg2.Error as e:
            verdict, loss, mode = f"FAILED {e.pgcode}: " + str(e).splitlines()[0], CURRENT[0], CURRENT[1]
            conn.rollback() if not conn.autocommit else None
        if verdict.startswith("FAILED"):
            failed += 1
            print(f"case {i} [{mode}] {verdict}\n  loss: {loss}", flush=True)
        else:
            passed += 1
            refused += verdict.startswith("refused")
            if args.verbose:
                print(f"case {i} [{mode}] {verdict}", flush=True)
                if verdict.startswith("skipped"):
                    print(f"  loss: {loss}", flush=True)
    print(f"soak: {args.queries} queries (seed {args.seed}) in {time.time() - t0:.0f} s, "
          f"{passed - refused} answered and checked, {refused} refused cleanly; "
          f"{STATS['fd_rows']} rows compared with finite differences, {STATS['kink_rows']} skipped at kinks, jvp checked on {STATS['jvp_checked']} "
          f"(refused on {STATS['jvp_refused']}); {STATS['ill']} ill-conditioned (relations between programs not compared)")
    # (the probes must stay a rare exception: were most cases flagged, the
    # relations would go unchecked and the soak still pass)
    if STATS["ill"] > max(3, 0.1 * (passed - refused)):
        failed += 1
        print(f"FAILED: {STATS['ill']} of {passed - refused} answered cases ill-conditioned: the probes skip too much")
    print(f"soak: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
