#!/bin/sh
# bound.sh - the lower bound columns, the offline optimum (-p optimal) and allocsim compare.
# The bound is checked against every policy on the captured traces (deferred cross-stream frees,
# empty_cache) and three bundled ones; BOUND_ALL=1 (make check-long) on all 24 bundled traces too.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
B="$srcdir/tests/bound"
MiB=1048576
# stat KEY FILE: the value of KEY in a --stats file
stat() { awk -F, -v k="$1" '$1 == k { print $2 }' "$2"; }

# ---- the optimum on hand-built traces whose optimum is known ----
t="$B/decreasing-is-optimal.trace"
run "$A" replay -p optimal --no-timing --stats "$TMP/s" "$t"
is "$st" 0 "optimal replays a native trace"
is "$(col "$out" peak_reserved_bytes)" $((17 * MiB)) "nested lifetimes: the placement's height is the peak of live bytes, 17 MiB"
is "$(col "$out" lower_bound_bytes)" $((17 * MiB)) "... which is lower_bound_bytes (the last request, 1000 bytes, rounds to 1024 but is alone)"
is "$(col "$out" overhead_vs_bound)" 1.000000 "... so overhead_vs_bound is 1"
is "$(stat heuristic_height_bytes "$TMP/s"),$(stat searched "$TMP/s"),$(stat optimal_proved "$TMP/s")" "$((17 * MiB)),0,1" \
	"size-decreasing first fit meets the bound: proved optimal without a search"
is "$(col "$out" num_device_alloc),$(col "$out" final_reserved_bytes)" "1,$((17 * MiB))" "one device segment of the planned height, kept to the end"

t="$B/search-beats-heuristic.trace"
run "$A" replay -p optimal --no-timing --stats "$TMP/s" "$t"
is "$(stat heuristic_height_bytes "$TMP/s")" $((13 * MiB)) "size-decreasing first fit needs 13 MiB here (3 goes above 2 and 4)"
is "$(col "$out" peak_reserved_bytes)" $((12 * MiB)) "the exact search finds 12 MiB (2, 3, 4 stacked, 5 under 4)"
is "$(stat searched "$TMP/s"),$(stat optimal_proved "$TMP/s"),$(stat search_nodes "$TMP/s")" "1,1,10" \
	"... and proves it optimal (it meets the peak of live bytes) after 10 search nodes"
is "$(col "$out" lower_bound_bytes),$(col "$out" overhead_vs_bound)" "$((12 * MiB)),1.000000" "the row states the bound and the overhead"
run "$A" replay -p optimal -c nodes:3 --no-timing --stats "$TMP/s" "$t"
is "$(col "$out" peak_reserved_bytes),$(stat optimal_proved "$TMP/s"),$(stat search_nodes "$TMP/s")" "$((13 * MiB)),0,3" \
	"a budget of 3 nodes ends the search first: the heuristic's 13 MiB, not proved"
run "$A" replay -p optimal -c search_max:4 --no-timing --stats "$TMP/s" "$t"
is "$(col "$out" peak_reserved_bytes),$(stat searched "$TMP/s"),$(stat optimal_proved "$TMP/s")" "$((13 * MiB)),0,0" \
	"search_max:4 leaves a trace of 5 allocations to the heuristic"
t="$B/optimum-above-bound.trace"
run "$A" replay -p optimal --no-timing --stats "$TMP/s" "$t"
is "$(col "$out" lower_bound_bytes),$(col "$out" peak_reserved_bytes),$(col "$out" overhead_vs_bound)" "$((7 * MiB)),$((8 * MiB)),1.142857" \
	"a trace whose optimum (8 MiB) lies above the peak of live bytes (7 MiB)"
is "$(stat searched "$TMP/s"),$(stat optimal_proved "$TMP/s"),$(stat search_nodes "$TMP/s")" "1,1,7313" \
	"... proved by exhausting the search (7313 nodes; tests/t_optimal.c checks every offset by brute force)"
