# lib.sh - TAP helpers for the shell tests (sourced).
: "${ALLOCSIM:=./allocsim}" "${srcdir:=.}"
T="$srcdir/traces/pytorch-h200"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/allocsim-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
n=0; failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else failed=$((failed + 1)); echo "not ok $n - $2"; fi; }
is() { n=$((n + 1)); if [ "$1" = "$2" ]; then echo "ok $n - $3"; else failed=$((failed + 1)); echo "not ok $n - $3"; echo "#   got:      '$1'"; echo "#   expected: '$2'"; fi; }
# like CMD... : runs CMD, records status in $st, stdout in $out, stderr in $errout
run() { "$@" >"$TMP/out" 2>"$TMP/err"; st=$?; out=$(cat "$TMP/out"); errout=$(cat "$TMP/err"); }
contains() { case "$1" in *"$2"*) return 0;; esac; return 1; }
# column NAME of the data row of a summary CSV held in $1
# (quote-aware: a config such as "roundup_power2_divisions:[1:4,>:2]" is quoted and holds commas)
csv_bars() { awk '{ o = ""; q = 0; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1);
	if (c == "\"") q = !q; else if (c == "," && !q) o = o "|"; else o = o c } print o }'; }
col() { printf '%s\n' "$1" | csv_bars | awk -F'|' -v c="$2" 'NR==1{for(i=1;i<=NF;i++) if($i==c) k=i} NR==2{print $k}'; }
finish() { echo "1..$n"; [ "$failed" = 0 ]; }
