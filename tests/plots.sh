#!/bin/sh
# plots.sh - every plotting script runs on CSVs that allocsim wrote and produces valid PDF and PNG,
# and the figures hold what doc/figures promises, checked on the layout matplotlib drew
# (tests/plotcheck.py: legends clear of the data or outside the axes, no colliding labels at
# single-column width, OOM runs marked, distinct styles beyond 8 traces, ticks), byte-identical
# output whatever the date, and the latency CDF's refusal of --no-timing zeros.
# All figures are checked in one Python process (matplotlib loads once): a few seconds.
. "${srcdir:-.}/tests/lib.sh"
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import matplotlib' 2>/dev/null; then echo "1..0 # SKIP no Python with matplotlib"; exit 0; fi
export MPLBACKEND=Agg
A=$ALLOCSIM; S="$srcdir/scripts"; tr="$T/seed_example__default.pickle.gz"; tr2="$T/resnet50_train__default.pickle.gz"
R="$T/resnet50_train"; B="$T/bert_infer_varlen"
"$A" replay -c "" --timeline "$TMP/tl.csv" --every 5 --segments "$TMP/seg.csv" -o "$TMP/sum.csv" "$tr2"
"$A" replay -c expandable_segments:True --timeline "$TMP/tl2.csv" --every 5 -o /dev/null "$tr2"
"$A" replay -c max_split_size_mb:128 --timeline "$TMP/tl3.csv" --every 5 -o /dev/null "$tr2"
"$A" sweep -t "$tr" "$tr2" --param max_split_size_mb=none,20,128 -o "$TMP/sw.csv"
# 10 traces: more than the palette's 8 colours
"$A" sweep -t "$tr" "$R"__default.pickle.gz "$R"__exp.pickle.gz "$R"__ms128.pickle.gz "$R"__ms40.pickle.gz "$R"__rp4.pickle.gz \
	"$B"__default.pickle.gz "$B"__exp.pickle.gz "$B"__ms128.pickle.gz "$B"__ms40.pickle.gz --param max_split_size_mb=none,20,128 -o "$TMP/many.csv"
# a capacity sweep: resnet50 runs out of memory at 2 and 4 GiB
"$A" sweep -t "$tr" "$tr2" --param capacity=2147483648,4294967296,6442450944,8589934592 -o "$TMP/cap.csv"
# the same capacities written with units (as a user or a later sweep writes them)
sed -e 's/^\([0-9]*\),2147483648,/\1,2GiB,/' -e 's/^\([0-9]*\),4294967296,/\1,4 GiB,/' \
	-e 's/^\([0-9]*\),6442450944,/\1,6GiB,/' -e 's/^\([0-9]*\),8589934592,/\1,8192MiB,/' "$TMP/cap.csv" > "$TMP/capu.csv"
# two swept parameters
"$A" sweep -t "$tr" "$tr2" --param max_split_size_mb=none,128 --param expandable_segments=False,True -o "$TMP/two.csv"
"$A" sweep -t "$tr" "$tr2" --param expandable_segments=False,True -o "$TMP/cmp.csv"
"$A" replay -c "" --latency "$TMP/lat.csv" -o /dev/null "$tr2"
"$A" replay -p passthrough --latency "$TMP/lat2.csv" -o /dev/null "$tr2"
"$A" replay -c "" --no-timing --latency "$TMP/latnt.csv" -o /dev/null "$tr2"
"$A" replay -p passthrough --no-timing --latency "$TMP/lat2nt.csv" -o /dev/null "$tr2"
# the latency file says what its ns column is (plot_latency.py names it on the axis)
is "$(head -1 "$TMP/lat.csv")" "event,op,bytes,ns,device_us,timing" "--latency has a timing column"
is "$(tail -n +2 "$TMP/lat.csv" | cut -d, -f6 | sort -u | tr '\n' ' ')" "model+host " "simulated with host timing: model+host"
is "$(tail -n +2 "$TMP/latnt.csv" | cut -d, -f6 | sort -u | tr '\n' ' ')" "model " "--no-timing: model (modelled device time only)"
is "$(awk -F, 'NR > 1 && $4 != sprintf("%.0f", $5 * 1000) { n++ } END { print NR - 1, n + 0 }' "$TMP/latnt.csv")" "9197 0" \
	"--no-timing: a row per malloc and free, ns is the device time"
# allocsim compare: three policies on two traces, and one more policy on one trace only (the other
# has no row of it: n/a), with a capacity it runs out of (hatched)
"$A" compare -p pytorch,bestfit,passthrough -o "$TMP/pol.csv" "$tr" "$tr2"
"$A" compare -p cuda-async --capacity 4GiB -o "$TMP/pol-oom.csv" "$tr2"

