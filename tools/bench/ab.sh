#!/usr/bin/env bash
# Builds of the CUDA test binary side by side in one call of the GPU machine: the same benchmarks
# from each, interleaved (a, b, …, a, b, …), so that the machine's drift between calls (10-15% on a
# kernel) cannot pass for a difference. The binaries travel compressed, bin/NAME.test.xz, one per
# build: two at 6.4 MB each and the tree do not fit the 64 MiB a call carries. With the tree at
# about 56 MB, four builds of about 2.3 MB compressed fit and five do not (checked 2026-12-04);
# bin/ must hold nothing else when it is carried (`make run`'s bin/tfd, 58 MB, alone passes it).
#
#   # here, on each commit (a: the baseline, b, c, …: the changes):
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/cuda.test ./cuda && xz -T0 -9 -c bin/cuda.test >bin/a.test.xz
#   # there, from the repository root, bin/ carried:
#   OUT=/tmp/out KERNELS='TileSizes/.*/rows=(32|64|256)/S=4$' EIGHT='^(streams=(32|64)|prefill=4096)$' bash tools/bench/ab.sh
#   # one build, dependent launch as it is and for every forward:
#   OUT=/tmp/out EIGHT='^streams=(32|64)$' ENVS='; TFD_CUDA_PDL_ROWS=0 TFD_CUDA_SERIAL_HEAVY=1' bash tools/bench/ab.sh
#
# KERNELS is a -test.bench pattern run without the checkpoint; EIGHT a pattern of BenchmarkEight's
# sub-benchmarks on the 8B checkpoint, which make_8b.py writes meanwhile (either may be empty).
# ROUNDS (2 unless set) is how many times each benchmark runs on each build.
# ENVS, environments separated by ';' (each 'VAR=value …', no value holding '/', ',' or ' '), runs
# the benchmarks of each build under each environment in turn, as the run BUILD[VAR=value,…]
# (a run of the build as it is where an environment is empty): one build under two settings of a
# knob, or each build under each. The first run is the baseline either way.
# TESTS, a -test.run pattern, runs on every build but the first, or on those TESTED names (the
# whole binary, TESTS='.', takes about 170 s on the H200, within its 300 s; on several builds, a
# call's 600 s go fast: TESTED=d tests only the last of a, b, c, d). The log keeps the top-level
# results, the binary's exit status and a tally of tests and subtests passed, failed and skipped;
# $OUT/NAME-tests.txt.gz the whole -test.v output.
# Each line is logged to $OUT/log.txt as RUN/… (NAME/… without ENVS); last, a line a benchmark
# sums its rounds: each run's mean time an op, and the first run's mean over it (above 1: faster
# than the first).
set -u
OUT=${OUT:-/tmp/tfd-ab}
M=${TFD_BENCH_DIR:-/tmp/q8b}
KERNELS=${KERNELS:-}
EIGHT=${EIGHT:-}
TESTS=${TESTS:-}
ENVS=${ENVS:-}
TESTED=${TESTED:-}
ROUNDS=${ROUNDS:-2}
L=$OUT/log.txt
D=$(mktemp -d)
mkdir -p "$OUT"
stage() { echo "=== $* ($(date +%T))" | tee -a "$L"; }
# summarize LOG BUILD… prints, for each benchmark the log has lines of (BUILD/Benchmark…, as the
# stages below write them), each build's mean ns/op over its rounds and the first build's mean
# over it.
summarize() {
	local log=$1
	shift
	awk -v builds="$*" '
		$4 == "ns/op" && index($1, "/Benchmark") > 0 {
			b = substr($1, 1, index($1, "/") - 1)
			name = substr($1, length(b) + 2)
			sum[name, b] += $3
			n[name, b]++
			if (!(name in seen)) {
				seen[name] = 1
				order[++k] = name
			}
		}
		END {
			nb = split(builds, bs, " ")
			for (i = 1; i <= k; i++) {
				name = order[i]
				line = name ":"
				base = n[name, bs[1]] ? sum[name, bs[1]] / n[name, bs[1]] : 0
				for (j = 1; j <= nb; j++) {
					if (!n[name, bs[j]]) continue
					m = sum[name, bs[j]] / n[name, bs[j]]
					line = line sprintf(" %s %.4g ms", bs[j], m / 1e6)
					if (base) line = line sprintf(" (%.3f)", base / m)
				}
				print line
			}
		}' "$log"
}

