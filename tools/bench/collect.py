#!/usr/bin/env python3
"""Gathers one run of tools/bench/run.sh (or moe.sh) into JSON: every Go benchmark line of the
log (name, iterations, each metric by unit), the PyTorch peer's results, and a summary of the
issue's goals: each ratio tfd / peer on the 8B checkpoint (single stream, 1, 8, 32 and 64
streams, a 4,096-token prefill) and single-stream decode as a share of the bandwidth limit (the
weight bytes a token reads at LIMIT_TB_S), each null where either side is missing; the same
again under "alt" for run.sh's last stage, the other matmul path (benchmarks named alt/…, the
setting it ran under in "alt_env"). A log of BenchmarkMoE (moe.sh, the Qwen3-30B-A3B-shaped
checkpoint) is summarised from it instead.

    python3 tools/bench/collect.py LOG PEER_JSON > results.json
"""

import json
import re
import sys

LINE = re.compile(r"^((?:alt/)?Benchmark\S+)\s+(\d+)\s+(.*)$")  # alt/: run.sh's ALT stage
ALT = re.compile(r"=== 8B checkpoint under (\S+)")  # anywhere: a benchmark cut by its timeout leaves no newline


def go_benchmarks(log):
    out = {}
    for line in open(log, errors="replace"):
        m = LINE.match(line.strip())
        if not m:
            continue
        name, n, rest = m.groups()
        fields = rest.split()
        metrics = {fields[i + 1]: float(fields[i]) for i in range(0, len(fields) - 1, 2)
                   if re.fullmatch(r"[-+0-9.eE]+", fields[i])}
        out[re.sub(r"-\d+$", "", name)] = {"n": int(n), **metrics}
    return out


# The bandwidth a plain BF16 matvec reaches on the H200 (docs/performance.md), which sets the limit
# on single-stream decode: the weights a token reads, at this rate.
LIMIT_TB_S = 4.0


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def summary(go, peer, prefix="", bench="BenchmarkEight"):
    static = peer.get("static_graph_decode", {})

    def tfd(name):
        return go.get(prefix + bench + "/" + name, {}).get("tok/s")

    def theirs(streams):
        return static.get(str(streams), {}).get("tok_s")

    decode = go.get(prefix + bench + "/decode", {})
    limit = LIMIT_TB_S * 1e3 / decode["GB/tok"] if decode.get("GB/tok") else None
    return {
        "single_stream_ratio": ratio(tfd("decode"), theirs(1)),
        "agg1_ratio": ratio(tfd("streams=1"), theirs(1)),
        "agg8_ratio": ratio(tfd("streams=8"), theirs(8)),
        "agg32_ratio": ratio(tfd("streams=32"), theirs(32)),
        "agg64_ratio": ratio(tfd("streams=64"), theirs(64)),
        # Greedy rounds as served: the picks on the device, the tokens read back, as the peer does.
        "agg1_picks_ratio": ratio(tfd("streams=1,picks"), theirs(1)),
        "agg32_picks_ratio": ratio(tfd("streams=32,picks"), theirs(32)),
        "agg64_picks_ratio": ratio(tfd("streams=64,picks"), theirs(64)),
        "prefill_ratio": ratio(tfd("prefill=4096"), peer.get("static_prefill_4096_tok_s")),
        "single_stream_of_limit": ratio(tfd("decode"), limit),
        "limit_tok_s": round(limit, 1) if limit else None,
        "limit_TB_s": LIMIT_TB_S,
    }


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    try:
        peer = json.load(open(argv[2]))
    except (OSError, ValueError) as e:
        peer = {"errors": [f"no peer results: {e}"]}
    go = go_benchmarks(argv[1])
    if any(name.startswith("BenchmarkMoE/") for name in go):
        s = summary(go, peer, bench="BenchmarkMoE")
    else:
        s = summary(go, peer)
        s["alt"] = summary(go, peer, "alt/")
        s["alt_env"] = next((m.group(1) for m in map(ALT.search, open(argv[1], errors="replace")) if m), None)
    json.dump({"summary": s, "go": go, "peer": peer}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv)
