#!/usr/bin/python3
"""The GPT of examples/gpt to PyTorch and back.

    examples/gpt/to_torch.py export gpt.pt    the tables -> a nanoGPT checkpoint (torch.save)
    examples/gpt/to_torch.py import gpt.pt    a checkpoint of the same sizes -> the tables

The database is the one psql would connect to (PGHOST, PGPORT, PGDATABASE,
...), or --db NAME; the tables are read in one snapshot. The checkpoint has
the layout of nanoGPT's (train.py writes its own so): {'model': state_dict,
'model_args': {n_layer, n_head, n_embd, block_size, vocab_size, bias,
dropout}, 'vocab': the characters of gpt.vocab by id (ours: nanoGPT's have
none)}.
Its state dict is that of `GPT` below, nanoGPT's model.py module for module
(transformer.wte, .wpe, .h[i].ln_1, .attn.c_attn, .attn.c_proj, .ln_2,
.mlp.c_fc, .mlp.c_proj, .ln_f, lm_head tied to wte; without the biases where
gpt.setup had bias => false, model_args' bias), with GPT-2's tanh GELU,
which is what gpt.sql computes (nanoGPT's own module uses the exact GELU:
load the state dict there and its logits differ in the GELU's last bits).

    import to_torch
    model, vocab = to_torch.load("gpt.pt")     # a GPT, float64, eval mode
    logits, loss = model(idx, targets)

Values cross as float8's shortest exact text both ways: a round trip is
bit for bit. test/torch/test_gpt.py checks that the exported module's
logits are the SQL forward's (1e-12) and that weights trained in PyTorch,
imported, give PyTorch's loss in SQL.
"""
import argparse
import math

import psycopg2
import torch
from torch import nn
from torch.nn import functional as F

# table -> its key columns, in the order of the tensor's dimensions (l counts from 1)
KEYS = {
    "wte": ["v", "e"], "wpe": ["t", "e"], "ln1_g": ["l", "e"], "ln1_b": ["l", "e"], "ln2_g": ["l", "e"],
    "ln2_b": ["l", "e"], "lnf_g": ["e"], "lnf_b": ["e"], "wq": ["l", "e", "h", "d"], "wk": ["l", "e", "h", "d"],
    "wv": ["l", "e", "h", "d"], "bq": ["l", "h", "d"], "bk": ["l", "h", "d"], "bv": ["l", "h", "d"],
    "wo": ["l", "h", "d", "e"], "bo": ["l", "e"], "wfc": ["l", "e", "k"], "bfc": ["l", "k"], "wmp": ["l", "k", "e"],
    "bmp": ["l", "e"],
}
BIASES = {"ln1_b", "ln2_b", "lnf_b", "bq", "bk", "bv", "bo", "bfc", "bmp"}


def tables_of(bias):
    """The model's tables, by name: KEYS, less the biases of a model without them."""
    return {n: k for n, k in KEYS.items() if bias or n not in BIASES}


