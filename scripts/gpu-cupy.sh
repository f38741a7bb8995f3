#!/bin/bash
# gpu-cupy.sh - the real CuPy pool's ground truth, on a CUDA machine with CuPy: build allocsim from
# a 'make dist' tarball (Debian packages of GSL etc. unpacked under $DEPS), replay every native trace
# in $TRACES through scripts/replay_cupy.py (fresh process each, address logs), again with
# --perturb on a few, the probes in traces/cupy-probes, a few traces under set_limit, and allocsim -p
# cupy --backend cuda.
# usage: DEPS=/path OUT=/out TRACES=/dir [PY=python3] scripts/gpu-cupy.sh TARBALL
set -u
tb=$1; : "${DEPS:?}" "${OUT:?}" "${TRACES:?}"
PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
inc=$DEPS/usr/include; lib=$DEPS/usr/lib/x86_64-linux-gnu
SECONDS=0
{
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
$PY -c 'import sys, cupy; print("python", sys.version.split()[0], "cupy", cupy.__version__, "cuda", cupy.cuda.runtime.runtimeGetVersion()); print("memGetInfo", cupy.cuda.runtime.memGetInfo())'
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
P=$here/../traces/cupy-probes
G=/tmp/cupy-gt; rm -rf $G; mkdir -p $G/ptr $G/ptr-probes
# 1. the ground truth: every trace, each in a fresh process
$PY $here/replay_cupy.py --ptr-log $G/ptr -o $OUT/cupy-ground-truth.csv $TRACES/*.trace.gz 2> $G/replay.err
echo "replay rc=$? ${SECONDS}s"; tail -3 $G/replay.err
# 2. the same under a different layout of the interpreter's small objects
$PY $here/replay_cupy.py --perturb 1000 -o $G/perturbed.csv $TRACES/resnet50_train__default.trace.gz \
	$TRACES/gpt2_train_varlen__default.trace.gz $TRACES/bert_infer_varlen__default.trace.gz \
	$TRACES/bert_infer_varlen__p110_default.trace.gz $TRACES/gpt2_train_varlen__p110_default.trace.gz \
	$TRACES/seed_example__default.trace.gz 2>> $G/replay.err
echo "perturbed rc=$? ${SECONDS}s"
# 3. probes (limit: set_limit(3072); device_oom: the whole GPU)
$PY $here/replay_cupy.py --ptr-log $G/ptr-probes -o $G/probes.csv $(ls $P/*.trace | grep -v /limit.trace) 2>> $G/replay.err
echo "probes rc=$? ${SECONDS}s"
$PY $here/replay_cupy.py --ptr-log $G/ptr-probes --limit 3072 -o $G/probes-limit.csv $P/limit.trace 2>> $G/replay.err
echo "probe limit rc=$? ${SECONDS}s"
{ cat $G/probes.csv; tail -n +2 $G/probes-limit.csv; } > $OUT/cupy-probes.csv
{ cat $G/perturbed.csv; } > $OUT/cupy-ground-truth-perturbed.csv
# 4. real traces under set_limit (free_all_blocks and OOM on real data), some again perturbed
mkdir -p $G/ptr-limit
echo "limit,perturb,$(head -1 $G/probes.csv)" > $OUT/cupy-limit.csv
for x in "gpt2_train_varlen__default 20000000000 0" "gpt2_train_varlen__default 18000000000 0" \
	"bert_infer_varlen__default 3000000000 0" "bert_infer_varlen__default 2000000000 0" \
	"resnet50_train__default 6000000000 0" "resnet50_train__default 6000000000 1000" "resnet50_train__default 6000000000 3000" \
	"gpt2_train_varlen__default 18000000000 1000"; do
	set -- $x
	pl=; [ $3 = 0 ] && mkdir -p $G/ptr-limit/$2 && pl="--ptr-log $G/ptr-limit/$2"
	r=$($PY $here/replay_cupy.py $pl --limit $2 --perturb $3 $TRACES/$1.trace.gz 2>> $G/replay.err | tail -1)
	echo "$2,$3,$r" >> $OUT/cupy-limit.csv
done
echo "limit ${SECONDS}s"
# 5. allocsim with the real GPU
rm -rf /tmp/ac && mkdir -p /tmp/ac && tar xzf "$tb" -C /tmp/ac && cd /tmp/ac/allocsim-* || exit 1
./configure GSL_CFLAGS="-I$inc" GSL_LIBS="-L$lib -lgsl -lgslcblas -lm" BSD_CFLAGS="-isystem $inc/bsd -DLIBBSD_OVERLAY -I$inc" \
	BSD_LIBS=" " ZLIB_CFLAGS="-I$inc" ZLIB_LIBS="-L$lib -lz" > $G/configure.log 2>&1 || { tail -20 $G/configure.log; }
grep -i "cuda" $G/configure.log | tail -3
make -s -j16 > $G/build.log 2>&1 || tail -20 $G/build.log
echo "build ${SECONDS}s"
for t in resnet50_train__default seed_example__default bert_infer_varlen__p110_default; do
	./allocsim replay --backend cuda -p cupy --check traces/pytorch-h200/$t.pickle.gz 2>&1 | tail -1
	./allocsim replay -p cupy traces/pytorch-h200/$t.pickle.gz | tail -1
done > $OUT/cupy-backend-cuda.csv 2>&1
./allocsim replay --backend cuda -p cupy --capacity 139GiB $P/device_oom.trace >> $OUT/cupy-backend-cuda.csv 2>&1
./allocsim replay --backend cuda -p cupy -c limit:3072 $P/limit.trace >> $OUT/cupy-backend-cuda.csv 2>&1
echo "backend cuda ${SECONDS}s"
cut -d, -f1,10,9,13,16 $OUT/cupy-backend-cuda.csv
(cd $G && tar czf $OUT/cupy-logs.tar.gz ptr ptr-probes ptr-limit replay.err configure.log build.log)
ls -la $OUT; echo "done ${SECONDS}s"
