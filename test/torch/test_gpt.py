#!/usr/bin/python3
"""The GPT of examples/gpt against a float64 PyTorch twin (nanoGPT's model,
written out with torch.nn.functional), fed the same initial tables and the
same batches: after each of 5 AdamW steps as nanoGPT configures it (decay
on matrices and embeddings, none on LayerNorm gains and biases, betas 0.9 /
0.99, clipping at 1.0, warmup + cosine schedule), the loss, every parameter
table and both moments must agree to 1e-9 relative. At 1 and 2 layers, and
without biases (gpt.setup's bias => false, nanoGPT's bias=False); clipping
must be active in at least one step. Then sampling (gpt.next_probs,
gpt.sample) against the twin's forward with the trained weights. Then
examples/gpt/to_torch.py: the exported nanoGPT module's logits against the
SQL forward's (1e-12), weights trained in PyTorch imported back give
PyTorch's loss in SQL (1e-12), a second export is bit for bit, and a
checkpoint with biases where the tables have none (or none where they have
them) is refused, the tables untouched. And
gpt.load_table: a user's text, its validation part never trained on, a
context longer than the text refused. And gpt.words_known (the demo's
measure of its samples) against the GPL's words read by Python.

Closes with "gpt: N passed, N failed".
"""
import math
import os
import subprocess
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
DB = "ddx_gpt"
HERE = os.path.dirname(os.path.abspath(__file__))
GPT = os.path.join(HERE, "..", "..", "examples", "gpt")
TOL = 1e-9
results = []

# table -> key columns, in the order of the tensor's dimensions
SHAPES = {
    "wte": ["v", "e"], "wpe": ["t", "e"], "ln1_g": ["l", "e"], "ln1_b": ["l", "e"], "ln2_g": ["l", "e"],
    "ln2_b": ["l", "e"], "lnf_g": ["e"], "lnf_b": ["e"], "wq": ["l", "e", "h", "d"], "wk": ["l", "e", "h", "d"],
    "wv": ["l", "e", "h", "d"], "bq": ["l", "h", "d"], "bk": ["l", "h", "d"], "bv": ["l", "h", "d"],
    "wo": ["l", "h", "d", "e"], "bo": ["l", "e"], "wfc": ["l", "e", "k"], "bfc": ["l", "k"], "wmp": ["l", "k", "e"],
    "bmp": ["l", "e"],
}
NO_DECAY = {"ln1_g", "ln1_b", "ln2_g", "ln2_b", "lnf_g", "lnf_b", "bq", "bk", "bv", "bo", "bfc", "bmp"}
BIASES = {"ln1_b", "ln2_b", "lnf_b", "bq", "bk", "bv", "bo", "bfc", "bmp"}


def tensor_shapes(L, H, C, T, nv, bias=True):
    """Each table's tensor shape (in SHAPES' order of keys) at these sizes, vocabulary nv; no biases
    where bias is false."""
    ext = {"l": L, "v": nv, "t": T, "e": C, "h": H, "d": C // H, "k": 4 * C}
    return {n: tuple(ext[k] for k in keys) for n, keys in SHAPES.items() if bias or n not in BIASES}


def shapes():
    """SHAPES, less the biases where the model (gpt.config) has none."""
    bias = psql("SELECT bias FROM gpt.config")[0][0] == "t"
    return {n: k for n, k in SHAPES.items() if bias or n not in BIASES}


def b_(p, name, *index):
    """A bias of the twin's parameters p, 0 where the model has none."""
    return p[name][index] if name in p else 0.0


def psql(sql, db=DB):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", db], input=sql,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return [line.split("\t") for line in r.stdout.splitlines() if line]


def table(name, query):
    """A parameter table (or its state column) as an array indexed by its keys (layers from 1 -> 0)."""
    keys = SHAPES[name]
    rows = psql(query)
    idx = [tuple(int(r[i]) - (1 if keys[i] == "l" else 0) for i in range(len(keys))) for r in rows]
    shape = tuple(max(i[d] for i in idx) + 1 for d in range(len(keys)))
    a = np.full(shape, np.nan)
    for i, r in zip(idx, rows):
        a[i] = float(r[len(keys)])
    assert not np.isnan(a).any(), name
    return a


def weights(name):
    return table(name, f"SELECT {', '.join(SHAPES[name])}, val FROM gpt.{name}")


def moments(name, run):
    keys = SHAPES[name]
    k = ", ".join(f"(s.key ->> '{c}')::int" for c in keys)
    m = table(name, f"SELECT {k}, s.m FROM ddx_state('{run}', 'gpt.{name}.val') s")
    v = table(name, f"SELECT {k}, s.v FROM ddx_state('{run}', 'gpt.{name}.val') s")
    return m, v


def layer_norm(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, None if isinstance(b, float) else b, eps=1e-5)


def forward(p, tok, tgt, L, H):
    """nanoGPT's GPT.forward: loss of the batch (tok, tgt: B x T)."""
    B, T = tok.shape
    logits = logits_of(p, tok, L)
    return torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))


