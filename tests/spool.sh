#!/bin/sh
# spool.sh - replay and validate decode a snapshot (settings at its end) into a temporary file of
# records and replay from it (src/readers/spool.c): the same rows as from memory, and a clear error
# where no temporary file can be made; and the pickle memo's pages packed as the reader passes them. (The memory it saves: tests/spool-long.sh and make bench.)
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
s="$T/gpt2_train_varlen__ms40.pickle.gz"
# the same replay through the binary form (mapped: not spooled) and through the spool
"$A" convert "$s" -o "$TMP/s.asbin"
run "$A" replay --no-timing -c max_split_size_mb:40 "$s"
r1=$(printf '%s\n' "$out" | tail -1 | cut -d, -f4-)
run "$A" replay --no-timing -c max_split_size_mb:40 "$TMP/s.asbin"
is "$r1" "$(printf '%s\n' "$out" | tail -1 | cut -d, -f4-)" "a spooled snapshot's replay equals its binary form's"
run "$A" replay --no-timing -c recorded - < "$s"
is "$st|$(col "$out" config)|$(col "$out" peak_reserved_bytes)" "0|max_split_size_mb:40|$(printf '%s\n' "$r1" | cut -d, -f7)" \
	"-c recorded from standard input: the settings at the end, the replay from the spool"
run "$A" validate "$s"
is "$st|$out" "0|$s: exact (604 device calls, 604 end-state segments)" "validate from the spool follows PyTorch exactly"
# no temporary file: exit 74 naming the directory, nothing written
run env TMPDIR="$TMP/none" "$A" replay -c "" "$s"
is "$st|$errout" "74|allocsim: error: cannot create a temporary file in $TMP/none for the decoded events: No such file or directory" \
	"replay: no temporary directory is exit 74, named"
run env TMPDIR="$TMP/none" "$A" validate "$s"
is "$st|$out" "74|" "validate: the same, nothing printed"
# the memo's packed pages (pickle.c, memo_pack): a GET of a packed slot, a PUT into one (its page
# unpacked), a GET of a restored slot
if command -v "${PYTHON:-python3}" >/dev/null 2>&1; then
	"${PYTHON:-python3}" "$srcdir/tests/memo-pack.py" 30000 > "$TMP/pack.pickle"
	run "$A" replay -c "" --no-timing "$TMP/pack.pickle"
	is "$st|$(col "$out" events)|$(col "$out" allocs)" "0|30004|30004" "memo GETs and a PUT across packed memo pages read as written"
else
	echo "ok $((n = n + 1)) # SKIP ${PYTHON:-python3} not found"
fi
finish
