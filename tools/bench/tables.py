#!/usr/bin/env python3
"""Prints the tables of docs/performance.md's first sections, in Markdown, from one run's
results.json (tools/bench/collect.py's output): the 8B checkpoint against the PyTorch peer, its
single stream against the bandwidth limit, the bundled model, the first token after idle, and
replies served by the scheduler, greedy and sampled (BenchmarkServed).
A figure the run lacks is printed as "–", never made up.

    python3 tools/bench/tables.py results.json
"""

import json
import sys


def num(v, digits=1):
    if v is None:
        return "–"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "–"


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    d = json.load(open(argv[1]))
    go, peer, s = d["go"], d.get("peer", {}), d["summary"]

    def tfd(name, prefix=""):
        return go.get(prefix + "BenchmarkEight/" + name, {}).get("tok/s")

    static = peer.get("static_graph_decode", {})
    alt = s.get("alt_env") or "alt"
    print(f"| tok/s | tfd | tfd, {alt} | PyTorch static cache + CUDA graph | tfd / peer |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = [("single-stream decode", "decode", "1")]
    rows += [(f"aggregate, {n} stream{'s' if n > 1 else ''}", f"streams={n}", str(n)) for n in (1, 2, 4, 8, 16, 32, 64)]
    for label, name, streams in rows:
        theirs = static.get(streams, {}).get("tok_s")
        print(f"| {label} | {num(tfd(name))} | {num(tfd(name, 'alt/'))} | {num(theirs)} | {ratio(tfd(name), theirs)} |")
    theirs = peer.get("static_prefill_4096_tok_s")
    print(f"| prefill, 4,096-token prompt | {num(tfd('prefill=4096'))} | {num(tfd('prefill=4096', 'alt/'))} | {num(theirs)} | {ratio(tfd('prefill=4096'), theirs)} |")
    # The run's side-by-side variants, where it has them: each the default's twin with one
    # choice undone.
    for label, name, versus in [
        ("single-stream decode, q/k norms, RoPE and KV write as five ops", "decode,qk_ops", None),
        ("64 streams, attention_tile_H for every row (TFD_CUDA_ATTN_TILE=1)", "streams=64,attention_tile", None),
        ("prefill, attention_split (TFD_CUDA_ATTN_TILE=0's kernel)", "prefill=4096,attention_split", theirs),
    ]:
        v = tfd(name)
        if v:
            print(f"| {label} | {num(v)} | | | {ratio(v, versus) if versus else ''} |")
    staged = [tfd(f"streams={n},staged") for n in (1, 32, 64)]
    if any(staged):
        print(f"| 1 / 32 / 64 streams, logits through the pinned stage (`,staged`) | {' / '.join(num(v) for v in staged)} | | | |")
    # Greedy rounds as the server runs them: the picks taken on the device (the peer, too, reads
    # back tokens), and on the host from the logits read back, as before picks.
    theirs = [static.get(str(n), {}).get("tok_s") for n in (1, 32, 64)]
    for label, suffix in [("greedy picks on the device (`,picks`)", "picks"), ("greedy picks on the host (`,hostpick`)", "hostpick")]:
        v = [tfd(f"streams={n},{suffix}") for n in (1, 32, 64)]
        if any(v):
            print(f"| 1 / 32 / 64 streams, {label} | {' / '.join(num(x) for x in v)} | | {' / '.join(num(x) for x in theirs)} | {' / '.join(ratio(a, b) for a, b in zip(v, theirs))} |")
    print()

    dec = go.get("BenchmarkEight/decode", {})
    print("| single stream | tok/s | weight bytes/s | of the limit |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| tfd | {num(dec.get('tok/s'))} | {num(dec.get('GB/s'))} GB/s | {num(100 * (s.get('single_stream_of_limit') or 0), 0)}% of {num(s.get('limit_tok_s'))} tok/s |")
    print()

    print("| bundled model (gopher) | result |")
    print("| --- | --- |")
    for name, unit in [("BenchmarkDecode/graphs", "tok/s"), ("BenchmarkDecode/eager", "tok/s"),
                       ("BenchmarkStreams/streams=1", "tok/s"), ("BenchmarkStreams/streams=8", "tok/s"),
                       ("BenchmarkStreams/streams=32", "tok/s"), ("BenchmarkStreams/streams=64", "tok/s"),
                       ("BenchmarkDecode8", "tok/s"), ("BenchmarkPrefill", "tok/s"),
                       ("BenchmarkLaunch/eager", "µs/op"), ("BenchmarkLaunch/graphs", "µs/op"),
                       ("BenchmarkMatVec", "GB/s"), ("BenchmarkMatVecMMA", "GB/s"),
                       ("BenchmarkMatMul256MMA", "TFLOP/s"), ("BenchmarkMatMul4096MMA", "TFLOP/s")]:
        v = go.get(name, {}).get(unit)
        if v is not None:
            print(f"| `{name}` | {num(v)} {unit} |")
    print()

    print("| first token after 10 s idle | ms |")
    print("| --- | ---: |")
    for tick in ("off", "on"):
        v = go.get(f"BenchmarkFirstTokenAfterIdle/tick={tick}", {}).get("ms/first-token")
        print(f"| tick {tick} | {num(v, 3)} |")
    print()

    # BenchmarkServed: tok/s of 1 … 64 replies at once, drafts off, served as the daemon serves
    # them; sampled replies are drawn on the host from each row's logits.
    served = {k: v for k, v in go.items() if k.startswith("BenchmarkServed/")}
    if served:
        counts = sorted({int(u.split("=")[1]) for v in served.values() for u in v if u.startswith("tok/s,streams=")})
        print("| served, drafts off (tok/s) | " + " | ".join(f"{n} stream{'s' if n > 1 else ''}" for n in counts) + " |")
        print("| --- |" + " ---: |" * len(counts))
        for name, v in served.items():
            print(f"| {name.split('/', 1)[1]} | " + " | ".join(num(v.get(f"tok/s,streams={n}"), 0) for n in counts) + " |")


if __name__ == "__main__":
    main(sys.argv)
