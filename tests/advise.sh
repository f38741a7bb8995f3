#!/bin/sh
# advise.sh - allocsim advise: the settings that fit, checked against what the real GPU did.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
GT="$T/ground-truth.csv"
# csv_field CSV SETTING COLUMN: a column of advise's CSV row for one setting
csv_field() { printf '%s\n' "$1" | csv_bars | awk -F'|' -v s="$2" -v c="$3" 'NR==1{for(i=1;i<=NF;i++) {if($i==c) k=i; if($i=="setting") j=i}} NR>1 && j && $j==s {print $k}'; }
# by_name PROGRAM: awk over the CSV on standard input (split as csv_bars does) with c["NAME"] the index of
# column NAME from the header line, so that a test names the columns it reads, not their positions
by_name() { csv_bars | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } '"$1"; }
gt() { awk -F, -v n="$1" -v c="$2" 'NR==1{for(i=1;i<=NF;i++) {if($i==c) k=i; if($i=="name") j=i}} NR>1 && j && $j==n {print $k}' "$GT"; }

# The recorded runs under a memory limit (fraction x device total) of two workloads: the real GPU ran
# the default settings (OOM), expandable_segments, garbage_collection_threshold:0.6 and
# max_split_size_mb:128 at the same limit. advise, from the default run's snapshot alone, must say
# which of them fit, as the GPU did.
for w in bert_infer_varlen gpt2_train_varlen; do
	frac=$(gt ${w}__p110_default fraction); total=$(gt ${w}__p110_default device_total_bytes)
	run "$A" advise --format csv --fraction "$frac" --device-total "$total" "$T/${w}__p110_default.pickle.gz"
	is "$st" 0 "$w: some setting fits the recorded limit (exit 0)"
	is "$(csv_field "$out" current target_bytes)" "$(gt ${w}__p110_default capacity_bytes)" "$w: target = fraction x device total = the recorded capacity"
	for p in default:current exp:expandable_segments gc06:garbage_collection_threshold:0.6 ms128:max_split_size_mb:128; do
		tag=${p%%:*}; s=${p#*:}
		real=$(gt ${w}__p110_$tag oom)
		is "$(csv_field "$out" "$s" fits)" "$((1 - real))" "$w: $s fits = the real GPU's run had no OOM (oom=$real)"
	done
	rec=$(printf '%s\n' "$out" | by_name 'NR>1 && $c["recommended"]==1 {print $c["config"]}')
	is "$(printf '%s\n' "$out" | by_name 'NR>1 && $c["recommended"]==1' | wc -l)" 1 "$w: exactly one setting is recommended"
	r2=$("$A" replay -c "$rec" --capacity "$(gt ${w}__p110_default capacity_bytes)" --no-timing "$T/${w}__p110_default.pickle.gz")
	is "$(col "$r2" num_ooms)" 0 "$w: the recommendation ($rec) replays without OOM at the limit"
	need=$(csv_field "$out" "$(printf '%s\n' "$out" | by_name 'NR>1 && $c["recommended"]==1 {print $c["setting"]}')" needed_bytes)
	r3=$("$A" replay -c "$rec" --capacity "$need" --no-timing "$T/${w}__p110_default.pickle.gz")
	is "$(col "$r3" num_ooms)" 0 "$w: it fits in the capacity advise says it needs ($need)"
done
# the current settings fail where the recording did: the snapshot's 'oom' entry
run "$A" advise --format csv --capacity "$(gt bert_infer_varlen__p110_default capacity_bytes)" "$T/bert_infer_varlen__p110_default.pickle.gz"
is "$(csv_field "$out" current oom_entry)" 5888 "bert: the current settings run out of memory at trace entry 5888, the snapshot's oom entry"
is "$(csv_field "$out" expandable_segments num_ooms)" 0 "bert: expandable_segments has no OOM"
# the table: the recommendation first, sizes in GiB
run "$A" advise --capacity "$(gt gpt2_train_varlen__p110_default capacity_bytes)" "$T/gpt2_train_varlen__p110_default.pickle.gz"
is "$(printf '%s\n' "$out" | sed -n 5p)" 'Recommendation: PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"' "gpt2: the table opens with the recommendation"
contains "$out" "target: 17.30 GiB (18580450876 bytes, --capacity)"; ok $? "the table shows the target in GiB and bytes"
contains "$out" "warning: max_split_size_mb together with expandable_segments costs more"; ok $? "the harmful combination (pytorch#123548) is named, with numbers"
is "$(printf '%s\n' "$out" | grep -c '<- recommended')" 1 "one row is marked"
# json parses and says the same
if [ -n "$PYTHON" ]; then
	j=$("$A" advise --format json --capacity 18580450876 "$T/gpt2_train_varlen__p110_default.pickle.gz" |
		"$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(d["recommended"], d["fits"], len(d["settings"]), d["recorded_ooms"])')
	is "$j" "expandable_segments:True True 15 1" "--format json: the same recommendation, 15 settings, the recorded OOM"
fi
# nothing fits: exit 3 and the setting that needs least
run "$A" advise --capacity 100MiB "$T/bert_infer_varlen__p110_default.pickle.gz"
is "$st" 3 "no setting fits 100 MiB: exit 3"
contains "$out" "No setting of the grid fits 0.10 GiB"; ok $? "and says so"
# deterministic for any -j
a1=$("$A" advise -j 1 --format csv --capacity 17GiB "$T/gpt2_train_varlen__default.pickle.gz"); a2=$("$A" advise -j 3 --format csv --capacity 17GiB "$T/gpt2_train_varlen__default.pickle.gz")
[ -n "$a1" ] && [ "$a1" = "$a2" ]; ok $? "-j 1 and -j 3 give the same bytes"
# more threads than settings: the threads left over run each setting's next bisection probes beside it
# and its unlimited run beside the one at the target; the bisection asks the probes -j 1 asks
# (ALLOCSIM_JOBS_DEBUG), and the bytes are -j 1's
for c in "" "--capacity 2GiB"; do
	ALLOCSIM_JOBS_DEBUG=1 "$A" advise -j 1 --format csv $c "$T/gpt2_train_varlen__default.pickle.gz" > "$TMP/s1.csv" 2> "$TMP/s1.err"
	ALLOCSIM_JOBS_DEBUG=1 "$A" advise -j 24 --format csv $c "$T/gpt2_train_varlen__default.pickle.gz" > "$TMP/s24.csv" 2> "$TMP/s24.err"
	cmp -s "$TMP/s1.csv" "$TMP/s24.csv"; ok $? "advise -j 24 ${c:-without a target}: -j 1's bytes"
	case $c in "") want="11 setting(s);87 asked" ;; *) want="15 setting(s);117 asked" ;; esac
	is "$(sed -n 's/^allocsim: jobs: advise: \([0-9]* setting(s)\) on .* probes: \([0-9]* asked\), .*$/\1;\2/p' "$TMP/s1.err")|$(sed -n 's/^allocsim: jobs: advise: \([0-9]* setting(s)\) on .* probes: \([0-9]* asked\), .*$/\1;\2/p' "$TMP/s24.err")" \
		"$want|$want" "... ${c:-without a target}: the bisections ask the same probes at -j 1 and -j 24 ($want)"
	r1=$(sed -n 's/.* asked, \([0-9]*\) run$/\1/p' "$TMP/s1.err"); r24=$(sed -n 's/.* asked, \([0-9]*\) run$/\1/p' "$TMP/s24.err")
	is "$r1 asked" "${want#*;}" "... -j 1 runs only those"
	ok "$([ -n "$r24" ] && [ "$r24" -gt "$r1" ]; echo $?)" "... -j 24 runs them and probes that may follow ($r24)"