builds=()
for f in bin/*.test.xz; do
	x=$(basename "$f" .test.xz)
	xz -dc "$f" >"$D/$x.test" && chmod +x "$D/$x.test" && builds+=("$x")
done
# The runs: each build under each environment of ENVS, named BUILD[VAR=value,…].
IFS=';' read -ra envs <<<"$ENVS"
[ ${#envs[@]} -gt 0 ] || envs=("")
runs=()
for x in "${builds[@]}"; do
	for e in "${envs[@]}"; do
		read -ra words <<<"$e"
		e=${words[*]}
		runs+=("$x${e:+[${e// /,}]}")
	done
done
if [ ${#runs[@]} -lt 2 ]; then
	echo "want two or more runs: bin/NAME.test.xz found: ${builds[*]:-none}; ENVS: ${ENVS:-none}" | tee -a "$L"
	exit 1
fi
# bench RUN ARGS… runs RUN's build under its environment with ARGS, each Benchmark line logged as
# RUN/….
bench() {
	local run=$1 e=
	shift
	[[ $run == *"["* ]] && e=${run#*[} && e=${e%]} && e=${e//,/ }
	# 120 s: with 60, a first run that loads the checkpoint printed nothing (twenty-sixth
	# session), most likely cut by it.
	env $e timeout 120 "$D/${run%%[*}.test" "$@" 2>&1 | grep '^Benchmark' | sed "s|^|$run/|" | tee -a "$L"
}
if [ -n "$EIGHT" ]; then
	(timeout 100 python3 tools/bench/make_8b.py --out "$M" >"$OUT/make_8b.txt" 2>&1; echo "make_8b: exit $?" >>"$OUT/make_8b.txt") &
	maker=$!
fi
if [ -n "$TESTS" ]; then
	[ -n "$TESTED" ] || TESTED="${builds[*]:1}"
	for x in $TESTED; do
		stage "tests on $x: $TESTS"
		timeout 300 "$D/$x.test" -test.v -test.run "$TESTS" -test.timeout 295s >"$D/$x-tests.txt" 2>&1
		echo "exit $?" >>"$D/$x-tests.txt"
		grep -e '^--- ' -e '^ok' -e '^exit' -e FAIL -e panic "$D/$x-tests.txt" | sed "s/^/$x: /" | tee -a "$L"
		# The tally counts subtests too (indented --- lines).
		for v in PASS FAIL SKIP; do echo "$(grep -c -e "^ *--- $v" "$D/$x-tests.txt") ${v,,}"; done |
			paste -sd ' ' | sed "s/^/$x: tests and subtests: /" | tee -a "$L"
		gzip -c "$D/$x-tests.txt" >"$OUT/$x-tests.txt.gz"
	done
fi
if [ -n "$KERNELS" ]; then
	stage "kernels: $KERNELS"
	for round in $(seq "$ROUNDS"); do
		for run in "${runs[@]}"; do
			bench "$run" -test.run '^$' -test.bench "$KERNELS" -test.benchtime 100x -test.timeout 55s
		done
	done
fi
if [ -n "$EIGHT" ]; then
	wait "$maker"
	tee -a "$L" <"$OUT/make_8b.txt"
	stage "8B checkpoint: $EIGHT"
	for round in $(seq "$ROUNDS"); do
		for run in "${runs[@]}"; do
			TFD_BENCH_MODEL=$M bench "$run" -test.run '^$' -test.timeout 115s \
				-test.bench "^BenchmarkEight\$/$EIGHT" -test.benchtime 1s
		done
	done
fi
rm -rf "$D"
stage "summary: each run's mean time an op, and the first run's over it (above 1: faster)"
summarize "$L" "${runs[@]}" | tee -a "$L"
stage done