P="$srcdir/tests/plotcheck.py"
cat > "$TMP/cases" <<EOF
timeline --legend-clear --no-overlap -- $S/plot_timeline.py -o $TMP/timeline a=$TMP/tl.csv expandable=$TMP/tl2.csv max_split_size_mb:128=$TMP/tl3.csv
sweep --legend-outside --no-overlap --log-ticks 3 -- $S/plot_sweep.py $TMP/sw.csv --param max_split_size_mb -o $TMP/sweep
sweep-many --legend-outside --distinct-styles --no-overlap -- $S/plot_sweep.py $TMP/many.csv --param max_split_size_mb -o $TMP/many.png
sweep-oom --oom 2 --xticks-match '^[0-9.]+ GiB$' --no-overlap --legend-outside -- $S/plot_sweep.py $TMP/cap.csv --param capacity -o $TMP/cap.png
sweep-units-infer --oom 2 --xticks-match '^[0-9.]+ GiB$' --text-has capacity -- $S/plot_sweep.py $TMP/capu.csv -o $TMP/capu.png
sweep-two --monotone-x --distinct-styles --text-has expandable_segments=True --no-overlap --legend-outside -- $S/plot_sweep.py $TMP/two.csv --param max_split_size_mb --width double -o $TMP/two.png
compare --legend-clear --no-overlap -- $S/plot_compare.py $TMP/cmp.csv -o $TMP/compare
segments --min-row-width 0.5 --no-overlap --text-has resnet50_train__default --text-has 'pytorch (defaults)' -- $S/plot_segments.py $TMP/seg.csv --summary $TMP/sum.csv --moment end -o $TMP/segments
latency --legend-clear --no-overlap --log-ticks 3 --text-has 'modelled device time + measured host time' -- $S/plot_latency.py -o $TMP/latency pytorch=$TMP/lat.csv passthrough=$TMP/lat2.csv
latency-zeros --exit 65 --stderr-has 'latencies are 0 ns' --stderr-has 'replay --no-timing' -- $S/plot_latency.py -o $TMP/latnt pytorch=$TMP/latnt.csv
latency-device --legend-clear --no-overlap --text-has 'modelled device time' --text-has '110 of 4600 calls' -- $S/plot_latency.py --device-calls -o $TMP/latdev pytorch=$TMP/latnt.csv passthrough=$TMP/lat2nt.csv
policies --legend-clear --no-overlap --text-has 'n/a' --text-has 'out of memory' -- $S/plot_policies.py $TMP/pol.csv $TMP/pol-oom.csv -o $TMP/policies
policies-log --legend-clear --no-overlap --log-ticks 3 -- $S/plot_policies.py $TMP/pol.csv $TMP/pol-oom.csv --scale log --width double -o $TMP/policies-log.png
repro-1 --env SOURCE_DATE_EPOCH=1 -- $S/plot_compare.py $TMP/cmp.csv -o $TMP/repro1
repro-2 --env SOURCE_DATE_EPOCH=1900000000 -- $S/plot_compare.py $TMP/cmp.csv -o $TMP/repro2
EOF
"$py" "$P" --batch "$TMP/cases" > "$TMP/results" 2>&1
while read -r name rest; do
	is "$(grep "^$name: " "$TMP/results" || echo "$name: no result")" "$name: ok" "$name: the script runs and its figure passes the checks (${rest%% -- *})"
done < "$TMP/cases"

valid() { # FILE: PDF or PNG magic, and not tiny
	case "$1" in
	*.pdf) [ "$(head -c 5 "$1")" = "%PDF-" ] && tail -c 32 "$1" | grep -q '%%EOF' ;;
	*.png) [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ;;
	esac && [ "$(wc -c < "$1")" -gt 2000 ]
}
for name in timeline sweep compare latency segments policies latdev; do
	for ext in pdf png; do valid "$TMP/$name.$ext"; ok $? "$name.$ext is a valid $ext file"; done
done
# -o NAME.png: that format alone
ok "$(valid "$TMP/many.png" && valid "$TMP/policies-log.png" && [ ! -e "$TMP/many.pdf" ] && [ ! -e "$TMP/policies-log.pdf" ]; echo $?)" "-o NAME.png writes the PNG alone"
# fonts are embedded TrueType (Type 42), not Type 3
ok "$(grep -c '/Type3' "$TMP/sweep.pdf" | grep -q '^0$'; echo $?)" "PDF uses no Type 3 fonts"
# reproducible: the same bytes whatever the date (SOURCE_DATE_EPOCH differs above), no version inside
cmp -s "$TMP/repro1.pdf" "$TMP/repro2.pdf"; ok $? "the PDF is byte-identical on a rerun at another date"
cmp -s "$TMP/repro1.png" "$TMP/repro2.png"; ok $? "the PNG is byte-identical on a rerun at another date"
valid "$TMP/repro1.pdf" && valid "$TMP/repro1.png" && ! grep -q -a -i 'matplotlib v' "$TMP/repro1.pdf" "$TMP/repro1.png"
ok $? "no matplotlib version inside the PDF or PNG"
valid "$TMP/repro1.pdf" && ! grep -q -a 'CreationDate' "$TMP/repro1.pdf"; ok $? "no creation date inside the PDF"
finish
