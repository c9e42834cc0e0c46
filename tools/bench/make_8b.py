#!/usr/bin/env python3
"""Write a random-init Qwen3 checkpoint of 8B-class shapes for speed measurements.

The shapes are Qwen3-8B's (hidden 4096, 36 layers, 32 heads of 128, 8 KV heads, intermediate
12288, vocab 151936, untied head), bf16, in safetensors shards with their index, a config.json
that both transformers and tfd read, and a byte-level BPE tokenizer.json of 256 byte tokens whose
vocabulary is padded to the model's. The weights are normal with std 0.02 (norms are ones), drawn
on the GPU, each tensor from a seed of its own, and written --jobs shards at a time, so host
memory stays near that many shards. The output means nothing: it exists to be timed
(docs/performance.md). make_30b_a3b.py writes the mixture-of-experts shape with the same code.

With --mtp it also writes an MTP head in the layout tfd loads for the bundled model (Qwen3-Next's:
mtp.fc, mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, one decoder layer under
mtp.layers.0., mtp.norm; config.json's mtp_num_hidden_layers = 1), random like the rest: its drafts
exist to time the drafted paths, and they land about as often as a guess of a random model's
argmax does, which is rarely.

    python3 tools/bench/make_8b.py --out /tmp/q8b          # on the GPU machine: ~16.4 GB
    python3 tools/bench/make_8b.py --mtp --out /tmp/q8b    # the same with an MTP head: ~16.8 GB
    python3 tools/bench/make_8b.py --tiny --mtp --out /tmp/tiny  # anywhere, no torch: a format check
"""

import argparse
import concurrent.futures
import json
import os
import random
import struct
import sys
import threading
import time

QWEN3_8B = dict(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128,
                intermediate=12288, vocab=151936)
TINY = dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=512)

# Qwen's special tokens, placed where Qwen3 places them when the vocabulary has room.
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def parse_args(argv=None, doc=None, mtp=False):
    """The writer's flags; with mtp, --mtp too (make_8b.py's, not make_30b_a3b.py's)."""
    p = argparse.ArgumentParser(description=doc or __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder to write (created; existing files replaced)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--std", type=float, default=0.02)
    p.add_argument("--shard-gb", type=float, default=4.0, help="largest shard, in GB")
    p.add_argument("--jobs", type=int, default=4, help="shards made and written at once")
    if mtp:
        p.add_argument("--mtp", action="store_true", help="append a random MTP head (mtp.*) and declare it in config.json")
    p.add_argument("--tiny", action="store_true",
                   help="tiny shapes, weights from Python's random module: checks the format without torch")
    return p.parse_args(argv)


def layer(p, s):
    """One decoder layer's tensors under the prefix p: (name, shape, init)."""
    h, q, kv, inter = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"], s["intermediate"]
    return [
        (p + "input_layernorm.weight", (h,), "ones"),
        (p + "self_attn.q_proj.weight", (q, h), "normal"),
        (p + "self_attn.k_proj.weight", (kv, h), "normal"),
        (p + "self_attn.v_proj.weight", (kv, h), "normal"),
        (p + "self_attn.q_norm.weight", (s["head_dim"],), "ones"),
        (p + "self_attn.k_norm.weight", (s["head_dim"],), "ones"),
        (p + "self_attn.o_proj.weight", (h, q), "normal"),
        (p + "post_attention_layernorm.weight", (h,), "ones"),
        (p + "mlp.gate_proj.weight", (inter, h), "normal"),
        (p + "mlp.up_proj.weight", (inter, h), "normal"),
        (p + "mlp.down_proj.weight", (h, inter), "normal"),
    ]


def tensors(s, mtp=False):
    """The checkpoint's tensors in file order: (name, shape, init), init 'normal' or 'ones'. With
    mtp, the MTP head's last, named as engine/mtp.go reads them."""
    h = s["hidden"]
    out = [("model.embed_tokens.weight", (s["vocab"], h), "normal")]
    for i in range(s["layers"]):
        out += layer(f"model.layers.{i}.", s)
    out += [("model.norm.weight", (h,), "ones"), ("lm_head.weight", (s["vocab"], h), "normal")]
    if mtp:
        out += [("mtp.fc.weight", (h, 2 * h), "normal"),
                ("mtp.pre_fc_norm_embedding.weight", (h,), "ones"),
                ("mtp.pre_fc_norm_hidden.weight", (h,), "ones")]
        out += layer("mtp.layers.0.", s)
        out += [("mtp.norm.weight", (h,), "ones")]
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def shards(ts, max_bytes):
    """Groups the tensors (index, name, shape, init), in order, into shards of at most max_bytes
    (a larger tensor alone)."""
    groups, cur, size = [], [], 0
    for t in ts:
        b = 2 * numel(t[2])
        if cur and size + b > max_bytes:
            groups.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    if cur:
        groups.append(cur)
    return groups


def config(s, mtp=False):
    c = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": s["hidden"],
        "intermediate_size": s["intermediate"],
        "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"],
        "vocab_size": s["vocab"],
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "use_cache": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": s["layers"],
        "bos_token_id": special_ids(s["vocab"])[0],
        "eos_token_id": special_ids(s["vocab"])[2],
        "torch_dtype": "bfloat16",
    }
    if mtp:
        c["mtp_num_hidden_layers"] = 1
    return c


