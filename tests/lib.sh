# lib.sh - TAP helpers for the shell tests (sourced).
: "${ALLOCSIM:=./allocsim}" "${srcdir:=.}"
T="$srcdir/traces/pytorch-h200"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/allocsim-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
n=0; failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else failed=$((failed + 1)); echo "not ok $n - $2"; fi; }
# is GOT EXPECTED NAME: a value on either side that is blank or holds a column col could not find
# fails (two empty strings are no evidence: a binary that does nothing gives them), so assert
# emptiness with a status beside it ("$st:$errout")
# (in the shell alone: the tests make thousands of these checks, and a process costs a millisecond or
# more on a virtual machine)
nl='
'
no_evidence() { case "$1" in *"<no column "*) return 0;; *[!" 	,:$nl"]*) return 1;; esac; return 0; }
is() { n=$((n + 1)); if ! no_evidence "$1" && ! no_evidence "$2" && [ "$1" = "$2" ]; then echo "ok $n - $3"; else failed=$((failed + 1)); echo "not ok $n - $3"; echo "#   got:      '$1'"; echo "#   expected: '$2'"; fi; }
# slurp VAR FILE: VAR = the file's contents without its trailing newlines, as $(cat FILE) gives them
# (bash reads it without a process: $(<FILE); a process costs milliseconds on a virtual machine, and
# the tests read thousands of files)
if [ -n "${BASH_VERSION:-}" ]; then
	slurp() { eval "$1=\$(<\"\$2\")"; }
else
	slurp() { eval "$1=\$(cat \"\$2\")"; }
fi
# like CMD... : runs CMD, records status in $st, stdout in $out, stderr in $errout
run() { "$@" >"$TMP/out" 2>"$TMP/err"; st=$?; slurp out "$TMP/out"; slurp errout "$TMP/err"; }
# cmp: two empty or missing files are no evidence of the same result (a binary that does nothing
# writes neither), so here cmp fails on one ('-', standard input, is not looked at)
cmp() { for f in "$@"; do case "$f" in -|-?*) ;; *) [ -s "$f" ] || return 2;; esac; done; command cmp "$@"; }
contains() { case "$1" in *"$2"*) return 0;; esac; return 1; }
# csv_bars: CSV lines with '|' between fields (quote-aware: a config such as
# "roundup_power2_divisions:[1:4,>:2]" is quoted and holds commas)
csv_bars() { awk '{ o = ""; q = 0; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1);
	if (c == "\"") q = !q; else if (c == "," && !q) o = o "|"; else o = o c } print o }'; }
# cols CSV NAME...: the columns NAME... of the data row of a summary CSV held in $1, space-separated,
# split as csv_bars does (a missing column or row prints "<no column NAME>", which is fails on). In
# the shell alone where no field is quoted (the tests call it thousands of times), else in one awk.
cols() { _cols_csv=$1; shift
	case "$_cols_csv" in *'"'*|*'|'*) _cols_awk "$_cols_csv" "$@"; return;; esac
	_cols_h=${_cols_csv%%"$nl"*}
	case "$_cols_csv" in *"$nl"*) _cols_r=${_cols_csv#*"$nl"}; _cols_r=${_cols_r%%"$nl"*}; _cols_d=1;; *) _cols_r=; _cols_d=;; esac
	_cols_w=; for _cols_n; do _cols_w="$_cols_w $_cols_n"; done
	_cols_o=; _cols_j=; _cols_ifs=$IFS; IFS=' '; set -f
	for _cols_n in $_cols_w; do
		_cols_v="<no column $_cols_n>"
		if [ -n "$_cols_d" ]; then
			_cols_i=0; IFS=,
			for _cols_c in $_cols_h; do _cols_i=$((_cols_i + 1)); [ "$_cols_c" = "$_cols_n" ] && _cols_k=$_cols_i && _cols_v=; done
			if [ -z "$_cols_v" ]; then set -- $_cols_r; [ "$_cols_k" -le $# ] && eval "_cols_v=\${$_cols_k}"; fi
			IFS=' '
		fi
		_cols_o="$_cols_o$_cols_j$_cols_v"; _cols_j=' '
	done
	set +f; IFS=$_cols_ifs
	printf '%s\n' "$_cols_o"; }
_cols_awk() { _cols_csv=$1; shift; _cols_w=; for _cols_n; do _cols_w="$_cols_w $_cols_n"; done
	printf '%s\n' "$_cols_csv" | awk -v want="$_cols_w" '{ o = ""; q = 0; for (i = 1; i <= length($0); i++) { ch = substr($0, i, 1)
	if (ch == "\"") q = !q; else if (ch == "," && !q) o = o "|"; else o = o ch }; nf = split(o, f, "|") }
	NR == 1 { for (i = 1; i <= nf; i++) k[f[i]] = i } NR == 2 { for (i = 1; i <= nf; i++) row[i] = f[i]; d = 1 }
	END { nw = split(want, w, " "); for (j = 1; j <= nw; j++) printf "%s%s", (j > 1 ? " " : ""), ((d && (w[j] in k)) ? row[k[w[j]]] : "<no column " w[j] ">"); print "" }'; }
