#!/usr/bin/python3
"""The GPT of examples/gpt: forward, backward and AdamW step, beside PyTorch.

    bench/gpt.py [repeats] [--small] [--no-bias] [--drift STEPS] [--node STEPS] [--fill STEPS] [--retain ROUNDS]

For each size (the demo's, examples/gpt/train.sql: 1 layer, 2 heads, 32
channels, context 16, batch 8 (16 channels and batch 4 before 2026-12-05);
and 2 layers, 4 heads, 64 channels, context 32, batch 8), in one session,
medians of `repeats` interleaved runs (ms):
  forward    the loss query as written, under PostgreSQL's default plan, with
             nested loops off, with nested loops and JIT off, and with the
             contraction node (ddx.contraction = all, in a session of its
             own, default plan or nested loops off, the faster), and as
             `SELECT ddx_value('ddx_loss')` (the loss evaluated with the
             settings of ddx's programs, the node included): a user can
             have any of them, the best is the honest denominator
  backward   one statement with the gradient of all 20 parameter tables
             (its forward included), and its ratio to the best forward
  step       ddx_adamw_step as nanoGPT configures AdamW, and its ratio
  fixed      per step: building the gradient program (the hook, at parse
             analysis) and planning the step's statement, from EXPLAIN
  memory     the backend's peak resident memory after the steps (VmHWM) and
             the temporary-file bytes of one step
  torch      PyTorch float64, one thread: forward + backward + AdamW step,
             and the step's multiple of it
With --no-bias: the model without biases (gpt.setup's bias => false, and
PyTorch's the same). With --drift N: an N-step ddx_train run at the first size, the median step
time of its first and last 100 steps.
With --node N (alone): at the first size, the step with the contraction node on and
off side by side: two sessions (ddx.contraction = all, off), each its own
training run, N steps each taken in turn; the median step (wall) and the
mean CPU time of each backend, and their ratios. (This machine's speed drifts
by a quarter over minutes: only steps taken in turn compare.) With --fill N
(alone): the same with ddx.contraction_fill on and off (Custom Scan (ddx fill)).
With --retain N (alone): at the first size and at 1 layer, 4 heads, 32 channels,
context 32, batch 16, the gradient statement and the AdamW step in two
sessions, ddx.retain_memory = 0 and its default, N rounds in turn: medians
and their ratios (what keeping freed memory between programs saves).
"""
import os
import statistics
import subprocess
import sys
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "torch"))
import test_gpt as tg  # noqa: E402
from common import interleaved  # noqa: E402

DB = "ddx_bench_gpt"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 5
DRIFT = int(sys.argv[sys.argv.index("--drift") + 1]) if "--drift" in sys.argv else 0
NODE = int(sys.argv[sys.argv.index("--node") + 1]) if "--node" in sys.argv else 0
FILL = int(sys.argv[sys.argv.index("--fill") + 1]) if "--fill" in sys.argv else 0
RETAIN = int(sys.argv[sys.argv.index("--retain") + 1]) if "--retain" in sys.argv else 0
SMALL = "--small" in sys.argv  # the first size only
BIAS = "--no-bias" not in sys.argv
SIZES = [(1, 2, 32, 16, 8), (2, 4, 64, 32, 8)]  # the second with half the repeats: ~3 min each
STEP_SQL = ("SELECT * FROM ddx_adamw_step(gpt.loss_sql(), gpt.params(), %s, beta2 => 0.99, weight_decay => 0.1, "
            "no_decay => gpt.no_decay(), max_grad_norm => 1.0, state_name => 'bench')")


def ms(cur, sql, args=None):
    t = time.perf_counter()
    cur.execute(sql, args)
    if cur.description:
        cur.fetchall()
    return (time.perf_counter() - t) * 1000


def setup(conn, size, steps):
    cur = conn.cursor()
    cur.execute("SELECT gpt.setup(%s, %s, %s, %s, %s, steps => %s, bias => %s)", size + (steps, BIAS))
    cur.execute("SELECT ddx_run_drop(name) FROM ddx_runs WHERE name = 'bench'")
    cur.execute("VACUUM ANALYZE")


def gradient_sql(cur):
    """One statement with the gradient of every parameter table, batch 1."""
    cur.execute("SELECT gpt.loss_sql(), gpt.params()")
    loss, params = cur.fetchone()
    loss = loss.replace("$1", "1")
    parts = [f"g{i} AS (SELECT sum(grad('ddx_loss', t.{p.split('.')[2]})) AS g FROM {'.'.join(p.split('.')[:2])} t)"
             for i, p in enumerate(params)]
    return (loss, f"WITH ddx_loss AS ({loss}), " + ", ".join(parts) + " SELECT " +
            " + ".join(f"(SELECT g FROM g{i})" for i in range(len(params))))


