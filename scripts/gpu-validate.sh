#!/bin/bash
# gpu-validate.sh - run on a CUDA machine from an unpacked 'make dist' tree, with GSL etc. unpacked
# under $DEPS (Debian packages, dpkg -x): build, calibrate, make check, and the sim-vs-real table.
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
./allocsim calibrate -n 15 -o $OUT/h200-latency-model.csv --raw $OUT/calibrate-raw.csv 2>&1 | tail -3
cp $OUT/h200-latency-model.csv traces/h200-latency-model.csv
make -s -j8 check > $OUT/check.log 2>&1; grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' $OUT/check.log; grep -E '^(FAIL|ERROR)' $OUT/check.log | head
T=traces/pytorch-h200; M=$OUT/h200-latency-model.csv
echo "trace,policy,config,real_peak_reserved,sim_peak_reserved,real_device_calls,sim_device_calls,real_device_time_us,model_device_time_us,real_alloc_ns_p50,model_alloc_ns_p50" > $OUT/validation.csv
for t in resnet50_train__default gpt2_train_varlen__default bert_infer_varlen__default; do
	for pc in "pytorch|" "pytorch|max_split_size_mb:128" "pytorch|expandable_segments:True" "passthrough|" "cuda-async|"; do
		p=${pc%%|*}; c=${pc#*|}
		r=$(./allocsim replay --backend cuda -p $p -c "$c" $T/$t.pickle.gz | tail -1)
		s=$(./allocsim replay -p $p -c "$c" --no-timing --latency-model $M $T/$t.pickle.gz | tail -1)
		python3 - "$r" "$s" "$t" "$p" "$c" >> $OUT/validation.csv <<'PY'
import csv, sys
h = "trace,policy,config,capacity_bytes,events".split(",")
r, s = (next(csv.reader([x])) for x in sys.argv[1:3])
import subprocess
hdr = subprocess.run(["./allocsim", "replay", "--no-timing", "-p", "passthrough", "traces/pytorch-h200/seed_example__default.pickle.gz"], capture_output=True, text=True).stdout.splitlines()[0].split(",")
R, S = dict(zip(hdr, r)), dict(zip(hdr, s))
print(",".join([sys.argv[3], sys.argv[4], sys.argv[5], R["peak_reserved_bytes"], S["peak_reserved_bytes"], R["device_calls"], S["device_calls"], R["device_time_us"], S["device_time_us"], R["alloc_ns_p50"], S["alloc_ns_p50"]]))
PY
	done
done
cat $OUT/validation.csv
./allocsim transfer -n 10 -o $OUT/transfer.csv && cat $OUT/transfer.csv
