#!/bin/sh
# outputs.sh - doc/reliability.md "Outputs": devices and FIFOs written in place, every write checked,
# outputs checked before the work, nothing committed when one output fails, Ctrl-C/SIGTERM during
# sweep and fit, locks on a sweep's -o, and what --resume keeps. Device nodes are made with mknod in
# the test's own directory (never the real /dev/null); those cases are skipped when mknod is refused.
# Signals go to allocsim alone (timeout --foreground; -k 10 bounds a hang, seen once in LeakSanitizer's
# exit-time check of the sanitizer build when the group was signalled).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
small="$srcdir/traces/captured/rounding__default.pickle.gz"
nodes=0
mknod "$TMP/null" c 1 3 2>/dev/null && mknod "$TMP/full" c 1 7 2>/dev/null && nodes=1
skip() { echo "ok $((n = n + 1)) # SKIP $1"; }
leftovers() { ls -a "$1" | grep -c -e '\.tmp[0-9]' -e '\.lock$'; }
ref=$("$A" replay --no-timing "$small")
mid="$T/resnet50_train__default.pickle.gz"

# ---- 1. anything that is not a regular file is written in place ----
if [ $nodes = 1 ]; then
	run "$A" replay --no-timing -o "$TMP/null" "$small"
	ok "$([ "$st" = 0 ] && [ -c "$TMP/null" ]; echo $?)" "-o a character device (mknod c 1 3): exit 0 and the node is still a device"
	run "$A" replay --no-timing --timeline "$TMP/null" --stats "$TMP/null" -o "$TMP/null" "$small"
	ok "$([ "$st" = 0 ] && [ -c "$TMP/null" ]; echo $?)" "one device for several outputs is allowed (like /dev/null)"
	run "$A" convert "$small" -o "$TMP/null"
	ok "$([ "$st" = 0 ] && [ -c "$TMP/null" ]; echo $?)" "convert -o a device writes in place"
else
	skip "mknod refused"; skip "mknod refused"; skip "mknod refused"
fi
mkfifo "$TMP/fifo"
timeout 20 cat "$TMP/fifo" > "$TMP/got" & reader=$!
run "$A" replay --no-timing -o "$TMP/fifo" "$small"
if [ -p "$TMP/fifo" ]; then wait $reader; else kill $reader 2>/dev/null; wait $reader 2>/dev/null; fi
ok "$([ "$st" = 0 ] && [ -p "$TMP/fifo" ]; echo $?)" "-o a FIFO: exit 0 and the FIFO is still a FIFO"
is "$(cat "$TMP/got")" "$ref" "the FIFO's reader gets the summary"
mkfifo "$TMP/noreader"
run timeout --foreground -k 10 --preserve-status -s INT 1 "$A" replay --timeline "$TMP/tl0.csv" -o "$TMP/noreader" "$small"
ok "$([ "$st" = 130 ] && [ -p "$TMP/noreader" ] && [ "$(leftovers "$TMP")" = 0 ] && [ ! -e "$TMP/tl0.csv" ]; echo $?)" "Ctrl-C while -o FIFO waits for its reader: exit 130, nothing written or left"
printf 'old\n' > "$TMP/real.csv"; ln -s real.csv "$TMP/link.csv"
run "$A" replay --no-timing -o "$TMP/link.csv" "$small"
ok "$([ "$st" = 0 ] && [ -L "$TMP/link.csv" ]; echo $?)" "-o a symlink to a regular file keeps the symlink"
is "$(cat "$TMP/real.csv")" "$ref" "and replaces its target (atomically, beside the target)"
ln -s /proc/self/fd/1 "$TMP/stdout-link"
"$A" replay --no-timing -o "$TMP/stdout-link" "$small" > "$TMP/so.csv"
ok "$([ -L "$TMP/stdout-link" ] && [ -n "$ref" ] && [ "$(cat "$TMP/so.csv")" = "$ref" ]; echo $?)" "-o a link to our own standard output (a file) writes through it"
run "$A" replay --no-timing --timeline "$TMP/stdout-link" "$small"; is "$st" 64 "and counts as standard output: two outputs there is exit 64"
printf 'old\n' > "$TMP/private.csv"; chmod 600 "$TMP/private.csv"
"$A" replay --no-timing -o "$TMP/private.csv" "$small"
is "$(stat -c %a "$TMP/private.csv"):$(head -c 6 "$TMP/private.csv")" "600:trace," "a replaced file keeps its permissions"
ln -s made.csv "$TMP/dangling.csv"
run "$A" replay --no-timing -o "$TMP/dangling.csv" "$small"
ok "$([ "$st" = 0 ] && [ -L "$TMP/dangling.csv" ] && [ "$(cat "$TMP/made.csv")" = "$ref" ]; echo $?)" "-o a dangling symlink creates its target"