# col CSV NAME: one column
col() { cols "$1" "$2"; }
# probe_scenarios: the scenario lines (NAME|OPS|RESULT) of traces/h200-pool-probes.txt
probe_scenarios() { grep -v '^#' "${srcdir:-.}/traces/h200-pool-probes.txt" | tail -n +2; }
# probe_traces DIR < SCENARIOS: every pool-probe scenario line (NAME|OPS|RESULT) as a native trace
# DIR/K.trace (K = 1, 2, ...; in one awk: a process costs milliseconds on a virtual machine):
# NAME=SIZE -> a ID SIZE 0, -NAME -> f ID, sync and trim -> e (empty_cache); wN (a wait) and q (a
# stream query) are dropped: a trace has no time; DIR/K.names gets the allocations' names in order
probe_traces() {
	awk -F'|' -v dir="$1" '{ k++; t = dir "/" k ".trace"; nm = dir "/" k ".names"; delete id; n = 0; names = ""
		print "#allocsim-trace 1" > t; no = split($2, op, " ")
		for (i = 1; i <= no; i++) { o = op[i]
			if (o ~ /^(sync|trim)$/) print "e" > t
			else if (o ~ /^(w[0-9]+|q)$/) continue
			else if (o ~ /^-/) print "f " id[substr(o, 2)] > t
			else { split(o, kv, "="); v = kv[2]; m = 1
				if (v ~ /M$/) { m = 1048576; sub(/M$/, "", v) } else if (v ~ /K$/) { m = 1024; sub(/K$/, "", v) }
				id[kv[1]] = ++n; names = names kv[1] " "; printf "a %d %.0f 0\n", n, v * m > t } }
		printf "%s", names > nm; close(t); close(nm) }'
}
# probe_trace OPS TRACE NAMES: one scenario's operations as probe_traces writes them
probe_trace() {
	_pt=$(mktemp -d "$TMP/pt.XXXXXX")
	printf 'x|%s|\n' "$1" | probe_traces "$_pt"
	mv "$_pt/1.trace" "$2"; mv "$_pt/1.names" "$3"; rm -rf "$_pt"
}
# probe_offsets_awk: DEVICE_LOG lines -> "name@offset ..." of every cudaMallocAsync, in MiB from the
# first (names: the scenario's .names, space-separated)
probe_offsets_awk='function hex(s,   i, v) { v = 0; for (i = 3; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", tolower(substr(s, i, 1))) - 1; return v }
	function start(names) { split(names, nm, " "); k = 0; b = 0; line = "" }
	$4 == "cudaMallocAsync" { a = hex($7); if (!k) b = a; line = line sprintf("%s%s@%.4g", k ? " " : "", nm[++k], (a - b) / 1048576) }'
# probe_offsets NAMES DEVICE_LOG: one scenario's offsets
probe_offsets() { awk -F, -v names="$(cat "$1")" "BEGIN { start(names) } $probe_offsets_awk END { print line }" "$2"; }
# probe_offsets_all DIR K: for scenarios 1..K, "name@offset ... | R=NM" from DIR/K.names, the device
# log DIR/K.dl.csv and the summary DIR/K.sum.csv (R: its final_reserved_bytes in MiB), a line each
probe_offsets_all() {
	_k=1; while [ $_k -le "$2" ]; do printf '%s ' "$1/$_k.dl.csv" "$1/$_k.sum.csv"; _k=$((_k + 1)); done |
		xargs awk -F, "$probe_offsets_awk"'
		FNR == 1 && FILENAME ~ /\.dl\.csv$/ { f = FILENAME; sub(/\.dl\.csv$/, ".names", f); getline names < f; close(f); start(names) }
		FNR == 1 && FILENAME ~ /\.sum\.csv$/ { for (i = 1; i <= NF; i++) if ($i == "final_reserved_bytes") c = i }
		FNR == 2 && FILENAME ~ /\.sum\.csv$/ { printf "%s | R=%dM\n", line, (c ? $c : -1048576) / 1048576 }'
}
finish() { echo "1..$n"; [ "$failed" = 0 ]; }
