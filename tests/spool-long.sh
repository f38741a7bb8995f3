#!/bin/sh
# spool-long.sh - replay and validate of a long snapshot keep flat memory (make check-long): peak
# RSS of a generated snapshot of 1M events within 1.2x of one of 100k (scripts/gen-snapshot.py:
# copies of a bundled snapshot, settings after the trace; without memo, and with the writer's memo,
# whose pages the pickle reader packs). Before the spool, 5.3x (the events held in memory, about 70
# bytes each); with the writer's memo before its pages were packed, 3.5x.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1 || [ ! -x /usr/bin/time ]; then
	for i in 1 2 3 4 5 6 7 8 9; do echo "ok $i # SKIP needs $PY and /usr/bin/time"; done; echo "1..9"; exit 0
fi
src="$T/bert_infer_varlen__default.pickle.gz"
for memo in "" --memo; do
"$PY" "$srcdir/scripts/gen-snapshot.py" $memo "$src" 4 "$TMP/s.pickle"
"$PY" "$srcdir/scripts/gen-snapshot.py" $memo "$src" 40 "$TMP/b.pickle"
# rss NAME CMD...: peak RSS (KB) in $NAME, the status in st_NAME, the output in $TMP/NAME.out
rss() { _n=$1; shift; /usr/bin/time -f %M -o "$TMP/$_n.rss" "$@" > "$TMP/$_n.out" 2>/dev/null; _st=$?
	_kb=$(tail -1 "$TMP/$_n.rss"); case $_kb in *[!0-9]*|'') _kb=0;; esac
	eval "st_$_n=$_st; $_n=$_kb"; }
for cmd in replay validate; do
	if [ $cmd = replay ]; then set -- replay -c "" --no-timing; else set -- validate; fi
	rss s "$A" "$@" "$TMP/s.pickle"
	rss b "$A" "$@" "$TMP/b.pickle"
	if [ $cmd = replay ]; then got=$(awk -F, 'NR==2{print $5}' "$TMP/b.out"); want=1000241
	else got=$(cut -d: -f2- "$TMP/b.out"); want=" exact (3120 device calls, 0 end-state segments)"; fi
	is "$st_s:$st_b:$got" "0:0:$want" "$cmd of 100k and 1M generated events${memo:+ (memo as the writer lays it out)}"
	ok "$([ "$st_b" = 0 ] && awk -v s="$s" -v b="$b" 'BEGIN{exit !(s > 0 && b > 0 && b <= 1.2 * s)}'; echo $?)" \
		"$cmd${memo:+ (memo as the writer lays it out)}: peak RSS at 1M events ${b} KB, at 100k ${s} KB (<= 1.2x)"
done
done
# the memo's packed pages (pkval.c, pkvm_memo_pack; the memo moves to its reservation past 2^19 slots,
# so 300,000 entries): a GET of a packed slot, a PUT into one (its page unpacked), a GET of a
# restored slot
"$PY" "$srcdir/tests/memo-pack.py" 300000 > "$TMP/pack.pickle"
run "$A" replay -c "" --no-timing "$TMP/pack.pickle"
is "$st|$(col "$out" events)|$(col "$out" allocs)" "0|300004|300004" "memo GETs and a PUT across packed memo pages read as written"
finish
