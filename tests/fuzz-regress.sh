#!/bin/sh
# fuzz-regress.sh - every input the fuzzers ever found a bug with (tests/fuzz-findings/TARGET/), fed
# as the fuzz target saw it, through replay with --check under two settings: exit 0 or 65, never a
# crash, an internal error, a time-out (20 s; ALLOCSIM_SLOW=N multiplies it, as make check-valgrind
# does: memcheck runs the stitch finding in 15-19 s alone) or (in the sanitizer build) a leak. Native and RMM inputs
# run with PyTorch's defaults and with expandable segments, and under stitch. A generator program (first byte 0xA5)
# is kept as the trace it generates, the program itself in fuzz/seeds/TARGET/.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
LIMIT=$((20 * ${ALLOCSIM_SLOW:-1}))
for f in "$srcdir"/tests/fuzz-findings/*/*; do
	[ -f "$f" ] || continue
	target=$(basename "$(dirname "$f")")
	in="$TMP/input"
	case "$target" in
	native) # a whole trace, plain or gzip'd (what a generator program of fuzz_native wrote), or its records
		if [ "$(head -c 15 "$f")" = "#allocsim-trace" ] || [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = 1f8b ]; then cp "$f" "$in"
		else { printf '#allocsim-trace 1\n'; cat "$f"; } > "$in"; fi ;;
	rmm) if [ "$(head -c 6 "$f")" = "Thread" ]; then cp "$f" "$in"; else { printf 'Thread,Time,Action,Pointer,Size,Stream\n'; cat "$f"; } > "$in"; fi ;;
	host) if [ "$(head -c 14 "$f")" = "op,id,size,ptr" ]; then cp "$f" "$in"; else { printf 'op,id,size,ptr\n'; cat "$f"; } > "$in"; fi ;;
	pickle) case "$(head -c 1 "$f" | od -An -tx1 | tr -d ' ')" in # whole pickles, plain or gzip'd (fuzz_pickle.c)
		80|1f) cp "$f" "$in" ;;
		*) { printf '\200\004'; cat "$f"; } > "$in" ;;
		esac ;;
	config)
		run timeout "$LIMIT" "$A" replay -c "$(cat "$f")" "$T/seed_example__default.pickle.gz"
		ok $([ "$st" = 0 ] || [ "$st" = 64 ]; echo $?) "config/$(basename "$f"): exit $st (0 or 64)"
		continue ;;
	model)
		run timeout "$LIMIT" "$A" replay --latency-model "$f" -o /dev/null "$T/seed_example__default.pickle.gz"
		ok $([ "$st" = 0 ] || [ "$st" = 65 ]; echo $?) "model/$(basename "$f") as a latency model: exit $st (0 or 65)"
		run timeout "$LIMIT" "$A" calibrate --from-log -o "$TMP/fit.csv" "$f"
		ok $([ "$st" = 0 ] || [ "$st" = 65 ]; echo $?) "model/$(basename "$f") as a device log: exit $st (0 or 65)"
		continue ;;
	gen) # fuzz_gen.c: a model's name, then option lines; as a --params file
		{ printf 'model '; cat "$f"; } > "$in"
		run timeout "$LIMIT" "$A" gen --params "$in" --max-events 20000 -o "$TMP/gen.trace"
		ok $([ "$st" = 0 ] || [ "$st" = 64 ] || [ "$st" = 65 ]; echo $?) "gen/$(basename "$f") as a parameter file: exit $st (0, 64 or 65)"
		continue ;;
	*) continue ;;
	esac
	for c in "" "expandable_segments:True"; do
		run timeout "$LIMIT" "$A" replay -c "$c" --check --capacity 64MiB "$in"
		ok $([ "$st" = 0 ] || [ "$st" = 65 ]; echo $?) "$target/$(basename "$f") (${c:-defaults}, 64 MiB): exit $st"
		run timeout "$LIMIT" "$A" replay -c "$c" --check "$in"
		ok $([ "$st" = 0 ] || [ "$st" = 65 ]; echo $?) "$target/$(basename "$f") (${c:-defaults}): exit $st"
	done
	# stitch (every policy runs in the fuzz targets; timeout-stitch-refused-128gib was its finding)
	run timeout "$LIMIT" "$A" replay -p stitch --check "$in"
	ok $([ "$st" = 0 ] || [ "$st" = 65 ]; echo $?) "$target/$(basename "$f") (stitch): exit $st"
done
finish
