#!/bin/sh
# cupy.sh - the cupy policy against the real CuPy 14.2 pool on an H200 (traces/cupy-h200.csv, written
# by scripts/replay_cupy.py through scripts/gpu-cupy.sh; doc/policies.md): every trace's peak
# total_bytes() = peak_reserved_bytes, peak used_bytes() = peak_allocated_bytes, cudaMalloc calls =
# num_device_alloc, and the final total and used bytes; the probes (traces/cupy-h200-probes.csv) the
# same; and replay_cupy.py itself, over the Python port of the pool (tests/fake_cupy), agrees with the
# policy (its event mapping is the one the policy is measured by).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
GT="$srcdir/traces/cupy-h200.csv"
PR="$srcdir/traces/cupy-h200-probes.csv"
stat_of() { awk -F, -v k="$2" '$1 == k { print $2 }' "$1"; }
# sim TRACE [replay options]: "peak_total,peak_used,cudamalloc,final_total,final_used" from the policy,
# the first three from the summary CSV, the used bytes from the pool's own statistics (--stats)
sim() {
	t=$1; shift
	"$A" replay -p cupy --no-timing "$@" --stats "$TMP/stats.csv" -o "$TMP/sum.csv" "$t" || { echo "replay failed"; return; }
	slurp s "$TMP/sum.csv"
	echo "$(col "$s" peak_reserved_bytes),$(stat_of "$TMP/stats.csv" peak_used_bytes),$(col "$s" num_device_alloc),$(col "$s" final_reserved_bytes),$(stat_of "$TMP/stats.csv" used_bytes)"
}
[ "$(head -1 "$GT" | cut -d, -f1-6)" = "trace,peak_total_bytes,peak_used_bytes,num_cudamalloc,final_total,final_used" ] ||
	{ echo "Bail out! $GT: not the ground truth's header"; exit 1; }