# ---- 2. every write is checked: a full device on stdout and as -o ----
if [ $nodes = 1 ]; then
	enospc="write error on standard output: No space left on device"
	full() { # full DESCRIPTION CMD...: CMD with stdout on the full device must exit 74 and say so
		d=$1; shift
		"$@" > "$TMP/full" 2> "$TMP/err"; s=$?
		is "$s" 74 "$d > full device: exit 74"
		contains "$(cat "$TMP/err")" "$enospc"; ok $? "$d > full device: says '$enospc'"
	}
	full "replay --summary -o FILE" "$A" replay --summary -o "$TMP/sum.csv" "$small"
	ok "$([ "$s" = 74 ] && [ ! -e "$TMP/sum.csv" ]; echo $?)" "replay --summary: the -o file is not committed when stdout failed"
	full "replay" "$A" replay "$small"
	full "validate" "$A" validate "$small"
	full "info" "$A" info "$small"
	full "fit param" "$A" fit param max_split_size_mb --values 128 --capacity 3GiB "$small"
	full "policies" "$A" policies
	full "convert -o -" "$A" convert "$small" -o -
	full "sweep" "$A" sweep -t "$small" --param max_split_size_mb=none,128
	for c in "" replay validate info convert policies sweep fit calibrate transfer; do
		full "allocsim $c --help" "$A" $c --help
	done
	full "allocsim --version" "$A" --version
	for o in "replay:$A replay -o $TMP/full $small" "convert:$A convert $small -o $TMP/full" \
	    "sweep:$A sweep -t $small -o $TMP/full" "replay --timeline:$A replay --timeline $TMP/full -o $TMP/ok.csv $small"; do
		run ${o#*:}
		is "$st" 74 "${o%%:*} with an output on a full device: exit 74"
		contains "$errout" "No space left on device"; ok $? "${o%%:*}: the message gives the cause"
	done
	ok "$([ "$st" = 74 ] && [ ! -e "$TMP/ok.csv" ]; echo $?)" "the summary is not committed when the timeline failed"
	is "$st,$(leftovers "$TMP")" 74,0 "no temporary file is left"
else
	for i in $(seq 64); do skip "mknod refused"; done
fi

# ---- 3. outputs are checked before the work: a FIFO input with no writer would block the run ----
mkfifo "$TMP/in"; mkdir "$TMP/dir"
run timeout 10 "$A" replay --timeline "$TMP/tl.csv" --stats "$TMP/st.csv" --segments "$TMP/sg.csv" --latency "$TMP/lat.csv" -o "$TMP/dir" "$TMP/in"
is "$st" 74 "replay -o a directory fails before reading the input"
contains "$errout" "it is a directory"; ok $? "and says that it is a directory"
run "$A" replay --timeline "$TMP/tl.csv" --stats "$TMP/st.csv" --segments "$TMP/sg.csv" --latency "$TMP/lat.csv" -o "$TMP/dir" "$small"
ok "$([ "$st" = 74 ] && [ ! -e "$TMP/tl.csv" ] && [ ! -e "$TMP/st.csv" ] && [ ! -e "$TMP/sg.csv" ] && [ ! -e "$TMP/lat.csv" ]; echo $?)" "-o a directory after --timeline/--stats/--segments/--latency: none of them is written"
is "$st,$(leftovers "$TMP")" 74,0 "and no temporary file is left"
run timeout 10 "$A" replay -o "$TMP/nodir/x.csv" "$TMP/in"; is "$st" 74 "an output in a missing directory fails before the input is read"
run timeout 10 "$A" sweep -t "$TMP/in" -o "$TMP/dir"; is "$st" 74 "sweep -o a directory fails before any run"
run timeout 10 "$A" sweep -t "$TMP/in" -o "$TMP/nodir/x.csv"; is "$st" 74 "sweep -o in a missing directory fails before any run"
run "$A" replay --timeline "$TMP/x.csv" -o "$TMP/x.csv" "$small"
is "$st" 64 "two outputs on one path: exit 64"
contains "$errout" "two outputs go to one file"; ok $? "and the message says so"
ok "$([ "$st" = 64 ] && [ ! -e "$TMP/x.csv" ]; echo $?)" "and nothing is written"
run "$A" replay --stats "$TMP/x.csv" --segments "$TMP/../$(basename "$TMP")/x.csv" "$small"; is "$st" 64 "two spellings of one new path: exit 64"
printf 'x\n' > "$TMP/x.csv"; ln -s x.csv "$TMP/y.csv"
run "$A" replay --latency "$TMP/x.csv" -o "$TMP/y.csv" "$small"; is "$st" 64 "an output and a symlink to it: exit 64"
run "$A" replay --timeline - "$small"; is "$st" 64 "two outputs on standard output: exit 64"
cp "$small" "$TMP/copy.pickle.gz"
run "$A" replay -o "$TMP/copy.pickle.gz" "$TMP/copy.pickle.gz"
ok "$([ "$st" = 64 ] && cmp -s "$small" "$TMP/copy.pickle.gz"; echo $?)" "an output that is the input: exit 64, the input untouched"
run "$A" convert "$TMP/copy.pickle.gz" -o "$TMP/copy.pickle.gz"; is "$st" 64 "convert onto its own input: exit 64"

# ---- 4. Ctrl-C / SIGTERM during sweep and fit ----
# (a grid of 3000 replays of a few ms each, 1.4 s here: the trace is decoded once, so it takes that
# many to outlast 0.4 s; interrupted after 0.4 s; the rest with -j 2; --no-share: every run replayed,
# none taken from an identical one)
grid="--no-share --param max_split_size_mb=20..60000:+20"
"$A" sweep -j 2 -t "$mid" $grid -o "$TMP/full.csv"
run timeout --foreground -k 10 --preserve-status -s INT 0.4 "$A" sweep -t "$mid" $grid -o "$TMP/part.csv"
is "$st" 130 "sweep interrupted by SIGINT: exit 130"
if [ -e "$TMP/part.csv" ]; then
	rows=$(wc -l < "$TMP/part.csv")
	echo "# $((rows - 1)) of $(($(wc -l < "$TMP/full.csv") - 1)) rows were done"
	ok "$(head -n "$rows" "$TMP/full.csv" | cmp -s - "$TMP/part.csv"; echo $?)" "the file holds whole rows, in order: a prefix of the full sweep"
	contains "$errout" "run the same command with --resume"; ok $? "the message says how to resume"
else
	ok "$([ "$st" = 130 ]; echo $?)" "no run had finished: no file"
	contains "$errout" "interrupted before any run finished"; ok $? "and the message says so"
fi
run "$A" sweep -j 2 -t "$mid" $grid --resume -o "$TMP/part.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/part.csv" "$TMP/full.csv"; echo $?)" "--resume completes it to the byte-identical file"
# (two workers finish 3000 runs in 0.7 s here: twice as many)
grid2="--no-share --param max_split_size_mb=20..120000:+20"
"$A" sweep -j 2 -t "$mid" $grid2 -o "$TMP/full2.csv"
run timeout --foreground -k 10 --preserve-status -s TERM 0.4 "$A" sweep -j 2 -t "$mid" $grid2 -o "$TMP/part2.csv"
is "$st" 130 "sweep -j2 stopped by SIGTERM: exit 130"
ok "$([ "$st" = 130 ] && { [ ! -e "$TMP/part2.csv" ] || [ -z "$(grep -vxF -f "$TMP/full2.csv" "$TMP/part2.csv")" ]; }; echo $?)" "every row written is a whole row of the full sweep"
ok "$([ "$st" = 130 ] && { [ ! -e "$TMP/part2.csv" ] || tail -n +2 "$TMP/part2.csv" | cut -d, -f1 | sort -c -n; }; echo $?)" "in grid order"
run "$A" sweep -j 2 -t "$mid" $grid2 --resume -o "$TMP/part2.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/part2.csv" "$TMP/full2.csv"; echo $?)" "--resume after -j2 gives the byte-identical file"
is "$st,$(leftovers "$TMP")" 0,0 "no temporary or lock file is left"
vals="20..60000:+20" # ~3,000 replays (1.4 s here): fit decodes its trace once, so it needs many to outlast 0.3 s
"$A" fit param max_split_size_mb --values "$vals" --capacity 16GiB "$mid" > "$TMP/fit.txt"
timeout --foreground -k 10 --preserve-status -s INT 0.3 "$A" fit param max_split_size_mb --values "$vals" --capacity 16GiB "$mid" > "$TMP/fitp.txt" 2> "$TMP/fite.txt"; s=$?
is "$s" 130 "fit interrupted: exit 130"
k=$(wc -l < "$TMP/fitp.txt")
ok "$([ "$k" -lt "$(wc -l < "$TMP/fit.txt")" ] && head -n "$k" "$TMP/fit.txt" | cmp -s - "$TMP/fitp.txt"; echo $?)" "fit's lines so far are whole, and no answer line is printed"
contains "$(cat "$TMP/fite.txt")" "interrupted after"; ok $? "fit says it was interrupted"

