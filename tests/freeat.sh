#!/bin/sh
# freeat.sh - the program's own calls and stream semantics for the other allocators (issue 31):
# --free-at requested|completed (when a cross-stream free reaches the policy), each policy's default,
# and what an explicit empty_cache() does by default (doc/policies.md, "The program's own calls").
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
# id 1 is freed while another stream still uses it (r), id 2 asked for before that use completes (f 1)
printf '#allocsim-trace 1\na 1 12582912 0\nr 1\na 2 12582912 0\nf 1\nf 2\n' > "$TMP/x.trace"
row() { "$A" replay --no-timing "$@" "$TMP/x.trace"; }
# peak_reserved_bytes,num_device_alloc,lower_bound_bytes
pk() { r=$(row "$@"); echo "$(col "$r" peak_reserved_bytes),$(col "$r" num_device_alloc),$(col "$r" lower_bound_bytes)"; }
is "$(pk -p cupy --free-at requested)" "12582912,1,12582912" "cupy --free-at requested: the chunk is back at the request, the second malloc reuses it (one cudaMalloc)"
is "$(pk -p cupy --free-at completed)" "25165824,2,25165824" "cupy --free-at completed: held until the completion, a second cudaMalloc"
is "$(pk -p cupy)" "$(pk -p cupy --free-at requested)" "cupy's default is the request (no record_stream in CuPy: the program drops the memory, stream ordering makes reuse safe)"
is "$(pk -p passthrough)" "12582912,2,12582912" "passthrough's default is the request (PyTorch without caching: cudaFree in the deleter, record_stream ignored)"
is "$(pk -p rmm-binning)" "12582912,2,12582912" "rmm-binning (no bins: straight upstream) frees at the request by default (RMM's deallocate is stream-ordered)"
is "$(pk -p rmm-binning --free-at completed)" "25165824,2,25165824" "rmm-binning --free-at completed holds it"
is "$(pk -p bfc --free-at requested) $(pk -p bfc)" "16777216,1,12582912 33554432,2,25165824" "bfc's default is the completion (PjRt frees a buffer used on another stream once that use is done)"
is "$(pk -p pytorch)" "25165824,2,25165824" "pytorch's default is the completion (record_stream's events)"
is "$(pk -p optimal --free-at requested)" "12582912,1,12582912" "optimal --free-at requested: the plan's lifetimes end at the request too"
is "$(pk -p optimal)" "25165824,1,25165824" "optimal's default is the completion"
# the default is what 'allocsim policies' lists as the property free_at_request
props() { "$A" policies | awk -v p="$1" '/^[a-z]/ { cur = $1 } cur == p && /properties:/ { print }'; }
ok "$(contains "$(props cupy)" free_at_request; echo $?)" "allocsim policies: cupy has the property free_at_request"
block() { "$A" policies | awk -v p="$1" '/^[a-z]/ { cur = $1 } cur == p && /answers:|properties:/ { print }'; }
b=$(block bfc); ok "$([ -n "$b" ] && ! contains "$b" free_at_request; echo $?)" "allocsim policies: bfc is listed without the property free_at_request"
# compare and sweep take the same option and give replay's rows
"$A" compare --free-at requested -p cupy,bfc,pytorch "$TMP/x.trace" -o "$TMP/c.csv"
is "$(tail -n +2 "$TMP/c.csv" | cut -d, -f2,10,13)" "cupy,12582912,1
bfc,16777216,1
pytorch,12582912,1" "compare --free-at requested: every policy frees at the request (pytorch as if record_stream had not been called)"
"$A" sweep -t "$TMP/x.trace" -p cupy --param tie=oldest,newest --free-at completed -o "$TMP/s.csv"
is "$(tail -n +2 "$TMP/s.csv" | wc -l),$(grep -c ',25165824,' "$TMP/s.csv")" "2,2" "sweep --free-at completed: both rows hold the block to its completion"
run "$A" sweep -t "$TMP/x.trace" -p cupy --param tie=oldest --free-at requested --resume -o "$TMP/s.csv"
is "$st:$errout" "64:allocsim: error: sweep: --free-at cannot be combined with --resume
Try 'allocsim sweep --help'." "sweep refuses --free-at with --resume (the rows on file do not say which was used)"
run "$A" compare -p cupy --free-at requested --resume -o "$TMP/c2.csv" "$TMP/x.trace"
is "$st:$errout" "64:allocsim: error: compare: --free-at cannot be combined with --resume
Try 'allocsim compare --help'." "compare refuses --free-at with --resume too"
run "$A" replay --free-at soon "$TMP/x.trace"
is "$st:$errout" "64:allocsim: error: replay: --free-at: requested or completed, not 'soon'
Try 'allocsim replay --help'." "replay --free-at with another word: usage error, exit 64"
run "$A" compare --free-at "" "$TMP/x.trace"
is "$st" 64 "compare --free-at '': usage error"
# the captured multi-stream traces: the two moments differ, and the engine's invariants hold under both
for t in multistream__default streams__s2__unlimited; do
	f="$srcdir/traces/captured/$t.pickle.gz"
	for p in cupy bfc rmm-pool bestfit stitch; do
		run "$A" replay -p $p --check --no-timing --free-at requested "$f"
		r1=$st; run "$A" replay -p $p --check --no-timing --free-at completed "$f"
		is "$r1,$st" "0,0" "$t: $p --check under both --free-at"
	done
