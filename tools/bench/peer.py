#!/usr/bin/env python3
"""The PyTorch peer of tfd's speed measurements (docs/performance.md), on the same checkpoint.

Two peers, both bf16 on one GPU:

  static  the decode loop a performance-minded PyTorch user writes (after gpt-fast): the Qwen3
          forward in plain torch ops, q/k/v and gate/up fused into one matrix each, a static KV
          cache of max_len slots per stream, and the one-token step for B streams captured in one
          torch CUDA graph and replayed, with the next token fed back on the device. Attention
          reads all max_len cached slots under a mask (that is what keeps the step's shapes fixed
          for the graph). Each step also copies the B new tokens to the host, as a server that
          streams them must. Prefill runs the same code over the whole prompt with a causal
          flash-attention call.

          A mixture of experts (Qwen3MoeForCausalLM, tools/bench/make_30b_a3b.py) runs its experts
          two ways, each measured (--experts):
            grouped  what torchtitan and current PyTorch MoE code write: the (token, expert) pairs
                     sorted by expert, their rows gathered, and each projection one
                     F.grouped_mm (torch._grouped_mm before torch 2.10) over the stacked
                     [experts, out, in] weights with the per-expert offsets computed on the
                     device; an expert with no pairs costs nothing, so a step reads each chosen
                     expert's weights once.
            gather   gpt-fast's Mixtral MoE: each token's k experts' weights indexed out of the
                     stacked tensor (w[ids]) and applied with einsum, the shapes fixed by B·k.
                     Good at one stream; at many it copies every chosen matrix once per token.
          Both keep the step's shapes static, so the whole step is still one CUDA graph.
          "static_graph_decode" holds, per stream count, the faster of the two.
  hf      transformers' own generate (greedy, its default dynamic cache, SDPA attention) and one
          forward over the whole prompt.

Decode positions go from --start to --start+--steps, over a cache that holds no prompt (zeros),
exactly as tfd's BenchmarkEight and BenchmarkMoE do. Results go to --json as they are made, so a run cut short
keeps what it measured.

    python3 tools/bench/peer.py --model /tmp/q8b --json /tmp/peer.json
    python3 tools/bench/peer.py --model /dev/shm/q30b --json /tmp/peer.json --streams 1,8,64 --prefill 0 --skip-hf
"""

import argparse
import json
import os
import sys
import time

DEV = "cuda"  # the device everything runs on; --device
EXPERTS = ("grouped", "gather")  # a mixture of experts' ways; --experts


def sync(torch):
    if DEV == "cuda":
        torch.cuda.synchronize()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the checkpoint folder (tools/bench/make_8b.py)")
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--streams", default="1,8,32,64", help="stream counts for the static decode loop")
    p.add_argument("--steps", type=int, default=64, help="timed decode steps per stream count")
    p.add_argument("--start", type=int, default=130, help="the first decode position")
    p.add_argument("--max-len", type=int, default=512, help="KV slots per stream of the static cache")
    p.add_argument("--prefill", type=int, default=4096, help="prompt length of the prefill measurement (0: none)")
    p.add_argument("--hf-tokens", type=int, default=16, help="tokens transformers' generate makes")
    p.add_argument("--skip-hf", action="store_true", help="measure only the static loop")
    p.add_argument("--experts", default="gather,grouped",
                   help="a mixture of experts' ways of computing its experts, each measured in this order (see above)")
    p.add_argument("--device", default="cuda",
                   help="cuda; cpu only checks the code on a machine without a GPU (no graphs, no timing)")
    a = p.parse_args(argv)
    a.streams = [int(s) for s in a.streams.split(",") if s]
    a.experts = [e for e in a.experts.split(",") if e]
    if set(a.experts) - set(EXPERTS) or not a.experts:
        p.error(f"--experts takes some of {','.join(EXPERTS)}")
    if a.start + a.steps + 8 > a.max_len:
        p.error("--start + --steps must stay inside --max-len")
    return a


