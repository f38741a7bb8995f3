#!/bin/sh
# fidelity-bfc.sh [ALLOCSIM] [SRCDIR] - the fidelity table of doc/policies.md (## bfc): JAX 0.11.2's
# real BFC allocator (traces/jax-h200.csv, run 1 of each trace) against allocsim -p bfc, as markdown
# (a difference is set in bold).
A=${1:-./allocsim}; S=${2:-.}
G=$S/traces/jax-h200.csv; T=$S/traces/pytorch-h200
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
echo "| trace | runs | peak_bytes_in_use real / sim | peak_pool_bytes real / sim | num_allocs real / sim | largest_free_block_bytes real / sim |"
echo "|---|---|---|---|---|---|"
for f in "$T"/*.pickle.gz; do
	name=$(basename "$f" .pickle.gz)
	row=$(grep "^$name,1," "$G") || { echo "| $name | 0 | not measured | | | |"; continue; }
	limit=$(echo "$row" | cut -d, -f13)
	"$A" replay -p bfc -c "memory_limit:$limit" --no-timing --stats "$tmp" -o /dev/null "$f" || exit 1
	s() { grep "^$1," "$tmp" | cut -d, -f2; }
	echo "$row" | awk -F, -v runs="$(grep -c "^$name," "$G")" -v a="$(s peak_bytes_in_use)" -v b="$(s peak_pool_bytes)" \
		-v c="$(s num_allocs)" -v d="$(s largest_free_block_bytes)" \
		'function m(r, x) { return r == x ? r " / " x : "**" r " / " x "**" }
		{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, runs, m($7, a), m($8, b), m($9, c), m($10, d) }'
done
