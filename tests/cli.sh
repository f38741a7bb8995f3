#!/bin/sh
# cli.sh - the command line: help, versions, exit statuses, option parsing, outputs.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
snap="$T/bert_infer_varlen__default.pickle.gz"

for c in "" replay validate info convert policies columns; do
	run "$A" $c --help; is "$st" 0 "allocsim $c --help exits 0"
	contains "$out" "usage: allocsim"; ok $? "allocsim $c --help prints usage"
	run "$A" $c --version; is "$st $out" "0 allocsim 0.1.0" "allocsim $c --version"
done
run "$A";                        is "$st" 64 "no command: exit 64"
run "$A" frobnicate;             is "$st" 64 "unknown command: exit 64"
contains "$errout" "'frobnicate' is not an allocsim command"; ok $? "unknown command is named"
run "$A" replay;                 is "$st" 64 "replay without a trace: exit 64"
run "$A" replay --bogus x;       is "$st" 64 "unknown option: exit 64"
run "$A" replay -p nosuch "$snap"; is "$st" 64 "unknown policy: exit 64"
contains "$errout" "unknown policy 'nosuch'"; ok $? "unknown policy is named"

# policies: every option of every policy, from the tables that parse them
run "$A" policies
is "$st" 0 "policies exits 0"
for w in pytorch bestfit passthrough max_split_size_mb roundup_power2_divisions garbage_collection_threshold expandable_segments max_non_split_rounding_mb granule min_segment per_stream split_threshold; do
	contains "$out" "$w"; ok $? "policies lists $w"
done

# every default 'allocsim policies' shows is the one the policy runs: -c with each key at its shown
# default replays to the same row as no -c (as_conf_defaults applies the table's text through each
# row's parser; pytorch and pytorch-pinned start from their own, so this holds them to their table).
# Left out: a default shown as not set (unset, -), and pytorch's keys whose shown default is a value
# the key refuses (unlimited, 0 for off).
printf '%s\n' "$out" | awk '/^[a-z]/ { p = $1 } /^    / && $3 == "default" { print p, $1, $4 }' > "$TMP/defaults"
np=0
for p in $(awk '{ print $1 }' "$TMP/defaults" | uniq); do
	np=$((np + 1))
	conf=$(awk -v p="$p" '$1 == p && $3 != "unset" && $3 != "-" && !(p ~ /^pytorch/ && $2 ~ /^(max_split_size_mb|roundup_power2_divisions|garbage_collection_threshold|pinned_reserve_segment_size_mb)$/) { printf "%s%s:%s", (n++ ? "," : ""), $2, $3 }' "$TMP/defaults")
	t="$srcdir/traces/pytorch-h200/bert_infer_varlen__default.pickle.gz"
	[ "$p" = pytorch-pinned ] && t="$srcdir/traces/fixtures/pinned-synthetic.host.csv"
	"$A" replay -p "$p" --no-timing "$t" 2>"$TMP/e1" | csv_bars | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "config") k = i } { $k = ""; print }' > "$TMP/d1"
	"$A" replay -p "$p" -c "$conf" --no-timing "$t" 2>"$TMP/e2" | csv_bars | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "config") k = i } { $k = ""; print }' > "$TMP/d2"
	if [ "$(wc -l < "$TMP/d1")" = 2 ] && cmp -s "$TMP/d1" "$TMP/d2"; then ok 0 "$p: -c '$conf' (its shown defaults) replays as no -c"
	else ok 1 "$p: -c '$conf' (its shown defaults) replays as no -c"; diff "$TMP/d1" "$TMP/d2" | sed 's/^/# /' | head -6; sed 's/^/# /' "$TMP/e2" | head -3; fi
done
[ "$np" -gt 0 ] && [ "$np" = "$(printf '%s\n' "$out" | grep -c '^[a-z][a-z0-9-]*$')" ]; ok $? "the defaults of every policy 'allocsim policies' lists are checked ($np)"

# columns: one list defines the header, the row, --stats and the table in doc/metrics.md
run "$A" columns
is "$st" 0 "columns exits 0"
is "$out" "$(sed -n '/^<!-- columns: generated/,/^<!-- end of columns -->/p' "$srcdir/doc/metrics.md" | sed '1d;$d')" \
	"doc/metrics.md's column table is what 'allocsim columns' prints (regenerate it with 'allocsim columns')"
