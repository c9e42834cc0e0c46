#!/usr/bin/env python3
"""Train `gopher`, tfd's bundled model: a ~16M-parameter Qwen3-architecture
causal LM with one Qwen3-Next-layout MTP module, on the Go standard library.

One script, run on the GPU machine (see README.md beside it):

    python3 tools/train/train.py --corpus .corpus/gosrc.tar.xz --out models/gopher

Steps: read the corpus, split it by package (1 package directory in 20 held
out, by a hash of its path; the held-out packages are halved again into a
validation half, used to pick the checkpoint, and a test half, used only for
the reported numbers), build instruction pairs from documented functions,
train a byte-level BPE tokenizer, train the model under a wall-clock budget,
evaluate on the test half, export a Hugging Face folder, check that
transformers loads it and gives the same logits, and write greedy samples.

Everything random is seeded. The number of optimizer steps is derived from the
throughput measured in the first steps (so the run fits its time budget);
pass --steps N to fix it and repeat a run exactly (up to GPU nondeterminism).
"""

import argparse
import hashlib
import io
import json
import math
import os
import random
import re
import sys
import tarfile
import time

T_START = time.time()

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The Qwen2 pre-tokenizer pattern (digits split one by one).
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# ChatML. Jinja string literals: the \n below are backslash-n for Jinja.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{- raise_exception('Unsupported role: ' + message['role']) -}}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)
SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a Go programming assistant. Answer with Go code.",
    "You write idiomatic, well-documented Go.",
]


def log(*a):
    print(f"[{time.time() - T_START:7.1f}s]", *a, flush=True)


def render_chat(messages, add_generation_prompt=False):
    """Python twin of CHAT_TEMPLATE (checked against transformers below)."""
    s = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return s + ("<|im_start|>assistant\n" if add_generation_prompt else "")


# ----------------------------------------------------------------------------
# Corpus


def pkg_hash(pkgdir):
    return int.from_bytes(hashlib.sha256(pkgdir.encode()).digest()[:8], "big")


