#!/bin/sh
# fidelity-bfc.sh [ALLOCSIM] [SRCDIR] - the fidelity table of doc/policies.md (## bfc): JAX 0.11.2's
# real BFC allocator (traces/jax-h200.csv) against allocsim -p bfc, as markdown (a difference in bold).
# A trace not replayed on the GPU is compared with the runs of the traces that make the same requests.
A=${1:-./allocsim}; S=${2:-.}
G=$S/traces/jax-h200.csv; T=$S/traces/pytorch-h200
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in "$T"/*.pickle.gz; do
	"$A" convert "$f" -o "$tmp/c.trace" 2>/dev/null || exit 1
	echo "$(basename "$f" .pickle.gz) $(awk '$1 == "a" { print "a", $2, $3 } $1 == "f" { print "f", $2 }' "$tmp/c.trace" | cksum | tr ' ' _)"
done > "$tmp/groups"
echo "| trace | GPU runs | peak_bytes_in_use JAX / allocsim | peak_pool_bytes JAX / allocsim | num_allocs JAX / allocsim | largest_free_block_bytes JAX / allocsim |"
echo "|---|---|---|---|---|---|"
while read -r name group; do
	runs=$(grep -c "^$name," "$G")
	src=$name
	[ "$runs" = 0 ] && src=$(for m in $(grep " $group\$" "$tmp/groups" | cut -d' ' -f1); do grep "^$m,1," "$G"; done | head -1 | cut -d, -f1)
	[ -n "$src" ] || { echo "| $name | 0 | not measured | | | |"; continue; }
	row=$(grep "^$src,1," "$G")
	limit=$(echo "$row" | cut -d, -f13)
	"$A" replay -p bfc -c "memory_limit:$limit" --no-timing --stats "$tmp/s.csv" -o /dev/null "$T/$name.pickle.gz" || exit 1
	s() { grep "^$1," "$tmp/s.csv" | cut -d, -f2; }
	note=$runs; [ "$src" = "$name" ] || note="0 (same requests as $src)"
	echo "$row" | awk -F, -v n="$name" -v runs="$note" -v a="$(s peak_bytes_in_use)" -v b="$(s peak_pool_bytes)" \
		-v c="$(s num_allocs)" -v d="$(s largest_free_block_bytes)" \
		'function m(r, x) { return r == x ? r " / " x : "**" r " / " x "**" }
		{ printf "| %s | %s | %s | %s | %s | %s |\n", n, runs, m($7, a), m($8, b), m($9, c), m($10, d) }'
done < "$tmp/groups"