class LayerNorm(nn.Module):
    """nanoGPT's: LayerNorm with an optional bias (torch.nn.LayerNorm has none to leave out in PyTorch 1.13)."""
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.n_head, self.n_embd = a["n_head"], a["n_embd"]
        self.c_attn = nn.Linear(a["n_embd"], 3 * a["n_embd"], bias=a["bias"])
        self.c_proj = nn.Linear(a["n_embd"], a["n_embd"], bias=a["bias"])

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.c_fc = nn.Linear(a["n_embd"], 4 * a["n_embd"], bias=a["bias"])
        self.c_proj = nn.Linear(4 * a["n_embd"], a["n_embd"], bias=a["bias"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.ln_1 = LayerNorm(a["n_embd"], a["bias"])
        self.attn = CausalSelfAttention(a)
        self.ln_2 = LayerNorm(a["n_embd"], a["bias"])
        self.mlp = MLP(a)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.args = dict(a)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(a["vocab_size"], a["n_embd"]), wpe=nn.Embedding(a["block_size"], a["n_embd"]),
            h=nn.ModuleList([Block(a) for _ in range(a["n_layer"])]), ln_f=LayerNorm(a["n_embd"], a["bias"])))
        self.lm_head = nn.Linear(a["n_embd"], a["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx, targets=None):
        T = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def read(cur):
    """The tables as tensors (float64) by table name, the model's arguments and the vocabulary."""
    cur.execute("SELECT n_layer, n_head, n_embd, block_size, bias FROM gpt.config")
    row = cur.fetchone()
    if row is None:
        raise SystemExit("no model in this database: gpt.setup has not run")
    L, H, C, T, bias = row
    cur.execute("SELECT ch FROM gpt.vocab ORDER BY v")
    vocab = [r[0] for r in cur.fetchall()]
    args = dict(n_layer=L, n_head=H, n_embd=C, block_size=T, vocab_size=len(vocab), bias=bias, dropout=0.0)
    ext = {"l": L, "v": len(vocab), "t": T, "e": C, "h": H, "d": C // H, "k": 4 * C}
    p = {}
    for name, keys in tables_of(bias).items():
        shape = [ext[k] for k in keys]
        a = torch.full(shape, float("nan"), dtype=torch.float64)
        cur.execute(f"SELECT {', '.join(keys)}, val FROM gpt.{name}")
        for r in cur.fetchall():
            i = tuple(r[d] - (1 if k == "l" else 0) for d, k in enumerate(keys))
            if any(x is None or x < 0 or x >= n for x, n in zip(i, shape)):
                raise SystemExit(f"gpt.{name} has a row with keys {r[:-1]} outside the configured sizes")
            if r[-1] is None:
                raise SystemExit(f"gpt.{name} has a NULL value at keys {r[:-1]}")
            a[i] = r[-1]
        if torch.isnan(a).any():  # a missing row (or a NaN value)
            raise SystemExit(f"gpt.{name} does not have a (non-NaN) value for every key of the configured sizes")
        p[name] = a
    return p, args, vocab


def state_dict(p, a):
    """nanoGPT's state dict from the tables' tensors."""
    C = a["n_embd"]
    sd = {"transformer.wte.weight": p["wte"], "transformer.wpe.weight": p["wpe"],
          "transformer.ln_f.weight": p["lnf_g"], "lm_head.weight": p["wte"]}
    bias = {"transformer.ln_f.bias": p.get("lnf_b")}
    for l in range(a["n_layer"]):
        h = f"transformer.h.{l}."
        # c_attn: y = x W^T + b, W (3C x C); q, k, v the three C-wide parts, each split into heads (h, d) -> h*hd + d
        sd[h + "attn.c_attn.weight"] = torch.cat([p[w][l].reshape(C, C).T for w in ("wq", "wk", "wv")])
        sd[h + "attn.c_proj.weight"] = p["wo"][l].reshape(C, C).T
        sd[h + "ln_1.weight"], sd[h + "ln_2.weight"] = p["ln1_g"][l], p["ln2_g"][l]
        sd[h + "mlp.c_fc.weight"], sd[h + "mlp.c_proj.weight"] = p["wfc"][l].T, p["wmp"][l].T
        if a["bias"]:
            bias[h + "attn.c_attn.bias"] = torch.cat([p[b][l].reshape(C) for b in ("bq", "bk", "bv")])
            bias[h + "attn.c_proj.bias"] = p["bo"][l]
            bias[h + "ln_1.bias"], bias[h + "ln_2.bias"] = p["ln1_b"][l], p["ln2_b"][l]
            bias[h + "mlp.c_fc.bias"], bias[h + "mlp.c_proj.bias"] = p["bfc"][l], p["bmp"][l]
    if a["bias"]:
        sd.update(bias)
    return {k: v.contiguous().clone() for k, v in sd.items()}


def tables(sd, a):
    """The tables' tensors from nanoGPT's state dict (the inverse of state_dict)."""
    L, H, C = a["n_layer"], a["n_head"], a["n_embd"]
    hd = C // H
    keys = tables_of(a["bias"])
    layer = {name: [] for name in keys if "l" in keys[name]}
    for l in range(L):
        h = f"transformer.h.{l}."
        w = sd[h + "attn.c_attn.weight"]
        for i, n in enumerate("qkv"):
            layer["w" + n].append(w[i * C:(i + 1) * C].T.reshape(C, H, hd))
        layer["wo"].append(sd[h + "attn.c_proj.weight"].T.reshape(H, hd, C))
        for t, m in (("ln1", "ln_1"), ("ln2", "ln_2")):
            layer[t + "_g"].append(sd[h + m + ".weight"])
        layer["wfc"].append(sd[h + "mlp.c_fc.weight"].T)
        layer["wmp"].append(sd[h + "mlp.c_proj.weight"].T)
        if a["bias"]:
            b = sd[h + "attn.c_attn.bias"]
            for i, n in enumerate("qkv"):
                layer["b" + n].append(b[i * C:(i + 1) * C].reshape(H, hd))
            layer["bo"].append(sd[h + "attn.c_proj.bias"])
            for t, m in (("ln1", "ln_1"), ("ln2", "ln_2")):
                layer[t + "_b"].append(sd[h + m + ".bias"])
            layer["bfc"].append(sd[h + "mlp.c_fc.bias"])
            layer["bmp"].append(sd[h + "mlp.c_proj.bias"])
    p = {name: torch.stack(v) for name, v in layer.items()}
    p.update(wte=sd["transformer.wte.weight"], wpe=sd["transformer.wpe.weight"], lnf_g=sd["transformer.ln_f.weight"])
    if a["bias"]:
        p["lnf_b"] = sd["transformer.ln_f.bias"]
    return {k: v.detach().to(torch.float64) for k, v in p.items()}


def write(cur, p):
    """UPDATE every row of every table from p; each table must have exactly one row per key."""
    for name, keys in KEYS.items():
        if name not in p:  # (a bias of a model without them)
            continue
        a = p[name]
        idx = torch.nonzero(torch.ones_like(a, dtype=torch.bool)).tolist()
        cols = [[i[d] + (1 if k == "l" else 0) for i in idx] for d, k in enumerate(keys)]
        vals = [float(a[tuple(i)]) for i in idx]
        unnest = ", ".join(["%s::int[]"] * len(keys)) + ", %s::float8[]"
        on = " AND ".join(f"g.{k} = d.{k}" for k in keys)
        cur.execute(f"UPDATE gpt.{name} g SET val = d.val FROM unnest({unnest}) d({', '.join(keys)}, val) WHERE {on}",
                    cols + [vals])
        if cur.rowcount != len(vals):
            raise SystemExit(f"gpt.{name}: {cur.rowcount} rows updated of {len(vals)}: the checkpoint's sizes are not "
                             "the configured model's (gpt.setup with its n_layer, n_head, n_embd, block_size first)")


def export(conn, path):
    # one snapshot for every table: an export during another session's
    # training would otherwise mix the tables of two steps
    conn.rollback()
    conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
    try:
        with conn.cursor() as cur:
            p, a, vocab = read(cur)
    finally:
        conn.rollback()  # (holds no lock on the tables after)
        conn.set_session(isolation_level="DEFAULT", readonly="DEFAULT")
    torch.save({"model": state_dict(p, a), "model_args": a, "vocab": vocab}, path)


def load(path):
    """A checkpoint as (GPT in eval mode, float64; the vocabulary)."""
    ck = torch.load(path)
    model = GPT(ck["model_args"]).to(torch.float64)
    model.load_state_dict(ck["model"])
    return model.eval(), ck["vocab"]


def import_(conn, path):
    ck = torch.load(path)
    if not isinstance(ck, dict) or not {"model", "model_args", "vocab"} <= ck.keys():
        raise SystemExit(f"{path}: not a checkpoint of to_torch.py (a dict with model, model_args and vocab)")
    with conn.cursor() as cur:
        _, a, vocab = read(cur)
        if ck["vocab"] != vocab:
            raise SystemExit("the checkpoint's vocabulary is not gpt.vocab: load the same text first")
        for k in ("n_layer", "n_head", "n_embd", "block_size", "bias"):
            if ck["model_args"][k] != a[k]:
                raise SystemExit(f"the checkpoint has {k} = {ck['model_args'][k]}, the tables {a[k]}: "
                                 "gpt.setup with the checkpoint's sizes (and bias) first")
        write(cur, tables(ck["model"], a))
    conn.commit()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("direction", choices=["export", "import"])
    ap.add_argument("path")
    ap.add_argument("--db", help="database (default: psql's, from the PG* environment)")
    o = ap.parse_args()
    conn = psycopg2.connect(dbname=o.db) if o.db else psycopg2.connect("")
    (export if o.direction == "export" else import_)(conn, o.path)


if __name__ == "__main__":
    main()