def one_size(conn, size, repeats):
    L, H, C, T, B = size
    setup(conn, size, 10 + repeats * 2)
    cur = conn.cursor()
    loss, grad = gradient_sql(cur)
    plans = {"default": "RESET enable_nestloop; RESET jit", "nestloop off": "SET enable_nestloop = off; RESET jit",
             "nestloop, jit off": "SET enable_nestloop = off; SET jit = off"}
    fwd = {k: [] for k in plans}
    # the node in a session of its own: a changed ddx.contraction plans the
    # session's kept programs again, which the backward would then time
    nconn = psycopg2.connect(dbname=DB)
    nconn.autocommit = True
    node = nconn.cursor()
    node.execute("SET ddx.contraction = 'all'")
    node_plans = {"node": "RESET enable_nestloop", "node, nestloop off": "SET enable_nestloop = off"}
    fwd.update({k: [] for k in node_plans})
    fwd["ddx_value"] = []
    value = f"WITH ddx_loss AS ({loss}) SELECT ddx_value('ddx_loss')"
    bwd, step = [], []
    ms(cur, grad)  # programs prepared once per session: warm
    cur.execute(STEP_SQL, (1e-3,))
    for r in range(repeats):
        for k, s in plans.items():
            cur.execute(s)
            fwd[k].append(ms(cur, loss))
        for k, s in node_plans.items():
            node.execute(s)
            fwd[k].append(ms(node, loss))
        node.execute("RESET enable_nestloop")
        fwd["ddx_value"].append(ms(node, value))
        cur.execute("RESET enable_nestloop; RESET jit")
        bwd.append(ms(cur, grad))
        step.append(ms(cur, STEP_SQL, (1e-3,)))
    nconn.close()
    f = {k: statistics.median(v) for k, v in fwd.items()}
    f["node"] = min(f["node"], f.pop("node, nestloop off"))
    best = min(f.values())
    b, s = statistics.median(bwd), statistics.median(step)
    # fixed costs: the hook's program build and the planning of the step's statement
    t = time.perf_counter()
    cur.execute("EXPLAIN " + grad)
    cur.fetchall()
    build = (time.perf_counter() - t) * 1000
    cur.execute("SELECT gpt.loss_sql(), gpt.params(), gpt.no_decay()")
    # one step's temp bytes and the backend's peak memory
    cur.execute("SELECT pg_stat_force_next_flush()")
    cur.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()")
    tb0 = cur.fetchone()[0]
    cur.execute(STEP_SQL, (1e-3,))
    cur.execute("SELECT pg_stat_force_next_flush()")
    cur.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()")
    tb = cur.fetchone()[0] - tb0
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    try:  # the peak RSS counts the shared buffers the backend touched: shown beside it
        with open(f"/proc/{pid}/status") as fh:
            st = {line.split(":")[0]: line.split()[1] for line in fh if ":" in line}
        hwm = f"{int(st['VmHWM']) // 1024} MB ({int(st['RssShmem']) // 1024} shared)"
    except (OSError, KeyError):
        hwm = "?"
    return f, best, b, s, build, tb, hwm


def torch_step(size):
    import torch
    torch.set_num_threads(1)
    L, H, C, T, B = size
    nv = 76
    g = torch.Generator().manual_seed(0)
    p = {n: (0.02 * torch.randn(s, generator=g)).requires_grad_()
         for n, s in tg.tensor_shapes(L, H, C, T, nv, BIAS).items()}
    opt = torch.optim.AdamW(list(p.values()), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    tok = torch.randint(0, nv, (B, T), generator=g)
    tgt = torch.randint(0, nv, (B, T), generator=g)
    times = []
    for _ in range(20):
        t = time.perf_counter()
        opt.zero_grad()
        tg.forward(p, tok, tgt, L, H).backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times[5:])


def drift(conn, steps):
    setup(conn, SIZES[0], steps)
    cur = conn.cursor()
    cur.execute("SELECT ddx_schedule_constant('bench_lr', 1e-3, %s)", (steps,))
    conn.autocommit = True
    cur.execute("CALL ddx_train(gpt.loss_sql(), gpt.params(), %s, 'bench_lr', weight_decay => 0.1, "
                "no_decay => gpt.no_decay(), max_grad_norm => 1.0, beta2 => 0.99, state_name => 'bench drift', "
                "log_every => 100000)", (steps,))
    cur.execute("SELECT extract(epoch FROM at - lag(at) OVER (ORDER BY step)) * 1000 FROM ddx_train_log "
                "WHERE run = 'bench drift' ORDER BY step")
    t = [r[0] for r in cur.fetchall()][1:]
    first, last = statistics.median(t[:100]), statistics.median(t[-100:])
    print(f"{steps}-step ddx_train run: median step {first:.0f} ms (first 100) vs {last:.0f} ms (last 100): "
          f"{100 * (last - first) / first:+.1f}%")


