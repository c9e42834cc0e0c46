#!/usr/bin/env bash
# The lone stream's figures of docs/performance.md ("A lone stream: code, prose and an edit"), on
# the GPU machine, from the repository root, with bin/cuda.test built beforehand (make test-cuda;
# -ldflags='-s -w' keeps it small enough to carry). BASE, if set, is a cuda.test built from
# another commit, whose greedy chains are timed beside this one's; TEST, if set, is the test
# binary to run instead of bin/cuda.test.
#
#   OUT=/tmp/out bash tools/bench/lone.sh
#
# Stages, each bounded by timeout so that a late failure keeps the earlier numbers: the CUDA tests
# of the chain, graph and scheduler paths while make_8b.py writes the 8B checkpoint (with a random
# MTP head, --mtp); greedy chains (and BASE's); BenchmarkLoneDraftsOnCUDA, greedy and sampled;
# BenchmarkLoneOnCUDA on the bundled model; the same on the 8B checkpoint, on the prompts
# PROMPTS8B names (default code: all three take about three times as long). All of it goes to
# $OUT/log.txt.
set -u
OUT=${OUT:-/tmp/tfd-lone}
M=${TFD_BENCH_DIR:-/tmp/q8b}
T=${TEST:-./bin/cuda.test}
L=$OUT/log.txt
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
stage() { echo "=== $* ($(date +%T))" | tee -a "$L"; }

stage machine
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
	nproc; free -g | head -2; uname -r
} 2>&1 | tee -a "$L"

stage "make_8b in the background; CUDA tests"
(timeout 120 python3 tools/bench/make_8b.py --mtp --out "$M" >"$OUT/make_8b.txt" 2>&1; echo "make_8b: exit $?" >>"$OUT/make_8b.txt") &
maker=$!
timeout 110 "$T" -test.v -test.run 'Chain|Lone|Graph|Flushed|Scheduler|Shared|EngineMatchesOracle' -test.timeout 105s 2>&1 |
	grep -v 'ptxas info' >>"$L"
grep -E '^(--- FAIL|FAIL|ok|PASS|panic)|Newcomer|TestGraphsKeepBits' "$L" | tail -20
wait $maker
tee -a "$L" <"$OUT/make_8b.txt"

chains() {
	timeout 20 "$1" -test.run '^$' -test.bench 'GreedyChain' -test.benchtime 1s 2>&1 | tee -a "$L"
	timeout 20 "$1" -test.run '^$' -test.bench 'LoneDraftsOnCUDA/greedy' -test.benchtime 1x 2>&1 | tee -a "$L"
}
stage "greedy chains"
chains "$T"
if [ -n "${BASE:-}" ]; then
	stage "greedy chains of $BASE"
	chains "$BASE"
fi

stage "lone drafts, greedy and sampled"
timeout 60 "$T" -test.run '^$' -test.bench 'LoneDraftsOnCUDA' -test.benchtime 1x 2>&1 | tee -a "$L"

stage "lone stream, bundled model"
timeout 60 "$T" -test.run '^$' -test.bench 'LoneOnCUDA' -test.benchtime 1x -test.timeout 55s 2>&1 | tee -a "$L"

stage "lone stream, 8B checkpoint"
TFD_BENCH_MODEL=$M TFD_BENCH_PROMPTS=${PROMPTS8B:-code} timeout 240 "$T" -test.run '^$' -test.bench 'LoneOnCUDA' -test.benchtime 1x -test.timeout 235s 2>&1 | tee -a "$L"
stage done
