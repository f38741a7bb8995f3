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
# many traces: one header, a row each; a bad one stops it, or with -k is an error line (exit 5)
run "$A" info --format csv "$mid" "$TMP/crlf.csv"
is "$st $(printf '%s\n' "$out" | wc -l) $(printf '%s\n' "$out" | tail -1 | cut -d, -f2)" "0 3 rmm" "info --format csv A B: one header, one row each"
head -c 20000 "$mid" > "$TMP/bad.pickle.gz"
run "$A" info --format csv "$mid" "$TMP/bad.pickle.gz" "$TMP/crlf.csv"
contains "$st: $errout" "65: allocsim: error: $TMP/bad.pickle.gz: truncated gzip data"; ok $? "info of many stops at a bad one (65), naming it"
run "$A" info -k --format json "$mid" "$TMP/bad.pickle.gz" "$TMP/crlf.csv"
is "$st $(printf '%s\n' "$out" | grep -c '^{"trace": ')" "5 2" "info -k: the good ones reported (a JSON object a line), exit 5"
contains "$errout" "allocsim: error: input 2 of 3: $TMP/bad.pickle.gz: truncated gzip data"; ok $? "... an error line for the bad one, naming position and file"

# ---- --keep-going: one unreadable snapshot among many does not stop the batch ----
head -c 20000 "$mid" > "$TMP/trunc.pickle.gz"
good2="$T/bert_infer_varlen__default.pickle.gz"
run "$A" compare -p pytorch,bestfit -o "$TMP/c.csv" "$mid" "$TMP/trunc.pickle.gz" "$good2"
is "$st:$([ -e "$TMP/c.csv" ] && echo written)" "65:" "compare without --keep-going: exit 65 as before, nothing written"
contains "$errout" "$TMP/trunc.pickle.gz: truncated gzip data"; ok $? "... and the message names the file"
"$A" compare -p pytorch,bestfit "$mid" "$good2" > "$TMP/c-good.csv"
run "$A" compare --keep-going -p pytorch,bestfit -o "$TMP/c.csv" "$mid" "$TMP/trunc.pickle.gz" "$good2" "$TMP/missing.pickle"
is "$st" 5 "compare --keep-going with bad inputs: exit 5 (some inputs failed)"
ok "$(cmp -s "$TMP/c.csv" "$TMP/c-good.csv"; echo $?)" "... the rows of the good ones, the same bytes as a compare of them alone"
is "$(printf '%s\n' "$errout" | grep -c '^allocsim: error: input ')" 2 "... one error line per bad input"
contains "$errout" "allocsim: error: input 2 of 4: $TMP/trunc.pickle.gz: truncated gzip data"; ok $? "... naming its position and the file"
contains "$errout" "allocsim: error: input 4 of 4: cannot open '$TMP/missing.pickle'"; ok $? "... a missing file too"
run "$A" compare -k -o "$TMP/c2.csv" "$TMP/trunc.pickle.gz" "$TMP/missing.pickle"
is "$st:$([ -e "$TMP/c2.csv" ] && echo written)" "65:" "compare -k where every input fails: the first failure's status, nothing written"
run "$A" compare -k -p pytorch "$mid"
is "$st $(printf '%s\n' "$out" | wc -l)" "0 2" "compare -k with nothing bad: exit 0"

g="--param max_split_size_mb=none,40"
"$A" sweep -t "$mid" "$good2" $g -o "$TMP/s-good.csv"
run "$A" sweep -t "$mid" "$TMP/trunc.pickle.gz" "$good2" $g -o "$TMP/s.csv"
is "$st:$([ -e "$TMP/s.csv" ] && echo written)" "65:" "sweep without --keep-going: exit 65 as before, nothing written"
contains "$errout" "$TMP/trunc.pickle.gz"; ok $? "... and the message names the file"
run "$A" sweep --keep-going -j 2 -t "$mid" "$TMP/trunc.pickle.gz" "$good2" $g -o "$TMP/s.csv"
is "$st" 5 "sweep --keep-going: exit 5"
is "$(cut -d, -f1 "$TMP/s.csv" | paste -sd' ' -)" "run 0 1 4 5" "... the good traces' rows, with their grid run numbers"
is "$(tail -n +2 "$TMP/s.csv" | cut -d, -f2-)" "$(tail -n +2 "$TMP/s-good.csv" | cut -d, -f2-)" "... the same rows as a sweep of the good ones alone"
contains "$errout" "allocsim: error: input 2 of 3: $TMP/trunc.pickle.gz: truncated gzip data"; ok $? "... the error line names the position and the file"
cp "$mid" "$TMP/trunc.pickle.gz"
run "$A" sweep --resume -t "$mid" "$TMP/trunc.pickle.gz" "$good2" $g -o "$TMP/s.csv"
is "$st $(cut -d, -f1 "$TMP/s.csv" | paste -sd' ' -)" "0 run 0 1 2 3 4 5" "--resume after the file is fixed runs only its rows"

