#!/bin/sh
# perf-long.sh - every bundled trace through the binary event format (make check-long: about 10 s).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
# every bundled trace converted to .asbin replays to the source's rows, byte for byte, for every
# policy (one sweep over the sources, one over the binary files; rows without the trace column)
# (traces/fixtures/no-history.pickle.gz holds no history: it is refused, and is left out)
src_list=; bin_list=; k=0; refused=
for t in "$T"/*.pickle.gz "$srcdir"/traces/captured/*.pickle.gz "$srcdir"/traces/fixtures/*.pickle.gz; do
	"$A" convert "$t" -o "$TMP/b$((k + 1)).asbin" 2>/dev/null || { refused="$refused $(basename "$t")"; continue; }
	k=$((k + 1)); src_list="$src_list $t"; bin_list="$bin_list $TMP/b$k.asbin"
done
all=$(ls "$T"/*.pickle.gz "$srcdir"/traces/captured/*.pickle.gz "$srcdir"/traces/fixtures/*.pickle.gz | wc -l)
is "$k:$refused" "$((all - 1)): no-history.pickle.gz" "every bundled trace but the one without history converts to the binary format ($((all - 1)) of $all)"
"$A" sweep -t $src_list -p pytorch -p bestfit -p passthrough -p cuda-async -j 2 | cut -d, -f1,3- > "$TMP/rt-src.csv"
"$A" sweep -t $bin_list -p pytorch -p bestfit -p passthrough -p cuda-async -j 2 | cut -d, -f1,3- > "$TMP/rt-bin.csv"
is "$(wc -l < "$TMP/rt-bin.csv")" $((4 * k + 1)) "binary round trip: one row per trace and policy ($k traces, 4 policies)"
cmp -s "$TMP/rt-src.csv" "$TMP/rt-bin.csv"; ok $? "binary round trip: every bundled trace replays to its source's rows, every policy"
"$A" sweep -t $src_list -p pytorch --param expandable_segments=True -j 2 | cut -d, -f1,2,4- > "$TMP/rt-src.csv"
"$A" sweep -t $bin_list -p pytorch --param expandable_segments=True -j 2 | cut -d, -f1,2,4- > "$TMP/rt-bin.csv"
cmp -s "$TMP/rt-src.csv" "$TMP/rt-bin.csv"; ok $? "binary round trip with expandable segments: every bundled trace, the same rows"
# replay -c recorded (the recorded settings travel in the header) with the latency model's columns
bad=0; i=0
for t in $src_list; do
	i=$((i + 1)); set -- $bin_list; shift $((i - 1))
	a=$("$A" replay -c recorded --no-timing "$t" 2>&1 | tail -1 | cut -d, -f2-)
	b=$("$A" replay -c recorded --no-timing "$1" 2>&1 | tail -1 | cut -d, -f2-)
	[ -n "$a" ] && [ "$a" = "$b" ] || { bad=1; echo "# differs: $t"; }
done
ok "$([ $i -gt 0 ] && [ $bad = 0 ]; echo $?)" "replay -c recorded of every bundled trace's binary form equals the source's row (latency columns included)"
finish