g2="--param max_split_size_mb=none,40,128"
"$A" convert "$mid" -o "$TMP/n.trace"; mkfifo "$TMP/slow"
( head -20000 "$TMP/n.trace"; sleep 1 ) > "$TMP/slow" & writer=$!
run timeout --foreground -k 10 --preserve-status -s INT 0.3 "$A" convert - -o "$TMP/conv.trace" < "$TMP/slow"; wait $writer
ok "$([ "$st" = 130 ] && [ ! -e "$TMP/conv.trace" ] && [ "$(leftovers "$TMP")" = 0 ]; echo $?)" "convert interrupted while reading: exit 130, no output and no temporary file"
contains "$errout" "interrupted; nothing was written"; ok $? "and says so"
( head -20000 "$TMP/n.trace"; sleep 1 ) > "$TMP/slow" & writer=$!
run timeout --foreground -k 10 --preserve-status -s INT 0.3 "$A" replay --timeline "$TMP/tl1.csv" -o "$TMP/r1.csv" - < "$TMP/slow"; wait $writer
ok "$([ "$st" = 130 ] && [ ! -e "$TMP/r1.csv" ] && [ ! -e "$TMP/tl1.csv" ] && [ "$(leftovers "$TMP")" = 0 ]; echo $?)" "replay interrupted while reading a FIFO: exit 130, nothing written or left"