run "$A" replay -p passthrough --no-timing --stats "$TMP/stats.csv" "$snap"
is "$(printf '%s\n' "$out" | head -1)" "$(printf '%s\n' "$out" | head -0; "$A" columns | tail -n +3 | cut -d'`' -f2 | paste -sd, -)" \
	"the CSV header is the column list, in order"
is "$(col "$out" schema_version)" 3 "the last column is the schema version (3)"
is "$(grep -c '^summary\.' "$TMP/stats.csv")" 13 "--stats writes the 13 counters as summary.NAME"
is "$(grep '^summary.allocs,' "$TMP/stats.csv")" "summary.allocs,$(col "$out" allocs)" "--stats and the row agree"

# capabilities, not names: --segments needs a policy that answers for its segment map
run "$A" replay -p passthrough --segments "$TMP/seg.csv" "$snap"
is "$st" 64 "--segments with a policy without a segment map is a usage error"
contains "$errout" "the passthrough policy has no segment map"; ok $? "... naming the policy"
run "$A" replay -p bestfit --no-timing --segments "$TMP/seg.csv" "$snap"
is "$st $(awk -F, '$1 == "end" && !s[$2]++ { t += $4 } END { printf "%.0f", t }' "$TMP/seg.csv")" "0 $(col "$out" final_reserved_bytes)" \
	"bestfit's segment map at the end covers its reserved bytes"

# sizes
for s in 512:512 64KiB:65536 20MiB:20971520 80GiB:85899345920 1.5GB:1500000000 2.5KiB:2560; do
	run "$A" replay -p passthrough --capacity "${s%%:*}" --no-timing "$snap"
	is "$(col "$out" capacity_bytes)" "${s#*:}" "--capacity ${s%%:*} = ${s#*:} bytes"
done
for s in 12XB 0.3B 99999999999999999999GiB -5 ""; do
	run "$A" replay --capacity "$s" "$snap"; is "$st" 64 "--capacity '$s' is rejected with 64"
done
# sizes as people type them: decimals are rounded down to bytes, and stderr says so; k is K is KiB
run "$A" replay -p passthrough --capacity 17.30GiB --no-timing "$snap"
is "$st $(col "$out" capacity_bytes)" "0 18575733555" "--capacity 17.30GiB = 18575733555 bytes (rounded down)"
is "$errout" "allocsim: note: size '17.30GiB' is 18575733555.2 bytes: rounded down to 18575733555 bytes" "and stderr states the rounding"
run "$A" replay -p passthrough --capacity 16k --no-timing "$snap"; a=$(col "$out" capacity_bytes)
run "$A" replay -p passthrough --capacity 16K --no-timing "$snap"
is "$a $(col "$out" capacity_bytes)" "16384 16384" "--capacity 16k = 16K = 16384 bytes"

