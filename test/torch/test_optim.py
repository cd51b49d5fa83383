#!/usr/bin/python3
"""Optimizers against PyTorch (float64): ddx_adamw_step with global-norm
clipping and a warmup + cosine schedule table, on a 2-layer MLP whose biases
get no weight decay, must match torch.optim.AdamW + clip_grad_norm_ (max norm 0.05, so that it clips) + the
same schedule after each of 10 steps: weights and both moments, to 1e-10.
Adam (L2 weight decay, decoupled => false) the same way, and SGD with
momentum and dampening, and with Nesterov momentum (weights and momentum
buffers).

Closes with "optim: N passed, N failed".
"""
import math
import sys

import torch

import test_models as tm

torch.set_default_dtype(torch.float64)
DB = "ddx_optim"
results = []


def run(decoupled):
    X, lab, W1, b1, W2, b2 = tm.mlp_data(32, 6, 8, 3, 21)
    names = ["w1", "b1", "w2", "b2"]
    init = [W1, b1, W2, b2]
    sql = (tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) + tm.vector("b1", b1) +
           tm.matrix("w2", W2) + tm.vector("b2", b2) +
           "ALTER TABLE w1 ADD PRIMARY KEY (i, j); ALTER TABLE w2 ADD PRIMARY KEY (i, j);"
           "ALTER TABLE b1 ADD PRIMARY KEY (j); ALTER TABLE b2 ADD PRIMARY KEY (j);"
           "SELECT ddx_schedule_warmup_cosine('sched', 3, 8, 0.05, 0.005, 12);")
    run_name = "adamw" if decoupled else "adam"
    tm.psql(sql, db=DB)
    loss_sql = "WITH " + tm.MLP_SQL + " SELECT l FROM loss"
    params = [torch.tensor(a, requires_grad=True) for a in init]
    decay, no_decay = [params[0], params[2]], [params[1], params[3]]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    opt = (torch.optim.AdamW if decoupled else torch.optim.Adam)(groups, lr=0.05, betas=(0.9, 0.95), eps=1e-8)

    def get_lr(it):  # nanoGPT
        if it < 3:
            return 0.05 * (it + 1) / (3 + 1)
        if it > 8:
            return 0.005
        return 0.005 + 0.5 * (1 + math.cos(math.pi * (it - 3) / (8 - 3))) * (0.05 - 0.005)

    worst = 0.0
    for it in range(10):
        lr = get_lr(it)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        logits = torch.tanh(torch.tensor(X) @ params[0] + params[1]) @ params[2] + params[3]
        torch.nn.functional.cross_entropy(logits, torch.tensor(lab)).backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=0.05)
        opt.step()
        tm.psql(f"""SELECT * FROM ddx_adamw_step($loss${loss_sql}$loss$, ARRAY['w1.val', 'b1.val', 'w2.val', 'b2.val'],
                      (SELECT lr FROM sched WHERE step = {it}), beta1 => 0.9, beta2 => 0.95, eps => 1e-8,
                      weight_decay => 0.1, no_decay => ARRAY['b1.val', 'b2.val'], max_grad_norm => 0.05,
                      decoupled => {'true' if decoupled else 'false'}, state_name => '{run_name}');""", db=DB)
        for name, p in zip(names, params):
            st = opt.state[p]
            keys = "i, j" if name.startswith("w") else "j"
            rows = tm.psql(f"SELECT {keys}, p.val, s.m, s.v FROM {name} p JOIN ddx_state('{run_name}', '{name}.val') s "
                           f"ON s.key = to_jsonb(p) - 'val'", db=DB)
            assert len(rows) == p.numel(), f"{name}: {len(rows)} state rows for {p.numel()} parameters"
            want = {"val": p.detach().numpy(), "m": st["exp_avg"].numpy(), "v": st["exp_avg_sq"].numpy()}
            for r in rows:
                idx = tuple(int(x) for x in r[:len(keys.split(","))])
                idx = idx if len(idx) > 1 else idx[0]
                for col, got in zip(("val", "m", "v"), r[len(keys.split(",")):]):
                    w = want[col][idx]
                    worst = max(worst, abs(float(got) - w) / max(1.0, abs(w)))
    ok = worst <= 1e-10
    results.append(ok)
    name = "AdamW, clipping, warmup+cosine, 10 steps" if decoupled else "Adam (L2 decay), clipping, 10 steps"
    print(f"{'ok' if ok else 'FAILED'}  {name:<44} max error {worst:.1e} (weights and both moments, every step)")


