#!/bin/sh
# harness.sh - sweep and fit: grid size and order, -j independence, resume, shards, and fit answers
# verified by replaying at and just below them.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
r50="$T/resnet50_train__default.pickle.gz"; bert="$T/bert_infer_varlen__default.pickle.gz"

run "$A" sweep -t "$r50" "$bert" -p pytorch -p bestfit --param max_split_size_mb=none,40,128 -j 2 -o "$TMP/j2.csv"
is "$st" 64 "a parameter the policy does not know is a usage error (bestfit has no max_split_size_mb)"
run "$A" sweep -t "$r50" "$bert" --param max_split_size_mb=none,40,128 --param roundup_power2_divisions=none,4 -j 1 -o "$TMP/j1.csv"
is "$st" 0 "sweep over two parameters, -j1"
run "$A" sweep -t "$r50" "$bert" --param max_split_size_mb=none,40,128 --param roundup_power2_divisions=none,4 -j 2 -o "$TMP/j2.csv"
is "$st" 0 "the same sweep, -j2"
is "$(($(wc -l < "$TMP/j1.csv") - 1))" 12 "2 traces x 3 x 2 values = 12 rows"
is "$(tail -n +2 "$TMP/j1.csv" | cut -d, -f1 | tr '\n' ' ')" "0 1 2 3 4 5 6 7 8 9 10 11 " "rows come in grid order"
ok "$(cmp -s "$TMP/j1.csv" "$TMP/j2.csv"; echo $?)" "-j1 and -j2 give byte-identical CSV"
is "$(head -1 "$TMP/j1.csv" | cut -d, -f1-5)" "run,max_split_size_mb,roundup_power2_divisions,trace,policy" "each parameter has its own column"
# a row equals the single replay with the same settings (ms40 resnet: PyTorch measured 9718202368)
is "$(grep '^2,40,none,' "$TMP/j1.csv" | cut -d, -f13)" 9718202368 "sweep row = PyTorch's peak reserved for max_split_size_mb:40"
# ranges and the capacity parameter
run "$A" sweep -t "$bert" --param capacity=1GiB,2GiB,4GiB --param max_split_size_mb=32..256:x2 -o "$TMP/r.csv"
is "$(($(wc -l < "$TMP/r.csv") - 1))" 12 "ranges: 32..256:x2 is 4 values, x 3 capacities"
is "$(awk -F, 'NR>1{print $2}' "$TMP/r.csv" | sort -u | tr '\n' ' ')" "1GiB 2GiB 4GiB " "capacity values are kept as given"
run "$A" sweep -t "$bert" --param max_split_size_mb=0..64:+32 -o "$TMP/r2.csv"
is "$st" 64 "max_split_size_mb:0 is rejected with PyTorch's rule"
run "$A" sweep -t "$bert" --param max_split_size_mb=10..5:+1; is "$st" 64 "an empty range is a usage error"
# resume: drop rows, resume, get the same file
head -5 "$TMP/j1.csv" > "$TMP/part.csv"
run "$A" sweep -t "$r50" "$bert" --param max_split_size_mb=none,40,128 --param roundup_power2_divisions=none,4 --resume -o "$TMP/part.csv"
ok "$(cmp -s "$TMP/part.csv" "$TMP/j1.csv"; echo $?)" "--resume completes a partial file to the same result"
# shards: the union of 1/2 and 2/2 is the full sweep (tests/shard.sh: the plan, merge's checks;
# tests/parallel-long.sh: GNU parallel)
for k in 1 2; do "$A" sweep -t "$r50" "$bert" --param max_split_size_mb=none,40,128 --param roundup_power2_divisions=none,4 --shard $k/2 -o "$TMP/s$k.csv"; done
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" -o "$TMP/merged.csv"
ok "$(cmp -s "$TMP/merged.csv" "$TMP/j1.csv"; echo $?)" "merged shards equal the full sweep"
{ head -1 "$TMP/s1.csv"; tail -q -n +2 "$TMP/s1.csv" "$TMP/s2.csv" | sort -t, -k1,1n; } > "$TMP/cat.csv"
ok "$(cmp -s "$TMP/cat.csv" "$TMP/j1.csv"; echo $?)" "... as does their rows concatenated and sorted on run"
# estimated costs 12,712 (resnet50) and 25,212 (bert) events a run: 6 x 12,712 + 25,212 = 101,484
# against 5 x 25,212 = 126,060
is "$(tail -n +2 "$TMP/s1.csv" | cut -d, -f1 | tr '\n' ' ')" "0 1 2 3 4 5 6 " "shard 1/2 runs the cheap runs, more of them"
run "$A" sweep -t "$bert" --shard 3/2; is "$st" 64 "--shard 3/2 is a usage error"

