#!/usr/bin/env bash
# Logits read by the GPU straight into the engine's page-locked buffer (HostFloat32) against the
# staged read (the pinned stage, then a copy on the CPU), in one call of the GPU machine, from the
# repository root, with the test binary built beforehand here:
#
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/cuda.test ./cuda   # here
#   OUT=/tmp/out bash tools/bench/hostbuf.sh                              # there, bin/ carried
#
# Stages (about 2.5 minutes), logged to $OUT/log.txt: make_8b.py in the background while the
# tests of the direct reads and the engine's bits run; then BenchmarkEight's 1, 32 and 64 streams
# with the direct read (the default) and ",staged", on one load of the checkpoint.
set -u
OUT=${OUT:-/tmp/tfd-hostbuf}
M=${TFD_BENCH_DIR:-/tmp/q8b}
BIN=${BIN:-./bin/cuda.test}
L=$OUT/log.txt
mkdir -p "$OUT"
stage() { echo "=== $* ($(date +%T))" | tee -a "$L"; }

stage "make_8b in the background; tests"
(timeout 100 python3 tools/bench/make_8b.py --out "$M" >"$OUT/make_8b.txt" 2>&1; echo "make_8b: exit $?" >>"$OUT/make_8b.txt") &
maker=$!
timeout 90 "$BIN" -test.v -test.timeout 85s \
	-test.run '^TestReadsIntoHostBuffers$|^TestHostBuffersKeepEngineBits$|^TestGraphsKeepBits$|^TestEngineMatchesOracle$|^TestSharedAndDraftedEqualSoloOnCUDA$|^TestPromptCacheOnCUDA$' 2>&1 |
	grep -v -e '^=== ' -e '--- PASS: .*/' -e 'ptxas' | tee -a "$L"
echo "tests: exit ${PIPESTATUS[0]}" | tee -a "$L"
wait "$maker"
tee -a "$L" <"$OUT/make_8b.txt"

stage "8B checkpoint: direct and staged reads"
TFD_BENCH_MODEL=$M timeout 80 "$BIN" -test.run '^$' -test.timeout 75s \
	-test.bench '^BenchmarkEight$/^streams=(1|32|64)(,staged)?$' -test.benchtime 1s 2>&1 | tee -a "$L"
stage done
