#!/usr/bin/env bash
# One run of every number in docs/performance.md, on the GPU machine, from the repository root,
# with bin/cuda.test built beforehand (make test-cuda: the GPU machine has no Go); BIN names
# another test binary.
#
#   OUT=/tmp/out bash tools/bench/run.sh
#
# Stages, each bounded by timeout so that a late failure keeps the earlier numbers, in the order
# of what matters most, inside the GPU machine's 10 minutes a call: the CUDA tests (graphs
# included) while make_8b.py writes the 8B checkpoint; the 8B benchmarks; the PyTorch peer; the
# bundled model's benchmarks and the matmul kernels; the first token after 10 s idle, tick off
# and on; replies served by the scheduler on the 8B, greedy and sampled (BenchmarkServed: what
# `tfd bench` measures, which the GPU machine cannot run from the tfd binary); then the 8B's
# decode, 8 and 64 streams and prefill again under ALT (the other matmul path: TFD_CUDA_MMA=0
# while the tensor cores are the default), named alt/… in the log; last, an ncu profile of one
# decode step, summed by tools/bench/ncu_step.py into the log (ncu64 and ncuprefill, the same for
# a step of 64 streams and for the prefill, only when STAGES names them; and without,
# BenchmarkStepWithout and BenchmarkPrefillWithout: a one-row step, and the 4,096-token prefill,
# without each kind of kernel, an upper bound on fusing it and where the prefill's time goes).
# Everything goes to $OUT/log.txt; $OUT/results.json gathers the numbers, written again after
# each stage that adds some, so that a call cut short keeps what it measured.
#
# STAGES names the stages to run (default: all of them, in this order): tests eight peer bundled
# idle served alt ncu. A short device budget can run a part, STAGES='eight peer' for the 8B
# against the peer (about 100 s); the checkpoint is written whenever a stage needs it. The tenth
# session's run of 'tests eight peer bundled idle' took 240 s.
set -u
STAGES=${STAGES:-tests eight peer bundled idle served alt ncu}
want() { [[ " $STAGES " == *" $1 "* ]]; }
OUT=${OUT:-/tmp/tfd-bench}
M=${TFD_BENCH_DIR:-/tmp/q8b}
BIN=${BIN:-./bin/cuda.test}
ALT=${ALT:-TFD_CUDA_MMA=0} # the CUDA cores; the tensor cores are the default
L=$OUT/log.txt
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
stage() { echo "=== $* ($(date +%T))" | tee -a "$L"; }

stage machine
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
	nproc; free -g | head -2; df -h "$(dirname "$M")" | tail -1; uname -r
	python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} 2>&1 | tee -a "$L"

collect() { python3 tools/bench/collect.py "$L" "$OUT/peer.json" >"$OUT/results.json"; }

maker=
if want eight || want peer || want served || want alt || want without || want ncu || want ncu64 || want ncuprefill; then
	(timeout 120 python3 tools/bench/make_8b.py --out "$M" >"$OUT/make_8b.txt" 2>&1; echo "make_8b: exit $?" >>"$OUT/make_8b.txt") &
	maker=$!
fi
if want tests; then
	stage "make_8b in the background; CUDA tests"
	timeout 300 "$BIN" -test.v -test.run . -test.timeout 295s 2>&1 | grep -v 'ptxas info' | tee -a "$L"
fi
if want tests && ! grep -q -- '--- PASS: TestGraphsKeepBits' "$L"; then
	# Measure without graphs rather than not at all; the log says why.
	echo "TestGraphsKeepBits did not pass: the benchmarks below run with TFD_CUDA_GRAPHS=0" | tee -a "$L"
	export TFD_CUDA_GRAPHS=0
fi
if [ -n "$maker" ]; then
	wait "$maker"
	tee -a "$L" <"$OUT/make_8b.txt"
fi

if want eight; then
	stage "8B checkpoint"
	TFD_BENCH_MODEL=$M timeout 150 "$BIN" -test.v -test.run '^$' -test.bench 'Eight$' -test.benchtime 1s -test.timeout 145s 2>&1 | tee -a "$L"
	collect
fi