# ---- durable rows: a sweep killed with SIGKILL keeps every finished row, --resume completes it ----
# (1,500 replays of a few ms; the kill comes once the journal holds two rows: the sweep is far from done)
grid="--no-share --param max_split_size_mb=20..30000:+20"
"$A" sweep -j 2 -t "$mid" $grid -o "$TMP/full.csv"
: > "$TMP/k.csv.tmp999999999"   # a temporary file of a dead process
"$A" sweep -j 2 -t "$mid" $grid -o "$TMP/k.csv" 2>/dev/null & pid=$!
i=0; lim=$((200 * ${ALLOCSIM_SLOW:-1}))
while [ "$(cat "$TMP/k.csv.partial" 2>/dev/null | wc -l)" -lt 3 ] && [ $i -lt $lim ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid 2>/dev/null; k=$?; wait $pid 2>/dev/null
rows=$(($(cat "$TMP/k.csv.partial" 2>/dev/null | wc -l) - 1))
echo "# killed with $rows rows in the journal"
ok "$([ $k = 0 ] && [ "$rows" -ge 2 ] && [ ! -e "$TMP/k.csv" ]; echo $?)" "a sweep killed with SIGKILL: the finished rows are on disk in k.csv.partial, no k.csv"
ok "$([ -s "$TMP/k.csv.partial" ] && [ -z "$(grep -vxF -f "$TMP/full.csv" "$TMP/k.csv.partial")" ]; echo $?)" "... whole rows of the full sweep"
run "$A" sweep -j 2 -t "$mid" $grid --resume -o "$TMP/k.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/k.csv" "$TMP/full.csv"; echo $?)" "--resume after SIGKILL gives the byte-identical file"
contains "$errout" "finished rows taken from '$TMP/k.csv.partial'"; ok $? "... taking the journal's rows"
is "$st $(ls -a "$TMP" | grep -c '^k\.csv\.')" "0 0" "no journal, lock or temporary file is left (the dead processes' included)"
: > "$TMP/k.csv.tmp1"   # process 1 is alive: its file is not ours to remove
run "$A" sweep -t "$mid" $g -o "$TMP/k.csv"
ok "$([ "$st" = 0 ] && [ -s "$TMP/k.csv" ] && [ -e "$TMP/k.csv.tmp1" ]; echo $?)" "a live process's temporary file is left alone"
rm -f "$TMP/k.csv.tmp1"

