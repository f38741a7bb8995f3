#!/bin/bash
# gpu-freeat.sh - the real CuPy pool and JAX's BFC fed native traces (the captured ones with explicit
# empty_cache calls and several streams), each with its cross-stream frees at the request and at the
# completion (replay_cupy.py / replay_jax.py --free-at), on a CUDA machine with CuPy and JAX.
# Writes $OUT/cupy-{requested,completed}.csv, $OUT/jax-{requested,completed}.csv, env.txt, log.txt;
# traces/cupy-h200-freeat.csv and traces/jax-h200-freeat.csv are the two pairs joined.
# usage: OUT=/out TRACES=/dir [PY=python3] scripts/gpu-freeat.sh   (about 4 minutes on one H200)
set -u
: "${OUT:?}" "${TRACES:?}"
PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
SECONDS=0
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
  $PY -c 'import sys, cupy; print("python", sys.version.split()[0], "cupy", cupy.__version__, "cuda", cupy.cuda.runtime.runtimeGetVersion())'
  $PY -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices()[0].device_kind)'
} > "$OUT/env.txt" 2>&1
T=$(ls "$TRACES"/*.trace.gz)
L=$(mktemp -d)
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# JAX: five processes at a time per mode, both modes at once; CuPy meanwhile, one trace at a time
( timeout 270 $PY "$here/replay_jax.py" -j 5 --budget 190 --free-at requested -o "$OUT/jax-requested.csv" $T > "$L/jr.log" 2>&1 ) &
J1=$!
( timeout 270 $PY "$here/replay_jax.py" -j 5 --budget 190 --free-at completed -o "$OUT/jax-completed.csv" $T > "$L/jc.log" 2>&1 ) &
J2=$!
timeout 120 $PY "$here/replay_cupy.py" --free-at requested -o "$OUT/cupy-requested.csv" $T > "$L/cr.log" 2>&1
echo "cupy requested rc=$? ${SECONDS}s" >> "$L/all.log"
timeout 120 $PY "$here/replay_cupy.py" --free-at completed -o "$OUT/cupy-completed.csv" $T > "$L/cc.log" 2>&1
echo "cupy completed rc=$? ${SECONDS}s" >> "$L/all.log"
wait $J1; echo "jax requested rc=$? ${SECONDS}s" >> "$L/all.log"
wait $J2; echo "jax completed rc=$? ${SECONDS}s" >> "$L/all.log"
for f in all cr cc jr jc; do echo "== $f"; cat "$L/$f.log"; done > "$OUT/log.txt" 2>&1
tail -c 4000 "$OUT/log.txt"; wc -l "$OUT"/*.csv; cat "$OUT/env.txt"
