#!/usr/bin/python3
"""What the second core gives a training step: the GPT's gradient and its
AdamW step under ddx.shards = 1 and 2 (a batch in parts, docs/training.md).

    bench/shards.py DB [rounds]

DB has examples/gpt set up (gpt.setup(...), any size; its batch even: the
parts then have as many tokens each, and the mean of their gradients is the
whole batch's). Two sessions, one with ddx.shards = 1 and one with 2, taken
in turn:

  gradient  the gradient of every parameter table at batch 1 (bench/gpt.py's
            statement): first checked equal in both sessions, row by row
            (the largest difference relative to the largest gradient), then
            timed for `rounds` rounds (default 9) after a warm one
  step      `CALL ddx_train` of the demo's AdamW (gpt.train's settings) for
            10 more steps of a run of its own per session, `rounds` times;
            the median of its steps' times (ddx_train_log's at, the first
            step of each CALL left out: it writes the run's row before its
            gradient, so its parts run in the backend)

Medians in ms, and the ratio of the two sessions'. The session-17 form of
this script (the halves of the batch in two sessions of their own, no
ddx.shards) measured the ceiling: RESULTS, "The second core".
"""
import statistics
import sys
import time

import psycopg2

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import gpt as G  # noqa: E402

DB = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 9


def session(shards):
    c = psycopg2.connect(dbname=DB)
    c.autocommit = True
    cur = c.cursor()
    cur.execute("SET search_path = gpt, public")
    cur.execute(f"SET ddx.shards = {shards}")
    return cur


def gradient_rows(cur):
    cur.execute("SELECT gpt.loss_sql(), gpt.params()")
    loss, params = cur.fetchone()
    loss = loss.replace("$1", "1")
    rows = " UNION ALL ".join(f"SELECT '{p}' AS p, t.ctid::text AS k, grad('ddx_loss', t.{p.split('.')[2]}) AS g "
                              f"FROM {'.'.join(p.split('.')[:2])} t" for p in params)
    cur.execute(f"WITH ddx_loss AS ({loss}) {rows}")
    return {(p, k): g for p, k, g in cur.fetchall()}


def steps(cur, run, n):
    cur.execute("SELECT coalesce(max(step), 0) FROM ddx_train_log WHERE run = %s", (run,))
    done = cur.fetchone()[0]
    cur.execute("CALL ddx_train(gpt.loss_sql(), gpt.params(), %s, 'bench_shards_lr', weight_decay => 0.1, "
                "no_decay => gpt.no_decay(), max_grad_norm => 1.0, beta2 => 0.99, state_name => %s, log_every => 0)",
                (done + n, run))
    cur.execute("SELECT extract(epoch FROM at - lag(at) OVER (ORDER BY step)) * 1000 FROM ddx_train_log "
                "WHERE run = %s AND step > %s ORDER BY step", (run, done))
    return [r[0] for r in cur.fetchall()][2:]


def main():
    one, two = session(1), session(2)
    g1, g2 = gradient_rows(one), gradient_rows(two)
    if g1.keys() != g2.keys():
        sys.exit("the parts' gradients have other rows than the whole batch's")
    top = max(abs(v) for v in g1.values())
    diff = max(abs(v - g2[k]) for k, v in g1.items())
    print(f"{len(g1)} gradient rows; ddx.shards = 2 against 1: max difference {diff:.3g} "
          f"({diff / top:.3g} of the largest gradient)")
    if diff > 1e-12 * top:
        sys.exit("the mean of the parts is not the whole batch's gradient")
    _, stmt = G.gradient_sql(one)
    t = {1: [], 2: []}
    for r in range(ROUNDS + 1):
        for k, cur in ((1, one), (2, two)):
            t0 = time.perf_counter()
            cur.execute(stmt)
            cur.fetchall()
            t[k].append((time.perf_counter() - t0) * 1000)
    a, b = statistics.median(t[1][1:]), statistics.median(t[2][1:])
    print(f"gradient: ddx.shards = 1 {a:.1f} ms, 2 {b:.1f} ms ({b / a:.2f}); medians of {ROUNDS}")
    one.execute("SELECT ddx_schedule_constant('bench_shards_lr', 1e-3, 100000)")
    for run in ("bench shards 1", "bench shards 2"):
        one.execute("SELECT ddx_run_drop(name) FROM ddx_runs WHERE name = %s", (run,))
    s = {1: [], 2: []}
    for r in range(ROUNDS):
        for k, cur in ((1, one), (2, two)):
            s[k] += steps(cur, f"bench shards {k}", 12)
    a, b = statistics.median(s[1]), statistics.median(s[2])
    print(f"AdamW step (ddx_train): ddx.shards = 1 {a:.1f} ms, 2 {b:.1f} ms ({b / a:.2f}); "
          f"medians of {len(s[1])} steps")


if __name__ == "__main__":
    main()
