#!/bin/sh
# valgrind-traces.sh - every bundled real trace replayed (recorded settings and capacity) and validated,
# for 'make check-valgrind' (each allocsim run under memcheck there; a plain run elsewhere).
. "${srcdir:-.}/tests/lib.sh"
for dir in "$T" "$srcdir/traces/captured"; do
	tail -n +2 "$dir/ground-truth.csv" | csv_bars > "$TMP/gt"
	while IFS='|' read -r name wl tag conf frac cap rest; do
		cap_arg=; [ -n "$cap" ] && cap_arg="--capacity $cap"
		run "$ALLOCSIM" replay -c "$conf" $cap_arg --no-timing --stats "$TMP/s.csv" "$dir/$name.pickle.gz"
		is "$st" 0 "$name: replay is clean"
		run "$ALLOCSIM" validate $cap_arg "$dir/$name.pickle.gz"
		is "$st" 0 "$name: validate is clean and exact"
	done < "$TMP/gt"
done
finish
