#!/bin/sh
# batch.sh - what a platform engineer running allocsim over many files relies on: --keep-going,
# durable rows after SIGKILL and --resume from the journal, quiet batches, closed pipes, refused
# output names and headers, info's machine-readable output, progress that ends with the work.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
snap="$T/bert_infer_varlen__default.pickle.gz"
mid="$T/resnet50_train__default.pickle.gz"

# ---- an RMM log whose header misnames a column is refused, naming file, line and column ----
printf 'Thread,Time,Action,Pointer,Size,StreamID\n1,1,allocate,0x1000000,1024,0x5\n1,2,free,0x1000000,1024,0x7\n' > "$TMP/hdr.csv"
run "$A" info "$TMP/hdr.csv"
is "$st: ${errout%%(*}" "65: allocsim: error: $TMP/hdr.csv:1: bad RMM log header: column 6 is 'StreamID', expected 'Stream' " \
	"an RMM log whose last header column is misnamed: exit 65, naming file, line and column"
printf 'Thread,Time,Action,Pointer,Size,Stream,Extra\n1,1,allocate,0x1000000,1024,0x5\n' > "$TMP/hdr7.csv"
run "$A" info "$TMP/hdr7.csv"
contains "$st: $errout" "65: allocsim: error: $TMP/hdr7.csv:1: bad RMM log header: column 7 ('Extra')"; ok $? "a seventh header column is refused"
printf 'Thread,Time,Action,Pointer,Size,Stream\r\n1,1,allocate,0x1000000,1024,0x5\r\n1,2,free,0x1000000,1024,0x7\r\n' > "$TMP/crlf.csv"
run "$A" info "$TMP/crlf.csv"
is "$st $(printf '%s\n' "$out" | grep '^alloc_events:')" "0 alloc_events: 1" "the right header with CRLF line ends is read"

# ---- a reader that closes the pipe (| head) ends the output, not with 141: every command exits 0 ----
for c in "convert $mid -o -" "sweep -t $mid --param max_split_size_mb=20..20000:+20" "info $mid"; do
	{ "$A" $c 2> "$TMP/pipe.err"; echo $? > "$TMP/pipe.st"; } | head -1 > "$TMP/pipe.out"
	slurp pst "$TMP/pipe.st"; slurp perr "$TMP/pipe.err"; slurp pout "$TMP/pipe.out"
	is "$pst:$perr:$([ -n "$pout" ] && echo read)" "0::read" "allocsim ${c%% *} | head -1: exit 0, no message"
done
run "$A" convert "$mid" -o /dev/full
is "$st" 74 "a full disk on standard output is still a write error (74)"

# ---- convert -o X.asbin.gz: the binary format is not compressed; refused, not a text trace ----
run "$A" convert "$snap" -o "$TMP/x.asbin.gz"
is "$st:$([ -e "$TMP/x.asbin.gz" ] && echo written)" "64:" "convert -o X.asbin.gz: exit 64, nothing written"
contains "$errout" "the binary format is not compressed"; ok $? "... saying why and what to name it"
run "$A" convert "$snap" -o "$TMP/x.asbin"
is "$st:$("$A" info "$TMP/x.asbin" | grep '^format:' | cut -d' ' -f1-2)" "0:format: binary" "-o X.asbin writes the binary format"

# ---- info --format json|csv: the text output's numbers, machine-readable ----
run "$A" info "$mid"; txt=$out
tv() { printf '%s\n' "$txt" | sed -n "s/^$1: \([^ ]*\).*/\1/p"; }
run "$A" info --format csv "$mid"
is "$st $(cols "$out" events peak_live_requested_bytes alloc_events recorded_ooms live_at_end time_span_us pytorch_version)" \
	"0 $(tv events) $(tv peak_live_requested_bytes) $(tv alloc_events) $(tv recorded_ooms) $(tv live_at_end) $(tv time_span_us) 2.9 to 2.11" \
	"info --format csv: one row with the text output's numbers"
is "$(col "$out" size_histogram)" "$(printf '%s\n' "$txt" | sed -n 's/^  \([0-9]*\),\([0-9]*\)$/\1:\2/p' | paste -sd';' -)" "... and its histogram as LOW:COUNT;..."
run "$A" info --format csv "$TMP/crlf.csv"
is "$(printf '%s\n' "$out" | head -1)" "$("$A" info --format csv "$mid" | head -1)" "the same columns for every trace (an RMM log's row stacks under a snapshot's)"
run "$A" info --format json "$mid"
if command -v python3 > /dev/null; then
	is "$st $(printf '%s\n' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events"], d["peak_live_requested_bytes"], d["devices"][0]["history_entries"], sum(b["count"] for b in d["size_histogram"]), d["history_truncated"])')" \
		"0 $(tv events) $(tv peak_live_requested_bytes) $(tv device_0_history_entries) $(tv alloc_events) False" "info --format json: valid JSON with the same numbers"
fi
contains "$out" "\"events\": $(tv events), "; ok $? "info --format json has the event count"
run "$A" info --format yaml "$mid"; is "$st" 64 "info --format yaml: exit 64"

finish