done
is "$(printf '%s\n' "$a1" | wc -l)" 16 "a header and 15 settings with a capacity"
# without a target: gc settings are not replayed (they act only under a limit), and it says so
run "$A" advise "$T/resnet50_train__default.pickle.gz"
is "$st" 0 "no target: exit 0"
contains "$out" "garbage_collection_threshold acts only under a memory limit"; ok $? "no target: the gc settings are left out, with a note"
run "$A" advise "$T/bert_infer_varlen__p110_default.pickle.gz"
contains "$errout" "warning: the recording ran out of memory 1 time(s) under a limit the trace does not record"; ok $? "an OOM snapshot without a target: a warning naming the options"
# the recorded settings are the current ones
run "$A" advise --format csv --capacity 4GiB "$T/resnet50_train__ms128.pickle.gz"
is "$(csv_field "$out" current config)" "max_split_size_mb:128" "the current settings default to the recorded ones"
# current settings that fit within 1% of the least need stay (expandable_segments needs 0.13% less
# on this trace, at 120x the modelled device time)
run "$A" advise --capacity 20GiB "$T/bert_infer_varlen__ms40.pickle.gz"
is "$(printf '%s\n' "$out" | sed -n 5p)" "Recommendation: keep the current settings; no setting of the grid needs 1% less memory." "a change must save memory: the recorded max_split_size_mb:40 stays"
# options
run "$A" advise --gpu list; contains "$out" "H200"; ok $? "--gpu list shows the table"
run "$A" advise --gpu A100-40GB --format csv "$T/seed_example__default.pickle.gz"
is "$(csv_field "$out" current target_bytes)" 42294690447 "--gpu A100-40GB: 39.39 GiB"
run "$A" advise --gpu B9000 "$T/seed_example__default.pickle.gz"; is "$st" 64 "--gpu with an unknown name: exit 64"
contains "$errout" "unknown GPU 'B9000'"; ok $? "and names it"
run "$A" advise --fraction 0.5 "$T/seed_example__default.pickle.gz"; is "$st" 64 "--fraction without a device total: exit 64"
contains "$errout" "add --device-total SIZE"; ok $? "and says what to add"
run "$A" advise --fraction 0.5 --capacity 1GiB "$T/seed_example__default.pickle.gz"; is "$st" 64 "two targets: exit 64"
run "$A" advise --fraction 1.5 --device-total 1GiB "$T/seed_example__default.pickle.gz"; is "$st" 64 "--fraction above 1: exit 64"
run "$A" advise -c "max_split_size_mb:3" "$T/seed_example__default.pickle.gz"; is "$st" 64 "a bad -c: exit 64 before any replay"
run "$A" advise -o "$T/seed_example__default.pickle.gz" "$T/seed_example__default.pickle.gz"; is "$st" 64 "-o naming the input: exit 64"
run "$A" advise --format csv -o "$TMP/a.csv" --capacity 1GiB "$T/seed_example__default.pickle.gz"
is "$st:$(head -c 6 "$TMP/a.csv")" "0:trace," "-o writes the file"
run "$A" advise "$TMP/missing.pickle.gz"; is "$st" 66 "a missing trace: exit 66"
# a directory of per-rank snapshots is one job: one setting for every rank, the worst rank named
mkdir "$TMP/job" "$TMP/empty"
cp "$T/bert_infer_varlen__p110_default.pickle.gz" "$TMP/job/rank0.pickle.gz"
cp "$T/gpt2_train_varlen__default.pickle.gz" "$TMP/job/rank2.pickle.gz"
cp "$T/gpt2_train_varlen__p110_default.pickle.gz" "$TMP/job/rank10.pickle.gz"
echo notes > "$TMP/job/README.txt"
run "$A" advise --format csv --capacity 18580450876 "$TMP/job"
is "$st" 0 "a job directory: exit 0"
is "$(printf '%s\n' "$out" | by_name 'NR>1 && $c["setting"]=="current" {sub(/.*\//, "", $c["trace"]); printf "%s ", $c["trace"]}')" "rank0.pickle.gz rank2.pickle.gz rank10.pickle.gz " \
	"the ranks in version order (rank2 before rank10), other files left out"