if want peer; then
	stage "PyTorch peer"
	timeout 120 python3 tools/bench/peer.py --model "$M" --skip-hf --json "$OUT/peer.json" 2>&1 | tee -a "$L"
	collect
fi

if want bundled; then
	stage "bundled model and bandwidth"
	timeout 50 "$BIN" -test.run '^$' -test.bench 'Decode|Streams|Prefill|Launch|MatVec|MatMul' -test.benchtime 0.5s 2>&1 | tee -a "$L"
	collect
fi

if want idle; then
	stage "first token after 10 s idle, tick off and on"
	# One process each, so that a slow first one cannot leave the second unmeasured.
	for tick in off on; do
		TFD_IDLE_SECONDS=10 timeout 60 "$BIN" -test.run '^$' -test.bench "FirstTokenAfterIdle/tick=$tick\$" -test.benchtime 2x 2>&1 | tee -a "$L"
		collect
	done
fi

if want served; then
	stage "replies served on the 8B checkpoint, greedy and sampled"
	TFD_BENCH_MODEL=$M timeout 150 "$BIN" -test.v -test.run '^$' -test.bench 'Served' -test.benchtime 1x -test.timeout 145s 2>&1 | grep -v '^=== RUN' | tee -a "$L"
	collect
fi

if want alt; then
	stage "8B checkpoint under $ALT"
	# Named apart (alt/…) so that collect.py keeps both.
	env $ALT TFD_BENCH_MODEL=$M timeout 50 "$BIN" -test.run '^$' -test.bench 'Eight/(decode|streams=(8|64)|prefill=4096)$' -test.benchtime 0.5s -test.timeout 45s 2>&1 |
		sed 's/^Benchmark/alt\/Benchmark/' | tee -a "$L"
	collect
fi

if want without; then
	stage "where a one-row 8B step's time goes: each kind of kernel left out (wrong outputs, upper bounds)"
	TFD_BENCH_MODEL=$M timeout 100 "$BIN" -test.run '^$' -test.bench 'StepWithout' -test.benchtime 1s -test.timeout 95s 2>&1 | tee -a "$L"
	stage "where the 8B prefill's time goes: each kind of kernel left out"
	TFD_BENCH_MODEL=$M timeout 100 "$BIN" -test.run '^$' -test.bench 'PrefillWithout' -test.benchtime 3x -test.timeout 95s 2>&1 | tee -a "$L"
fi

# profile NAME BENCH LAUNCHES SECONDS [--all] times every kernel of BENCH (one iteration) alone,
# graphs off, and sums the last whole forward (--all: every forward) by tools/bench/ncu_step.py,
# which says what the sum means, into the log; the CSV is kept, gzipped, as ncu-NAME.csv.gz.
profile() {
	if ! command -v ncu >/dev/null; then
		echo "no ncu on the PATH" | tee -a "$L"
		return
	fi
	TFD_CUDA_GRAPHS=0 TFD_BENCH_MODEL=$M timeout "$4" ncu --clock-control none --csv --page raw \
		--metrics gpu__time_duration.sum --launch-count "$3" "$BIN" -test.run '^$' \
		-test.bench "^BenchmarkEight\$/^$2\$" -test.benchtime 1x >"$OUT/ncu-$1.csv" 2>"$OUT/ncu-$1.err"
	python3 tools/bench/ncu_step.py ${5:-} "$OUT/ncu-$1.csv" 2>&1 | tee -a "$L"
	gzip -f "$OUT/ncu-$1.csv"
}
# Last, so that a slow profiler costs no figure above. ncu64 and ncuprefill are not in the default
# STAGES (they would not fit one call with the rest): run them in a call of their own.
if want ncu; then
	stage "ncu: where one 8B decode step's kernel time goes"
	profile decode decode 2200 90
fi
if want ncu64; then
	stage "ncu64: where one 8B step of 64 streams with device picks goes"
	profile 64 'streams=64,picks' 2600 120
fi
if want ncuprefill; then
	stage "ncuprefill: where the 8B prefill of 4,096 tokens goes (16 forwards of 256 rows)"
	profile prefill 'prefill=4096' 12000 240 --all
fi
stage done
