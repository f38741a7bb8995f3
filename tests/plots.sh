#!/bin/sh
# plots.sh - every plotting script runs on CSVs that allocsim wrote and produces valid PDF and PNG.
. "${srcdir:-.}/tests/lib.sh"
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import matplotlib' 2>/dev/null; then echo "1..0 # SKIP no Python with matplotlib"; exit 0; fi
export MPLBACKEND=Agg
A=$ALLOCSIM; S="$srcdir/scripts"; tr="$T/seed_example__default.pickle.gz"; tr2="$T/resnet50_train__default.pickle.gz"
"$A" replay -c "" --timeline "$TMP/tl.csv" --every 5 --segments "$TMP/seg.csv" -o "$TMP/sum.csv" "$tr2"
"$A" sweep -t "$tr" "$tr2" --param max_split_size_mb=none,20,128 -o "$TMP/sw.csv"
"$A" replay -c "" --latency "$TMP/lat.csv" -o /dev/null "$tr2"
"$A" replay -p passthrough --latency "$TMP/lat2.csv" -o /dev/null "$tr2"
valid() { # FILE: PDF or PNG magic, and not tiny
	case "$1" in
	*.pdf) [ "$(head -c 5 "$1")" = "%PDF-" ] && tail -c 32 "$1" | grep -q '%%EOF' ;;
	*.png) [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ;;
	esac && [ "$(wc -c < "$1")" -gt 2000 ]
}
check() { # NAME CMD...: runs a script, checks NAME.pdf and NAME.png
	name=$1; shift
	"$@" > "$TMP/plot.out" 2>&1; st=$?
	is "$st" 0 "$name: the script runs"
	[ "$st" = 0 ] || sed 's/^/# /' "$TMP/plot.out" | tail -5
	for ext in pdf png; do valid "$TMP/$name.$ext"; ok $? "$name.$ext is a valid $ext file"; done
}
check timeline "$py" "$S/plot_timeline.py" -o "$TMP/timeline" a="$TMP/tl.csv" b="$TMP/tl.csv"
check sweep "$py" "$S/plot_sweep.py" "$TMP/sw.csv" --param max_split_size_mb --width double -o "$TMP/sweep"
check compare "$py" "$S/plot_compare.py" "$TMP/sw.csv" -o "$TMP/compare"
check latency "$py" "$S/plot_latency.py" -o "$TMP/latency" pytorch="$TMP/lat.csv" passthrough="$TMP/lat2.csv"
check segments "$py" "$S/plot_segments.py" "$TMP/seg.csv" --moment end -o "$TMP/segments"
# fonts are embedded TrueType (Type 42), not Type 3
ok "$(grep -c '/Type3' "$TMP/sweep.pdf" | grep -q '^0$'; echo $?)" "PDF uses no Type 3 fonts"
finish
