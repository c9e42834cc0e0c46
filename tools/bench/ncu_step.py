#!/usr/bin/env python3
"""Where one decode step's GPU time goes, from an ncu CSV of a forward's kernels.

ncu times each kernel alone (it serializes them), so the sum is the step's kernel time without the
gaps between kernels, graphs and dependent launch; the wall time of a step (BenchmarkEight) less
this sum is what launches, gaps and overlap cost.

  TFD_CUDA_GRAPHS=0 TFD_BENCH_MODEL=/tmp/q8b ncu --clock-control none --csv --page raw \\
      --metrics gpu__time_duration.sum --launch-count 2200 \\
      ./cuda.test -test.run '^$' -test.bench '^BenchmarkEight$/^decode$' -test.benchtime 1x > ncu.csv
  python3 tools/bench/ncu_step.py ncu.csv          # the last whole forward
  python3 tools/bench/ncu_step.py --all ncu.csv    # every kernel from the first forward on
  python3 tools/bench/ncu_step.py docs/ncu/step-decode-f7f99b2.csv.gz   # a committed one, gzipped

A forward starts with its embedding kernel (embed_*); the last forward profiled whole (between
the last two embeddings) is summed by kernel, largest first, and the matmuls again by grid (one
grid a matrix shape). Both of ncu's CSV pages are read: --page raw (a column a metric) and the
default --page details (a row a metric).
"""
import csv
import gzip
import sys
from collections import defaultdict


def main(path, whole_run=False):
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own log lines are not CSV
    rows = list(csv.reader(lines))
    head = rows[0]
    name_col = head.index("Kernel Name")
    grid_col = head.index("Grid Size")
    if "Metric Name" in head:
        # --page details: a row a metric, the value in "Metric Value" (in the unit of "Metric Unit")
        metric_col, unit_col, time_col = head.index("Metric Name"), head.index("Metric Unit"), head.index("Metric Value")
        scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}
        wanted = lambda r: r[metric_col] == "gpu__time_duration.sum"
        unit = lambda r: scale.get(r[unit_col], 1)
    else:
        # --page raw: a row a kernel, a column a metric (after a row of units)
        time_col = head.index("gpu__time_duration.sum")
        wanted = lambda r: True
        unit = lambda r: 1
    kernels = []
    for r in rows[1:]:
        if not wanted(r):
            continue
        try:
            ns = float(r[time_col].replace(",", "")) * unit(r)
        except ValueError:
            continue  # the units row
        kernels.append((r[name_col].split("(")[0], ns, r[grid_col]))
    starts = [i for i, (n, _, _) in enumerate(kernels) if n.startswith("embed_")]
    if len(starts) < (1 if whole_run else 2):
        sys.exit(f"{path}: fewer than two forwards among {len(kernels)} kernels")
    if whole_run:
        step = kernels[starts[0]:]
        what = f"{len(starts)} forwards"
    else:
        step = kernels[starts[-2]:starts[-1]]
        what = "one forward"
    total = sum(ns for _, ns, _ in step)
    print(f"{what}: {len(step)} kernels, {total / 1e3:.1f} µs of kernel time")
    table("kernel", [(n, ns) for n, ns, _ in step], total)
    table("matmul grid", [(f"{n} {g}", ns) for n, ns, g in step if "matmul" in n], total)


def table(what, items, total):
    by = defaultdict(lambda: [0, 0.0])
    for n, ns in items:
        by[n][0] += 1
        by[n][1] += ns
    print(f"{what:48} {'launches':>8} {'µs':>10} {'share':>6} {'µs each':>8}")
    for n, (c, ns) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"{n:48} {c:8d} {ns / 1e3:10.1f} {ns / total:6.1%} {ns / c / 1e3:8.2f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--all":
        main(sys.argv[2], whole_run=True)
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
