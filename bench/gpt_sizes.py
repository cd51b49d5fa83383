#!/usr/bin/python3
"""Which GPT learns to write in how many steps: the model of examples/gpt in PyTorch.

    bench/gpt_sizes.py STEPS L,H,C,T,B,LR[,nobias][,warmup=N][,decay=N][,minf=F][,seed=N]
                             [,beta1=F][,beta2=F][,wd=F][,clip=F][,every=N] [...]

The model is test/torch/test_gpt.py's twin of examples/gpt (float64, one
thread), initialized as gpt.setup initializes it, trained with AdamW as
gpt.train configures it (decay on matrices and embeddings, betas 0.9 /
0.99, weight decay 0.1, clipping at 1.0, warmup 50 steps then cosine decay
to LR / 10) on the GPL split as gpt.load_text splits it (val_share 0.1: the
last tenth of each of ten segments), batches of random windows wholly in
the training part. Every 100 steps the loss on 64 validation windows spread
over the validation part; printed per configuration: that curve, the first
step below 2.0 nats a character, and PyTorch's milliseconds a step. What it
tells: how many steps a configuration needs, to set against the SQL step
time of the same configuration (`CALL gpt.train` prints it). `nobias`: the
model without biases (gpt.setup's bias => false). `warmup`, `decay`, `minf`:
the schedule's warmup steps (50), the step its cosine ends at (STEPS) and
its last rate as a fraction of LR (0.1), as ddx_schedule_warmup_cosine's
warmup_steps, decay_steps and min_lr / max_lr; `seed`: the generator's seed
(0), for the spread between initializations and batches; `beta1`, `beta2`:
AdamW's betas (0.9, 0.99); `wd`: the weight decay on matrices and
embeddings (0.1); `clip`: the gradient norm clipped to (1.0; 0 for no
clipping); `every`: the steps between validations (100). With the
environment variable GPT_SIZES_JSON set, each configuration's options and
full validation curve are also appended, a JSON line, to that file. The demo's
(examples/gpt/train.sql):

    bench/gpt_sizes.py 1700 1,2,32,16,8,1e-2,warmup=400,decay=2000,minf=0.02
"""
import math
import sys
import time
import os
import json

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "torch"))
import test_gpt as tg  # noqa: E402

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


def corpus(val_share=0.1):
    """Tokens and the validation mask, as gpt.load_text makes them (psql's \\set drops the last newline)."""
    text = open("/usr/share/common-licenses/GPL-3").read().rstrip("\n")
    chars = sorted(set(text), key=lambda c: c.encode())
    data = torch.tensor([chars.index(c) for c in text])
    n = len(text)
    nseg = max(1, min(10, math.floor(n * val_share / 256)))
    val = torch.zeros(n, dtype=torch.bool)
    for k in range(nseg):
        a, z = k * n // nseg, (k + 1) * n // nseg
        val[z - round((z - a) * val_share):z] = True
    return data, val, len(chars)


def windows(val, T, want_val):
    """Starts of the windows of T + 1 tokens wholly in the validation part (want_val) or out of it."""
    v = val.to(torch.int64)
    c = torch.cat([torch.zeros(1, dtype=torch.int64), v.cumsum(0)])
    starts = torch.arange(len(val) - T)
    nv = c[starts + T + 1] - c[starts]
    return starts[nv == (T + 1 if want_val else 0)]


def init(L, H, C, T, nv, g, bias=True):
    p = {}
    for n, s in tg.tensor_shapes(L, H, C, T, nv, bias).items():
        if n in ("ln1_g", "ln2_g", "lnf_g"):
            t = torch.ones(s)
        elif n in tg.NO_DECAY:
            t = torch.zeros(s)
        else:
            t = (0.02 / math.sqrt(2 * L) if n in ("wo", "wmp") else 0.02) * torch.randn(s, generator=g)
        p[n] = t.requires_grad_()
    return p


