#!/usr/bin/env python3
"""Sums one kernel's SASS source counters, as tools/bench/prof.sh writes them (ncu --page source
--csv --print-source sass, gzipped): the stall samples by reason; each opcode's share of the
executed instructions and of the samples; and the kernel's loops, told apart by how many times
their instructions ran (the instructions of one loop body run equally often), each with its
instruction mix and share of the samples: a loop's non-FMA instructions are its overhead.

    python3 tools/bench/ncu_sass.py d-sass.csv.gz [N]

N (default 12) is how many of the most-sampled loops and instructions to list."""

import collections
import csv
import gzip
import sys


def opcode(src):
    words = src.split()
    op = words[1] if words[0].startswith("@") else words[0]  # past a predicate
    return op.split(".")[0]


def count(row, col, name):
    """The row's integer in the column name (blank: 0)."""
    return int(row[col[name]] or 0)


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    rows = list(csv.reader(gzip.open(path, "rt")))
    header = rows[1]  # rows[0] names the kernel
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    insts = []
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        src = r[col["Source"]].strip()
        insts.append({
            "src": src, "op": opcode(src), "executed": count(r, col, "Instructions Executed"),
            "samples": count(r, col, "Warp Stall Sampling (All Samples)"),
            "stalls": {h[len("stall_"):]: count(r, col, h) for h in reasons},
        })
    samples = sum(i["samples"] for i in insts) or 1
    executed = sum(i["executed"] for i in insts) or 1
    print(f"{rows[0][1]}: {len(insts)} instructions, {executed:,} executed (warp-level), {samples:,} stall samples")

    print("\nstall samples by reason")
    by_reason = collections.Counter()
    for i in insts:
        by_reason.update(i["stalls"])
    for reason, n in by_reason.most_common(top):
        print(f"  {reason:20s} {100 * n / samples:5.1f}%")

    print("\nopcodes: executed%, samples%")
    ran, sampled = collections.Counter(), collections.Counter()
    for i in insts:
        ran[i["op"]] += i["executed"]
        sampled[i["op"]] += i["samples"]
    for op, n in ran.most_common(top):
        print(f"  {op:8s} {100 * n / executed:5.1f}% {100 * sampled[op] / samples:5.1f}%")

    print("\nloops (instructions that ran equally often): runs, instructions, samples%, mix")
    loops = collections.defaultdict(list)
    for i in insts:
        loops[i["executed"]].append(i)
    for runs, body in sorted(loops.items(), key=lambda kv: -sum(i["samples"] for i in kv[1]))[:top]:
        mix = collections.Counter(i["op"] for i in body)
        share = 100 * sum(i["samples"] for i in body) / samples
        print(f"  {runs:9,d} {len(body):5d} {share:5.1f}%  " + " ".join(f"{op} {n}" for op, n in mix.most_common(10)))

    print("\ninstructions: samples, runs, source, top reasons")
    for i in sorted(insts, key=lambda i: -i["samples"])[:top]:
        why = sorted(i["stalls"].items(), key=lambda kv: -kv[1])[:3]
        print(f"  {i['samples']:6d} {i['executed']:9,d} {i['src'][:56]:56s} " + " ".join(f"{k}={v}" for k, v in why))


if __name__ == "__main__":
    main()