def logits_of(p, tok, L):
    """The logits (B x T x vocabulary) of the batch tok (B x T)."""
    B, T = tok.shape
    x = p["wte"][tok] + p["wpe"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(L):
        h = layer_norm(x, p["ln1_g"][l], b_(p, "ln1_b", l))
        q, k, v = (torch.einsum("bte,ehd->bhtd", h, p[w][l]) + (p[b][l][None, :, None, :] if b in p else 0.0)
                   for w, b in (("wq", "bq"), ("wk", "bk"), ("wv", "bv")))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = att @ v
        x = x + torch.einsum("bhtd,hde->bte", y, p["wo"][l]) + b_(p, "bo", l)
        h = layer_norm(x, p["ln2_g"][l], b_(p, "ln2_b", l))
        f = torch.nn.functional.gelu(h @ p["wfc"][l] + b_(p, "bfc", l), approximate="tanh")
        x = x + f @ p["wmp"][l] + b_(p, "bmp", l)
    x = layer_norm(x, p["lnf_g"], b_(p, "lnf_b"))
    return x @ p["wte"].T


def get_lr(it, warmup, decay, max_lr, min_lr):  # nanoGPT
    if it < warmup:
        return max_lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (decay - warmup))) * (max_lr - min_lr)


def twin(L, H, C, T, B, steps=5, bias=True):
    name = (f"GPT {L} layer{'s' if L > 1 else ''}, {H} heads, {C} channels, context {T}, batch {B}"
            f"{'' if bias else ', no biases'}")
    run = f"twin {L} {bias}"
    psql(f"SELECT gpt.setup({L}, {H}, {C}, {T}, {B}, steps => {steps}, bias => {bias});"
         f"SELECT ddx_schedule_warmup_cosine('gpt_sched', 2, {steps}, 3e-3, 3e-4, {steps});")
    tabs = shapes()
    p = {n: torch.tensor(weights(n), requires_grad=True) for n in tabs}
    decay = [p[n] for n in tabs if n not in NO_DECAY]
    no_decay = [p[n] for n in tabs if n in NO_DECAY]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.99), eps=1e-8)
    worst, clipped = 0.0, 0
    for it in range(steps):
        batch = psql(f"SELECT b, t, tok, tgt FROM gpt.batches WHERE step = {it + 1} ORDER BY b, t")
        tok = torch.tensor([int(r[2]) for r in batch]).reshape(B, T)
        tgt = torch.tensor([int(r[3]) for r in batch]).reshape(B, T)
        lr = get_lr(it, 2, steps, 3e-3, 3e-4)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        loss = forward(p, tok, tgt, L, H)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), max_norm=1.0)
        clipped += bool(norm > 1.0)
        opt.step()
        got = psql(f"""SELECT step, loss, grad_norm FROM ddx_adamw_step(gpt.loss_sql(), gpt.params(),
                          (SELECT lr FROM gpt_sched WHERE step = {it}), beta1 => 0.9, beta2 => 0.99, eps => 1e-8,
                          weight_decay => 0.1, no_decay => gpt.no_decay(), max_grad_norm => 1.0,
                          state_name => '{run}')""")[0]
        assert int(got[0]) == it + 1, got
        worst = max(worst, abs(float(got[1]) - loss.item()) / abs(loss.item()),
                    abs(float(got[2]) - norm.item()) / norm.item())
        for n in tabs:
            st = opt.state[p[n]]
            m, v = moments(n, run)
            if n == "bk":
                # q·(k + bk) = q·k + q·bk adds the same to every score of a query, which softmax
                # ignores: bk's gradient is 0 in exact arithmetic, rounding noise in both. Both must
                # stay noise (|m| far below any other table's), not agree on it.
                noise = max(np.max(np.abs(m)), np.max(np.abs(st["exp_avg"].numpy())))
                if noise > 1e-12:
                    print(f"  step {it + 1} bk: moment {noise:.1e}, not rounding noise")
                    worst = max(worst, 1.0)
                continue
            for ours, theirs in ((weights(n), p[n].detach().numpy()), (m, st["exp_avg"].numpy()),
                                 (v, st["exp_avg_sq"].numpy())):
                # relative, with values far below the table's largest compared at 1e-3 of it
                scale = np.maximum(np.abs(theirs), 1e-3 * np.max(np.abs(theirs)) + 1e-300)
                e = float(np.max(np.abs(ours - theirs) / scale))
                if e > TOL:
                    print(f"  step {it + 1} {n}: {e:.1e} (largest {np.max(np.abs(theirs)):.1e})")
                worst = max(worst, e)
    # gpt.val_loss (the forward on the validation windows, its grouped sums
    # on the contraction node) against the twin's loss on the same windows
    rows = psql("SELECT b, t, tok, tgt FROM gpt.batches WHERE step = 0 ORDER BY b, t")
    windows = sorted({int(r[0]) for r in rows})
    vtok = torch.tensor([[int(r[2]) for r in rows if int(r[0]) == w] for w in windows])
    vtgt = torch.tensor([[int(r[3]) for r in rows if int(r[0]) == w] for w in windows])
    with torch.no_grad():
        vl = forward(p, vtok, vtgt, L, H).item()
    got_val = float(psql("SELECT gpt.val_loss()")[0][0])
    e_val = abs(got_val - vl) / abs(vl)
    if e_val > TOL:
        print(f"  validation loss {got_val!r} against the twin's {vl!r}")
    ok = worst <= TOL and clipped > 0 and e_val <= TOL and len(windows) > 0
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  {name}: {steps} AdamW steps, loss {float(got[1]):.4f}, "
          f"max relative error {worst:.1e} (loss, norm, {len(tabs)} tables, both moments), clipped in {clipped}; "
          f"validation loss ({len(windows)} windows) {e_val:.1e} from the twin's")


