#!/bin/bash
# gpu-validate.sh - run on a CUDA machine with a 'make dist' tarball and GSL etc. unpacked under $DEPS
# (Debian packages, dpkg -x): build, make check (unless SKIP_CHECK=1), calibrate (micro-benchmarks),
# then the device logs of real replays, in $ROUNDS rounds (default 8). Each round replays the 3
# validation workloads x 5 settings once (V.*.<round>) and a share of the calibration set, every
# captured trace x 5 settings (C.*), so that both sets sample the machine over the same minutes
# (device time on a shared host drifts by 10-20% from one minute to the next). runs.csv records when
# each replay started and ended. Back home: 'allocsim calibrate --from-log' over the C.* logs gives a
# model of this machine fitted on other workloads than the validation ones, and
# scripts/latency-validation.py --logs the validation table.
# usage: DEPS=/path OUT=/out [ROUNDS=8] [SKIP_CHECK=1] scripts/gpu-validate.sh TARBALL
set -u
tb=$1; : "${DEPS:?}" "${OUT:?}"
R=${ROUNDS:-8}
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
inc=$DEPS/usr/include; lib=$DEPS/usr/lib/x86_64-linux-gnu
rm -rf /tmp/av && mkdir -p /tmp/av && tar xzf "$tb" -C /tmp/av && cd /tmp/av/allocsim-* || exit 1
./configure -q GSL_CFLAGS="-I$inc" GSL_LIBS="-L$lib -lgsl -lgslcblas -lm" BSD_CFLAGS="-isystem $inc/bsd -DLIBBSD_OVERLAY -I$inc" \
	BSD_LIBS=" " ZLIB_CFLAGS="-I$inc" ZLIB_LIBS="-L$lib -lz" > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
make -s -j16 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
SECONDS=0
if [ "${SKIP_CHECK:-0}" != 1 ]; then
	make -s -j8 check > $OUT/check.log 2>&1; grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' $OUT/check.log; grep -E '^(FAIL|ERROR)' $OUT/check.log | head
	grep -E '^(SKIP)' $OUT/check.log | head -3
	echo "check ${SECONDS}s"
fi
L=/tmp/h200-device-logs; rm -rf $L; mkdir -p $L
./allocsim calibrate -n 15 -o $L/micro-model.csv --raw $L/micro-raw.csv 2> $L/calibrate.err; echo "calibrate rc=$? ${SECONDS}s"
T=traces/pytorch-h200
SETTINGS=("pytorch|" "pytorch|max_split_size_mb:128" "pytorch|expandable_segments:True" "passthrough|" "cuda-async|")
echo "name,start_s,end_s" > $L/runs.csv
one() { # name policy config trace
	local s=$(date +%s.%N)
	./allocsim replay --backend cuda -p $2 -c "$3" --device-log $L/$1.dl.csv -o $L/$1.sum.csv $4 || echo "FAIL $1"
	echo "$1,$s,$(date +%s.%N)" >> $L/runs.csv
}
cal=()
for f in traces/captured/*.pickle.gz $T/seed_example__default.pickle.gz; do
	for pc in "${SETTINGS[@]}"; do cal+=("$f|$pc"); done
done
for k in $(seq 1 $R); do
	for t in resnet50_train__default gpt2_train_varlen__default bert_infer_varlen__default; do
		for pc in "${SETTINGS[@]}"; do
			p=${pc%%|*}; c=${pc#*|}
			one V.${t}.${p}.${c//:/=}.$k $p "$c" $T/$t.pickle.gz
		done
	done
	for i in "${!cal[@]}"; do
		[ $((i % R)) -eq $((k - 1)) ] || continue
		e=${cal[$i]}; f=${e%%|*}; pc=${e#*|}; p=${pc%%|*}; c=${pc#*|}
		one C.$(basename $f .pickle.gz).${p}.${c//:/=}.1 $p "$c" $f
	done
	echo "round $k ${SECONDS}s"
done
cd /tmp && (tar cf - h200-device-logs | xz -6 -T8 > $OUT/h200-device-logs.tar.xz ||
	tar czf $OUT/h200-device-logs.tgz h200-device-logs); ls -la $OUT