def backend_cpu_ms(pid):
    """The user + system CPU time of a backend so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def on_off(steps, what, settings):
    """The AdamW step at the first size in two sessions, each with its
    settings and its own training run, `steps` steps each taken in turn:
    the median step (wall) and the mean CPU time of each backend."""
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    setup(conn, SIZES[0], steps + 10)
    sessions = []
    for name, sql in settings:
        c = psycopg2.connect(dbname=DB)
        c.autocommit = True
        cur = c.cursor()
        cur.execute(sql)
        cur.execute("SELECT pg_backend_pid()")
        sessions.append((cur, cur.fetchone()[0], STEP_SQL.replace("'bench'", f"'bench {name}'")))
    wall, cpu = ([], []), ([], [])
    for i in range(steps + 2):  # (the first two: programs built, plans made)
        for k, (cur, pid, sql) in enumerate(sessions):
            c0 = backend_cpu_ms(pid)
            t = ms(cur, sql, (1e-3,))
            if i >= 2:
                wall[k].append(t)
                cpu[k].append(backend_cpu_ms(pid) - c0)
    on, off = statistics.median(wall[0]), statistics.median(wall[1])
    con, coff = statistics.mean(cpu[0]), statistics.mean(cpu[1])
    print(f"{SIZES[0]}: AdamW step, {what} on / off, {steps} steps each in turn: median {on:.0f} / {off:.0f} ms "
          f"({off / on:.2f}x), backend CPU {con:.0f} / {coff:.0f} ms ({coff / con:.2f}x)", flush=True)


def retain_on_off(rounds):
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    for size in (SIZES[0], (1, 4, 32, 32, 16)):
        setup(conn, size, 2 * rounds + 10)
        grad = gradient_sql(conn.cursor())[1]
        runs = []
        for setting in ("0", "DEFAULT"):
            c = psycopg2.connect(dbname=DB)
            c.autocommit = True
            cur = c.cursor()
            cur.execute(f"SET ddx.retain_memory = {setting}")
            step = STEP_SQL.replace("%s", "1e-3").replace("'bench'", f"'bench retain {setting}'")
            runs += [(cur, grad), (cur, step)]
        g0, s0, g1, s1 = interleaved(runs, rounds)
        print(f"{size}: gradient {g0:.0f} / {g1:.0f} ms ({g0 / g1:.2f}x), AdamW step {s0:.0f} / {s1:.0f} ms "
              f"({s0 / s1:.2f}x): ddx.retain_memory = 0 / default, median of {rounds} rounds in turn", flush=True)


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    for f in ("gpt.sql", "load_gpl3.sql"):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-c", "CREATE EXTENSION IF NOT EXISTS ddx",
                        "-f", os.path.join(HERE, "..", "examples", "gpt", f)], check=True, capture_output=True)
    if NODE:  # (only the comparison)
        on_off(NODE, "node", [("all", "SET ddx.contraction = 'all'"), ("off", "SET ddx.contraction = 'off'")])
        return
    if FILL:
        on_off(FILL, "ddx fill", [("fill", "SET ddx.contraction_fill = on"),
                                  ("no fill", "SET ddx.contraction_fill = off")])
        return
    if RETAIN:
        retain_on_off(RETAIN)
        return
    conn = psycopg2.connect(dbname=DB)
    conn.autocommit = True
    print(f"GPT of examples/gpt, median of {REPEATS} interleaved runs (ms); ratios to the best forward plan")
    print(f"{'size (layers, heads, channels, context, batch)':<48} {'forward: default':>16} {'nl off':>8} "
          f"{'nl+jit off':>10} {'node':>6} {'ddx_value':>9} {'backward':>9} {'ratio':>6} {'step':>7} {'ratio':>6} {'build':>6} "
          f"{'temp':>6} {'peak RSS':>18} {'torch step':>10} {'step/torch':>10}")
    for size, repeats in list(zip(SIZES, (REPEATS, max(2, REPEATS // 2))))[:1 if SMALL else 2]:
        f, best, b, s, build, tb, hwm = one_size(conn, size, repeats)
        t = torch_step(size)
        print(f"{str(size):<48} {f['default']:16.0f} {f['nestloop off']:8.0f} {f['nestloop, jit off']:10.0f} "
              f"{f['node']:6.0f} {f['ddx_value']:9.0f} {b:9.0f} {b / best:6.2f} {s:7.0f} {s / best:6.2f} {build:6.0f} {tb:6d} {hwm:>18} "
              f"{t:10.2f} {s / t:9.0f}x", flush=True)
        print(f"{'':<48} default-plan ratios: backward {b / f['default']:.2f}, step {s / f['default']:.2f}")
    if DRIFT:
        drift(conn, DRIFT)


if __name__ == "__main__":
    main()