def run(steps, L, H, C, T, B, lr, bias=True, warmup=50, decay=None, minf=0.1, seed=0,
        beta1=0.9, beta2=0.99, wd=0.1, clip=1.0, every=100):
    decay = decay or steps
    data, val, nv = corpus()
    g = torch.Generator().manual_seed(seed)
    p = init(L, H, C, T, nv, g, bias)
    opt = torch.optim.AdamW([{"params": [p[n] for n in p if n not in tg.NO_DECAY], "weight_decay": wd},
                             {"params": [p[n] for n in p if n in tg.NO_DECAY], "weight_decay": 0.0}],
                            lr=lr, betas=(beta1, beta2))
    train_starts, val_starts = windows(val, T, False), windows(val, T, True)
    vs = val_starts[torch.linspace(0, len(val_starts) - 1, 64).long()]
    vtok = torch.stack([data[s:s + T] for s in vs])
    vtgt = torch.stack([data[s + 1:s + T + 1] for s in vs])
    curve, below, ms = [], None, []
    for it in range(steps):
        for group in opt.param_groups:
            group["lr"] = tg.get_lr(it, warmup, decay, lr, lr * minf)
        s = train_starts[torch.randint(len(train_starts), (B,), generator=g)]
        tok = torch.stack([data[i:i + T] for i in s])
        tgt = torch.stack([data[i + 1:i + T + 1] for i in s])
        t0 = time.perf_counter()
        opt.zero_grad()
        tg.forward(p, tok, tgt, L, H).backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        opt.step()
        ms.append((time.perf_counter() - t0) * 1000)
        if (it + 1) % every == 0:
            with torch.no_grad():
                v = tg.forward(p, vtok, vtgt, L, H).item()
            curve.append((it + 1, v))
            if below is None and v < 2.0:
                below = it + 1
    ms.sort()
    sched = f" warmup {warmup}, cosine to {decay}, to {minf:g} lr, seed {seed}"
    if (beta1, beta2, wd, clip, every) != (0.9, 0.99, 0.1, 1.0, 100):
        sched += f", betas {beta1:g}/{beta2:g}, wd {wd:g}, clip {clip:g}, every {every}"
    print(f"{L},{H},{C},{T},{B} lr {lr:g}{'' if bias else ' no biases'}{sched}: validation " +
          " ".join(f"{s}:{v:.2f}" for s, v in curve[::2]) +
          f"; below 2.0 at step {below}; PyTorch {ms[len(ms) // 2]:.1f} ms a step", flush=True)
    if os.environ.get("GPT_SIZES_JSON"):
        with open(os.environ["GPT_SIZES_JSON"], "a") as out:
            out.write(json.dumps({"L": L, "H": H, "C": C, "T": T, "B": B, "lr": lr, "bias": bias,
                                  "warmup": warmup, "decay": decay, "minf": minf, "seed": seed,
                                  "beta1": beta1, "beta2": beta2, "wd": wd, "clip": clip,
                                  "every": every, "steps": steps, "below": below,
                                  "curve": curve, "ms": ms[len(ms) // 2]}) + "\n")


def main():
    steps = int(sys.argv[1])
    for cfg in sys.argv[2:]:
        L, H, C, T, B, lr, *rest = cfg.split(",")
        opts = dict(o.split("=") for o in rest if "=" in o)
        run(steps, int(L), int(H), int(C), int(T), int(B), float(lr), "nobias" not in rest,
            warmup=int(opts.get("warmup", 50)), decay=int(opts["decay"]) if "decay" in opts else None,
            minf=float(opts.get("minf", 0.1)), seed=int(opts.get("seed", 0)),
            beta1=float(opts.get("beta1", 0.9)), beta2=float(opts.get("beta2", 0.99)),
            wd=float(opts.get("wd", 0.1)), clip=float(opts.get("clip", 1.0)),
            every=int(opts.get("every", 100)))


if __name__ == "__main__":
    main()