def sampling(L, bs):
    """gpt.next_probs and gpt.sample (the forward at the last position alone,
    a prepared statement) against the twin's forward over the whole context,
    with the tables as the training left them: the next-token distribution
    at temperature 0.8 (1e-12 relative), a greedy continuation, and one
    sampled at temperature 0.8 from the same draws (PostgreSQL's random()
    after setseed, read back) by the inverse CDF, character for character."""
    p = {n: torch.tensor(weights(n)) for n in shapes()}
    vocab = {int(v): ch for v, ch in psql("SELECT v, ch FROM gpt.vocab")}
    ids = {ch: v for v, ch in vocab.items()}
    prompt = "The "
    n = bs + 4  # past the context: the window slides

    def probs(ctx, temperature):
        z = logits_of(p, torch.tensor([ctx[-bs:]]), L)[0, -1] / temperature
        return torch.softmax(z, dim=0)

    ctx = [ids[c] for c in prompt]
    want = probs(ctx, 0.8)
    got = psql(f"SELECT v, p FROM gpt.next_probs(ARRAY{ctx}, 0.8) ORDER BY v")
    got = torch.tensor([float(r[1]) for r in got])
    err = float(torch.max(torch.abs(got - want) / want))
    ok = len(got) == len(want) and err <= 1e-12
    # greedy
    g = list(ctx)
    for _ in range(n):
        g.append(int(torch.argmax(probs(g, 1.0))))
    greedy = psql(f"SELECT gpt.sample('{prompt}', {n})")[0][0]
    ok_g = greedy == prompt + "".join(vocab[t] for t in g[len(ctx):])
    # sampled: the draws sample() takes, one per character, after setseed(0.25)
    draws = [float(r[0]) for r in psql(f"SELECT setseed(0.25); SELECT random() FROM generate_series(1, {n})")]
    s = list(ctx)
    for u in draws:
        cdf = torch.cumsum(probs(s, 0.8), dim=0)
        s.append(int(torch.nonzero(cdf >= u)[0]))
    sampled = psql(f"SELECT setseed(0.25); SELECT gpt.sample('{prompt}', {n}, 0.8)")[0][0]
    ok_s = sampled == prompt + "".join(vocab[t] for t in s[len(ctx):])
    results.append(ok and ok_g and ok_s)
    print(f"{'ok' if ok and ok_g and ok_s else 'FAILED'}  sampling, {L} layer{'s' if L > 1 else ''}: next-token "
          f"distribution at the last position {err:.1e} relative to the whole forward's; greedy {'=' if ok_g else '!='} "
          f"the twin's; sampled from the same draws {'=' if ok_s else '!='} the twin's ({sampled!r})")


