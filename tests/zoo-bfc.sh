#!/bin/sh
# zoo-bfc.sh - the bfc policy against the real BFC allocator of JAX 0.11.2 on an H200
# (traces/jax-h200.csv, measured with scripts/replay_jax.py; doc/policies.md): every bundled real
# trace must give JAX's peak_bytes_in_use, peak_pool_bytes, num_allocs and final
# largest_free_block_bytes (the policy's --stats keys) under JAX's bytes_limit; every trace has a run
# of its own, and every run measured on the GPU must agree with the others.
. "${srcdir:-.}/tests/lib.sh"
G="$srcdir/traces/jax-h200.csv"
# stats KEY...: those keys of the --stats file, comma-separated (one process for them all)
stats() { awk -F, -v want="$*" '{ v[$1] = $2 } END { n = split(want, w, " ")
	for (j = 1; j <= n; j++) printf "%s%s", (j > 1 ? "," : ""), ((w[j] in v) ? v[w[j]] : "<no column " w[j] ">"); print "" }' "$TMP/s.csv"; }
# Recordings of one workload under different PyTorch settings make the same requests: group the traces
# by their allocation and free records; every GPU run of every trace of a group must agree. (Awk for
# the bookkeeping, a few processes in all: a process costs milliseconds on a virtual machine.)
for f in "$T"/*.pickle.gz; do
	name=${f##*/}; name=${name%.pickle.gz}
	"$ALLOCSIM" convert "$f" -o "$TMP/c.trace" 2>/dev/null || continue
	echo "$name $(awk '$1 == "a" { print "a", $2, $3 } $1 == "f" { print "f", $2 }' "$TMP/c.trace" | cksum)"
done > "$TMP/sums"
# NAME GROUP: the group is the first trace (by name) with the same allocations and frees (checksum, length)
awk '{ k = $2 " " $3; if (!(k in first)) first[k] = $1; print $1, first[k] }' "$TMP/sums" > "$TMP/groups"
is "$(wc -l < "$TMP/groups")" 24 "24 bundled real traces"
# NAME|GROUP|RUNS|ROWS|TRACES|DISTINCT|WANT: the GPU runs of the trace itself, of the traces of its group
# and how many traces that is, and how many distinct results (peak_bytes_in_use, peak_pool_bytes,
# num_allocs, largest_free_block_bytes, bytes_limit) those runs gave: WANT, ';' between two
awk -F, 'FILENAME != ARGV[1] { split($0, w, " "); grp[w[1]] = w[2]; order[++n] = w[1]; size[w[2]]++; next }
	FNR > 1 { runs[$1]++; row[$1, runs[$1]] = $7 "," $8 "," $9 "," $10 "," $13 }
	END { for (i = 1; i <= n; i++) { t = order[i]; g = grp[t]; rows = 0; d = 0; want = ""; delete seen
		for (j = 1; j <= n; j++) { m = order[j]; if (grp[m] != g) continue
			for (k = 1; k <= runs[m]; k++) { rows++; v = row[m, k]; if (!(v in seen)) { seen[v] = 1; d++; want = want (d > 1 ? ";" : "") v } } }
		printf "%s|%s|%d|%d|%d|%d|%s\n", t, g, runs[t], rows, size[g], d, want } }' "$G" "$TMP/groups" > "$TMP/table"