# metrics: the waste categories add up to reserved - requested at the reserved peak; JW #4 by hand
for c in "" max_split_size_mb:40 expandable_segments:True roundup_power2_divisions:4; do
	for t in "$r50" "$T/gpt2_train_varlen__default.pickle.gz" "$T/bert_infer_varlen__p110_default.pickle.gz"; do
		o=$("$A" replay -c "$c" --no-timing "$t")
		sum=$(( $(col "$o" waste_rounding) + $(col "$o" waste_unsplit) + $(col "$o" waste_oversize) + $(col "$o" waste_free_cached) + $(col "$o" waste_pending_free) ))
		is "$sum" "$(( $(col "$o" peak_reserved_bytes) - $(col "$o" requested_at_peak_reserved) ))" "waste attribution sums to reserved - requested at the peak (${c:-defaults}, $(basename "$t" .pickle.gz))"
	done
done
o=$("$A" replay -c "" --no-timing "$r50")
is "$(col "$o" frag_jw4)" "$(awk -v r="$(col "$o" peak_reserved_bytes)" -v q="$(col "$o" peak_requested_bytes)" 'BEGIN{printf "%.6f", (r-q)/q}')" "frag_jw4 = (peak reserved - peak requested) / peak requested"
is "$(col "$o" wasted_bytes_at_peak)" 6679758336 "wasted bytes at the reserved peak (resnet50: 7029653504 reserved, 349895168 allocated)"
# fit capacity: the answer fits, 2 MiB less does not
run "$A" fit capacity "$bert"
is "$st" 0 "fit capacity runs"
cap=$(printf '%s\n' "$out" | tail -1)
contains "$out" "no non-monotonic sample found"; ok $? "fit capacity reports its monotonicity check"
at=$("$A" replay -c "" --capacity "$cap" --stop-at-oom --no-timing "$bert"); below=$("$A" replay -c "" --capacity $((cap - 2097152)) --stop-at-oom --no-timing "$bert")
is "$(col "$at" num_ooms) $(col "$below" num_ooms)" "0 1" "replaying at the answer has no OOM, 2 MiB below has one ($cap)"
run "$A" fit capacity --exact "$r50"
cap=$(printf '%s\n' "$out" | tail -1)
at=$("$A" replay -c "" --capacity "$cap" --stop-at-oom "$r50"); below=$("$A" replay -c "" --capacity $((cap - 1)) --stop-at-oom "$r50")
is "$(col "$at" num_ooms) $(col "$below" num_ooms)" "0 1" "--exact: the answer fits and one byte less does not ($cap)"
run "$A" replay -c "" --capacity 6166558947 --check "$r50"
is "$st" 0 "--check holds under a capacity that forces flushes (regression: overlapping model addresses)"
# fit param: the best value is the smallest peak reserved among rows without OOM
run "$A" fit param max_split_size_mb --capacity 3GiB "$bert"
is "$st" 0 "fit param runs"
best=$(printf '%s\n' "$out" | tail -1)
want=$(printf '%s\n' "$out" | sed '1d;$d' | awk -F, '$4==0' | sort -t, -k2,2n -s | head -1 | cut -d, -f1)
is "$best" "$want" "fit param picks the lowest peak reserved without OOM ($best)"
run "$A" fit param roundup_power2_divisions --capacity 3GiB "$bert"; is "$st" 64 "fit param needs --values for other options"
# sweep takes the first run of every (trace, policy), costliest first, then the second of every one, ...
# (ALLOCSIM_JOBS_DEBUG): -j 1 replays what the grid order replayed (6 of bert's and seed's 16 runs given by
# a finished run of their trace), and the rows stay in grid order, the same for any -j
seed="$T/seed_example__default.pickle.gz"
ALLOCSIM_JOBS_DEBUG=1 "$A" sweep -j 1 -t "$seed" "$bert" -p pytorch --param max_split_size_mb=none,20..2048:x2 > "$TMP/so1.csv" 2> "$TMP/so1.err"
is "$(sed -n 's/^allocsim: jobs: sweep: //p' "$TMP/so1.err" | sed 's|[^ ]*/||' | tr '\n' ';')" \
	"1: bert_infer_varlen__default.pickle.gz pytorch (cost 25043, 8 runs);2: seed_example__default.pickle.gz pytorch (cost 10379, 8 runs);16 run(s) to do, 10 replayed, 6 given by a finished run of their trace;" \
	"sweep -j 1: bert's runs first (its events), 10 replayed and 6 given by a finished run"