def special_ids(vocab):
    """Qwen3's ids for the specials when the vocabulary is Qwen's; else the last three ids."""
    start = 151643 if vocab >= 151646 else vocab - len(SPECIALS)
    return [start + i for i in range(len(SPECIALS))]


def byte_unicode():
    """GPT-2's byte-to-character map of byte-level BPE: printable bytes stand for themselves."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer(vocab):
    """A byte-level BPE tokenizer.json with no merges: 256 byte tokens, padded to vocab."""
    chars = byte_unicode()
    specials = special_ids(vocab)
    v = {chars[b]: b for b in range(256)}
    for i in range(256, vocab):
        if i not in specials:
            v[f"<|pad_{i}|>"] = i
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in zip(specials, SPECIALS)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    split = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False}, byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": v, "merges": []},
    }


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def write_safetensors(path, entries):
    """Writes entries [(name, shape, buffer of bf16 bytes)] as one safetensors file, without
    copying the buffers: a header of their offsets, then each buffer in order."""
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, buf in entries:
        n = memoryview(buf).nbytes
        assert n == 2 * numel(shape), (name, n, shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % 8)  # the data starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _, _, buf in entries:
            f.write(memoryview(buf).cast("B"))
    return at


def python_bf16(shape, init, rnd, std):
    """bf16 bytes from Python's random module (the --tiny path): truncated float32."""
    n = numel(shape)
    vals = [1.0] * n if init == "ones" else [rnd.gauss(0.0, std) for _ in range(n)]
    f32 = struct.pack(f"<{n}f", *vals)
    return b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))


def write_checkpoint(a, s, ts, cfg, tag):
    """Writes the checkpoint of shapes s: config cfg, tensors ts (tensors()), the tokenizer files,
    and the weights in shards of at most a.shard_gb, a.jobs shards at a time, a progress line each.

    Every tensor is drawn from a generator of its own, seeded by a.seed and its index in ts, so
    the bytes do not depend on which thread writes which shard, nor in what order."""
    os.makedirs(a.out, exist_ok=True)
    write_json(os.path.join(a.out, "config.json"), cfg)
    write_json(os.path.join(a.out, "tokenizer.json"), tokenizer(s["vocab"]))
    write_json(os.path.join(a.out, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 40960,
        "eos_token": SPECIALS[2], "pad_token": SPECIALS[0], "add_bos_token": False})
    ids = special_ids(s["vocab"])
    write_json(os.path.join(a.out, "generation_config.json"),
               {"bos_token_id": ids[0], "eos_token_id": ids[2], "do_sample": False})

    if a.tiny:
        def make(index, shape, init):
            return python_bf16(shape, init, random.Random(a.seed * 1000003 + index), a.std)
    else:
        import torch
        local = threading.local()

        def make(index, shape, init):
            if init == "ones":
                t = torch.ones(shape, dtype=torch.bfloat16, device="cuda")
            else:
                if not hasattr(local, "gen"):
                    local.gen = torch.Generator(device="cuda")
                local.gen.manual_seed(a.seed * 1000003 + index)
                t = torch.randn(shape, dtype=torch.bfloat16, device="cuda", generator=local.gen).mul_(a.std)
            # int16 has bf16's size and a numpy type, whose buffer is written without a copy.
            return t.view(torch.int16).cpu().numpy()

    t0 = time.time()
    indexed = [(i, *t) for i, t in enumerate(ts)]
    groups = shards(indexed, int(a.shard_gb * 1e9))
    weight_map, done, lock = {}, [0], threading.Lock()

    def write(i, group):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        entries = [(n, shape, make(index, shape, init)) for index, n, shape, init in group]
        size = write_safetensors(os.path.join(a.out, name), entries)
        del entries
        with lock:
            for _, n, _, _ in group:
                weight_map[n] = name
            done[0] += size
            print(f"{tag}: {name}: {len(group)} tensors, {size / 1e9:.2f} GB; {done[0] / 1e9:.2f} GB so far, "
                  f"{time.time() - t0:.1f} s", flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for f in [pool.submit(write, i, g) for i, g in enumerate(groups)]:
            f.result()  # raises a shard's failure
    write_json(os.path.join(a.out, "model.safetensors.index.json"),
               {"metadata": {"total_size": done[0]}, "weight_map": dict(sorted(weight_map.items()))})
    print(f"{tag}: wrote {done[0] / 1e9:.2f} GB of weights to {a.out} in {time.time() - t0:.1f} s", flush=True)
    return 0


def main(argv=None):
    a = parse_args(argv, mtp=True)
    s = TINY if a.tiny else QWEN3_8B
    return write_checkpoint(a, s, tensors(s, a.mtp), config(s, a.mtp), "make_8b")


if __name__ == "__main__":
    sys.exit(main())
