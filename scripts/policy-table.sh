#!/bin/sh
# policy-table.sh - the comparison table of doc/policies.md: every registered policy on every bundled
# real trace (allocsim compare -p all), as peak reserved bytes over the lower bound, with the
# offline optimum's proof status. Prints the markdown table; with --update FILE, replaces the table
# between the markers in FILE (doc/policies.md) instead.
# usage: scripts/policy-table.sh [--update FILE] [ALLOCSIM [TRACES_DIR]]      (JOBS=N for -j)
set -e
update=
if [ "$1" = --update ]; then update=$2; shift 2; fi
A=${1:-./allocsim}; D=${2:-traces/pytorch-h200}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$A" compare -p all -j "$JOBS" "$D"/*.pickle.gz -o "$tmp/compare.csv"
for t in "$D"/*.pickle.gz; do
	"$A" replay -p optimal --no-timing --stats "$tmp/s.csv" "$t" > /dev/null
	printf '%s,%s,%s\n' "$t" "$(awk -F, '$1 == "optimal_proved" { print $2 }' "$tmp/s.csv")" \
		"$(awk -F, '$1 == "heuristic_height_bytes" { print $2 }' "$tmp/s.csv")"
done > "$tmp/proved.csv"
# the summary CSV's quoted fields (a config with commas) cannot occur: compare runs the defaults
awk -F, -v proved="$tmp/proved.csv" '
	BEGIN { while ((getline l < proved) > 0) { split(l, f, ","); pr[f[1]] = f[2] } }
	NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	{ t = $h["trace"]; p = $h["policy"]
	  if (!(t in seen)) { seen[t] = 1; traces[++nt] = t }
	  if (!(p in pseen)) { pseen[p] = 1; pols[++np] = p }
	  cell[t, p] = sprintf("%.3f", $h["overhead_vs_bound"]) ($h["num_ooms"] > 0 ? " (" $h["num_ooms"] " OOM)" : "")
	  req[t] = $h["peak_requested_bytes"]; if (p == "optimal") opt[t] = $h["peak_reserved_bytes"] }
	END {
	  printf "| trace | peak live GiB |"; for (k = 1; k <= np; k++) printf " %s |", pols[k]; printf " optimal proved |\n"
	  printf "|---|---:|"; for (k = 1; k <= np; k++) printf "---:|"; printf "---|\n"
	  for (j = 1; j <= nt; j++) { t = traces[j]; n = t; sub(/.*\//, "", n); sub(/\.pickle\.gz$/, "", n)
	    printf "| %s | %.3f |", n, req[t] / 1073741824
	    for (k = 1; k <= np; k++) printf " %s |", cell[t, pols[k]]
	    printf " %s |\n", pr[t] == 1 ? "yes" : "no" } }' "$tmp/compare.csv" > "$tmp/table.md"
if [ -z "$update" ]; then cat "$tmp/table.md"; exit 0; fi
grep -q '^<!-- policy table: generated' "$update" || { echo "$update: no '<!-- policy table: generated' marker" >&2; exit 1; }
awk -v table="$tmp/table.md" '
	/^<!-- policy table: generated/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
	/^<!-- end of policy table -->/ { skip = 0 }
	!skip { print }' "$update" > "$tmp/doc" && cat "$tmp/doc" > "$update"