# ---- 5. two sweeps on one -o: the second fails at once instead of one losing the other's rows ----
timeout 30 "$A" sweep -t "$TMP/in" -o "$TMP/shared.csv" 2>/dev/null & first=$!
i=0; while [ ! -e "$TMP/shared.csv.lock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
run "$A" sweep -t "$small" --shard 2/2 -o "$TMP/shared.csv"
is "$st" 75 "a second sweep on a -o being written: exit 75"
contains "$errout" "is being written by another allocsim run"; ok $? "and says why"
timeout 10 sh -c ': > "$1"' _ "$TMP/in"; wait $first
ok "$([ $i -lt 100 ] && [ ! -e "$TMP/shared.csv" ] && [ ! -e "$TMP/shared.csv.lock" ]; echo $?)" "the lock file goes with the run that held it"
"$A" sweep -t "$small" $g2 -o "$TMP/shfull.csv"
"$A" sweep -t "$small" $g2 --shard 1/2 -o "$TMP/sh.csv"
"$A" sweep -t "$small" $g2 --shard 2/2 --resume -o "$TMP/sh.csv"
ok "$(cmp -s "$TMP/sh.csv" "$TMP/shfull.csv"; echo $?)" "shards run one after another into one file with --resume keep each other's rows"

# ---- 6. what --resume keeps ----
"$A" sweep -t "$mid" $g2 --capacity 1GiB -o "$TMP/oom.csv"
"$A" sweep -t "$mid" $g2 --capacity 1GiB --stop-at-oom -o "$TMP/stale.csv"
run "$A" sweep -t "$mid" $g2 --capacity 1GiB --resume -o "$TMP/stale.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/stale.csv" "$TMP/oom.csv"; echo $?)" "--resume does not keep the rows of a --stop-at-oom run (out-of-memory rows are run again)"
"$A" sweep -t "$mid" $g2 -o "$TMP/ok.csv"
head -c $(($(wc -c < "$TMP/ok.csv") - 40)) "$TMP/ok.csv" > "$TMP/cut.csv"
run "$A" sweep -t "$mid" $g2 --resume -o "$TMP/cut.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/cut.csv" "$TMP/ok.csv"; echo $?)" "a truncated last row is run again"
contains "$errout" "line 4: an incomplete row (no end of line)"; ok $? "with a warning naming the line"
awk -F, 'BEGIN { OFS = "," } NR == 3 { NF = NF - 1 } { print }' "$TMP/ok.csv" > "$TMP/short.csv"
run "$A" sweep -t "$mid" $g2 --resume -o "$TMP/short.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/short.csv" "$TMP/ok.csv"; echo $?)" "a row with a missing field is run again"
awk -F, 'BEGIN { OFS = "," } NR == 3 { $8 = "12x" } { print }' "$TMP/ok.csv" > "$TMP/nan.csv"
run "$A" sweep -t "$mid" $g2 --resume -o "$TMP/nan.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/nan.csv" "$TMP/ok.csv"; echo $?)" "a row with text where a number belongs is run again"
"$A" sweep -t "$mid" $g2 --timing -o "$TMP/timed.csv"
run "$A" sweep -t "$mid" $g2 --resume -o "$TMP/timed.csv"
ok "$([ "$st" = 0 ] && cmp -s "$TMP/timed.csv" "$TMP/ok.csv"; echo $?)" "rows with timing are run again without --timing"
cp "$TMP/ok.csv" "$TMP/other.csv"
run "$A" sweep -t "$mid" --param max_split_size_mb=none,40,128 --param roundup_power2_divisions=none --resume -o "$TMP/other.csv"
is "$st" 65 "--resume on the output of a sweep with other parameters: exit 65"
contains "$errout" "its header differs"; ok $? "and says the header differs"
ok "$(cmp -s "$TMP/other.csv" "$TMP/ok.csv"; echo $?)" "and leaves the file as it was"
run "$A" sweep -t "$small" $g2 --resume -o "$TMP/other.csv"
is "$st" 65 "--resume with rows of another trace: exit 65"
contains "$errout" "line 2: the row is of no run of this sweep"; ok $? "and names the line"
{ cat "$TMP/ok.csv"; sed -n '2s/^0,none,\([^,]*\),pytorch,,0,[0-9]*/0,none,\1,pytorch,,0,1/p' "$TMP/ok.csv"; } > "$TMP/dup.csv"
run "$A" sweep -t "$mid" $g2 --resume -o "$TMP/dup.csv"
is "$st" 65 "--resume with two different rows for one run: exit 65"
run "$A" sweep -t "$small" --param 'x,y=none' -o "$TMP/comma.csv"
is "$st" 64 "a --param name with a comma: exit 64"
contains "$errout" "contains a comma"; ok $? "and says why"
run "$A" sweep -t "$small" --param 'max_split_size_mb=1"28' -o "$TMP/quote.csv"
is "$st" 64 "a --param value with a double quote: exit 64"
run "$A" sweep -t "$small" --param max_split_size_mb=128 --resume -o "$TMP/null"
[ $nodes = 1 ] && is "$st" 64 "--resume needs a regular file" || skip "mknod refused"
finish