exact=0 summary=0 bundled=0
while IFS=, read -r name pt pu nm ft fu rest; do
	[ "$name" = trace ] && continue
	f="$T/$name.pickle.gz"; [ -f "$f" ] || f="$srcdir/traces/captured/$name.pickle.gz"
	# recorded with the frees at their completion (replay_cupy.py's default; the policy's is the request)
	got=$(sim "$f" --free-at completed)
	if [ "$got" = "$pt,$pu,$nm,$ft,$fu" ]; then exact=$((exact + 1)); else echo "# $name: real $pt,$pu,$nm,$ft,$fu simulated $got"; fi
	case $f in "$T"/*)
		bundled=$((bundled + 1))
		slurp s "$TMP/sum.csv"
		[ "$(col "$s" peak_reserved_bytes),$(col "$s" peak_allocated_bytes),$(col "$s" num_device_alloc)" = "$pt,$pu,$nm" ] && summary=$((summary + 1));;
	esac
done < "$GT"
is "$exact/$(tail -n +2 "$GT" | wc -l)" 45/45 "all five numbers equal the real pool's on every trace measured (24 bundled, 21 captured)"
is "$bundled,$summary" "24,24" "on the 24 bundled traces: peak_reserved_bytes, peak_allocated_bytes and num_device_alloc are the real peak total_bytes(), peak used_bytes() and cudaMalloc count"
# the probes: limit replayed with set_limit(3072), device_oom on the whole GPU (139 GiB here)
while IFS=, read -r name pt pu nm ft fu nf oo rest; do
	[ "$name" = trace ] && continue
	o=; [ "$name" = limit ] && o="-c limit:3072"; [ "$name" = device_oom ] && o="--capacity 139GiB"
	got=$(sim "$srcdir/traces/cupy-probes/$name.trace" $o)
	is "$got,$(col "$(cat "$TMP/sum.csv")" num_ooms)" "$pt,$pu,$nm,$ft,$fu,$oo" "probe $name: peak/final total and used bytes, cudaMalloc calls, OOMs as measured"
done < "$PR"
# under set_limit (traces/cupy-h200-limit.csv): exact where the real pool's choice between equal free
# chunks (by the address of a Python object) does not matter; where it does, the real pool itself
# changes with the interpreter's heap layout (--perturb), and the simulation stays within those runs
lim_real() { awk -F, -v l="$2" -v t="$1" -v p="$3" '$1 == l && $3 == t && $2 == p { print $4 "," $5 "," $6 "," $7 "," $8 "," $10 }' "$srcdir/traces/cupy-h200-limit.csv"; }
lim_sim() { got=$(sim "$T/$1.pickle.gz" -c "limit:$2"); echo "$got,$(col "$(cat "$TMP/sum.csv")" num_ooms)"; }
for x in "gpt2_train_varlen__default 20000000000" "bert_infer_varlen__default 3000000000" "bert_infer_varlen__default 2000000000"; do
	set -- $x
	is "$(lim_sim $1 $2)" "$(lim_real $1 $2 0)" "set_limit($2) on $1: exact (peak/final total and used, cudaMalloc calls, OOMs)"
done
is "$(lim_real resnet50_train__default 6000000000 0) $(lim_real resnet50_train__default 6000000000 1000) $(lim_sim resnet50_train__default 6000000000)" \
	"5998721024,5830342656,463,5976439296,68157440,0 5987774976,5830342656,467,5982861824,68157440,0 5988890624,5830342656,467,5966608896,68157440,0" \
	"set_limit(6e9) on resnet50: the real pool's numbers change with the interpreter's heap (--perturb 1000); the simulation's peak lies between the two real runs', its cudaMalloc count is the perturbed run's"
is "$(lim_real gpt2_train_varlen__default 18000000000 0) $(lim_sim gpt2_train_varlen__default 18000000000)" \
	"17981349888,15532911616,404,17823424512,68157440,1 17981379584,15532911616,404,17823454208,68157440,1" \
	"set_limit(18e9) on gpt2: cudaMalloc calls and the OOM exact, peak total 29696 bytes (0.0002%) above the real pool's"
if "${PYTHON:-python3}" -c 'import array, gzip' 2>/dev/null; then
	"$A" convert "$T/resnet50_train__default.pickle.gz" -o "$TMP/r50.trace.gz"
	tar xzf "$srcdir/traces/cupy-h200-logs.tar.gz" -C "$TMP" ptr/resnet50_train__default.ptr.gz
	run "${PYTHON:-python3}" "$srcdir/scripts/cupy_ties.py" "$TMP/r50.trace.gz" "$TMP/ptr/resnet50_train__default.ptr.gz"
	is "$st $out" "0 ties=1036 oldest=865 newest=161 age_between=10 lowest_addr=157 highest_addr=794 addr_between=85 ooms=0" \
		"cupy_ties.py: the real pool took the oldest of equal free chunks in 865 of 1036 ties on resnet50"
fi
# an inferred empty_cache (`e maybe`) is PyTorch's own release, never a free_all_blocks of the program,
# even when the recorded settings equal -c and the run is followed by a phase marker, not an allocation
printf '#allocsim-trace 1\n#allocator_settings: tie:oldest\na 1 1024 0\na 2 1024 0\nf 1\ne maybe\nX 0x7f0000000000 2097152 0\np step\na 3 1024 0\nf 2\nf 3\n' > "$TMP/maybe.trace"
is "$(sim "$TMP/maybe.trace" -c tie:oldest),$(col "$(cat "$TMP/sum.csv")" num_device_free)" "2048,2048,2,2048,0,0" \
	"e maybe before a phase marker under the recorded settings: no free_all_blocks (the freed chunk is reused, no cudaFree)"
# replay_cupy.py over the Python port of the pool: the same numbers as the policy
if "${PYTHON:-python3}" -c 'import array, gzip' 2>/dev/null; then
	for name in seed_example__default bert_infer_varlen__p110_default multistream__default emptycache__default; do
		f="$T/$name.pickle.gz"; [ -f "$f" ] || f="$srcdir/traces/captured/$name.pickle.gz"
		"$A" convert "$f" -o "$TMP/$name.trace.gz"
		run env FAKE_CUPY_TIE=oldest PYTHONPATH="$srcdir/tests/fake_cupy" "${PYTHON:-python3}" "$srcdir/scripts/replay_cupy.py" "$TMP/$name.trace.gz"
		is "$(printf '%s\n' "$out" | tail -1 | cut -d, -f2-6)" "$(sim "$f" --free-at completed)" "replay_cupy.py over the port of the pool = the policy: $name"
	done
	# the free at the request: the policy's default, replay_cupy.py --free-at requested
	for name in multistream__default streams__s2__unlimited; do
		f="$srcdir/traces/captured/$name.pickle.gz"
		"$A" convert "$f" -o "$TMP/$name.trace.gz"
		run env FAKE_CUPY_TIE=oldest PYTHONPATH="$srcdir/tests/fake_cupy" "${PYTHON:-python3}" "$srcdir/scripts/replay_cupy.py" --free-at requested "$TMP/$name.trace.gz"
		r=$(printf '%s\n' "$out" | tail -1 | cut -d, -f2-6)
		is "$r" "$(sim "$f")" "replay_cupy.py --free-at requested over the port of the pool = the policy's default: $name"
		c=$(sim "$f" --free-at completed)
		ok "$([ -n "$r" ] && [ "$r" != "$c" ]; echo $?)" "... which differs from the free at the completion on $name ($r, $c)"
	done
	run env FAKE_CUPY_TIE=oldest PYTHONPATH="$srcdir/tests/fake_cupy" "${PYTHON:-python3}" "$srcdir/scripts/replay_cupy.py" "$TMP/maybe.trace"
	is "$(printf '%s\n' "$out" | tail -1 | cut -d, -f2-6)" "$(sim "$TMP/maybe.trace" -c tie:oldest)" "replay_cupy.py over the port of the pool = the policy: e maybe"
	run "${PYTHON:-python3}" "$srcdir/scripts/replay_cupy.py" "$TMP/none.trace"; s1=$st; e1=$errout
	run "$A" replay "$TMP/none.trace"
	is "$s1:$e1" "$st:replay_cupy.py: $TMP/none.trace: no such file" "replay_cupy.py: a missing trace is exit status 66, as for allocsim"
else
	echo "# no python3: replay_cupy.py not tested"
fi
finish
