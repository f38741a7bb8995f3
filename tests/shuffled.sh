#!/bin/sh
# shuffled.sh - --backend shuffled: the real backend's address map (src/device/device_map.c) over a
# simulated driver that hands out other addresses in another order, as the GPU's driver does. Every
# policy must decide as in simulation: the whole summary row, the warnings and the device log the same
# (issue 31). With ALLOCSIM_RAW_ADDRESSES=1 the policy sees the driver's addresses, as --backend cuda
# did before: the replays below that then differ show that the shuffled addresses matter.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
C="$srcdir/traces/captured"
# same NAME ARGS...: the replay's stdout and stderr on the shuffled driver equal the simulation's, which
# succeeds and writes a summary
same() { name=$1; shift
	"$A" replay --no-timing "$@" >"$TMP/s.out" 2>"$TMP/s.err"; s1=$?
	"$A" replay --backend shuffled --no-timing "$@" >"$TMP/d.out" 2>"$TMP/d.err"; s2=$?
	slurp so "$TMP/s.out"; slurp se "$TMP/s.err"; slurp do "$TMP/d.out"; slurp de "$TMP/d.err"
	[ "$s1" = 0 ] && [ -n "$so" ] || so="(the simulation failed: status $s1)"
	is "$s2|$do|$de" "0|$so|$se" "$name"; }
for t in "$T"/*.pickle.gz "$C"/*.pickle.gz; do
	b=$(basename "$t" .pickle.gz)
	same "pytorch, recorded settings: shuffled driver = simulation ($b)" -p pytorch -c recorded "$t"
done
for t in "$T"/*__default.pickle.gz "$T"/*__p110_default.pickle.gz "$C"/*__default.pickle.gz "$C/multistream__p110_default.pickle.gz"; do
	b=$(basename "$t" .pickle.gz)
	for p in bestfit passthrough cuda-async cupy bfc rmm-pool rmm-arena rmm-binning optimal buddy stitch pytorch-pinned 'pytorch>passthrough'; do
		same "$p: shuffled driver = simulation ($b)" -p "$p" -c '' "$t"
	done
	same "pytorch, expandable segments: shuffled driver = simulation ($b)" -p pytorch -c expandable_segments:True "$t"
	same "pytorch, max_split_size_mb:128: shuffled driver = simulation ($b)" -p pytorch -c max_split_size_mb:128 "$t"
done
# under a capacity: refusals and the fallbacks after them
for t in "$T/gpt2_train_varlen__p110_gc06.pickle.gz" "$C/emptycache__p110_gc05.pickle.gz"; do
	b=$(basename "$t" .pickle.gz)
	for pc in "pytorch|recorded" "pytorch|expandable_segments:True" "stitch|" "bfc|" "cupy|" "rmm-pool|" "cuda-async|"; do
		same "${pc%%|*} ${pc#*|} --capacity 8GiB: shuffled driver = simulation ($b)" -p "${pc%%|*}" -c "${pc#*|}" --capacity 8GiB "$t"
	done
done
# the memory-limited recordings under their own limit (the meta's fraction of the H200's memory), where
# the simulation reproduces PyTorch's peak reserved bytes and cudaMalloc count exactly
for t in "$T"/*__p110_*.pickle.gz "$C"/*__p110_*.pickle.gz; do
	f=$(sed -n 's/.*"fraction": *"\([0-9.]*\)".*/\1/p' "${t%.pickle.gz}.meta.json")
	same "pytorch, recorded settings and fraction $f: shuffled driver = simulation ($(basename "$t" .pickle.gz))" \
		-p pytorch -c recorded --fraction "$f" --device-total 150109880320 "$t"
done
# the device log: the same calls, sizes, addresses (the simulation's), results and modelled times
for pc in "pytorch|expandable_segments:True" "stitch|" "pytorch|max_split_size_mb:128"; do
	t="$T/gpt2_train_varlen__default.pickle.gz"
	rm -f "$TMP/l1.csv" "$TMP/l2.csv"
	"$A" replay --no-timing -p "${pc%%|*}" -c "${pc#*|}" --device-log "$TMP/l1.csv" -o /dev/null "$t"
	"$A" replay --backend shuffled --no-timing -p "${pc%%|*}" -c "${pc#*|}" --device-log "$TMP/l2.csv" -o /dev/null "$t"
	cmp -s "$TMP/l1.csv" "$TMP/l2.csv"; ok $? "${pc%%|*} ${pc#*|}: the shuffled driver's device log is the simulation's, byte for byte"
done
same "--check on the shuffled driver (pytorch, expandable segments)" --check -p pytorch -c expandable_segments:True "$T/bert_infer_varlen__default.pickle.gz"
same "--addresses model on the shuffled driver" --addresses model -p pytorch -c recorded "$T/resnet50_train__default.pickle.gz"
# the raw driver addresses change decisions: the map above is what makes the rows equal
raw() { ALLOCSIM_RAW_ADDRESSES=1 "$A" replay --backend shuffled --no-timing "$@" 2>/dev/null; }
sim() { "$A" replay --no-timing "$@" 2>/dev/null; }
for pct in "pytorch|recorded|$T/resnet50_train__default.pickle.gz|peak_allocated_bytes" "pytorch|recorded|$T/gpt2_train_varlen__ms128.pickle.gz|peak_allocated_bytes" \
	"buddy||$T/gpt2_train_varlen__rp4.pickle.gz|peak_reserved_bytes" \
	"buddy||$C/mempool__default.pickle.gz|frag_external_max" \
	"bestfit||$T/gpt2_train_varlen__p110_default.pickle.gz|peak_reserved_bytes" \
	"pytorch|recorded --fraction 0.123779 --device-total 150109880320|$T/gpt2_train_varlen__p110_gc06.pickle.gz|peak_reserved_bytes"; do
	IFS='|' read -r p c t k <<-X
	$pct
	X
	set -- ${c#* }; [ "$c" = "${c#* }" ] && set --; c=${c%% *}
	r=$(col "$(raw -p "$p" -c "$c" "$@" "$t")" "$k"); s=$(col "$(sim -p "$p" -c "$c" "$@" "$t")" "$k")
	ok "$(! no_evidence "$r" && ! no_evidence "$s" && [ "$r" != "$s" ]; echo $?)" "$p on raw shuffled addresses decides otherwise: $k $r, simulated $s ($(basename "$t" .pickle.gz))"
done
run "$A" replay --backend nosuch "$T/resnet50_train__default.pickle.gz"
is "$st" 64 "an unknown backend is a usage error"
contains "$errout" "sim, cuda or shuffled"; ok $? "... naming the three"
echo "1..$n"
[ "$failed" = 0 ]
