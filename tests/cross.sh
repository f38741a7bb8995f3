#!/bin/sh
# cross.sh - each real trace replayed under every *other* recorded setting of its workload must
# reproduce PyTorch's numbers for that setting (scripts/cross-fidelity.py; Python 3 stdlib only).
. "${srcdir:-.}/tests/lib.sh"
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3)
if [ -z "$py" ]; then echo "1..0 # SKIP no python3"; exit 0; fi
for mode in auto model; do
	"$py" "$srcdir/scripts/cross-fidelity.py" "$ALLOCSIM" "$T" --addresses $mode > "$TMP/x.md"; st=$?
	is "$st" 0 "cross-fidelity script runs (addresses $mode)"
	last=$(tail -1 "$TMP/x.md")
	is "$last" "124 of 124 cross-setting replays exact; worst peak-reserved error 0.000%" "cross-setting replays exact (addresses $mode)"
	grep '\*\*no' "$TMP/x.md" | head -5 | sed 's/^/# /'
done
finish
