#!/usr/bin/env python3
"""Gathers one run of tools/bench/run.sh into JSON: every Go benchmark line of the log (name,
iterations, each metric by unit) and the PyTorch peer's results.

    python3 tools/bench/collect.py LOG PEER_JSON > results.json
"""

import json
import re
import sys

LINE = re.compile(r"^(Benchmark\S+)\s+(\d+)\s+(.*)$")


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


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    try:
        peer = json.load(open(argv[2]))
    except (OSError, ValueError) as e:
        peer = {"errors": [f"no peer results: {e}"]}
    json.dump({"go": go_benchmarks(argv[1]), "peer": peer}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv)