# PYTORCH_CUDA_ALLOC_CONF validation: each message names the key and the value
chk() { run "$A" replay -c "$1" "$snap"; is "$st: $errout" "64: allocsim: error: $2" "-c '$1' says: $2"; }
chk "max_split_size_mb:10" "max_split_size_mb: 10 is too small: at least 20 (the large segment size, in MiB)"
chk "max_split_size_mb:abc" "max_split_size_mb: 'abc' is not a number of MiB"
chk "roundup_power2_divisions:3" "roundup_power2_divisions: 3 is not a power of 2"
chk "roundup_power2_divisions:[256:3]" "roundup_power2_divisions: 3 in '[256:3]' is not a power of 2 (or 0 to disable roundup)"
chk "roundup_power2_divisions:[100:2]" "roundup_power2_divisions: the interval 100 in '[100:2]' is not a power of 2"
chk "garbage_collection_threshold:1.5" "garbage_collection_threshold: '1.5' is not a number in (0.0, 1.0)"
chk "expandable_segments:true" "expandable_segments: 'true' is not True or False"
chk "no_such_key:1" "Unrecognized key 'no_such_key' in allocator config (see 'allocsim policies')"
chk "max_splt_size_mb:40" "Unrecognized key 'max_splt_size_mb' in allocator config: did you mean 'max_split_size_mb'? (see 'allocsim policies')"
chk "max_split_size:40" "Unrecognized key 'max_split_size' in allocator config: did you mean 'max_split_size_mb'? (see 'allocsim policies')"
chk "backend:x" "backend: 'x' is not native or cudaMallocAsync"
run "$A" replay -c "max_split_size_mb" "$snap"; is "$st" 64 "-c 'max_split_size_mb' is rejected"; contains "$errout" "expected ':'"; ok $? "-c 'max_split_size_mb' says: expected ':'"
run "$A" replay -c "backend:cudaMallocAsync" "$snap"; is "$st" 64 "-c 'backend:cudaMallocAsync' is rejected"; contains "$errout" "not simulated by the pytorch policy: replay with -p cuda-async"; ok $? "-c 'backend:cudaMallocAsync' says: not simulated, names -p cuda-async"
# a key of another policy says whose it is; misspelt policies and commands get the closest name
run "$A" replay -p bestfit -c max_split_size_mb:40 "$snap"
is "$st: $errout" "64: allocsim: error: max_split_size_mb is an option of pytorch, not bestfit (see 'allocsim policies')" "a pytorch key given to bestfit names its policy"
run "$A" replay -p bestfit -c min_segmnt:20MiB "$snap"
is "$st: $errout" "64: allocsim: error: Unrecognized key 'min_segmnt' in allocator config: did you mean 'min_segment'? (see 'allocsim policies')" "bestfit: did you mean min_segment"
run "$A" replay -p bestfti "$snap"
is "$st: $errout" "64: allocsim: error: replay: unknown policy 'bestfti': did you mean 'bestfit'? (see 'allocsim policies')
Try 'allocsim replay --help'." "a misspelt policy: did you mean"
run "$A" sweep -p pytroch -t "$snap"
is "$st: $errout" "64: allocsim: error: sweep: unknown policy 'pytroch': did you mean 'pytorch'? (see 'allocsim policies')
Try 'allocsim sweep --help'." "sweep: a misspelt policy: did you mean"
run "$A" replya "$snap"
is "$st: $errout" "64: allocsim: error: 'replya' is not an allocsim command: did you mean 'replay'? See 'allocsim --help'." "a misspelt command: did you mean"
run "$A" replay -c " max_split_size_mb : 128 , roundup_power2_divisions:[256:1,512:2,>:8]" --no-timing "$snap"
is "$st" 0 "whitespace is dropped and the list form parses"
run "$A" replay -p bestfit -c "granule:3" "$snap"; is "$st" 64 "bestfit granule must be a power of two"

# an OOM is a result, not an error
run "$A" replay -c "" --capacity 1GiB --no-timing "$snap"
is "$st" 0 "replay under too small a capacity exits 0"
ok $([ "$(col "$out" num_ooms)" -gt 0 ] && echo 0 || echo 1) "and counts OOMs ($(col "$out" num_ooms))"
ok $([ "$(col "$out" first_oom_event)" -ge 0 ] && echo 0 || echo 1) "and names the first OOM's trace entry"
ok $([ "$(col "$out" peak_reserved_bytes)" -le 1073741824 ] && echo 0 || echo 1) "and never reserves beyond the capacity"

# outputs
run "$A" replay -c "" -o "$TMP/sum.csv" --timeline "$TMP/tl.csv" --every 100 --stats "$TMP/st.csv" "$snap"
is "$st:$out" "0:" "-o writes the summary to a file, not stdout"
is "$(head -1 "$TMP/sum.csv" | cut -d, -f1-10)" "trace,policy,config,capacity_bytes,events,allocs,frees,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes" "summary CSV header"
is "$(head -1 "$TMP/tl.csv")" "event,type,time_us,requested_bytes,allocated_bytes,reserved_bytes" "timeline header"
is "$(($(wc -l < "$TMP/tl.csv") - 1))" "$(( ($(col "$(cat "$TMP/sum.csv")" events) + 99) / 100 ))" "--every 100 writes every 100th event"
contains "$(cat "$TMP/st.csv")" "reserved_bytes.all.peak,3837788160"; ok $? "--stats writes memory_stats keys"
run "$A" replay -c "" -o "$TMP/nodir/x.csv" "$snap"; is "$st" 74 "an unwritable output exits 74"
run "$A" replay --check -p bestfit --no-timing "$snap"; is "$st" 0 "bestfit passes --check on a real trace"
run "$A" replay --check -p passthrough --no-timing "$snap"; is "$st" 0 "passthrough passes --check on a real trace"
# determinism
a=$("$A" replay -c "" --no-timing "$T/gpt2_train_varlen__ms40.pickle.gz"); b=$("$A" replay -c "" --no-timing "$T/gpt2_train_varlen__ms40.pickle.gz")
is "$a" "$b" "two runs give byte-identical CSV"
# --summary needs pytorch
run "$A" replay -p bestfit --summary "$snap"; is "$st" 64 "--summary with another policy is a usage error"
finish