def to_torch_roundtrip(L, T, B, bias=True):
    """examples/gpt/to_torch.py: the exported module's logits are the SQL
    forward's; weights trained in PyTorch from it, imported, give PyTorch's
    loss in SQL; a second export is bit for bit the module's state."""
    sys.path.insert(0, GPT)
    import to_torch
    path = f"/tmp/ddx_gpt_{os.getpid()}.pt"
    conn = to_torch.psycopg2.connect(dbname=DB)
    to_torch.export(conn, path)
    model, _ = to_torch.load(path)
    # gpt.n_params(): the module's own count (its tied embedding once)
    n_sql, n_torch = int(psql("SELECT gpt.n_params()")[0][0]), sum(p.numel() for p in model.parameters())
    batch = psql("SELECT b, t, tok, tgt FROM gpt.batches WHERE step = 1 ORDER BY b, t")
    tok = torch.tensor([int(r[2]) for r in batch]).reshape(B, T)
    tgt = torch.tensor([int(r[3]) for r in batch]).reshape(B, T)
    cur = conn.cursor()
    cur.execute("SELECT 'WITH ' || gpt.forward_sql('SELECT g.b, g.t, g.tok, g.tgt FROM gpt.batches g "
                "WHERE g.step = 1') || ' SELECT b, t, v, z FROM logits'")
    cur.execute(cur.fetchone()[0])
    sql_logits = torch.full((B, T, model.args["vocab_size"]), float("nan"))
    for b, t, v, z in cur.fetchall():
        sql_logits[b, t, v] = z
    with torch.no_grad():
        logits, _ = model(tok)
    e_logits = float((logits - sql_logits).abs().max() / logits.abs().max())
    # trained in PyTorch, then imported: the loss of a batch in SQL is PyTorch's
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        model(tok, tgt)[1].backward()
        opt.step()
    with torch.no_grad():
        want = model(tok, tgt)[1].item()
    torch.save({"model": model.state_dict(), "model_args": model.args, "vocab": to_torch.load(path)[1]}, path)
    to_torch.import_(conn, path)
    cur.execute("SELECT gpt.loss_sql()")
    cur.execute(cur.fetchone()[0].replace("$1", "1"))
    got = cur.fetchone()[0]
    e_loss = abs(got - want) / abs(want)
    to_torch.export(conn, path + "2")
    again = torch.load(path + "2")["model"]
    same = all(torch.equal(again[k], v) for k, v in model.state_dict().items())
    # a checkpoint whose bias is not the tables' is refused, the tables untouched
    other = dict(model.args, bias=not model.args["bias"])
    torch.save({"model": to_torch.GPT(other).to(torch.float64).state_dict(), "model_args": other, "vocab": to_torch.load(path)[1]},
               path)
    try:
        to_torch.import_(conn, path)
        refused = False
    except SystemExit as e:
        refused = "bias" in str(e)
    conn.rollback()
    to_torch.export(conn, path + "2")
    refused = refused and all(torch.equal(torch.load(path + "2")["model"][k], v) for k, v in again.items())
    conn.close()
    os.unlink(path)
    os.unlink(path + "2")
    # without biases: the module has none, and the checkpoint says so
    nobias = not bias and model.args["bias"] is False and not any(k.endswith(".bias") for k in model.state_dict())
    ok = e_logits <= 1e-12 and e_loss <= 1e-12 and same and (bias or nobias) and refused and n_sql == n_torch
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  to PyTorch and back, {L} layer{'s' if L > 1 else ''}"
          f"{'' if bias else ', no biases (model_args bias False, no bias in the state dict: ' + str(nobias) + ')'}: "
          f"logits of the exported "
          f"module {e_logits:.1e} relative to SQL's; trained in PyTorch and imported, SQL's loss {e_loss:.1e} relative "
          f"to PyTorch's ({want:.4f}); exported again {'bit for bit' if same else 'NOT bit for bit'}; a checkpoint "
          f"with bias={not model.args['bias']} {'refused' if refused else 'NOT refused'}; gpt.n_params() {n_sql}, "
          f"the module's {n_torch}")


