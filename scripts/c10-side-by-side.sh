#!/bin/bash
# c10-side-by-side.sh - issue 15's side-by-side on a CUDA machine with torch installed: every trace of
# a directory of PyTorch snapshots (with its ground-truth.csv: recorded settings and capacity) replayed
# (1) through PyTorch's own CUDA caching allocator, libc10_cuda of the installed torch, by
#     scripts/c10_replay.cpp (built here with g++ against torch's headers and libraries), warm: one
#     pass from an empty cache (whose statistics are the cross-check), then $PASSES timed passes;
# (2) through allocsim's simulation of the same trace with the pytorch policy, the same settings and
#     capacity, from its binary form (.asbin): `allocsim sweep -j 1 --timing` with $RUNS identical
#     runs over the trace decoded once; each run's wall_seconds covers one simulation of the decoded
#     events (policy and simulated device created, every event replayed, summary computed), not the
#     decode;
# and writes one CSV row per trace with both costs per event (medians), their ratio and both sides'
# statistics (doc/real-gpu.md, "PyTorch's own allocator side by side").
# usage: [PY=python3] [PASSES=11] [RUNS=21] [ALLOCSIM=./allocsim] [C10_REPLAY=prebuilt] [C10_TIMEOUT=120] scripts/c10-side-by-side.sh TRACE_DIR OUT.csv
#        [PY=python3] scripts/c10-side-by-side.sh --build-only BINARY     (build c10_replay alone)
set -u
D=$1; O=${2:?usage: c10-side-by-side.sh TRACE_DIR OUT.csv}
A=${ALLOCSIM:-./allocsim}; PY=${PY:-python3}; PASSES=${PASSES:-11}; RUNS=${RUNS:-21}
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
if [ -n "${C10_REPLAY:-}" ]; then # a c10_replay built before
	cp "$C10_REPLAY" "$W/c10_replay" || exit 66
else
	# torch's headers and libraries, and the CUDA runtime its libc10_cuda was linked with
	eval "$("$PY" - <<-'EOF'
	import torch, torch.utils.cpp_extension as ce
	print("TINC='%s'" % " ".join("-I" + p for p in ce.include_paths()))
	print("TLIB='%s'" % ce.library_paths()[0])
	print("TVER='%s'" % torch.__version__)
	print("TABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
	EOF
	)" || { echo "c10-side-by-side: torch not found by $PY" >&2; exit 66; }
	cudart=$(ldd "$TLIB/libc10_cuda.so" | awk '/libcudart/ { print $3; exit }')
	cuinc=
	for d in ${CUDA_HOME:-/usr/local/cuda}/include /usr/local/cuda-13*/include "$(dirname "$(dirname "$cudart")")/include"; do
		[ -f "$d/cuda_runtime_api.h" ] && { cuinc=$d; break; }
	done
	[ -n "$cudart" ] && [ -n "$cuinc" ] || { echo "c10-side-by-side: CUDA runtime ($cudart) or its headers ($cuinc) not found" >&2; exit 66; }
	echo "torch $TVER, $TLIB, cudart $cudart, headers $cuinc" >&2
	built=
	for std in c++17 c++20; do
		if g++ -O2 -std=$std -D_GLIBCXX_USE_CXX11_ABI=$TABI $TINC -I"$cuinc" "$here/c10_replay.cpp" -o "$W/c10_replay" \
			-L"$TLIB" -Wl,-rpath,"$TLIB" -lc10_cuda -lc10 "$cudart" -Wl,-rpath,"$(dirname "$cudart")" 2> "$W/build.log"; then
			built=$std; break
		fi
	done
	[ -n "$built" ] || { echo "c10-side-by-side: c10_replay does not build:" >&2; head -40 "$W/build.log" >&2; exit 70; }
	echo "c10_replay built with -std=$built" >&2
fi
if [ "$D" = --build-only ]; then
	cp "$W/c10_replay" "$O"; exit