is "$(printf '%s\n' "$out" | by_name 'NR>1 && $c["recommended"]==1 {print $c["setting"]}' | sort -u)" "expandable_segments" "one recommendation for the job, marked on every rank's row"
single=$("$A" advise --format csv --capacity 18580450876 "$T/gpt2_train_varlen__default.pickle.gz" | by_name 'NR>1 {print $c["setting"], $c["fits"], $c["needed_bytes"]}')
r2=$(printf '%s\n' "$out" | by_name 'NR>1 && $c["trace"] ~ /rank2/ {print $c["setting"], $c["fits"], $c["needed_bytes"]}')
[ -n "$single" ] && [ "$r2" = "$single" ]; ok $? "a rank's rows equal advise on that snapshot alone"
run "$A" advise --capacity 18580450876 "$TMP/job"
contains "$out" "the current settings run out of memory on 2 of 3 ranks"; ok $? "the table says how many ranks run out"
contains "$out" "worst rank under the recommendation: $TMP/job/rank2.pickle.gz"; ok $? "and names the worst rank"
if [ -n "$PYTHON" ]; then
	j=$("$A" advise --format json --capacity 18580450876 "$TMP/job" | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(len(d["ranks"]), d["recommended"], d["worst_rank"].split("/")[-1])')
	is "$j" "3 expandable_segments:True rank2.pickle.gz" "--format json for a job: its ranks, the recommendation, the worst rank"
fi
run "$A" advise "$TMP/empty"; is "$st" 66 "an empty directory: exit 66"
contains "$errout" "holds no snapshots"; ok $? "and says so"
# the ranks are decoded side by side (-j at once): the same bytes whatever -j is, and of two bad ranks
# the first file's error, as one after the other found it
d1=$("$A" advise -j 1 --format csv --no-fit "$TMP/job"); d3=$("$A" advise -j 3 --format csv --no-fit "$TMP/job")
[ -n "$d1" ] && [ "$d1" = "$d3" ]; ok $? "a job directory: -j 1 and -j 3 give the same bytes"
mkdir "$TMP/badjob"
cp "$T/gpt2_train_varlen__default.pickle.gz" "$TMP/badjob/rank0.pickle.gz"
echo junk > "$TMP/badjob/rank1.pickle.gz"
printf 'nonsense' > "$TMP/badjob/rank2.pickle.gz"
for j in 1 2 3; do
	run "$A" advise -j $j "$TMP/badjob"
	is "$st" 65 "a job with two bad ranks, -j $j: exit 65"
	contains "$errout" "badjob/rank1.pickle.gz: byte offset 0: unknown trace format"; ok $? "and the error is the first bad rank's (-j $j)"
done
# A program written to fragment (scripts/capture-fragmenter.py), run on the H200 under every setting of
# the grid at one limit (traces/fragmenter/fragmenter.csv): from the unlimited run's snapshot alone,
# advise says which settings fit exactly as the GPU ran them, and for those that fit, the peak reserved
# bytes and cudaMalloc/map calls the GPU counted. The limit is set_per_process_memory_fraction(F) with
# F = 178257920 / total: PyTorch's (size_t)(F x total) is 178257919 bytes (with 178257920, 30 MiB more
# would fit exactly at 140 MiB reserved, and expandable+max_split:128 would wrongly fit).
F="$srcdir/traces/fragmenter"
adv=$("$A" advise --format csv --capacity 178257919 "$F/fragmenter__unlimited.pickle.gz" | by_name 'NR>1 {print $c["setting"] "|" $c["fits"] "|" $c["peak_reserved_bytes"] "|" $c["num_device_alloc"]}' | sort)
gpu=$(by_name < "$F/fragmenter.csv" 'NR>2 {print ($c["tag"] == "current" ? "current" : $c["tag"]) "|" ($c["oom"] == 0) "|" $c["peak_reserved"] "|" $c["num_device_alloc"]}' | sort)
is "$(printf '%s\n' "$adv" | cut -d'|' -f1,2 | tr '\n' ' ')" "$(printf '%s\n' "$gpu" | cut -d'|' -f1,2 | tr '\n' ' ')" \
	"fragmenter: advise's fits equals the H200's outcome for all 15 settings"
is "$(printf '%s\n' "$adv" | awk -F'|' '$2 == 1' | tr '\n' ' ')" "$(printf '%s\n' "$gpu" | awk -F'|' '$2 == 1' | tr '\n' ' ')" \
	"fragmenter: for the settings that fit, peak reserved and device calls equal the H200's"
for t in limit_exp limit_expms128 limit_ms64 limit; do
	run "$A" validate -c recorded --capacity 178257919 "$F/fragmenter__$t.pickle.gz"
	contains "$out" ": exact ("; ok $? "fragmenter__$t (the GPU run at the limit) validates exact"
done
# --- sizes and the OOM message as a user has them (issue 32) ---
oommsg() { grep -o '"oom": "[^"]*"' "$1" | sed 's/^"oom": "//; s/"$//'; }
g=gpt2_train_varlen__p110_default
run "$A" advise --format csv --capacity 17.30GiB "$T/$g.pickle.gz"
is "$st $(csv_field "$out" current target_bytes)" "0 18575733555" "--capacity 17.30GiB: rounded down to 18575733555 bytes"
contains "$errout" "size '17.30GiB' is 18575733555.2 bytes: rounded down to 18575733555 bytes"; ok $? "and the rounding is stated"
# PyTorch's own message (the real one, from the run's meta.json): '17.30 GiB allowed' is the target
msg=$(oommsg "$T/$g.meta.json")
run "$A" advise --format csv --oom-message "$msg" "$T/$g.pickle.gz"
is "$st $(csv_field "$out" current target_bytes) $(csv_field "$out" current fits) $(csv_field "$out" expandable_segments fits)" "0 18575733555 0 1" \
	"--oom-message: the target is its '17.30 GiB allowed'; the recorded settings do not fit, expandable_segments does (as on the GPU)"
is "$st $(printf '%s\n' "$errout" | grep -c warning)" "0 0" "--oom-message of this run: no warning (its 1.48 GiB is the failed request, 1588925440 bytes)"
run "$A" advise --no-fit --format csv --oom-message "$msg" "$T/bert_infer_varlen__p110_default.pickle.gz"
contains "$errout" "warning: the --oom-message's request (1.48 GiB) is not the one that failed in $T/bert_infer_varlen__p110_default.pickle.gz (345882624 bytes): is the message from this run?"
ok $? "another run's message: a warning names both requests"
printf '%s\n' "$msg" > "$TMP/oom.txt"
run "$A" advise --oom-message "@$TMP/oom.txt" "$T/$g.pickle.gz"
contains "$out" "target: 17.30 GiB (18575733555 bytes, --oom-message: its '17.30 GiB allowed' (set_per_process_memory_fraction), printed to +-0.005 GiB)"
ok $? "--oom-message @FILE: the table says where the target comes from and how precise it is"
# without a memory fraction, PyTorch could hold what it held plus what was free
run "$A" advise --format csv --oom-message "CUDA out of memory. Tried to allocate 330.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 23.10 GiB memory in use. Of the allocated memory 1.01 GiB is allocated by PyTorch, and 358.66 MiB is reserved by PyTorch but unallocated." \
	"$T/bert_infer_varlen__p110_default.pickle.gz"
# 1.01 GiB = 1084479242 (rounded down), 358.66 MiB = 376082268, 512 MiB = 536870912 (the recording ran under 1.54 GiB)
is "$(csv_field "$out" current target_bytes) $(csv_field "$out" current fits)" "1997432422 1" \
	"a message without 'allowed': allocated + reserved-unallocated + free = 1997432422 bytes, where the current settings fit"
run "$A" advise --oom-message "CUDA error: an illegal memory access" "$T/$g.pickle.gz"
is "$st" 64 "--oom-message that is not PyTorch's: exit 64"
contains "$errout" "not PyTorch's CUDA out-of-memory message"; ok $? "and says so"
run "$A" advise --oom-message "@$TMP/missing.txt" "$T/$g.pickle.gz"; is "$st" 64 "--oom-message @FILE that is missing: exit 64"
run "$A" advise --oom-message "$msg" --capacity 1GiB "$T/$g.pickle.gz"; is "$st" 64 "--oom-message with --capacity: exit 64"
# --gpu combines with --fraction: the fraction of that card's memory (H200: 150109880320 bytes)
run "$A" advise --format csv --gpu H200 --fraction "$(gt $g fraction)" "$T/$g.pickle.gz"
is "$st $(csv_field "$out" current target_bytes)" "0 $(gt $g capacity_bytes)" "--gpu H200 --fraction F: F x the H200's memory = the recorded limit"
run "$A" advise --format csv --device-total 139.80GiB --fraction 0.5 "$T/$g.pickle.gz"
is "$st $(csv_field "$out" current target_bytes)" "0 75054553497" "--device-total 139.80GiB (150109106995 bytes, rounded down) x 0.5"
run "$A" advise --help
contains "$out" "--device-total SIZE"; ok $? "advise --help lists --device-total"
contains "$out" "--oom-message MSG"; ok $? "advise --help lists --oom-message"
# --- the recommendation: the simplest within the precision, never a key twice (issue 32) ---
# gpt2 recorded with max_split_size_mb:40: expandable_segments needs 15.85 GiB, expandable_segments with
# max_split_size_mb:128 16.00 GiB (within 1%) at one more changed key: the simpler one is recommended
run "$A" advise --format csv "$T/gpt2_train_varlen__ms40.pickle.gz"
is "$(printf '%s\n' "$out" | by_name 'NR>1 && $c["recommended"]==1 {print $c["setting"] " " $c["config"]}')" "expandable_segments max_split_size_mb:40,expandable_segments:True" \
	"ms40: the simpler expandable_segments is recommended, not expandable+max_split:128 within the precision"
is "$(csv_field "$out" expandable+max_split:128 config)" "max_split_size_mb:128,expandable_segments:True" \
	"the recorded max_split_size_mb:40 and the candidate's max_split_size_mb:128 are merged key by key"
is "$(printf '%s\n' "$out" | by_name 'NR>1 {r++; n=split($c["config"], kv, ","); delete seen; for (i=1;i<=n;i++) {split(kv[i], k, ":"); if (seen[k[1]]++) d++}} END {print r + 0, d + 0}')" "11 0" \
	"no setting of the 11 names a key twice"
run "$A" advise --format csv --capacity 4GiB "$T/resnet50_train__ms128.pickle.gz"
is "$(printf '%s\n' "$out" | by_name 'NR>1' | wc -l) $(printf '%s\n' "$out" | by_name 'NR>1 && $c["config"]=="max_split_size_mb:128"' | wc -l)" "12 1" \
	"settings that merge to the same (max_split_size_mb:128 on the current one; expandable+max_split:128 and max_split:128+gc:0.8 on two others) are replayed once: 12 of 15 rows"
# --- without a target, an OOM recording: no fits=true for what ran out (issue 32) ---
g=gpt2_train_varlen__p110_default
run "$A" advise --format csv "$T/$g.pickle.gz"
is "$st" 0 "no target, OOM recording: exit 0 when a setting is shown to fit (it needs no more than the recording held)"
is "$(csv_field "$out" current fits)|$(csv_field "$out" expandable_segments fits)|$(csv_field "$out" max_split_size_mb:128 fits)" "0|1|" \
	"no target: the recorded settings ran out (0), expandable_segments needs less than was held (1), max_split_size_mb:128 is unknown (empty)"
for p in default:current ms128:max_split_size_mb:128 exp:expandable_segments; do
	tag=${p%%:*}; s=${p#*:}
	[ "$(gt ${g%_default}_$tag oom)" = 1 ] && { f=$(csv_field "$out" "$s" fits); [ "$f" = 0 ] || { [ -z "$f" ] && [ -n "$(csv_field "$out" "$s" needed_bytes)" ]; }; ok $? "no target: $s, which ran out of memory on the GPU, is not reported to fit (fits '$f')"; }
done
if [ -n "$PYTHON" ]; then
	j=$("$A" advise --format json "$T/$g.pickle.gz" 2>/dev/null | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); s={x["setting"]: x["fits"] for x in d["settings"]}; print(s["current"], s["expandable_segments"], s["max_split_size_mb:128"], d["recorded_held_bytes"])')
	is "$j" "False True None $(gt $g peak_reserved)" "--format json without a target: false, true, null; the limit was at least the recorded peak"
fi
C="$srcdir/traces/captured"
run "$A" advise --format csv "$C/emptycache__p110_default.pickle.gz"
is "$st" 4 "no target, OOM recording, no setting needs less than the recording held: exit 4"
is "$(printf '%s\n' "$out" | by_name 'NR>1 {n++; if ($c["fits"] == 1) y++} END {print n + 0, y + 0}')" "11 0" "and none of its 11 settings is reported to fit"
run "$A" advise --format csv --oom-message "$(oommsg "$C/emptycache__p110_default.meta.json")" "$C/emptycache__p110_default.pickle.gz"
is "$st $(csv_field "$out" current fits)" "0 0" "with its OOM message the limit is known (521.23 MiB allowed): exit 0, the recorded settings do not fit"
# --- one numbering everywhere (issue 32): replay, blame, advise and info name the same trace entry
# and count the same events (the snapshot's 21909 entries hold 14390 events a replay counts) ---
g=gpt2_train_varlen__p110_default; cap=$(gt $g capacity_bytes)
r=$("$A" replay --capacity "$cap" --no-timing "$T/$g.pickle.gz" 2>/dev/null)
b=$("$A" blame --format table "$T/$g.pickle.gz" 2>/dev/null | sed -n 's/^At the first out-of-memory (trace entry \([0-9]*\)).*/\1/p')
ad=$("$A" advise --format csv --capacity "$cap" "$T/$g.pickle.gz" 2>/dev/null)
is "$(col "$r" first_oom_event) $b $(csv_field "$ad" current oom_entry)" "20516 20516 20516" "replay's first_oom_event, blame's and advise's OOM: trace entry 20516, all three"
inf=$("$A" info "$T/$g.pickle.gz")
at=$("$A" advise --capacity "$cap" "$T/$g.pickle.gz" 2>/dev/null | head -1)
is "$(col "$r" events) $(printf '%s\n' "$inf" | sed -n 's/^events: //p')" "14390 14390" "replay and info count the same events"
contains "$at" "($(gt $g trace_entries) trace entries, 14390 events; 1 out-of-memory in the recording)"; ok $? "advise names the trace entries (PyTorch's $(gt $g trace_entries)) and the same events"
# replay takes the message too: at its limit the recorded settings run out at the recording's own OOM
run "$A" replay --no-timing --oom-message "$(oommsg "$T/$g.meta.json")" "$T/$g.pickle.gz"
is "$st $(col "$out" capacity_bytes) $(col "$out" num_ooms) $(col "$out" first_oom_event)" "0 18575733555 1 20516" \
	"replay --oom-message: capacity 17.30 GiB, one OOM, at trace entry 20516 as recorded"
finish
