#!/usr/bin/python3
"""An optimizer step against the cost of writing what it must write.

    bench/optimizer.py [rows] [repeats] [fillfactor]

A parameter table w (id int PRIMARY KEY, val float8) of `rows` rows
(default 100,000) and the trivial loss sum(val * val), so that the step is
all optimizer: an AdamW step must compute the gradient, read and write each
row's moments (its state row) and write each parameter. Timed, each in a
transaction then rolled back (the tables vacuumed after it, untimed), in
round-robin rounds after a warm-up round, medians of `repeats` (default 5),
ms:

  loss          SELECT sum(val * val) FROM w
  gradient      the gradient of the loss, every row's, summed
  update w      UPDATE w SET val = val * 0.999: every parameter written once
  update state  UPDATE of every state row's step, m and v: the moments
                written once
  floor         gradient + update w + update state: what no step can avoid
  adamw         ddx_adamw_step (step 2 of its run: the state exists)
  adamw clip    the same with max_grad_norm (the update waits for the norm)
  sgd momentum  ddx_sgd_step with momentum 0.9
  torch         PyTorch's AdamW step on a vector of `rows` float64 (forward,
                backward, step; one thread)

and each step's multiple of the floor. With `fillfactor` (default 100,
PostgreSQL's), w is created WITH (fillfactor = N): room on each page for
the new versions of its rows, so that an UPDATE of val is a HOT update (no
index entry per row). A step's parameters are checked
against PyTorch's AdamW first.
"""
import statistics
import sys
import time

import psycopg2

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
FILLFACTOR = int(sys.argv[3]) if len(sys.argv) > 3 else 100
DB = "ddx_bench_optimizer"
LOSS = "SELECT sum(val * val) FROM w"


def connect(db):
    conn = psycopg2.connect(dbname=db)
    conn.autocommit = True
    return conn, conn.cursor()


def main():
    _, admin = connect("postgres")
    admin.execute(f"DROP DATABASE IF EXISTS {DB}")
    admin.execute(f"CREATE DATABASE {DB}")
    conn, cur = connect(DB)
    cur.execute("CREATE EXTENSION ddx")
    cur.execute(f"CREATE TABLE w (id int PRIMARY KEY, val float8) WITH (fillfactor = {FILLFACTOR}); "
                f"INSERT INTO w SELECT g, sin(g) FROM generate_series(1, {ROWS}) g")
    cur.execute("VACUUM ANALYZE w")
    cur.execute("SELECT array_agg(val ORDER BY id) FROM w")
    w0 = cur.fetchone()[0]
    # step 1 of each run, committed: the timed steps are step 2, the state there
    cur.execute(f"SELECT step FROM ddx_adamw_step('{LOSS}', ARRAY['w.val'], lr => 1e-3, state_name => 'a')")
    cur.execute(f"SELECT step FROM ddx_adamw_step('{LOSS}', ARRAY['w.val'], lr => 1e-3, max_grad_norm => 1.0, "
                f"state_name => 'c')")
    cur.execute(f"SELECT step FROM ddx_sgd_step('{LOSS}', ARRAY['w.val'], lr => 1e-3, momentum => 0.9, "
                f"state_name => 's')")
    cur.execute("SELECT array_agg(val ORDER BY id) FROM w")
    w3 = cur.fetchone()[0]
    cur.execute("SELECT state FROM _ddx.state_table WHERE param = 'w'::regclass")
    state = cur.fetchone()[0]

    import numpy as np
    import torch
    torch.set_num_threads(1)
    # the three committed steps, as PyTorch takes them (AdamW, AdamW after
    # clipping, SGD with momentum, each the first of its run)
    p = torch.tensor(np.array(w0), dtype=torch.float64, requires_grad=True)
    for opt, clip in ((torch.optim.AdamW([p], lr=1e-3), None), (torch.optim.AdamW([p], lr=1e-3), 1.0),
                      (torch.optim.SGD([p], lr=1e-3, momentum=0.9), None)):
        opt.zero_grad()
        (p * p).sum().backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(p, clip)
        opt.step()
    err = float(np.max(np.abs(p.detach().numpy() - np.array(w3))))
    print(f"{ROWS} parameter rows (fillfactor {FILLFACTOR}); after three steps, largest difference from PyTorch {err:.1e}")
    if err > 1e-12:
        sys.exit("the steps differ from PyTorch's")

    q = torch.tensor(np.array(w3), dtype=torch.float64, requires_grad=True)
    topt = torch.optim.AdamW([q], lr=1e-3)

    def torch_step():
        topt.zero_grad()
        (q * q).sum().backward()
        topt.step()

    runs = {
        "loss": LOSS,
        "gradient": f"WITH ddx_l AS ({LOSS}) SELECT sum(grad('ddx_l', w.val)) FROM w",
        "update w": "UPDATE w SET val = val * 0.999",
        "update state": f"UPDATE {state} SET step = step + 1, at = at + 1, m = 0.9 * m, v = 0.999 * v "
                        f"WHERE run = (SELECT id FROM _ddx.run WHERE name = 'a')",
        "adamw": f"SELECT * FROM ddx_adamw_step('{LOSS}', ARRAY['w.val'], lr => 1e-3, state_name => 'a')",
        "adamw clip": f"SELECT * FROM ddx_adamw_step('{LOSS}', ARRAY['w.val'], lr => 1e-3, max_grad_norm => 1.0, "
                      f"state_name => 'c')",
        "sgd momentum": f"SELECT * FROM ddx_sgd_step('{LOSS}', ARRAY['w.val'], lr => 1e-3, momentum => 0.9, "
                        f"state_name => 's')",
    }
    times = {k: [] for k in list(runs) + ["torch"]}
    for i in range(REPEATS + 1):
        for name, sql in runs.items():
            cur.execute("BEGIN")
            t0 = time.perf_counter()
            cur.execute(sql)
            if cur.description:
                cur.fetchall()
            t = (time.perf_counter() - t0) * 1000
            cur.execute("ROLLBACK")
            cur.execute(f"VACUUM w, {state}")
            if i:
                times[name].append(t)
        ts = []
        torch_step()
        for _ in range(10):
            t0 = time.perf_counter()
            torch_step()
            ts.append((time.perf_counter() - t0) * 1000)
        if i:
            times["torch"].append(statistics.median(ts))
    med = {k: statistics.median(v) for k, v in times.items()}
    floor = med["gradient"] + med["update w"] + med["update state"]
    print(f"medians of {REPEATS} rounds, ms")
    for k in runs:
        extra = f"  {med[k] / floor:5.2f}x floor" if k.startswith(("adamw", "sgd")) else ""
        print(f"  {k:<14} {med[k]:9.1f}{extra}")
        if k == "update state":
            print(f"  {'floor':<14} {floor:9.1f}")
    print(f"  {'torch':<14} {med['torch']:9.2f}")
    conn.close()


if __name__ == "__main__":
    main()