def run_sgd(nesterov):
    X, lab, W1, b1, W2, b2 = tm.mlp_data(32, 6, 8, 3, 5)
    names = ["w1", "b1", "w2", "b2"]
    tm.psql(tm.matrix("x", X) + tm.vector("lab", lab) + tm.matrix("w1", W1) + tm.vector("b1", b1) +
            tm.matrix("w2", W2) + tm.vector("b2", b2) +
            "ALTER TABLE w1 ADD PRIMARY KEY (i, j); ALTER TABLE w2 ADD PRIMARY KEY (i, j);"
            "ALTER TABLE b1 ADD PRIMARY KEY (j); ALTER TABLE b2 ADD PRIMARY KEY (j);", db=DB)
    run_name = "nesterov" if nesterov else "sgd"
    loss_sql = "WITH " + tm.MLP_SQL + " SELECT l FROM loss"
    params = [torch.tensor(a, requires_grad=True) for a in (W1, b1, W2, b2)]
    opt = torch.optim.SGD(params, lr=0.3, momentum=0.9, dampening=0.1 if not nesterov else 0.0,
                          weight_decay=0.01, nesterov=nesterov)
    worst = 0.0
    for it in range(10):
        opt.zero_grad()
        logits = torch.tanh(torch.tensor(X) @ params[0] + params[1]) @ params[2] + params[3]
        torch.nn.functional.cross_entropy(logits, torch.tensor(lab)).backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=0.2)
        opt.step()
        tm.psql(f"""SELECT * FROM ddx_sgd_step($loss${loss_sql}$loss$, ARRAY['w1.val', 'b1.val', 'w2.val', 'b2.val'],
                      0.3, momentum => 0.9, dampening => {0.0 if nesterov else 0.1}, weight_decay => 0.01,
                      nesterov => {'true' if nesterov else 'false'}, max_grad_norm => 0.2,
                      state_name => '{run_name}');""", db=DB)
        for name, p in zip(names, params):
            keys = "i, j" if name.startswith("w") else "j"
            nk = len(keys.split(","))
            rows = tm.psql(f"SELECT {keys}, p.val, s.buf FROM {name} p JOIN ddx_state('{run_name}', '{name}.val') s "
                           f"ON s.key = to_jsonb(p) - 'val'", db=DB)
            assert len(rows) == p.numel(), f"{name}: {len(rows)} state rows for {p.numel()} parameters"
            want = {"val": p.detach().numpy(), "buf": opt.state[p]["momentum_buffer"].numpy()}
            for r in rows:
                idx = tuple(int(x) for x in r[:nk])
                idx = idx if len(idx) > 1 else idx[0]
                for col, got in zip(("val", "buf"), r[nk:]):
                    worst = max(worst, abs(float(got) - want[col][idx]) / max(1.0, abs(want[col][idx])))
    ok = worst <= 1e-10
    results.append(ok)
    name = "SGD, Nesterov momentum, L2, clipping" if nesterov else "SGD, momentum, dampening, L2, clipping"
    print(f"{'ok' if ok else 'FAILED'}  {name + ', 10 steps':<44} max error {worst:.1e} (weights and buffers, every step)")


def main():
    import subprocess
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    tm.psql("CREATE EXTENSION ddx;", db=DB)
    for name, fn in (("AdamW", lambda: run(True)), ("Adam", lambda: run(False)), ("SGD", lambda: run_sgd(False)),
                     ("SGD Nesterov", lambda: run_sgd(True))):
        try:
            fn()
        except Exception as e:
            results.append(False)
            print(f"FAILED  {name}: {e}")
    print(f"optim: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