def split_of(path):
    """'train', 'val' or 'test' for a file, by its package directory."""
    h = pkg_hash(os.path.dirname(path))
    if h % 20 != 0:
        return "train"
    return "val" if (h // 20) % 2 == 0 else "test"


def is_big_generated(text):
    return len(text) > 32768 and "DO NOT EDIT" in text[:2048]


def read_corpus(path, every=1):
    files = []
    with tarfile.open(path, "r:xz") as tf:
        for m in tf:
            if m.isfile() and m.name.endswith(".go"):
                files.append((m.name, tf.extractfile(m).read().decode("utf-8", "replace")))
    files.sort()
    return files[::every]


DIRECTIVE = re.compile(r"^//(go:|line |export |extern |sys |sysnb |lint:|nolint|\+build)")
FUNC = re.compile(r"^func (?:\((?:\w+ )?\*?(\w+)(?:\[[^\]]*\])?\) )?(\w+)")


def doc_pairs(path, text):
    """(name, receiver type or None, doc first paragraph, function source) for
    each documented top-level func/method in gofmt'd source."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = FUNC.match(ln)
        if not m:
            i += 1
            continue
        # the function's end
        end = None
        if ln.endswith("{"):
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            end = j
        elif ln.endswith("}"):
            end = i
        elif ln.endswith("("):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(")"):
                j += 1
            if j < len(lines) and lines[j].endswith("{"):
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                end = k
        if end is None or end >= len(lines):
            i += 1
            continue
        # the doc comment right above it
        d = i - 1
        doc = []
        while d >= 0 and lines[d].startswith("//"):
            doc.append(lines[d])
            d -= 1
        doc.reverse()
        doc = [x for x in doc if not DIRECTIVE.match(x)]
        para = []
        for x in doc:
            x = x[2:]
            if x.startswith(" "):
                x = x[1:]
            if not x.strip():
                if para:
                    break
                continue
            if x.startswith("\t") or x.startswith("  "):  # code block in doc
                break
            para.append(x.strip())
        src = "\n".join(lines[i : end + 1])
        nlines = end - i + 1
        name = m.group(2)
        if para and 2 <= nlines <= 60 and len(src) <= 2000 and not name.startswith(("Test", "Benchmark", "Fuzz", "Example")):
            docs = " ".join(para)
            if 12 <= len(docs) <= 400:
                out.append((name, m.group(1), docs, src))
        i = end + 1
    return out


def request_for(name, recv, doc, key):
    """Turn a doc comment into a user request; the phrasing is picked by a hash."""
    h = pkg_hash(key)
    kind = "method" if recv else "function"
    rest = None
    if doc.startswith(name + " ") and len(doc) > len(name) + 1:
        r = doc[len(name) + 1 :]
        verb = r.split(" ", 1)[0]
        # "Name returns ...", "Name reports whether ...": a third-person verb
        if r[0].islower() and verb.endswith("s") and verb.isalpha():
            rest = r
    if rest is not None:
        forms = [
            f"Write a {kind} that {rest}",
            f"Write a Go {kind} that {rest}",
            f"Write a Go {kind} named {name} that {rest}",
            f"Write a Go {kind} that {rest}" if not recv else f"Write a method on {recv} that {rest}",
        ]
    else:
        forms = [
            f"Write a Go {kind}: {doc}",
            f"Implement this in Go: {doc}",
        ]
    return forms[h % len(forms)]


def build_pairs(files):
    pairs = []
    for path, text in files:
        if is_big_generated(text):
            continue
        for name, recv, doc, src in doc_pairs(path, text):
            key = f"{path}:{name}:{recv}"
            req = request_for(name, recv, doc, key)
            msgs = [{"role": "user", "content": req}, {"role": "assistant", "content": src}]
            if pkg_hash(key + "#sys") % 4 == 0:
                msgs.insert(0, {"role": "system", "content": SYSTEM_PROMPTS[pkg_hash(key + "#s") % len(SYSTEM_PROMPTS)]})
            pairs.append(render_chat(msgs))
    return pairs


def code_text(text):
    # big generated files (tables, rewrite rules) are cut to their first 16 KiB
    if is_big_generated(text):
        cut = text.rfind("\n", 0, 16384)
        return text[: cut + 1]
    return text


# ----------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(texts, out_dir, max_len):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8192,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    # Mirror Qwen2's layout for the decoder and post-processor (ByteLevel, all flags off).
    with open(path) as f:
        j = json.load(f)
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    j["decoder"] = dict(bl)
    j["post_processor"] = dict(bl)
    with open(path, "w") as f:
        json.dump(j, f, ensure_ascii=False, indent=2)
    tok = Tokenizer.from_file(path)
    assert tok.get_vocab_size() == 8192, tok.get_vocab_size()
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    added = {
        str(ids[s]): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
        for s in SPECIALS
    }
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
    return tok, ids


def encode_docs(tok, texts, eot):
    encs = tok.encode_batch(texts, add_special_tokens=False)
    arrs = []
    for e in encs:
        a = np.empty(len(e.ids) + 1, dtype=np.int32)
        a[:-1] = e.ids
        a[-1] = eot
        arrs.append(a)
    return arrs


# ----------------------------------------------------------------------------
# Model (Qwen3 backbone + Qwen3-Next-layout MTP module); parameter names are
# the checkpoint's tensor names.


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):  # plain Qwen3 RMSNorm: x / rms(x) * w, computed in float32
        return F.rms_norm(x.float(), (x.shape[-1],), self.weight.float(), self.eps)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, nh, nkv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(d, nh * hd, bias=False)
        self.k_proj = nn.Linear(d, nkv * hd, bias=False)
        self.v_proj = nn.Linear(d, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, c["rms_norm_eps"])
        self.k_norm = RMSNorm(hd, c["rms_norm_eps"])

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.nh, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.nh // self.nkv
        k = k[:, :, None].expand(B, self.nkv, rep, T, self.hd).reshape(B, self.nh, T, self.hd)
        v = v[:, :, None].expand(B, self.nkv, rep, T, self.hd).reshape(B, self.nh, T, self.hd)
        dt = v.dtype if not torch.is_autocast_enabled() else torch.bfloat16
        o = F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))


def rope(x, cos, sin):
    # non-interleaved (rotate-half) RoPE, as transformers' Qwen3
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    rot = torch.cat((-x2, x1), dim=-1)
    return (x.float() * cos + rot.float() * sin).to(x.dtype)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class MTP(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden_size"]
        self.pre_fc_norm_embedding = RMSNorm(d, c["rms_norm_eps"])
        self.pre_fc_norm_hidden = RMSNorm(d, c["rms_norm_eps"])
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.layers = nn.ModuleList([Layer(c)])
        self.norm = RMSNorm(d, c["rms_norm_eps"])


class Gopher(nn.Module):
    def __init__(self, c, max_pos):
        super().__init__()
        self.c = c
        self.model = Backbone(c)
        self.mtp = MTP(c)
        hd = c["head_dim"]
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        t = torch.arange(max_pos + 1, dtype=torch.int64).float()
        fr = torch.outer(t, inv)
        emb = torch.cat((fr, fr), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        nl = self.c["num_hidden_layers"] + 1
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * nl) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) * std)
            else:
                with torch.no_grad():
                    p.fill_(1.0)

    def head(self, x):  # tied lm_head
        return F.linear(x, self.model.embed_tokens.weight)

    def hidden(self, ids):
        """Backbone hidden states before the final norm, positions 0..T-1."""
        T = ids.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.model.embed_tokens(ids)
        for l in self.model.layers:
            x = l(x, cos, sin)
        return x

    def logits(self, h):
        return self.head(self.model.norm(h))

    def mtp_logits(self, next_ids, h, pos0=1):
        """Draft logits for x[t+2] from x[t+1] (next_ids[:, t]) and h[t];
        the MTP decoder layer sees positions pos0.. (= t+1)."""
        T = next_ids.shape[1]
        cos, sin = self.cos[pos0 : pos0 + T], self.sin[pos0 : pos0 + T]
        m = self.mtp
        e = m.pre_fc_norm_embedding(self.model.embed_tokens(next_ids))
        u = m.fc(torch.cat([e, m.pre_fc_norm_hidden(h)], dim=-1))  # embedding half first
        for l in m.layers:
            u = l(u, cos, sin)
        return self.head(m.norm(u))


def count(params):
    return sum(p.numel() for p in params)


# ----------------------------------------------------------------------------


@torch.no_grad()
def evaluate(model, stream, T, max_windows, bs=16):
    n = min((len(stream) - 2) // T, max_windows)
    assert n > 0, "evaluation stream shorter than one window"
    ar = torch.arange(T + 2, device=stream.device)
    s1 = s2 = 0.0
    ntok = 0
    agree_self = agree_true = top1 = nself = 0
    for i in range(0, n, bs):
        starts = torch.arange(i, min(i + bs, n), device=stream.device) * T
        xb = stream[starts[:, None] + ar].long()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = model.hidden(xb[:, :T])
            lg = model.logits(h)
            lg2 = model.mtp_logits(xb[:, 1 : T + 1], h)
        s1 += F.cross_entropy(lg.float().flatten(0, 1), xb[:, 1 : T + 1].flatten(), reduction="sum").item()
        s2 += F.cross_entropy(lg2.float().flatten(0, 1), xb[:, 2 : T + 2].flatten(), reduction="sum").item()
        ntok += xb.shape[0] * T
        p1, p2 = lg.argmax(-1), lg2.argmax(-1)
        top1 += (p1 == xb[:, 1 : T + 1]).sum().item()
        agree_true += (p2 == xb[:, 2 : T + 2]).sum().item()
        agree_self += (p2[:, :-1] == p1[:, 1:]).sum().item()
        nself += xb.shape[0] * (T - 1)
    return {
        "tokens": ntok,
        "loss": s1 / ntok,
        "ppl": math.exp(s1 / ntok),
        "mtp_loss": s2 / ntok,
        "top1_acc": top1 / ntok,
        "mtp_agree_greedy": agree_self / nself,
        "mtp_agree_true": agree_true / ntok,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=".corpus/gosrc.tar.xz")
    ap.add_argument("--out", default="models/gopher")
    ap.add_argument("--results", default="tools/train/results.json")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--train-seconds", type=float, default=370)
    ap.add_argument("--steps", type=int, default=0, help="fix the step count (0: from measured throughput)")
    ap.add_argument("--deadline", type=float, default=0, help="unix time by which training must have stopped")
    ap.add_argument("--decay-start", type=int, default=0, help="with --steps: step at which the LR decay starts")
    ap.add_argument("--patience", type=int, default=3, help="evaluations without val improvement before the decay")
    ap.add_argument("--val-windows", type=int, default=96)
    ap.add_argument("--eval-every", type=int, default=150)
    ap.add_argument("--instruct-frac", type=float, default=0.15)
    ap.add_argument("--smoke", action="store_true", help="tiny end-to-end run: 1 file in 8, 20 s of training")
    args = ap.parse_args()
    if args.steps and not args.decay_start:
        args.decay_start = int(args.steps * 0.8)
    if args.smoke:
        args.train_seconds = min(args.train_seconds, 20)
        args.eval_every = 40

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    dev = "cuda"
    os.makedirs(args.out, exist_ok=True)
    for f in os.listdir(args.out):
        os.remove(os.path.join(args.out, f))
    results = {"args": vars(args)}

    # ---- data
    files = read_corpus(args.corpus, every=8 if args.smoke else 1)
    split = {"train": [], "val": [], "test": []}
    for p, t in files:
        split[split_of(p)].append((p, t))
    pkgs = {s: len({os.path.dirname(p) for p, _ in v}) for s, v in split.items()}
    log(f"corpus: {len(files)} files; packages train/val/test = {pkgs['train']}/{pkgs['val']}/{pkgs['test']}; "
        f"files {len(split['train'])}/{len(split['val'])}/{len(split['test'])}")
    code = {s: [code_text(t) for _, t in v] for s, v in split.items()}
    pairs = build_pairs(split["train"])
    log(f"instruction pairs from training packages: {len(pairs)}")
    print("example pair:\n" + pairs[len(pairs) // 3], flush=True)

    bpe_texts = code["train"] + [p.replace("<|im_start|>", "").replace("<|im_end|>", "") for p in pairs]
    tok, ids = train_tokenizer(bpe_texts, args.out, args.seq)
    eot, im_start, im_end = ids["<|endoftext|>"], ids["<|im_start|>"], ids["<|im_end|>"]
    log(f"tokenizer: vocab {tok.get_vocab_size()}, specials {ids}")

    enc = {s: encode_docs(tok, code[s], eot) for s in code}
    enc_pairs = encode_docs(tok, pairs, eot)
    ntok = {s: int(sum(len(a) for a in v)) for s, v in enc.items()}
    npair = int(sum(len(a) for a in enc_pairs))
    chars = sum(len(t) for t in code["train"])
    reps = max(1, round(args.instruct_frac * ntok["train"] / ((1 - args.instruct_frac) * npair)))
    reps = min(reps, 4)
    docs = list(enc["train"]) + enc_pairs * reps
    rng = random.Random(args.seed)
    rng.shuffle(docs)
    train_stream = torch.from_numpy(np.concatenate(docs)).to(dev)
    val_stream = torch.from_numpy(np.concatenate(enc["val"])).to(dev)
    test_stream = torch.from_numpy(np.concatenate(enc["test"])).to(dev)
    frac = npair * reps / len(train_stream)
    log(f"tokens: train code {ntok['train']:,} + pairs {npair:,} x{reps} = {len(train_stream):,} "
        f"(instruct {frac:.1%}); val {ntok['val']:,}; test {ntok['test']:,}; {chars / ntok['train']:.2f} chars/token")
    results["data"] = {
        "files": len(files),
        "packages": pkgs,
        "files_by_split": {s: len(v) for s, v in split.items()},
        "instruction_pairs": len(pairs),
        "instruction_repeats": reps,
        "tokens_train_code": ntok["train"],
        "tokens_train_pairs": npair,
        "tokens_train_total": len(train_stream),
        "instruction_token_fraction": frac,
        "tokens_val": ntok["val"],
        "tokens_test": ntok["test"],
        "chars_per_token": chars / ntok["train"],
    }

    # ---- model
    c = dict(vocab_size=8192, hidden_size=384, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=6,
             num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6, rope_theta=10000.0)
    T = args.seq
    model = Gopher(c, T).to(dev)
    model.init_weights(args.seed)
    nb = count(model.model.parameters())
    nm = count(model.mtp.parameters())
    log(f"params: backbone {nb:,} (tied embedding {c['vocab_size'] * c['hidden_size']:,}), mtp {nm:,}")
    results["params"] = {"backbone": nb, "mtp": nm, "total": nb + nm}

    decay = [p for p in model.parameters() if p.dim() == 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    ar = torch.arange(T + 2, device=dev)
    B = args.batch
    limit = len(train_stream) - (T + 2)

    def batch():
        starts = torch.randint(0, limit, (B,), device=dev, generator=gen)
        return train_stream[starts[:, None] + ar].long()

    budget = args.train_seconds
    if args.deadline:
        budget = min(budget, args.deadline - time.time())
    log(f"training budget {budget:.0f}s, batch {B}x{T}")
    # Warmup-stable-decay schedule: linear warmup, constant peak LR, then a
    # cosine decay to zero over 20% of the run. The decay starts when the
    # validation loss has not improved for --patience evaluations (the corpus
    # is small and a long run overfits) or when the clock says it must start
    # to finish inside the budget; --steps/--decay-start fix both instead.
    total_steps = args.steps or 10**9
    decay_start = args.decay_start or None
    decay_len = (total_steps - decay_start) if decay_start else None
    per = None
    best = (float("inf"), 0, None)
    stale = 0
    curve = []
    torch.backends.cuda.matmul.allow_tf32 = True
    t0 = time.time()
    t_eval = 0.0
    step = 0
    tl1 = tl2 = 0.0
    nl = 0

    def start_decay(why):
        nonlocal decay_start, decay_len, total_steps
        decay_start = step
        decay_len = max(100, round(0.25 * step))
        total_steps = decay_start + decay_len
        log(f"decay starts at step {step} ({why}); {decay_len} decay steps, {total_steps} in all")

    while step < total_steps:
        el = time.time() - t0
        if el > budget + 5:
            log("stopped by the clock")
            break
        if step == 10:
            torch.cuda.synchronize()
            t_mark = time.time()
        if step == 30:
            torch.cuda.synchronize()
            per = (time.time() - t_mark) / 20
            log(f"{per * 1000:.1f} ms/step, {B * T / per / 1e3:.0f}k tok/s; budget allows about {int(budget / per)} steps")
        if decay_start is None and per is not None and el + 0.25 * step * per * 1.03 + 2 > budget:
            start_decay("clock")
        if step < args.warmup:
            lr = args.lr * (step + 1) / args.warmup
        elif decay_start is None or step < decay_start:
            lr = args.lr
        else:
            lr = args.lr * 0.5 * (1 + math.cos(math.pi * (step - decay_start) / decay_len))
        for g in opt.param_groups:
            g["lr"] = lr
        xb = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = model.hidden(xb[:, :T])
            lg = model.logits(h)
            l1 = F.cross_entropy(lg.float().flatten(0, 1), xb[:, 1 : T + 1].flatten())
            lg2 = model.mtp_logits(xb[:, 1 : T + 1], h)
            l2 = F.cross_entropy(lg2.float().flatten(0, 1), xb[:, 2 : T + 2].flatten())
            loss = l1 + args.mtp_weight * l2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tl1 += l1.detach()
        tl2 += l2.detach()
        nl += 1
        if step % args.eval_every == 0 or step == total_steps:
            te = time.time()
            model.eval()
            ev = evaluate(model, val_stream, T, args.val_windows)
            model.train()
            t_eval += time.time() - te
            tr1, tr2 = (tl1 / nl).item(), (tl2 / nl).item()
            tl1 = tl2 = 0.0
            nl = 0
            el = time.time() - t0
            curve.append({"step": step, "seconds": round(el, 1), "tokens": step * B * T, "lr": lr, "train_loss": round(tr1, 4),
                          "train_mtp_loss": round(tr2, 4), "val_loss": round(ev["loss"], 4),
                          "val_mtp_agree": round(ev["mtp_agree_greedy"], 4)})
            log(f"step {step}/{total_steps if total_steps < 10**9 else '?'} lr {lr:.2e} train {tr1:.3f} mtp {tr2:.3f} | "
                f"val {ev['loss']:.4f} mtp-agree {ev['mtp_agree_greedy']:.3f} | {step * B * T / 1e6:.0f}M tok "
                f"({step * B * T / len(train_stream):.2f} ep), {el:.0f}s")
            if ev["loss"] < best[0] - 0.002:
                stale = 0
            else:
                stale += 1
            if ev["loss"] < best[0]:
                best = (ev["loss"], step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            if decay_start is None and step >= args.warmup and stale >= args.patience:
                start_decay(f"val loss flat for {stale} evaluations")
    torch.cuda.synchronize()
    train_time = time.time() - t0
    if best[2] is None or (curve and curve[-1]["step"] != step):
        model.eval()
        ev = evaluate(model, val_stream, T, args.val_windows)
        if ev["loss"] < best[0]:
            best = (ev["loss"], step, {k: v.detach().clone() for k, v in model.state_dict().items()})
    log(f"trained {step} steps, {step * B * T:,} tokens in {train_time:.0f}s; best val {best[0]:.4f} at step {best[1]}")
    model.load_state_dict(best[2])
    model.eval()
    # round to bf16: the numbers below are those of the exported weights
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    test = evaluate(model, test_stream, T, 10**9)
    log("held-out test: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in test.items()}))
    results["train"] = {
        "steps": step,
        "batch": B,
        "seq": T,
        "tokens_seen": step * B * T,
        "epochs": step * B * T / len(train_stream),
        "seconds": train_time,
        "seconds_in_val_evals": t_eval,
        "tokens_per_second": step * B * T / max(1e-9, train_time - t_eval),
        "decay_start": decay_start,
        "best_step": best[1],
        "best_val_loss": best[0],
        "curve": curve,
    }
    results["heldout_test"] = test

    # ---- export
    export(model, c, args.out, ids, T)
    verify_and_sample(model, args.out, test_stream, results, tok)
    results["elapsed_seconds"] = time.time() - T_START
    os.makedirs(os.path.dirname(args.results) or ".", exist_ok=True)
    with open(args.results, "w") as f:
        json.dump(results, f, indent=2, ensure_ascii=False)
    log(f"wrote {args.results}")


SHARD_LIMIT = 14 * 1024 * 1024 - 64 * 1024  # bytes of tensor data; leaves room for the header


def export(model, c, out, ids, max_pos):
    from safetensors.torch import save_file
    from transformers import GenerationConfig, Qwen3Config

    sd = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in model.state_dict().items()}
    shards, cur, size = [], {}, 0
    for k, v in sd.items():
        n = v.numel() * v.element_size()
        if cur and size + n > SHARD_LIMIT:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = v
        size += n
    shards.append(cur)
    wmap = {}
    total = 0
    for i, sh in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(sh, os.path.join(out, name), metadata={"format": "pt"})
        assert os.path.getsize(os.path.join(out, name)) <= 14 * 1024 * 1024
        for k, v in sh.items():
            wmap[k] = name
            total += v.numel() * v.element_size()
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)

    cfg = Qwen3Config(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], head_dim=c["head_dim"], hidden_act="silu",
        max_position_embeddings=max_pos, rms_norm_eps=c["rms_norm_eps"], tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"]}, attention_bias=False,
        bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )
    cfg.architectures = ["Qwen3ForCausalLM"]
    cfg.dtype = torch.bfloat16
    cfg.save_pretrained(out)
    p = os.path.join(out, "config.json")
    with open(p) as f:
        j = json.load(f)
    j["mtp_num_hidden_layers"] = 1
    j["tie_word_embeddings"] = True
    j["dtype"] = "bfloat16"
    with open(p, "w") as f:
        json.dump(dict(sorted(j.items())), f, indent=2)
    gc = GenerationConfig(
        do_sample=True, temperature=0.7, top_p=0.95, top_k=40, repetition_penalty=1.0,
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad_token_id=ids["<|endoftext|>"], bos_token_id=None,
    )
    gc.save_pretrained(out)
    tot = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    log(f"exported {out}: {sorted(os.listdir(out))}, {tot / 2**20:.1f} MiB")
    assert tot <= 40 * 2**20


def verify_and_sample(model, out, test_stream, results, tok):
    import transformers
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_warning()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x = test_stream[: 2 * 512].view(2, 512).long()
    with torch.no_grad():
        h = model.hidden(x)
        ref = model.logits(h)
        ref2 = model.mtp_logits(x[:, 1:], h[:, :-1])
    try:
        hf, info = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, output_loading_info=True)
        log("transformers loading info: " + json.dumps({k: sorted(v) if isinstance(v, (set, list)) else str(v) for k, v in info.items()}))
    except TypeError:
        hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
        info = {}
    hf = hf.to("cuda").eval()
    with torch.no_grad():
        got = hf(x).logits
    diff = (got - ref).abs().max().item()
    log(f"transformers vs trained model, f32 logits on 2x512 held-out tokens: max |diff| = {diff:.3e}")
    assert diff < 2e-3, diff
    # the MTP tensors read back from the shards give the same draft logits
    m2 = Gopher(model.c, 2048).to("cuda").eval()
    sd = {}
    for f in sorted(os.listdir(out)):
        if f.endswith(".safetensors"):
            sd.update(load_file(os.path.join(out, f)))
    m2.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    with torch.no_grad():
        g2 = m2.mtp_logits(x[:, 1:], m2.hidden(x)[:, :-1])
    d2 = (g2 - ref2).abs().max().item()
    log(f"MTP logits from the shards vs trained model: max |diff| = {d2:.3e}")
    assert d2 < 2e-3, d2
    results["export_check"] = {
        "hf_vs_trained_max_abs_logit_diff": diff,
        "mtp_from_shards_max_abs_diff": d2,
        "hf_unexpected_keys": sorted(info.get("unexpected_keys", [])) if info else None,
        "hf_missing_keys": sorted(info.get("missing_keys", [])) if info else None,
    }
    del hf

    # tokenizer through transformers = raw tokenizer; template = Python twin
    tk = AutoTokenizer.from_pretrained(out)
    probe = "package main\n\nfunc main() {\n\tprintln(\"héllo, 世界\")\n}\n<|im_end|>"
    assert tk.encode(probe, add_special_tokens=False) == tok.encode(probe, add_special_tokens=False).ids
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    for agp in (False, True):
        assert tk.apply_chat_template(conv, tokenize=False, add_generation_prompt=agp) == render_chat(conv, agp)
    log(f"AutoTokenizer class {type(tk).__name__}: encodes like tokenizers; chat template matches the training rendering")

    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16).to("cuda").eval()
    samples = []

    def gen(name, prompt, n, **kw):
        ids = tk(prompt, add_special_tokens=False, return_tensors="pt").input_ids.to("cuda")
        torch.manual_seed(0)
        o = hf.generate(ids, max_new_tokens=n, **kw)
        text = tk.decode(o[0, ids.shape[1]:], skip_special_tokens=False)
        samples.append({"name": name, "prompt": prompt, "settings": {k: v for k, v in kw.items() if k != "generation_config"}, "completion": text})
        print(f"===== {name} {kw} =====\n--- prompt ---\n{prompt}\n--- completion ---\n{text}\n", flush=True)

    go_prefix = ("package main\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\n"
                 "// countWords returns the number of words in s.\nfunc countWords(s string) int {\n")
    gen("go-completion", go_prefix, 160, do_sample=False)
    chat = tk.apply_chat_template([{"role": "user", "content": "Write a function that reverses a slice of ints."}],
                                  tokenize=False, add_generation_prompt=True)
    gen("chat-greedy", chat, 200, do_sample=False)
    gen("chat-sampled-defaults", chat, 200, do_sample=True)
    chat2 = tk.apply_chat_template([{"role": "user", "content": "Write a function that returns the largest element of a slice of ints."}],
                                   tokenize=False, add_generation_prompt=True)
    gen("chat-greedy-2", chat2, 200, do_sample=False)
    gen("doc-comment", "// Clamp returns", 120, do_sample=False)
    results["samples"] = samples


if __name__ == "__main__":
    main()
