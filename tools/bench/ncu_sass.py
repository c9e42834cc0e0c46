#!/usr/bin/env python3
"""Where one kernel's warps stall, instruction by instruction, from ncu's SASS view.

ncu samples each warp's program counter and why it could not issue; its source page prints the
samples a SASS instruction, split by stall reason. This prints the instructions that hold the most
samples, with their main reasons and the instructions just before them (a stall is usually on an
operand that an earlier instruction produces):

  ncu --clock-control none -k regex:matmul_wg1 -c 1 --section SourceCounters \\
      --page source --print-source sass --csv \\
      ./cuda.test -test.run '^$' -test.bench 'TileSizes/gateup/rows=64/S=64,quarters' \\
      -test.benchtime 3x > sass.csv
  python3 tools/bench/ncu_sass.py sass.csv              # the 12 busiest instructions
  python3 tools/bench/ncu_sass.py --top 5 --before 8 sass.csv
  python3 tools/bench/ncu_sass.py --per HGMMA --top 0 sass.csv   # the whole kernel's mix
  python3 tools/bench/ncu_sass.py --loops 8 --top 0 sass.csv.gz  # its loops (prof.sh's CSV)

--per OP adds a summary: the stall reasons' shares of all samples, and by opcode the share of
samples and the instructions executed for every 4 executions of OP (for matmul_wg: a chunk's
four HGMMA of a SIMD group).

--loops N adds the N loops that hold the most samples, told apart by how many times their
instructions ran (the instructions of one loop body run equally often): each with its
executions, its instructions, its share of the samples and its opcode mix, so that a loop's
overhead beside its FMAs shows (the twenty-first session read attention_tile_H this way).

The fourteenth session found this way that matmul_wg's loads of weights went through moves that
waited for them (docs/performance.md, "Weights that always load").
"""
import argparse
import csv
import gzip

SAMPLES = "Warp Stall Sampling (All Samples)"


def number(s):
    try:
        return float(s.replace(",", "")) if s else 0.0
    except ValueError:
        return 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", help="ncu --page source --print-source sass --csv output (or it gzipped)")
    p.add_argument("--top", type=int, default=12, help="instructions to print, most samples first")
    p.add_argument("--before", type=int, default=0, help="instructions before each to print too")
    p.add_argument("--per", metavar="OP", help="summarize stalls and the opcode mix per 4 executions of OP")
    p.add_argument("--loops", type=int, default=0, metavar="N", help="the N loops with the most samples, by executions")
    a = p.parse_args()

    with (gzip.open(a.csv, "rt", newline="") if a.csv.endswith(".gz") else open(a.csv, newline="")) as f:
        rows = list(csv.reader(f))  # ncu's own log lines parse as rows of one or two cells
    kernel = next((r[1] for r in rows if len(r) > 1 and r[0] == "Kernel Name"), "?")
    at = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if at is None:
        raise SystemExit(f"{a.csv}: no SASS table (want ncu --page source --print-source sass --csv)")
    head = rows[at]
    col = {name: i for i, name in enumerate(head)}
    code = [r for r in rows[at + 1:] if len(r) == len(head)]
    reasons = [n for n in head if n.startswith("stall_") and not n.endswith("(Not Issued)")]
    total = sum(number(r[col[SAMPLES]]) for r in code)
    print(f"{kernel}: {len(code)} instructions, {total:.0f} samples")
    if total == 0:
        return

    def line(i, mark):
        r = code[i]
        share = 100 * number(r[col[SAMPLES]]) / total
        execs = r[col["Instructions Executed"]] if "Instructions Executed" in col else ""
        return f"{mark} {r[0][-6:]} {share:5.1f}% {execs:>9} {r[1]}"

    if a.per:
        summarize(code, col, reasons, total, a.per)
    if a.loops:
        loops(code, col, total, a.loops)

    order = sorted(range(len(code)), key=lambda i: -number(code[i][col[SAMPLES]]))
    for i in order[: a.top]:
        for j in range(max(0, i - a.before), i):
            print(line(j, " "))
        main_reasons = sorted(((number(code[i][col[n]]), n[6:]) for n in reasons), reverse=True)[:3]
        why = ", ".join(f"{n} {v:.0f}" for v, n in main_reasons if v > 0)
        print(line(i, ">"), f"  [{why}]")
        if a.before:
            print()


def opcode(r):
    """The instruction's opcode without its modifiers, past a predicate."""
    words = r[1].split()
    return (words[1] if words and words[0].startswith("@") and len(words) > 1 else words[0] if words else "?").split(".")[0]


def loops(code, col, total, n):
    """Prints the n loops with the most samples: instructions grouped by their executions."""
    bodies = {}
    for r in code:
        bodies.setdefault(number(r[col["Instructions Executed"]]), []).append(r)
    print("loops: executions, instructions, share of samples, opcodes")
    for runs, body in sorted(bodies.items(), key=lambda x: -sum(number(r[col[SAMPLES]]) for r in x[1]))[:n]:
        mix = {}
        for r in body:
            mix[opcode(r)] = mix.get(opcode(r), 0) + 1
        share = 100 * sum(number(r[col[SAMPLES]]) for r in body) / total
        top = " ".join(f"{op} {k}" for op, k in sorted(mix.items(), key=lambda x: -x[1])[:10])
        print(f"  {runs:>11,.0f} {len(body):5d} {share:5.1f}%  {top}")


def summarize(code, col, reasons, total, per):
    """Prints the stall reasons' shares, and each opcode's samples and executions per 4 of per."""
    execs = lambda r: number(r[col["Instructions Executed"]])
    share = {n[6:]: sum(number(r[col[n]]) for r in code) for n in reasons}
    print("stalls:", ", ".join(f"{n} {100 * v / total:.1f}%" for n, v in sorted(share.items(), key=lambda x: -x[1])[:6]))
    ops = {}
    for r in code:
        op = opcode(r)
        s, e = ops.get(op, (0.0, 0.0))
        ops[op] = (s + number(r[col[SAMPLES]]), e + execs(r))
    anchor = ops.get(per, (0.0, 0.0))[1]
    if anchor == 0:
        print(f"no {per} executed")
        return
    print(f"instructions executed per 4 {per}: {4 * sum(e for _, e in ops.values()) / anchor:.1f}")
    for op, (s, e) in sorted(ops.items(), key=lambda x: -x[1][0])[:12]:
        print(f"  {op:<12} {100 * s / total:5.1f}% of samples  {4 * e / anchor:6.1f} per 4 {per}")


if __name__ == "__main__":
    main()
