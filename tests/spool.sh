#!/bin/sh
# spool.sh - replay and validate decode a snapshot (settings at its end) into a temporary file of
# records and replay from it (src/readers/spool.c): the same rows as from memory, and a clear error
# where no temporary file can be made. (The pickle memo's packed pages: tests/spool-long.sh.) (The memory it saves: tests/spool-long.sh and make bench.)
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
finish