fi
{
tail -n +2 "$D/ground-truth.csv" | "$PY" -c 'import csv, sys
for r in csv.reader(sys.stdin): print("%s|%s|%s" % (r[0], r[3], r[5]))'
} > "$W/list"
while IFS='|' read -r name conf cap; do
	t=$D/$name.pickle.gz
	[ -f "$t" ] || continue
	"$A" convert "$t" -o "$W/$name.trace" && "$A" convert "$t" -o "$W/$name.asbin" || exit 65
	capargs=(); [ -n "$cap" ] && capargs=(--capacity "$cap")
	PYTORCH_CUDA_ALLOC_CONF="$conf" timeout "${C10_TIMEOUT:-120}" "$W/c10_replay" --passes "$PASSES" --name "$name" "${capargs[@]}" \
		--header "$W/$name.trace" > "$W/$name.c10.csv" || { echo "c10_replay failed on $name" >&2; rm -f "$W/$name.c10.csv"; continue; }
	vals=$(for i in $(seq "$RUNS"); do printf '%s,' "${cap:-none}"; done)
	"$A" sweep -j 1 --timing -p pytorch -c "$conf" -t "$W/$name.asbin" --param capacity="${vals%,}" -o "$W/$name.sim.csv" || exit 70
	echo "$name $(tail -1 "$W/$name.c10.csv" | cut -d, -f20-25)" >&2
done < "$W/list"
"$PY" - "$W" "$O" <<'EOF'
import csv, glob, os, statistics, sys
w, out = sys.argv[1], sys.argv[2]
rows = []
for f in sorted(glob.glob(os.path.join(w, "*.c10.csv"))):
    name = os.path.basename(f)[:-len(".c10.csv")]
    c = list(csv.DictReader(open(f)))[0]
    s = list(csv.DictReader(open(os.path.join(w, name + ".sim.csv"))))
    ns = sorted(float(r["wall_seconds"]) * 1e9 / int(r["events"]) for r in s)
    a = s[0]
    med = statistics.median(ns)
    row = {"trace": name, "conf": c["conf"], "capacity_bytes": c["capacity_bytes"] if c["capacity_bytes"] != "0" else "",
           "events": c["events"], "c10_warm_ns_per_event": c["c10_warm_ns_per_event_median"],
           "c10_warm_min": c["c10_warm_ns_per_event_min"], "c10_warm_max": c["c10_warm_ns_per_event_max"],
           "c10_passes": c["passes"], "c10_cold_ns_per_event": c["c10_cold_ns_per_event"],
           "allocsim_sim_ns_per_event": "%.1f" % med, "allocsim_min": "%.1f" % ns[0], "allocsim_max": "%.1f" % ns[-1],
           "allocsim_runs": len(ns), "ratio_c10_over_allocsim": "%.2f" % (float(c["c10_warm_ns_per_event_median"]) / med)}
    same = True
    for k in ("peak_reserved_bytes", "peak_allocated_bytes", "peak_requested_bytes", "final_reserved_bytes",
              "final_allocated_bytes", "num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms"):
        row["c10_" + k], row["allocsim_" + k] = c["c10_" + k], a[k]
        same = same and c["c10_" + k] == a[k]
    row["stats_equal"] = "yes" if same else "no"
    for k in ("e_maybe", "e_maybe_empty_cache", "restarts", "c10_warm_last_pass_device_alloc",
              "c10_warm_last_pass_device_free", "c10_warm_last_pass_ooms", "device_total_bytes"):
        row[k] = c[k]
    rows.append(row)
if not rows:
    sys.exit("c10-side-by-side: no trace replayed")
with open(out, "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    wr.writeheader()
    wr.writerows(rows)
print("%d traces, statistics equal on %d" % (len(rows), sum(r["stats_equal"] == "yes" for r in rows)), file=sys.stderr)
EOF
