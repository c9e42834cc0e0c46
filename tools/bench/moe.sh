#!/usr/bin/env bash
# The Qwen3-30B-A3B-shaped measurement of docs/performance.md (issue 17), on the GPU machine,
# from the repository root, with bin/cuda.test built beforehand (make test-cuda; -ldflags='-s -w'
# keeps it small enough to carry); BIN names another test binary.
#
#   OUT=/tmp/out bash tools/bench/moe.sh
#
# Stages, each bounded by timeout so that a late failure keeps the earlier numbers: where the
# 61.1 GB checkpoint fits (below); make_30b_a3b.py writes it; BenchmarkMoE (tfd: decode, and 1, 8
# and 64 streams); BenchmarkExpertMatMul and BenchmarkMatVec (where tfd's time goes); the PyTorch
# peer at the same stream counts (no prefill, no transformers' generate); collect.py. Nothing else runs beside them. Everything goes to $OUT/log.txt,
# $OUT/results.json gathers the numbers, and the last line is the table.
#
# Where: TFD_BENCH_DIR if set; else /dev/shm, grown to hold it if it is smaller (tmpfs: the
# files are the only copy in host memory, and tfd maps them rather than reading them into a
# second one); else /tmp on the disk if that has room.
#
# TINY=1 runs the same stages on make_30b_a3b.py's tiny shape in /tmp, the peer on the CPU: a
# check of the script anywhere (tfd's stage skips without a GPU). PYTHON names the interpreter.
set -u
OUT=${OUT:-/tmp/tfd-moe}
BIN=${BIN:-./bin/cuda.test}
D=$(dirname "$0")
PY=${PYTHON:-python3}
TINY=${TINY:-}
L=$OUT/log.txt
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
stage() { echo "=== $* ($(date +%T))" | tee -a "$L"; }
avail() { df -B1 --output=avail "$1" 2>/dev/null | tail -1 | tr -d ' '; }
NEED=64000000000 # 61.1 GB and a margin

stage machine
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
	nproc; free -g | head -2; df -h / /tmp /dev/shm; uname -r
	$PY -c 'import torch; print("torch", torch.__version__)'
} 2>&1 | tee -a "$L"

stage "where the checkpoint goes"
M=${TFD_BENCH_DIR:-}
if [ -n "$TINY" ]; then
	M=${M:-/tmp/q30b-tiny}
elif [ -z "$M" ]; then
	if [ "$(avail /dev/shm)" -lt $NEED ]; then
		mount -o remount,size=72G /dev/shm 2>&1 | tee -a "$L"
	fi
	if [ "$(avail /dev/shm)" -ge $NEED ]; then
		M=/dev/shm/q30b
	elif [ "$(avail /tmp)" -ge $NEED ]; then
		M=/tmp/q30b
	else
		echo "no room for 61.1 GB: /dev/shm has $(avail /dev/shm) bytes, /tmp $(avail /tmp)" | tee -a "$L"
		exit 1
	fi
fi
df -h "$(dirname "$M")" | tee -a "$L"
echo "checkpoint: $M" | tee -a "$L"

stage make_30b_a3b
timeout 150 $PY "$D/make_30b_a3b.py" --out "$M" ${TINY:+--tiny} 2>&1 | tee -a "$L"
free -g | head -2 | tee -a "$L"

stage "tfd: BenchmarkMoE"
TFD_BENCH_MODEL=$M timeout 150 "$BIN" -test.v -test.run '^$' -test.bench MoE -test.benchtime 1s -test.timeout 145s 2>&1 |
	grep -v 'ptxas info' | tee -a "$L"

stage "tfd: one layer's expert matmuls, and the matvec bandwidth"
timeout 60 "$BIN" -test.run '^$' -test.bench '^Benchmark(ExpertMatMul|MatVec)$' -test.benchtime 1s -test.timeout 55s 2>&1 |
	grep -v 'ptxas info' | tee -a "$L"

stage "PyTorch peer"
timeout 130 $PY "$D/peer.py" --model "$M" --json "$OUT/peer.json" --streams 1,8,64 --prefill 0 --skip-hf \
	${TINY:+--device cpu} 2>&1 | tee -a "$L"

stage collect
$PY "$D/collect.py" "$L" "$OUT/peer.json" >"$OUT/results.json"
$PY - "$OUT/results.json" <<'EOF' | tee -a "$L"
import json, sys
r = json.load(open(sys.argv[1]))
go, peer = r["go"], r["peer"].get("static_graph_decode", {})
num = lambda x, f: format(x, f) if x else "-"
cells = []
for name, b in [("decode", 1), ("streams=1", 1), ("streams=8", 8), ("streams=64", 64)]:
    t = go.get("BenchmarkMoE/" + name, {}).get("tok/s")
    p = peer.get(str(b), {}).get("tok_s")
    cells.append(f"{name}: tfd {num(t, '.1f')} peer {num(p, '.1f')} ({num(t and p and t / p, '.3f')})")
print("table (tok/s, tfd/peer):", "; ".join(cells))
EOF
stage done
