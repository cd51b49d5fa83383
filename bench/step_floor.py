#!/usr/bin/python3
"""The GPT's AdamW step against what its writes cost: is the optimizer at its floor?

    bench/step_floor.py [rounds]

In the database bench/gpt.py leaves (ddx_bench_gpt, its run 'bench': run
bench/gpt.py --small first), the statement ddx_adamw_step prepares for the
GPT (_ddx.step_sql, as gpt.train configures AdamW) and two of its variants,
each prepared in a session of its own and executed in turn for `rounds`
rounds (default 21; the first left out), in a transaction rolled back and
the tables vacuumed after it (untimed), ms (medians):

  step      the statement: the loss and every gradient (ddx_g<i>), the norm,
            the state rows updated and the parameters moved
  no write  the same up to the norm, nothing written: the gradient's share
  floor     the same up to the norm, then one plain UPDATE of every
            parameter table (val = val * 0.999) and of every state table
            (m, v and step of the run's rows): what no optimizer step that
            keeps its state in rows can avoid
  read      no gradient: every parameter table's values summed and the
            step's batch read (its tokens summed), one scan of each: what a
            gradient that forms no rows between its input scans and its
            result (issue 38's dense regions) cannot do without
  write     the floor's UPDATEs alone: with `read`, the floor of a whole
            step whose gradient is dense

step - no write is what the optimizer costs; floor - no write what writing
each parameter and state row once costs. All read batch 5 of gpt.batches.
"""
import re
import statistics
import sys
import time

import psycopg2

DB = "ddx_bench_gpt"
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 21
PARAMS = "(int, int, float8, float8, float8, float8, float8, float8, float8, float8)"
ARGS = "(5, {run}, 1e-3, 0.9, 0.99, 1e-8, 1.0, 0, 0, 0.1)"


def split_ctes(sql):
    """The statement's top-level CTEs [(name, text)] and its final SELECT."""
    assert sql.startswith("WITH ")
    i, out = 5, []
    head = re.compile(r"\s*(\w+) AS (MATERIALIZED |NOT MATERIALIZED )?\(")
    while True:
        m = head.match(sql, i)
        if not m:
            break
        j, depth, quoted = m.end(), 1, False
        while depth:
            ch = sql[j]
            if ch == "'":
                quoted = not quoted
            elif not quoted:
                depth += {"(": 1, ")": -1}.get(ch, 0)
            j += 1
        out.append((m.group(1), sql[m.start():j].strip()))
        i = j
        m = re.compile(r"\s*,").match(sql, i)
        if not m:
            break
        i = m.end()
    return out, sql[i:].strip()


def main():
    conn = psycopg2.connect(dbname=DB)
    cur = conn.cursor()
    cur.execute("SELECT id, owner FROM _ddx.run WHERE name = 'bench'")
    run, owner = cur.fetchone()
    cur.execute("SELECT q.sql FROM _ddx.step_sql(_ddx.optimizer('adamw', false, false), gpt.loss_sql(), "
                "ARRAY(SELECT x FROM _ddx.param_tables(gpt.params(), gpt.no_decay()) x), %s::regrole, true) q",
                (owner,))
    step = cur.fetchone()[0]
    cur.execute("SELECT x.qtbl, _ddx.state_table_for(x.tbl, %s::regrole) FROM _ddx.param_tables(gpt.params()) x",
                (owner,))
    tables = cur.fetchall()
    conn.rollback()
    ctes, final = split_ctes(step)
    names = [n for n, _ in ctes]
    upto = [c for c in ctes[:names.index("ddx_scale") + 1]]
    nowrite = "WITH " + ", ".join(t for _, t in upto) + " " + final
    writes = []
    for n, (tbl, st) in enumerate(tables):
        writes.append(f"fu{n} AS (UPDATE {tbl} SET val = val * 0.999 RETURNING 1)")
        writes.append(f"fs{n} AS (UPDATE {st} SET m = m * 0.9, v = v * 0.99, step = step + 1 "
                      f"WHERE run = $2 RETURNING 1)")
    floor = "WITH " + ", ".join([t for _, t in upto] + writes) + " " + final
    sums = [f"(SELECT sum(val) FROM {tbl})" for tbl, _ in tables]
    read = "SELECT " + " + ".join(sums) + " + (SELECT sum(tok) FROM gpt.batches WHERE step = $1) AS s"
    write = "WITH " + ", ".join(writes) + " SELECT 1"  # (data-modifying CTEs run to completion unread)
    variants = {"step": step, "no write": nowrite, "floor": floor, "read": read, "write": write}
    curs = {}
    for name, sql in variants.items():
        c = psycopg2.connect(dbname=DB)
        c.autocommit = True
        k = c.cursor()
        k.execute(f"PREPARE s {PARAMS} AS {sql}")
        curs[name] = k
    conn.autocommit = True
    times = {name: [] for name in variants}
    for r in range(ROUNDS):
        for name, k in curs.items():
            k.execute("BEGIN")
            t = time.perf_counter()
            k.execute("EXECUTE s " + ARGS.format(run=run))
            k.fetchall()
            times[name].append((time.perf_counter() - t) * 1000)
            k.execute("ROLLBACK")
            # (the versions the rolled-back updates left, vacuumed away
            # untimed: each execution finds the tables as a step does)
            cur.execute("VACUUM " + ", ".join(f"{t}, {st}" for t, st in tables))
    med = {name: statistics.median(v[1:]) for name, v in times.items()}
    rows = sum(1 for _ in tables)
    print(f"GPT AdamW step ({rows} parameter tables), medians of {ROUNDS - 1} rounds in turn, ms")
    for name in variants:
        print(f"  {name:9s} {med[name]:7.1f}")
    print(f"  optimizer (step - no write) {med['step'] - med['no write']:.1f}; "
          f"floor (floor - no write) {med['floor'] - med['no write']:.1f}; "
          f"a step with a dense gradient at least read + write {med['read'] + med['write']:.1f}")


if __name__ == "__main__":
    main()