done
# an explicit empty_cache() (a definite 'e'): what each policy's real user calls
printf '#allocsim-trace 1\na 1 3000000 0\nf 1\ne\n' > "$TMP/e.trace"
fin() { r=$("$A" replay --no-timing -p "$1" ${2:+-c "$2"} "$TMP/e.trace"); echo "$(col "$r" final_reserved_bytes),$(col "$r" num_device_free)"; }
is "$(fin cupy)" "0,1" "cupy: empty_cache is free_all_blocks() (the unsplit free chunk goes back)"
is "$(fin bfc)" "4194304,0" "bfc: JAX has no such call, the region stays (default empty_cache_releases:False)"
is "$(fin bfc empty_cache_releases:True)" "0,1" "bfc empty_cache_releases:True: the what-if release"
is "$(fin rmm-pool initial_pool_size:0)" "3000064,0" "rmm-pool: RMM has no such call (release() is protected), the pool stays"
is "$(fin rmm-pool initial_pool_size:0,empty_cache_releases:True)" "0,1" "rmm-pool empty_cache_releases:True: the what-if release"
is "$(fin rmm-arena arena_size:8MiB)" "8388608,0" "rmm-arena: the arena stays"
is "$(fin pytorch)" "0,1" "pytorch: torch.cuda.empty_cache() releases the free segment"
is "$(fin stitch)" "0,1" "stitch (GMLake is PyTorch's allocator): emptyCache releases the free segment"
# The real allocators on the H200 (scripts/gpu-freeat.sh, 2026-12-04: CuPy 14.2.0, JAX 0.11.2): every
# captured trace with explicit empty_cache calls or several streams, its cross-stream frees at the request
# and at the completion (replay_cupy.py / replay_jax.py --free-at), against -p cupy / -p bfc --free-at
stat_of() { awk -F, -v k="$2" '$1 == k { print $2 }' "$1"; }
C="$srcdir/traces/cupy-h200-freeat.csv"; J="$srcdir/traces/jax-h200-freeat.csv"
tr -d '\r' < "$J" > "$TMP/j.csv"   # (replay_jax.py's csv module ends lines with CRLF)
exact=0 total=0 differ=0
while IFS=, read -r name pt pu nm ft fu nf oo ne al fr cv py sec fa; do
	[ "$name" = trace ] && continue
	total=$((total + 1))
	"$A" replay -p cupy --free-at "$fa" --no-timing --stats "$TMP/cs.csv" -o "$TMP/c.csv" "$srcdir/traces/captured/$name.pickle.gz" || continue
	slurp r "$TMP/c.csv"
	got="$(col "$r" peak_reserved_bytes),$(stat_of "$TMP/cs.csv" peak_used_bytes),$(col "$r" num_device_alloc),$(col "$r" final_reserved_bytes),$(stat_of "$TMP/cs.csv" used_bytes),$(col "$r" num_ooms)"
	if [ "$got" = "$pt,$pu,$nm,$ft,$fu,$oo" ]; then exact=$((exact + 1)); else echo "# cupy $name $fa: real $pt,$pu,$nm,$ft,$fu,$oo simulated $got"; fi
	echo "$name,$got" >> "$TMP/sim-cupy.csv"
done < "$C"
# where the driver put the regions (replay_jax.py --log, 2026-12-04, all 20 streams__s2/s3 runs): the
# first two high, the second below the first, every later one bottom-up; -p bfc breaks ties in that order
R="$srcdir/traces/jax-h200-freeat-regions.csv"
placed=$(awk -F, 'function hex(s,  v, i) { v = 0; for (i = 3; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
	NR > 1 { a = hex($5); if ($3 == 0) { h0 = a; n++ } else if ($3 == 1) { if (!(a < h0)) bad++; h1 = a } else { if (!(a < h1) || ($3 > 2 && !(a > prev))) bad++ }; prev = a } END { print n "," bad + 0 }' "$R")
is "$exact/$total [$off] $placed" "58/58 [] 20,0" "JAX's real BFC, 29 traces x 2 --free-at: peak and final bytes_in_use, pool_bytes, num_allocs, largest free block equal -p bfc --free-at the same on all 58 runs (before -p bfc ordered the regions as the driver placed them, 20,0: first two above the later ones in all 20 logged runs, 8 differed: every streams__s2 run at the request, two at the completion, streams__s3__unlimited's final bytes_in_use)"
# after every event: JAX's bytes_in_use and pool_bytes (replay_jax.py --log) against -p bfc's timeline
E="$srcdir/traces/jax-h200-freeat-events.csv.gz"
for t in streams__s2__unlimited streams__s2__k110 streams__s3__unlimited; do
	for fa in requested completed; do
		"$A" replay -p bfc -c memory_limit:112583507968 --free-at $fa --no-timing --timeline "$TMP/tl.csv" -o /dev/null "$srcdir/traces/captured/$t.pickle.gz"
		# at the completion the timeline's allocated bytes drop at the request (r): only pool_bytes is BFC's there
		# (at the request the later f of the same block changes nothing, and replay_jax.py makes no event of it)
		awk -F, -v fa=$fa 'NR > 1 && ($2 == "alloc" || ($2 == "free" && !(fa == "requested" && $4 == q)) || ($2 == "free_requested" && fa == "requested")) { print (fa == "requested" ? $5 : "-") "," $6 } NR > 1 { q = $4 }' "$TMP/tl.csv" > "$TMP/sim.ev"
		gzip -dc "$E" | awk -F, -v t=$t -v fa=$fa '$1 == t && $2 == fa { print (fa == "requested" ? $5 : "-") "," $6 }' > "$TMP/real.ev"
		nev=$(wc -l < "$TMP/real.ev")
		is "$([ "$nev" -gt 200 ] && cmp -s "$TMP/sim.ev" "$TMP/real.ev" && echo same || echo "differ ($nev events; first: $(diff "$TMP/sim.ev" "$TMP/real.ev" | head -3 | paste -sd' '))")" same \
			"$t --free-at $fa: pool_bytes$([ $fa = requested ] && echo ' and bytes_in_use') after every one of JAX's events equal -p bfc's"
	done
done
finish