t="$B/search-beats-heuristic.trace"
run "$A" replay -p optimal -c search_max:65 "$t"
is "$st,$errout" "64,allocsim: error: option search_max: at most 64 allocations, got '65'" "search_max above 64 is refused"
{ echo '#allocsim-trace 1'; for i in $(seq 1 20); do echo "a $i 1152921504606846975 0"; done; } > "$TMP/huge.trace"
run "$A" replay -p optimal --check --no-timing "$TMP/huge.trace"
is "$st,$(col "$out" num_ooms),$(col "$out" peak_reserved_bytes)" "0,20,0" "twenty live requests of 2^60-1 bytes (beyond 2^64 together): no placement, every one fails (offsets wrapped and served five before)"
run "$A" replay -p optimal "-" < "$t"
is "$st" 64 "optimal needs a file it can read twice, not standard input"
run "$A" replay -p optimal -c align:1MiB --no-timing --capacity 11MiB "$t"
is "$(col "$out" num_ooms),$(col "$out" peak_reserved_bytes)" "4,$((5 * MiB))" \
	"below the planned height requests fail until the rest of the trace fits: the last one alone gets its 5 MiB"

# ---- the bound: never above what a policy reserves; every policy's rounding ----
traces="$T/seed_example__default.pickle.gz $T/bert_infer_varlen__p110_default.pickle.gz $T/resnet50_train__default.pickle.gz $(ls "$srcdir"/traces/captured/*.pickle.gz)"
[ -n "$BOUND_ALL" ] && traces="$(ls "$T"/*.pickle.gz "$srcdir"/traces/captured/*.pickle.gz)"
"$A" compare -p all -j 2 $traces -o "$TMP/all.csv"
is "$?" 0 "compare -p all over $(echo $traces | wc -w) traces"
# the registered policies: at least the seven of this writing (a binary that lists none cannot match)
npol=$("$A" policies | grep -c '^[a-z][^ ]*$'); [ "$npol" -ge 7 ] || npol=7
rows=$(( $(echo $traces | wc -w) * npol ))
is "$(awk -F, 'NR > 1' "$TMP/all.csv" | wc -l)" "$rows" "one row per trace and policy"
# the rows checked and those that break the invariant (none), so that no rows at all is no pass
r=$(csv_bars < "$TMP/all.csv" | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	{ lb = $h["lower_bound_bytes"]; n++; if (lb == "" || lb + 0 > $h["peak_reserved_bytes"] + 0 || lb + 0 < $h["peak_requested_bytes"] + 0) bad = bad " " $h["policy"] "@" $h["trace"] }
	END { print n + 0 " rows, above or below:" bad }')
is "$r" "$rows rows, above or below:" "every policy: peak_requested_bytes <= lower_bound_bytes <= peak_reserved_bytes on every trace"
r=$(csv_bars < "$TMP/all.csv" | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	$h["policy"] == "optimal" { o[$h["trace"]] = $h["peak_reserved_bytes"] }
	$h["policy"] == "passthrough" { p[$h["trace"]] = $h["lower_bound_bytes"] }
	END { for (t in o) { n++; if (o[t] + 0 < p[t] + 0 || p[t] == "") bad = bad " " t } print n + 0 " traces, below:" bad }')
is "$r" "$(echo $traces | wc -w) traces, below:" "optimal's height is never below the 512-byte-rounded peak of live bytes"
r=$(csv_bars < "$TMP/all.csv" | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	$h["trace"] ~ /resnet50_train__default/ && ($h["policy"] == "pytorch" || $h["policy"] == "bfc" || $h["policy"] == "cuda-async") { printf "%s=%s ", $h["policy"], $h["lower_bound_bytes"] }')
is "$r" "pytorch=5830342656 cuda-async=5830299792 bfc=5830313728 " "resnet50: the bound rounds as the policy does (512, none, 256 bytes)"
run "$A" replay -p pytorch -c 'roundup_power2_divisions:4' --no-timing "$T/resnet50_train__default.pickle.gz"
is "$(col "$out" lower_bound_bytes)" 6631624704 "pytorch with roundup_power2_divisions:4 on resnet50: its own rounding (6631624704, not 5830342656)"

# ---- compare: the rows of replay, the same for any -j ----
t1="$T/seed_example__default.pickle.gz"; t2="$B/search-beats-heuristic.trace"
"$A" compare -p bestfit,optimal -p 'pytorch>passthrough' "$t1" "$t2" > "$TMP/c1.csv"
{ "$A" replay -p bestfit --no-timing "$t1"; for p in optimal 'pytorch>passthrough'; do "$A" replay -p "$p" --no-timing "$t1" | tail -1; done
  for p in bestfit optimal 'pytorch>passthrough'; do "$A" replay -p "$p" --no-timing "$t2" | tail -1; done; } > "$TMP/r.csv"
is "$(cat "$TMP/c1.csv")" "$(cat "$TMP/r.csv")" "compare writes replay's header and rows, trace by trace, policies in the order given"
"$A" compare -j 1 -p all "$t1" "$t2" > "$TMP/j1.csv"; "$A" compare -j 3 -p all "$t1" "$t2" > "$TMP/j3.csv"
cmp -s "$TMP/j1.csv" "$TMP/j3.csv"; ok $? "compare -j 1 and -j 3 write the same bytes"
is "$(cut -d, -f2 "$TMP/j1.csv" | sed -n '2,$p' | sort -u | wc -l)" "$npol" "-p all is every registered policy"
# the jobs start costliest first (events, x16 for the offline optimal): the small trace given first runs last
ALLOCSIM_JOBS_DEBUG=1 "$A" compare -j 2 -p bestfit,optimal -p 'pytorch>passthrough' "$t2" "$t1" 2>"$TMP/order" >"$TMP/o2.csv"
is "$(sed 's/^allocsim: jobs: compare: \([0-9]*\): .*\/\([^/]*\) (cost \([0-9]*\))$/\1 \2 \3/' "$TMP/order" | tr '\n' ';')" \
	"1 seed_example__default.pickle.gz optimal 166064;2 seed_example__default.pickle.gz bestfit 10379;3 seed_example__default.pickle.gz pytorch>passthrough 10379;4 search-beats-heuristic.trace optimal 160;5 search-beats-heuristic.trace bestfit 10;6 search-beats-heuristic.trace pytorch>passthrough 10;" \
	"ALLOCSIM_JOBS_DEBUG: compare starts the costliest jobs first (events x 16 for optimal), ties in the output's order"
"$A" compare -j 1 -p bestfit,optimal -p 'pytorch>passthrough' "$t2" "$t1" > "$TMP/o1.csv"
is "$(cut -d, -f1,2 "$TMP/o2.csv" | sed -n '2p;5p' | sed 's|.*/||' | tr '\n' ';')" "search-beats-heuristic.trace,bestfit;seed_example__default.pickle.gz,bestfit;" \
	"... the rows still in the order given"
cmp -s "$TMP/o1.csv" "$TMP/o2.csv"; ok $? "... and byte-identical to -j 1's"
run "$A" compare -p nosuch "$t1"
is "$st" 64 "an unknown policy is a usage error"
contains "$errout" "unknown policy 'nosuch'"; ok $? "... that names it"
echo keep > "$TMP/keep.csv"
run "$A" compare -p bestfit -o "$TMP/keep.csv" "$t1" "$TMP/missing.trace"
is "$st,$(cat "$TMP/keep.csv")" "66,keep" "a missing trace fails with 66 and leaves -o as it was"
run "$A" compare -p bestfit -o "$TMP/nodir/x.csv" "$TMP/missing.trace"
is "$st" 74 "-o in a missing directory fails before any work (74, not the missing trace's 66)"
run "$A" compare -p bestfit -o "$t1" "$t1"
is "$st" 64 "-o naming an input is refused"
finish
