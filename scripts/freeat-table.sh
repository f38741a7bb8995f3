#!/bin/sh
# freeat-table.sh [ALLOCSIM] [SRCDIR] - the --free-at table of doc/policies.md ("The program's own
# calls"): the real CuPy pool (traces/cupy-h200-freeat.csv, scripts/replay_cupy.py) and JAX's BFC
# (traces/jax-h200-freeat.csv, scripts/replay_jax.py) fed each captured trace with its cross-stream
# frees at the request and at the completion, against allocsim -p cupy / -p bfc --free-at the same
# (markdown; a difference in bold).
A=${1:-./allocsim}; S=${2:-.}
C=$S/traces/cupy-h200-freeat.csv; J=$S/traces/jax-h200-freeat.csv
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tr -d '\r' < "$J" > "$tmp/j.csv"; J=$tmp/j.csv   # (replay_jax.py's csv module ends lines with CRLF)
stat_of() { awk -F, -v k="$2" '$1 == k { print $2 }' "$1"; }
m() { if [ "$1" = "$2" ]; then echo "$1"; else echo "**$1 / $2**"; fi; }
echo "| trace | free at | CuPy peak total_bytes | CuPy cudaMalloc calls | CuPy peak used_bytes | JAX peak pool_bytes | JAX peak bytes_in_use | JAX final largest free block |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
tail -n +2 "$C" | while IFS=, read -r name pt pu nm ft fu nf oo ne al fr cv py sec fa; do
	f=$S/traces/captured/$name.pickle.gz
	"$A" replay -p cupy --free-at "$fa" --no-timing --stats "$tmp/c.csv" -o "$tmp/s.csv" "$f" || exit 1
	spt=$(tail -1 "$tmp/s.csv" | cut -d, -f10); snm=$(tail -1 "$tmp/s.csv" | cut -d, -f13); spu=$(stat_of "$tmp/c.csv" peak_used_bytes)
	row=$(awk -F, -v n="$name" -v f="$fa" '$1 == n && $15 == f && $2 == 1' "$J")
	if [ -n "$row" ]; then
		limit=$(echo "$row" | cut -d, -f13)
		"$A" replay -p bfc -c "memory_limit:$limit" --free-at "$fa" --no-timing --stats "$tmp/b.csv" -o /dev/null "$f" || exit 1
		jp="$(m "$(echo "$row" | cut -d, -f8)" "$(stat_of "$tmp/b.csv" peak_pool_bytes)") | $(m "$(echo "$row" | cut -d, -f7)" "$(stat_of "$tmp/b.csv" peak_bytes_in_use)") | $(m "$(echo "$row" | cut -d, -f10)" "$(stat_of "$tmp/b.csv" largest_free_block_bytes)")"
	else
		jp="not measured | | "
	fi
	echo "| $name | $fa | $(m "$pt" "$spt") | $(m "$nm" "$snm") | $(m "$pu" "$spu") | $jp |"
done