class Results:
    """The results dict, rewritten to disk after every change."""

    def __init__(self, path):
        self.path, self.d = path, {"errors": []}

    def set(self, key, value):
        self.d[key] = value
        self.save()
        print(f"peer: {key} = {json.dumps(value)}", flush=True)

    def error(self, what, e):
        self.d["errors"].append(f"{what}: {type(e).__name__}: {e}")
        self.save()
        print(f"peer: {what} failed: {type(e).__name__}: {e}", flush=True)

    def save(self):
        with open(self.path, "w") as f:
            json.dump(self.d, f, indent=1)


def load_weights(torch, folder):
    """Every tensor of the checkpoint, on the GPU, by name."""
    from safetensors import safe_open
    idx = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
    w = {}
    for shard in sorted(set(idx["weight_map"].values())):
        with safe_open(os.path.join(folder, shard), framework="pt", device=DEV) as f:
            for name in f.keys():
                w[name] = f.get_tensor(name)
    return w


def sparse(cfg, i):
    """Whether decoder layer i is a mixture of experts, as transformers' Qwen3-MoE decides."""
    return (cfg.get("num_experts", 0) > 0 and i not in cfg.get("mlp_only_layers", [])
            and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def is_expert(cfg, name):
    """Whether the tensor name is one expert's projection (a token reads k of them a layer)."""
    return cfg.get("num_experts", 0) > 0 and ".mlp.experts." in name


def build_static(torch, cfg, w, max_pos):
    """The static peer's model: fused weights and the rotary tables. m["experts"] picks how a
    mixture of experts runs (EXPERTS); a graph captures the way set when it was captured."""
    F = torch.nn.functional
    H, KVH, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    layers = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        pop = lambda n: w.pop(p + n)
        L = dict(
            ln1=pop("input_layernorm.weight"), ln2=pop("post_attention_layernorm.weight"),
            qn=pop("self_attn.q_norm.weight"), kn=pop("self_attn.k_norm.weight"),
            wqkv=torch.cat([pop("self_attn.q_proj.weight"), pop("self_attn.k_proj.weight"),
                            pop("self_attn.v_proj.weight")]),
            wo=pop("self_attn.o_proj.weight"))
        if sparse(cfg, i):
            # The experts stacked: w13 [experts, 2·inter, hidden] (gate over up), w2 [experts,
            # hidden, inter]; the router scores [experts, hidden].
            ex = lambda j, n: pop(f"mlp.experts.{j}.{n}.weight")
            E = cfg["num_experts"]
            L.update(router=pop("mlp.gate.weight"),
                     w13=torch.stack([torch.cat([ex(j, "gate_proj"), ex(j, "up_proj")]) for j in range(E)]),
                     w2=torch.stack([ex(j, "down_proj") for j in range(E)]))
        else:
            L.update(w13=torch.cat([pop("mlp.gate_proj.weight"), pop("mlp.up_proj.weight")]),
                     w2=pop("mlp.down_proj.weight"))
        layers.append(L)
    theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=DEV) / hd))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32, device=DEV), inv)
    emb = torch.cat([freqs, freqs], -1)
    m = dict(H=H, KVH=KVH, hd=hd, G=H // KVH, eps=eps, layers=layers, experts=EXPERTS[0],
             embed=w.pop("model.embed_tokens.weight"), norm=w.pop("model.norm.weight"),
             head=w.pop("lm_head.weight"), cos=emb.cos().to(torch.bfloat16), sin=emb.sin().to(torch.bfloat16),
             arange=torch.arange(max_pos, device=DEV))

    def rms(x, weight):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return weight * xf.to(x.dtype)

    def rope(x, cos, sin):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def mlp(x, L):
        h = rms(x, L["ln2"])
        if "router" in L:
            return x + moe(h, L)
        g, u = F.linear(h, L["w13"]).chunk(2, -1)
        return x + F.linear(F.silu(g) * u, L["w2"])

    k, norm_topk = cfg.get("num_experts_per_tok", 0), cfg.get("norm_topk_prob", False)
    grouped_mm = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)

    def moe(h, L):
        """Qwen3-MoE's block on h [T, hidden]: the softmax over all experts in float32, the k
        best, renormalised over them (norm_topk_prob), cast back to bf16, as transformers does."""
        probs = F.linear(h, L["router"]).softmax(-1, dtype=torch.float32)
        weights, ids = probs.topk(k, -1)  # [T, k]
        if norm_topk:
            weights = weights / weights.sum(-1, keepdim=True)
        weights = weights.to(h.dtype)
        if m["experts"] == "gather":
            return experts_gather(h, ids, weights, L)
        return experts_grouped(h, ids, weights, L)

    def experts_gather(h, ids, weights, L):
        """gpt-fast's ConditionalFeedForward: each token's k experts' weights indexed out."""
        g, u = torch.einsum("ti,taoi->tao", h, L["w13"][ids]).chunk(2, -1)
        y = torch.einsum("tao,taio->tai", F.silu(g) * u, L["w2"][ids])
        return torch.einsum("tai,ta->ti", y, weights)

    def experts_grouped(h, ids, weights, L):
        """The pairs sorted by expert, then one grouped matmul a projection (see the docstring)."""
        T, E = ids.shape[0], L["w13"].shape[0]
        flat = ids.reshape(-1)  # pair t·k+r is row t's r-th expert
        _, order = flat.sort(stable=True)  # pairs by expert
        counts = torch.zeros(E, dtype=torch.int32, device=h.device).scatter_add_(
            0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = counts.cumsum(0, dtype=torch.int32)  # each expert's run ends here
        xs = h.index_select(0, order // k)
        g, u = grouped_mm(xs, L["w13"].transpose(1, 2), offs=offs).chunk(2, -1)
        y = grouped_mm(F.silu(g) * u, L["w2"].transpose(1, 2), offs=offs)
        y = torch.empty_like(y).index_copy_(0, order, y)  # back in pair order
        return (y.view(T, k, -1) * weights.unsqueeze(-1)).sum(1)

    def decode(tok, pos, kc, vc):
        """One step for B streams at position pos (a 1-element device tensor): logits [B, V]."""
        B, S = tok.shape[0], kc[0].shape[2]
        x = F.embedding(tok, m["embed"])
        cos, sin = m["cos"][pos].view(1, 1, hd), m["sin"][pos].view(1, 1, hd)
        mask = (m["arange"][:S] <= pos).view(1, 1, 1, S)
        for li, L in enumerate(layers):
            q, k, v = F.linear(rms(x, L["ln1"]), L["wqkv"]).split([H * hd, KVH * hd, KVH * hd], -1)
            q = rope(rms(q.view(B, H, hd), L["qn"]), cos, sin)
            k = rope(rms(k.view(B, KVH, hd), L["kn"]), cos, sin)
            kc[li].index_copy_(2, pos, k.unsqueeze(2))
            vc[li].index_copy_(2, pos, v.view(B, KVH, 1, hd))
            # The G query heads of a KV head attend as G query rows of one head: no repeated K/V.
            o = F.scaled_dot_product_attention(q.view(B, KVH, m["G"], hd), kc[li], vc[li], attn_mask=mask)
            x = mlp(x + F.linear(o.reshape(B, H * hd), L["wo"]), L)
        return F.linear(rms(x, m["norm"]), m["head"])

    def prefill(tok, kc, vc):
        """The prompt tok [T] of one stream into slots 0..T-1: the last position's logits."""
        T = tok.shape[0]
        x = F.embedding(tok, m["embed"])
        cos, sin = m["cos"][:T].view(T, 1, hd), m["sin"][:T].view(T, 1, hd)
        for li, L in enumerate(layers):
            q, k, v = F.linear(rms(x, L["ln1"]), L["wqkv"]).split([H * hd, KVH * hd, KVH * hd], -1)
            q = rope(rms(q.view(T, H, hd), L["qn"]), cos, sin).transpose(0, 1)
            k = rope(rms(k.view(T, KVH, hd), L["kn"]), cos, sin).transpose(0, 1)
            v = v.view(T, KVH, hd).transpose(0, 1)
            kc[li][0, :, :T] = k
            vc[li][0, :, :T] = v
            o = F.scaled_dot_product_attention(q[None], k.repeat_interleave(m["G"], 0)[None],
                                               v.repeat_interleave(m["G"], 0)[None], is_causal=True)
            x = mlp(x + F.linear(o[0].transpose(0, 1).reshape(T, H * hd), L["wo"]), L)
        return F.linear(rms(x[-1:], m["norm"]), m["head"])

    m["decode"], m["prefill"] = decode, prefill
    return m


def kv_cache(torch, cfg, B, S):
    shape = (B, cfg["num_key_value_heads"], S, cfg["head_dim"])
    n = cfg["num_hidden_layers"]
    return ([torch.zeros(shape, dtype=torch.bfloat16, device=DEV) for _ in range(n)],
            [torch.zeros(shape, dtype=torch.bfloat16, device=DEV) for _ in range(n)])


def bench_static_decode(torch, m, cfg, B, a):
    """Tokens per second of the graph-replayed step for B streams, and ms a step."""
    kc, vc = kv_cache(torch, cfg, B, a.max_len)
    tok = torch.randint(0, cfg["vocab_size"], (B,), device=DEV)
    pos = torch.tensor([a.start], device=DEV)
    if DEV == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up outside the graph, as capture requires
            for _ in range(3):
                m["decode"](tok, pos, kc, vc)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            nxt = m["decode"](tok, pos, kc, vc).argmax(-1)
        replay = graph.replay
    else:
        graph, nxt = None, torch.zeros_like(tok)
        replay = lambda: nxt.copy_(m["decode"](tok, pos, kc, vc).argmax(-1))
    host = []

    def run(steps, first):
        for i in range(steps):
            pos.fill_(first + i)
            replay()
            tok.copy_(nxt)
            host.append(nxt.cpu())  # the tokens reach the host every step, as a server's do
    run(2, a.start)
    sync(torch)
    t0 = time.perf_counter()
    run(a.steps, a.start + 2)
    sync(torch)
    dt = time.perf_counter() - t0
    del graph, kc, vc
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return {"tok_s": B * a.steps / dt, "ms_per_step": 1e3 * dt / a.steps}


def time_median(torch, fn, reps):
    times = []
    for _ in range(reps):
        sync(torch)
        t0 = time.perf_counter()
        fn()
        sync(torch)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def bench_bandwidth(torch):
    """bf16 matvec (cuBLAS) read bandwidth on an 8192×8192 matrix, and device copy bandwidth."""
    F = torch.nn.functional
    ws = [torch.randn(8192, 8192, dtype=torch.bfloat16, device=DEV) for _ in range(4)]
    x = torch.randn(1, 8192, dtype=torch.bfloat16, device=DEV)
    for w in ws:
        F.linear(x, w)
    n = 200
    dt = time_median(torch, lambda: [F.linear(x, ws[i % 4]) for i in range(n)], 3)
    matvec = n * ws[0].numel() * 2 / dt / 1e9
    src = torch.empty(4 << 30, dtype=torch.uint8, device=DEV)
    dst = torch.empty_like(src)
    dst.copy_(src)
    dt = time_median(torch, lambda: [dst.copy_(src) for _ in range(5)], 3)
    copy = 5 * 2 * src.numel() / dt / 1e9
    del ws, src, dst
    torch.cuda.empty_cache()
    return {"matvec_bf16_8192_GB_s": matvec, "copy_GB_s_read_plus_write": copy}


def static_decodes(torch, m, cfg, a, r, moe):
    """The graph-replayed decode at each stream count; for a mixture of experts in each of
    a.experts' ways, one way at every count before the next way (a way whose capture fails
    cannot spoil the numbers of one measured before it), the faster kept as static_graph_decode
    (and left set in m for prefill)."""
    decode, ways = {}, {}
    for way in a.experts if moe else [None]:
        for B in a.streams:
            what = f"static decode of {B} streams" + (f", experts {way}" if way else "")
            try:
                if way:
                    m["experts"] = way
                got = bench_static_decode(torch, m, cfg, B, a)
            except Exception as e:  # one stream count or way failing keeps the others
                r.error(what, e)
                continue
            if way:
                got["experts"] = way
                ways.setdefault(way, {})[str(B)] = got
                r.set("static_graph_decode_by_experts", ways)
            if str(B) not in decode or got["tok_s"] > decode[str(B)]["tok_s"]:
                decode[str(B)] = got
                r.set("static_graph_decode", decode)
    if moe and decode:
        m["experts"] = decode[max(decode, key=int)]["experts"]


def static_section(torch, a, cfg, r):
    t0 = time.perf_counter()
    w = load_weights(torch, a.model)
    r.set("weights_GB", sum(t.numel() * t.element_size() for t in w.values()) / 1e9)
    # A token reads every matrix but the embedding table (one row of it), and of a mixture's
    # experts only the k it is routed to.
    share = cfg["num_experts_per_tok"] / cfg["num_experts"] if cfg.get("num_experts") else 1
    r.set("weights_read_per_token_GB", sum(t.numel() * t.element_size() * (share if is_expert(cfg, n) else 1)
                                           for n, t in w.items() if not n.endswith("embed_tokens.weight")) / 1e9)
    moe = any(sparse(cfg, i) for i in range(cfg["num_hidden_layers"]))
    m = build_static(torch, cfg, w, max(a.prefill, a.max_len))
    r.set("static_load_s", time.perf_counter() - t0)
    with torch.inference_mode():
        static_decodes(torch, m, cfg, a, r, moe)
        if a.prefill > 0:
            try:
                kc, vc = kv_cache(torch, cfg, 1, a.prefill)
                prompt = torch.randint(0, cfg["vocab_size"], (a.prefill,), device=DEV)
                m["prefill"](prompt, kc, vc)
                dt = time_median(torch, lambda: m["prefill"](prompt, kc, vc), 3)
                r.set(f"static_prefill_{a.prefill}_tok_s", a.prefill / dt)
                del kc, vc
            except Exception as e:
                r.error("static prefill", e)
    del m
    if DEV == "cuda":
        torch.cuda.empty_cache()


def hf_section(torch, a, cfg, r):
    import transformers
    from transformers import AutoModelForCausalLM
    r.set("transformers", transformers.__version__)
    t0 = time.perf_counter()
    try:
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, device_map="cuda")
    except TypeError:  # transformers before 4.56 names it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.bfloat16, device_map="cuda")
    model.eval()
    r.set("hf_load_s", time.perf_counter() - t0)
    r.set("hf_attention", getattr(model.config, "_attn_implementation", "?"))
    with torch.inference_mode():
        ids = torch.randint(0, cfg["vocab_size"], (1, 128), device=DEV)
        # min_new_tokens keeps a random model's stray end-of-text from cutting the run short.
        gen = dict(do_sample=False, pad_token_id=0)
        try:
            model.generate(ids, max_new_tokens=2, min_new_tokens=2, **gen)
            sync(torch)
            t0 = time.perf_counter()
            out = model.generate(ids, max_new_tokens=a.hf_tokens, min_new_tokens=a.hf_tokens, **gen)
            sync(torch)
            made = out.shape[1] - ids.shape[1]
            r.set("hf_generate", {"tokens": made, "tok_s": made / (time.perf_counter() - t0)})
        except Exception as e:
            r.error("transformers generate", e)
        if a.prefill <= 0:
            return
        prompt = torch.randint(0, cfg["vocab_size"], (1, a.prefill), device=DEV)

        def forward():
            try:
                return model(prompt, use_cache=False, logits_to_keep=1)
            except TypeError:
                return model(prompt, use_cache=False)
        forward()
        r.set(f"hf_prefill_{a.prefill}_tok_s", a.prefill / time_median(torch, forward, 3))


def main(argv=None):
    global DEV
    a = parse_args(argv)
    DEV = a.device
    import torch
    r = Results(a.json)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    r.set("device", torch.cuda.get_device_name() if DEV == "cuda" else DEV)
    r.set("torch", torch.__version__)
    r.set("args", vars(a))
    if DEV == "cuda":
        try:
            r.set("bandwidth", bench_bandwidth(torch))
        except Exception as e:
            r.error("bandwidth", e)
    try:
        static_section(torch, a, cfg, r)
    except Exception as e:
        r.error("static peer", e)
    if not a.skip_hf:
        try:
            hf_section(torch, a, cfg, r)
        except Exception as e:
            r.error("transformers peer", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