"$A" sweep -j 4 -t "$seed" "$bert" -p pytorch --param max_split_size_mb=none,20..2048:x2 > "$TMP/so4.csv" 2>/dev/null
cmp -s "$TMP/so1.csv" "$TMP/so4.csv"; ok $? "... -j 4 writes the same bytes"
is "$(sed -n '2p;10p' "$TMP/so1.csv" | cut -d, -f1,3 | sed 's|,.*/|,|')" "$(printf '0,seed_example__default.pickle.gz\n8,bert_infer_varlen__default.pickle.gz')" "... rows in grid order (seed's first, as given)"
# fit -j N: the replays run N at a time, the output is -j 1's byte for byte (the replay count included)
"$A" fit capacity "$bert" > "$TMP/f1.txt"
ALLOCSIM_JOBS_DEBUG=1 "$A" fit -j 3 capacity "$bert" > "$TMP/f3.txt" 2> "$TMP/f3.err"
cmp -s "$TMP/f1.txt" "$TMP/f3.txt"; ok $? "fit -j 3 capacity writes -j 1's bytes"
contains "$(cat "$TMP/f1.txt")" "1990197248 (1.85 GiB) fits, 1988100096 runs out of memory; 29 replays; no non-monotonic"; ok $? "... (bert: 1990197248, 29 replays)"
is "$(sed 's/^allocsim: jobs: fit: \([0-9]*\) replay(s) at once$/\1/' "$TMP/f3.err" | tr '\n' ' ')" "3 3 3 3 3 2 16 " \
	"... in 7 rounds, not 17: 3 bisection probes at once (the next and both that may follow), then the 16 samples together"
is "$(ALLOCSIM_JOBS_DEBUG=1 "$A" fit capacity "$bert" 2>&1 >/dev/null | LC_ALL=C sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
	" 12 allocsim: jobs: fit: 1 replay(s) at once; 1 allocsim: jobs: fit: 16 replay(s) at once;" "... -j 1: one probe at a time"
"$A" fit capacity --exact "$r50" > "$TMP/e1.txt"; "$A" fit -j 4 capacity --exact "$r50" > "$TMP/e4.txt"
cmp -s "$TMP/e1.txt" "$TMP/e4.txt"; ok $? "fit -j 4 capacity --exact writes -j 1's bytes"
"$A" fit param max_split_size_mb --capacity 3GiB "$bert" > "$TMP/p1.txt"; "$A" fit -j 4 param max_split_size_mb --capacity 3GiB "$bert" > "$TMP/p4.txt"
cmp -s "$TMP/p1.txt" "$TMP/p4.txt"; ok $? "fit -j 4 param writes -j 1's bytes ($(($(wc -l < "$TMP/p1.txt") - 2)) values)"
nv=$(($(wc -l < "$TMP/p1.txt") - 2))
is "$(ALLOCSIM_JOBS_DEBUG=1 "$A" fit -j 4 param max_split_size_mb --capacity 3GiB "$bert" 2>&1 >/dev/null | tr '\n' ';')" \
	"allocsim: jobs: fit: $nv replay(s) at once;" "... every value on one queue (values cost unequal times), not -j at a time behind each other"
is "$(ALLOCSIM_JOBS_DEBUG=1 "$A" fit param max_split_size_mb --capacity 3GiB "$bert" 2>&1 >/dev/null | LC_ALL=C sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
	" $nv allocsim: jobs: fit: 1 replay(s) at once;" "... -j 1: one value at a time, each line as it comes"
run "$A" fit -j 0 capacity "$bert"
is "$st:$(echo "$errout" | head -1)" "64:allocsim: error: fit: -j: '0' is not a number of workers (1..1024)" "fit -j 0 is a usage error"
finish
