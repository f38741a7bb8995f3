#!/bin/sh
# perf.sh - decode once (every command reads its input once) and the binary event format.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
snap="$T/gpt2_train_varlen__default.pickle.gz"
snap2="$T/bert_infer_varlen__default.pickle.gz"
# rows without the trace name (the first column; the run index and parameters for sweep)
rows() { cut -d, -f2-; }

# --- decode once: standard input can be read only once, so these fail when a command re-reads ---
a=$("$A" replay -c recorded --no-timing "$snap" | tail -1 | rows)
b=$("$A" replay -c recorded --no-timing - < "$snap" | tail -1 | rows)
is "$b" "$a" "replay -c recorded reads a snapshot once (from standard input, the same row as from the file)"
a=$("$A" replay -c "" --no-timing --segments "$TMP/seg-file.csv" "$snap2" | tail -1 | rows)
b=$("$A" replay -c "" --no-timing --segments "$TMP/seg-stdin.csv" - < "$snap2" | tail -1 | rows)
is "$b" "$a" "replay --segments replays its second pass from memory (standard input works)"
cmp -s "$TMP/seg-file.csv" "$TMP/seg-stdin.csv"; ok $? "the segment map from standard input equals the file's"
"$A" sweep -t "$snap" --param max_split_size_mb=none,20,64 | cut -d, -f1,2,4- > "$TMP/sw-file.csv"
"$A" sweep -t - --param max_split_size_mb=none,20,64 < "$snap" | cut -d, -f1,2,4- > "$TMP/sw-stdin.csv"
is "$(wc -l < "$TMP/sw-stdin.csv")" 4 "sweep from standard input: a header and 3 rows"
cmp -s "$TMP/sw-file.csv" "$TMP/sw-stdin.csv"; ok $? "sweep decodes its trace once: 3 runs from standard input equal the file's"
a=$("$A" fit capacity "$snap" | tail -1)
b=$("$A" fit capacity - < "$snap" | tail -1)
is "$b" "$a" "fit capacity decodes its trace once (standard input: the same capacity)"
contains "$a" "" && [ "$a" -gt 0 ] 2>/dev/null; ok $? "fit capacity prints a capacity in bytes ($a)"
gzip -dc "$snap" | "$A" convert - -o "$TMP/stdin.trace"
grep -q '^#allocator_settings: ' "$TMP/stdin.trace"; ok $? "convert from standard input carries the snapshot's settings (read once)"
"$A" convert "$snap" -o "$TMP/file.trace"
cmp -s "$TMP/stdin.trace" "$TMP/file.trace"; ok $? "convert from standard input equals convert from the file"

# --- sweep output does not depend on -j ---
"$A" sweep -t "$snap" "$snap2" -p pytorch -p bestfit --param capacity=1GiB,2GiB,4GiB -j 1 > "$TMP/j1.csv"
"$A" sweep -t "$snap" "$snap2" -p pytorch -p bestfit --param capacity=1GiB,2GiB,4GiB -j 5 > "$TMP/j5.csv"
is "$(wc -l < "$TMP/j1.csv")" 13 "sweep of 2 traces x 2 policies x 3 capacities: 12 rows"
cmp -s "$TMP/j1.csv" "$TMP/j5.csv"; ok $? "sweep rows are byte-identical with -j 1 and -j 5 (threads share the decoded traces)"
finish
