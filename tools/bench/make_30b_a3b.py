#!/usr/bin/env python3
"""Write a random-init Qwen3-MoE checkpoint of Qwen3-30B-A3B's shapes for speed measurements.

The shapes and config are Qwen3-30B-A3B's (Qwen3MoeForCausalLM: hidden 2048, 48 layers, 32 query
heads and 4 KV heads of 128, every layer a mixture of 128 experts of which a token takes 8, each
a SwiGLU of 768, norm_topk_prob, vocab 151936, rope_theta 1e6, untied head), bf16, 61.1 GB. As
the Hub's checkpoint does, every expert's gate, up and down projections are tensors of their own
(model.layers.L.mlp.experts.E.gate_proj.weight …), beside the router (mlp.gate.weight). The
tokenizer and the way the weights are made and written are make_8b.py's (normal, std 0.02, each
tensor from a seed of its own, drawn on the GPU, --jobs shards at a time).

Random router weights score the experts alike, so routing is near uniform: every expert gets
about its share of the tokens, and 64 streams touch nearly all 128 experts of a layer each step.
That is what a random checkpoint can honestly stand for; a trained model's routing is skewed
(some experts hot), which this does not measure.

    python3 tools/bench/make_30b_a3b.py --out /dev/shm/q30b         # on the GPU machine: 61.1 GB
    python3 tools/bench/make_30b_a3b.py --tiny --out /tmp/tinymoe   # anywhere, no torch
"""

import sys

import make_8b

QWEN3_30B_A3B = dict(hidden=2048, layers=48, heads=32, kv_heads=4, head_dim=128, intermediate=6144,
                     experts=128, per_token=8, moe_intermediate=768, vocab=151936)
TINY = dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=96,
            experts=8, per_token=2, moe_intermediate=32, vocab=512)


def tensors(s):
    """The checkpoint's tensors in file order: (name, shape, init), init 'normal' or 'ones'."""
    h, q, kv = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    e, inter = s["experts"], s["moe_intermediate"]
    out = [("model.embed_tokens.weight", (s["vocab"], h), "normal")]
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (h,), "ones"),
            (p + "self_attn.q_proj.weight", (q, h), "normal"),
            (p + "self_attn.k_proj.weight", (kv, h), "normal"),
            (p + "self_attn.v_proj.weight", (kv, h), "normal"),
            (p + "self_attn.q_norm.weight", (s["head_dim"],), "ones"),
            (p + "self_attn.k_norm.weight", (s["head_dim"],), "ones"),
            (p + "self_attn.o_proj.weight", (h, q), "normal"),
            (p + "post_attention_layernorm.weight", (h,), "ones"),
            (p + "mlp.gate.weight", (e, h), "normal"),
        ]
        for j in range(e):
            x = f"{p}mlp.experts.{j}."
            out += [
                (x + "gate_proj.weight", (inter, h), "normal"),
                (x + "up_proj.weight", (inter, h), "normal"),
                (x + "down_proj.weight", (h, inter), "normal"),
            ]
    out += [("model.norm.weight", (h,), "ones"), ("lm_head.weight", (s["vocab"], h), "normal")]
    return out


def config(s):
    """Qwen3-30B-A3B's config.json with s's shapes: the dense 8B config's keys, the architecture
    and the mixture's."""
    c = make_8b.config(s)
    c.update({
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_experts": s["experts"],
        "num_experts_per_tok": s["per_token"],
        "moe_intermediate_size": s["moe_intermediate"],
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
    })
    return c


def main(argv=None):
    a = make_8b.parse_args(argv, __doc__)
    s = TINY if a.tiny else QWEN3_30B_A3B
    return make_8b.write_checkpoint(a, s, tensors(s), config(s), "make_30b_a3b")


if __name__ == "__main__":
    sys.exit(main())
