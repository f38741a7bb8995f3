#!/bin/sh
# reliability-long.sh - the invariants (--check after every event) on every bundled and captured
# trace, every policy but pytorch (checked in fidelity.sh): make check-long. tests/reliability.sh
# checks two bundled ones and the captured ones under default settings.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
for t in "$T"/*.pickle.gz "$srcdir"/traces/captured/*.pickle.gz; do
	for p in bestfit passthrough cuda-async; do
		run "$A" replay -p "$p" --check --no-timing "$t"
		is "$st" 0 "$p --check holds on $(basename "$t" .pickle.gz)"
	done
done
finish