def words_known():
    """gpt.words_known, what the demo's samples are judged by, against the
    words of the GPL's file read here: runs of two or more letters, compared
    in lower case, the corpus's words from the file, not from the tables."""
    import re
    with open("/usr/share/common-licenses/GPL-3") as f:
        vocab = {w.lower() for w in re.findall("[A-Za-z]{2,}", f.read())}
    samples = ["The conse thow you regive on in this works:\n broductionse of the (25 anibitionatem, COPYRIGHT's",
               "Licensee-licenses;conveying\tth", "1234 ... !", "", "GNU gnu Gnu gNU xyzzy a I e"]
    ok, shown = True, []
    for smp in samples:
        got = psql("SELECT known, words FROM gpt.words_known($s$" + smp + "$s$)")[0]
        ws = re.findall("[A-Za-z]{2,}", smp)
        want = [sum(w.lower() in vocab for w in ws), len(ws)]
        ok = ok and [int(x) for x in got] == want
        shown.append(f"{got[0]}/{got[1]}")
    null = psql("SELECT known, words FROM gpt.words_known(NULL)")[0]
    ok = ok and null == ["0", "0"]
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  gpt.words_known against the GPL's words read by Python: {', '.join(shown)} "
          f"of the samples' words known; NULL {null[0]}/{null[1]}")


def own_text():
    """gpt.load_table: a user's table of text; its validation part never in a
    training batch; text shorter than the context refused with 22023."""
    # 10 rows of 90 a's and b's, a row of 101 z's, joined by 10 newlines: 1,011 characters in one
    # segment (a tenth of it is under 256), its last tenth (101, the z's) for validation
    psql("DROP TABLE IF EXISTS my_text; CREATE TABLE my_text (id int, body text);"
         "INSERT INTO my_text SELECT i, repeat('ab', 45) FROM generate_series(1, 10) i;"
         "INSERT INTO my_text VALUES (11, repeat('z', 101));"
         "SELECT gpt.load_table('my_text', 'body', val_share => 0.1, order_by => 'id');"
         "SELECT gpt.setup(1, 2, 8, 8, 4, steps => 2000, val_windows => 4);")
    # (8,000 windows drawn from the 902 that fit: each drawn with probability 1 - 1e-4, the one
    # whose target would be the first z among them)
    z = psql("SELECT v FROM gpt.vocab WHERE ch = 'z'")[0][0]
    in_train = int(psql(f"SELECT count(*) FROM gpt.batches WHERE step > 0 AND (tok = {z} OR tgt = {z})")[0][0])
    val = psql(f"SELECT count(*), bool_and(tok = {z} AND tgt = {z}) FROM gpt.batches WHERE step = 0")[0]
    loss = psql("SELECT ddx_schedule_constant('own_lr', 1e-2, 3);"
                "CALL gpt.train(3, 3, 'own text', 'own_lr');"
                "SELECT loss FROM gpt.val_log WHERE run = 'own text' AND step = 3")[-1][0]
    r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", "-d", DB, "-c",
                        "SELECT gpt.setup(1, 2, 8, 1000, 4, steps => 2)"], capture_output=True, text=True)
    short = r.returncode != 0 and "22023" in r.stderr and "too short for a context of 1000" in r.stderr
    ok = in_train == 0 and int(val[0]) > 0 and val[1] == "t" and math.isfinite(float(loss)) and short
    results.append(ok)
    print(f"{'ok' if ok else 'FAILED'}  own text (gpt.load_table): {in_train} training tokens from the validation "
          f"part, {int(val[0]) // 8} validation windows all of it, validation loss {float(loss):.3f} after 3 steps of "
          f"gpt.train; a context longer than the text refused: {r.stderr.strip().splitlines()[0] if r.stderr else '?'}")


def main():
    subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", f"DROP DATABASE IF EXISTS {DB}", "-c",
                    f"CREATE DATABASE {DB}"], check=True, capture_output=True)
    psql("CREATE EXTENSION ddx;")
    for f in ("gpt.sql", "load_gpl3.sql"):
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", os.path.join(GPT, f)],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
    for cfg, bias in (((1, 2, 16, 8, 2), True), ((2, 2, 8, 8, 2), True), ((2, 2, 8, 8, 2), False)):
        try:
            twin(*cfg, bias=bias)
            sampling(cfg[0], cfg[3])
            to_torch_roundtrip(cfg[0], cfg[3], cfg[4], bias)
        except (Exception, SystemExit) as e:  # a failure of one size is reported, the other still runs
            results.append(False)
            print(f"FAILED  GPT {cfg}: {e}")
    try:
        words_known()
    except (Exception, SystemExit) as e:
        results.append(False)
        print(f"FAILED  words_known: {e}")
    try:
        own_text()
    except (Exception, SystemExit) as e:
        results.append(False)
        print(f"FAILED  own text: {e}")
    print(f"gpt: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