while IFS='|' read -r name group runs rows ntraces distinct want; do
	f="$T/$name.pickle.gz"
	# trace,run,events,allocs,frees,ooms,peak_bytes_in_use,peak_pool_bytes,num_allocs,largest_free_block_bytes,...,bytes_limit
	ok "$([ -n "$group" ] && [ "$runs" -ge 1 ]; echo $?)" "$name: replayed through JAX's BFC on the H200 itself (not only through a trace with the same requests; allocsim reads it)"
	is "$distinct" 1 "$name: measured on the H200 ($runs runs; $rows runs of the $ntraces traces with these requests, all alike)"
	limit=${want##*,}
	run "$ALLOCSIM" replay -p bfc -c "memory_limit:$limit" --capacity "$limit" --check --no-timing --stats "$TMP/s.csv" "$f"
	is "$st" 0 "$name: replay -p bfc --check exits 0"
	is "$(stats peak_bytes_in_use peak_pool_bytes num_allocs largest_free_block_bytes bytes_limit)" "$want" \
		"$name: peak_bytes_in_use, peak_pool_bytes, num_allocs, largest_free_block_bytes, bytes_limit equal JAX's"
	is "$(cols "$out" peak_allocated_bytes peak_reserved_bytes | tr ' ' ,)" "$(stats peak_bytes_in_use peak_pool_bytes)" \
		"$name: the summary's peak allocated/reserved bytes are BFC's peak_bytes_in_use/peak_pool_bytes"
done < "$TMP/table"
# After every allocation and free: JAX's bytes_in_use and pool_bytes (traces/jax-h200-events.csv.xz,
# run 1 of the six distinct request sequences and the five GPT-2 runs measured apart) are the replay's
# allocated and reserved bytes.
mkdir "$TMP/ev"
xz -dc "$srcdir/traces/jax-h200-events.csv.xz" | awk -F, -v d="$TMP/ev" 'NR > 1 { if (!seen[$1]++) print $1 > (d "/names"); print $5 "," $6 > (d "/" $1 ".want") }'
for name in $(cat "$TMP/ev/names"); do
	limit=$(grep "^$name,1," "$G" | cut -d, -f13)
	"$ALLOCSIM" replay -p bfc -c "memory_limit:$limit" --no-timing --timeline "$TMP/tl.csv" -o /dev/null "$T/$name.pickle.gz"
	awk -F, '$2 == "alloc" || $2 == "free" { print $5 "," $6 }' "$TMP/tl.csv" > "$TMP/got"
	nw=$(wc -l < "$TMP/ev/$name.want")
	is "$nw:$(cmp "$TMP/ev/$name.want" "$TMP/got" 2>&1)" "$(wc -l < "$TMP/got"):" \
		"$name: bytes_in_use and pool_bytes equal JAX's after each of the $nw allocations and frees"
done
# Ties between equal free chunks of different regions go to the region made first (TF compares
# addresses; JAX's process got its regions bottom-up, in creation order): so the regions' placement
# does not change the result. With the top-down placement of PyTorch's process, ResNet-50 came out
# different when addresses decided (6,173,136,384 bytes, as --backend cuda on the H200 gave too);
# now every address model gives JAX's.
r=resnet50_train__default
want=$(grep "^$r,1," "$G" | cut -d, -f7)
for m in model ascending; do
	run "$ALLOCSIM" replay -p bfc -c "memory_limit:112583507968" --addresses $m --no-timing --stats "$TMP/s.csv" "$T/$r.pickle.gz"
	is "$st:$(stats peak_bytes_in_use)" "0:$want" "$r: --addresses $m gives JAX's peak_bytes_in_use"
done
run "$ALLOCSIM" policies
for o in memory_limit mem_fraction allow_growth garbage_collection fragmentation_fraction empty_cache_releases; do
	ok "$(printf '%s\n' "$out" | sed -n '/^bfc$/,/^[a-z]/p' | grep -q "^    $o " ; echo $?)" "allocsim policies lists bfc's option $o"
done
run "$ALLOCSIM" replay -p bfc -c mem_fraction:1.5 "$T/seed_example__default.pickle.gz"
is "$st:$errout" "64:allocsim: error: mem_fraction: expected a fraction from 0 to 1, got '1.5'" "a fraction above 1 is a usage error"
run "$ALLOCSIM" replay -p bfc -c memory_limit:100 "$T/seed_example__default.pickle.gz"
is "$st:$errout" "64:allocsim: error: bfc: a memory limit of 100 bytes holds no allocation" "a limit under 256 bytes is a usage error"
finish
