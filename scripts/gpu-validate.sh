#!/bin/bash
# gpu-validate.sh - run on a CUDA machine with a 'make dist' tarball and GSL etc. unpacked under $DEPS
# (Debian packages, dpkg -x): build, make check, calibrate (micro-benchmarks), then the device logs
# of real replays: the 3 validation workloads x 5 settings x 4 runs (V.*) and every captured trace
# x 5 settings (C.*). Back home: 'allocsim calibrate --from-log' over them gives the bundled model
# (traces/h200-latency-model.csv) and scripts/latency-validation.py the validation table.
# usage: DEPS=/path OUT=/out scripts/gpu-validate.sh TARBALL
set -u
tb=$1; : "${DEPS:?}" "${OUT:?}"
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
inc=$DEPS/usr/include; lib=$DEPS/usr/lib/x86_64-linux-gnu
rm -rf /tmp/av && mkdir -p /tmp/av && tar xzf "$tb" -C /tmp/av && cd /tmp/av/allocsim-* || exit 1
./configure -q GSL_CFLAGS="-I$inc" GSL_LIBS="-L$lib -lgsl -lgslcblas -lm" BSD_CFLAGS="-isystem $inc/bsd -DLIBBSD_OVERLAY -I$inc" \
	BSD_LIBS=" " ZLIB_CFLAGS="-I$inc" ZLIB_LIBS="-L$lib -lz" > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
make -s -j16 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
SECONDS=0
make -s -j8 check > $OUT/check.log 2>&1; grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' $OUT/check.log; grep -E '^(FAIL|ERROR)' $OUT/check.log | head
grep -E '^(SKIP)' $OUT/check.log | head -3
echo "check ${SECONDS}s"
L=/tmp/logs; mkdir -p $L
./allocsim calibrate -n 15 -o $L/micro-model.csv --raw $L/micro-raw.csv 2> $L/calibrate.err; echo "calibrate rc=$? ${SECONDS}s"
T=traces/pytorch-h200
for k in 1 2 3 4; do
for t in resnet50_train__default gpt2_train_varlen__default bert_infer_varlen__default; do
	for pc in "pytorch|" "pytorch|max_split_size_mb:128" "pytorch|expandable_segments:True" "passthrough|" "cuda-async|"; do
		p=${pc%%|*}; c=${pc#*|}; n=V.${t}.${p}.${c//:/=}.$k
		./allocsim replay --backend cuda -p $p -c "$c" --device-log $L/$n.dl.csv -o $L/$n.sum.csv $T/$t.pickle.gz || echo "FAIL $n"
	done
done
done
echo "validation replays ${SECONDS}s"
for f in traces/captured/*.pickle.gz $T/seed_example__default.pickle.gz; do
	t=$(basename $f .pickle.gz)
	for pc in "pytorch|" "pytorch|max_split_size_mb:128" "pytorch|expandable_segments:True" "passthrough|" "cuda-async|"; do
		p=${pc%%|*}; c=${pc#*|}; n=C.${t}.${p}.${c//:/=}.1
		./allocsim replay --backend cuda -p $p -c "$c" --device-log $L/$n.dl.csv -o $L/$n.sum.csv $f || echo "FAIL $n"
	done
done
echo "captured replays ${SECONDS}s"
mv $L /tmp/h200-device-logs && cd /tmp && (tar cf - h200-device-logs | xz -6 -T4 > $OUT/h200-device-logs.tar.xz ||
	tar czf $OUT/h200-device-logs.tgz h200-device-logs); ls -la $OUT
