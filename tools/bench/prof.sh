#!/usr/bin/env bash
# An ncu profile (the full set) of one kernel's launch in a benchmark, for each build: ncu's
# details page and its SASS source counters (each instruction's executions and stall samples),
# without loading a checkpoint when the benchmark needs none. On the GPU machine, bin/ carried:
#
#   OUT=/tmp/out KERNEL=attention_tile BENCH='PrefillAttention/rows=256,at=1792$' bash tools/bench/prof.sh a b
#
# profiles the second launch of a kernel matching KERNEL (the first is the benchmark's warm-up)
# in bin/a.test.xz and bin/b.test.xz, writing $OUT/NAME-details.txt and $OUT/NAME-sass.csv.gz.
# ncu runs with --clock-control none, the clocks the kernels serve at. tools/bench/ncu_sass.py
# reads the SASS counters (--per FFMA --loops 8: stall reasons, opcode mix, loops).
set -u
OUT=${OUT:-/tmp/tfd-prof}
KERNEL=${KERNEL:?a regular expression of kernel names}
BENCH=${BENCH:?a -test.bench pattern}
mkdir -p "$OUT"
for x in "$@"; do
	xz -dc "bin/$x.test.xz" >"/tmp/$x.test" && chmod +x "/tmp/$x.test"
	timeout 200 ncu --clock-control none -k "regex:$KERNEL" --launch-skip 1 --launch-count 1 --set full \
		--import-source no -f -o "/tmp/$x" "/tmp/$x.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime 1x \
		>"/tmp/$x-ncu.log" 2>&1
	tail -2 "/tmp/$x-ncu.log"
	ncu -i "/tmp/$x.ncu-rep" --page details >"$OUT/$x-details.txt" 2>&1
	ncu -i "/tmp/$x.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/$x-sass.csv.gz"
done