# compare too: its rows go to FILE.partial as they finish; --resume takes them (8 traces x 13 policies)
set -- $(ls "$T"/*.pickle.gz | grep -v p110 | head -8)
"$A" compare "$@" > "$TMP/cfull.csv"
"$A" compare -o "$TMP/ck.csv" "$@" 2>/dev/null & pid=$!
i=0; while [ "$(cat "$TMP/ck.csv.partial" 2>/dev/null | wc -l)" -lt 3 ] && [ $i -lt $lim ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid 2>/dev/null; k=$?; wait $pid 2>/dev/null
rows=$(($(cat "$TMP/ck.csv.partial" 2>/dev/null | wc -l) - 1)); echo "# compare killed with $rows rows in the journal"
ok "$([ $k = 0 ] && [ "$rows" -ge 2 ] && [ ! -e "$TMP/ck.csv" ] && [ -z "$(tail -n +2 "$TMP/ck.csv.partial" | cut -d, -f2- | grep -vxF -f "$TMP/cfull.csv")" ]; echo $?)" \
	"a compare killed with SIGKILL: its finished rows are on disk in ck.csv.partial, whole rows of the full compare"
run "$A" compare --resume -o "$TMP/ck.csv" "$@"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/ck.csv" "$TMP/cfull.csv"; echo $?)" "compare --resume after SIGKILL gives the byte-identical file"
contains "$errout" "$rows finished rows taken from"; ok $? "... taking the journal's rows"
is "$st $(ls -a "$TMP" | grep -c '^ck\.csv\.')" "0 0" "no journal, lock or temporary file is left"
run "$A" compare --resume "$@"; is "$st" 64 "compare --resume without -o FILE: exit 64"
printf '%s\n' "$(head -1 "$TMP/full.csv")" > "$TMP/k.csv.partial"
run "$A" sweep -t "$mid" $g -o "$TMP/k.csv"
is "$st $([ -e "$TMP/k.csv.partial" ] && echo left)" "0 " "a sweep without --resume replaces an earlier journal (and removes it at the end) ..."
contains "$errout" "warning: '$TMP/k.csv.partial' (the finished rows of an earlier run that did not end) is replaced"; ok $? "... with a warning"

# ---- warnings: once, with a count; --quiet ----
o1="$T/bert_infer_varlen__p110_default.pickle.gz"; o2="$T/gpt2_train_varlen__p110_default.pickle.gz"; o3="$T/bert_infer_varlen__p110_gc06.pickle.gz"
run "$A" sweep -t "$o1" "$o2" "$o3" $g --shard 1/2 -o "$TMP/w.csv"
is "$st $(printf '%s\n' "$errout" | grep -c 'warning')" "0 2" "sweep over three traces that ran out of memory: two warnings, not three"
contains "$errout" "the same holds for 2 more traces"; ok $? "... the second counts the others"
run "$A" sweep -t "$o1" "$o2" "$o3" $g --shard 2/2 -o "$TMP/w2.csv"
is "$st:$errout" "0:" "shard 2/2 does not repeat them (shard 1 tells)"
run "$A" sweep -q -t "$o1" "$o2" "$o3" $g -o "$TMP/w.csv"
is "$st:$errout:$(wc -l < "$TMP/w.csv")" "0::7" "--quiet: no warning, the rows as ever"

# ---- progress: on a terminal only; it ends with the work (no 200 ms sleep after it) ----
if command -v script > /dev/null && script -qc true /dev/null > /dev/null 2>&1; then
	small="$srcdir/traces/captured/rounding__default.pickle.gz"
	ms() { date +%s%N | cut -c1-13; }
	# ten sweeps of a few ms on a terminal against the same ten without one: the old loop slept 200 ms
	# after a short sweep on a terminal (2 s over ten); the difference allowed is 1 s (ALLOCSIM_SLOW: more)
	t0=$(ms); for i in 1 2 3 4 5 6 7 8 9 10; do script -qc "'$A' sweep -t '$small' $g -o '$TMP/p.csv'" /dev/null > "$TMP/pty.out"; done; t1=$(ms)
	for i in 1 2 3 4 5 6 7 8 9 10; do script -qc "'$A' sweep -t '$small' $g -o '$TMP/p.csv' 2>/dev/null" /dev/null > /dev/null; done; t2=$(ms)
	echo "# ten sweeps: $((t1 - t0)) ms with the bar on a terminal, $((t2 - t1)) ms without"
	contains "$(cat "$TMP/pty.out")" "2/2"; bar=$?; ok $bar "sweep on a terminal draws its bar"
	ok "$([ $bar = 0 ] && [ $((t1 - t0 - (t2 - t1))) -lt $((1000 * ${ALLOCSIM_SLOW:-1})) ]; echo $?)" "... and ends with the work: ten short sweeps lose less than 1 s to it (the 200 ms sleep lost 2 s)"
	for c in "compare -p pytorch,bestfit $small" "fit param max_split_size_mb --values none,40 --capacity 1GiB $small" "fit capacity --samples 1 $small" "advise $small"; do
		ALLOCSIM_PROGRESS_DELAY=0 script -qc "'$A' $c > /dev/null" /dev/null > "$TMP/pty.out"
		contains "$(cat "$TMP/pty.out")" "${c%% *} [###"; ok $? "${c%% *} on a terminal draws a bar (ALLOCSIM_PROGRESS_DELAY=0: at once)"
	done
	ALLOCSIM_PROGRESS_DELAY=0 script -qc "'$A' replay -p optimal --no-timing '$small' > /dev/null" /dev/null > "$TMP/pty.out"
	contains "$(cat "$TMP/pty.out")" "optimal [###"; ok $? "the optimal policy's placement draws a bar on a terminal (replay -p optimal)"
	ALLOCSIM_PROGRESS_DELAY=0 script -qc "'$A' sweep -q -p optimal -t '$small' -o '$TMP/p.csv'; echo st=\$?" /dev/null > "$TMP/pty.out"
	is "$(tr -d '\r' < "$TMP/pty.out")" "st=0" "... not under sweep --quiet"
	run "$A" compare -p pytorch "$small"
	is "$st:$errout" "0:" "no bar when stderr is no terminal"
	script -qc "'$A' sweep -q -t '$small' $g -o '$TMP/p.csv'; echo st=\$?" /dev/null > "$TMP/pty.out"
	is "$(tr -d '\r' < "$TMP/pty.out")" "st=0" "sweep --quiet on a terminal: no bar"
fi

finish
