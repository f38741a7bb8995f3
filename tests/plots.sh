#!/bin/sh
# plots.sh - every plotting script runs on CSVs that allocsim wrote and produces valid PDF and PNG,
# and the figures hold what doc/figures promises, checked on the layout matplotlib drew
# (tests/plotcheck.py: legends clear of the data or outside the axes, no colliding labels at
# single-column width, OOM runs marked, distinct styles beyond 8 traces, ticks, every tick
# labelled, fixed policy colours, hatching only for out-of-memory, a downsampled timeline's peak at
# the trace's peak), byte-identical output whatever the date, the latency CDF's refusal of
# --no-timing zeros, and every script's refusal of a CSV of the wrong kind or with a bad field.
# tests/plots-newer.sh runs it all again under a second matplotlib (Debian 13's 3.10).
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
"$A" compare -p all -o "$TMP/pol-all.csv" "$tr" "$tr2"
# a whole timeline (every event: the script downsamples it, keeping each bucket's min and max) and
# its summary, whose peaks the figure's highest points must equal
"$A" replay -c "" --no-timing --timeline "$TMP/tlfull.csv" -o "$TMP/tlfull-sum.csv" "$tr2"
"$A" replay -c max_split_size_mb:128 --no-timing --timeline "$TMP/tlfull2.csv" -o /dev/null "$tr2"
gib() { awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i } NR == 2 { printf "%.15g", $k / 1073741824 }' "$TMP/tlfull-sum.csv"; }
pa=$(gib peak_allocated_bytes); pr=$(gib peak_reserved_bytes)
is "$(tail -n +2 "$TMP/tlfull.csv" | wc -l | tr -d ' ')" 9197 "the whole timeline: a row per event (the figure must downsample it)"
# CSVs of the wrong kind or with a bad field
awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "peak_reserved_bytes") k = i } NR == 3 { $k = "12x" } 1' "$TMP/sw.csv" > "$TMP/sw-bad.csv"
head -3 "$TMP/cmp.csv" | sed '3s/,[^,]*$//' > "$TMP/cmp-short.csv"
"$A" convert "$tr" -o "$TMP/trace.asbin"  # a binary file given as a CSV
# the bundled H200 transfer table, drawn once allocsim has read it as a table (transfer HOSTTRACE)
"$A" transfer --table "$srcdir/traces/h200-transfer.csv" -o /dev/null "$srcdir/traces/fixtures/pinned-synthetic.host.csv" &&
	cp "$srcdir/traces/h200-transfer.csv" "$TMP/transfer.csv"

P="$srcdir/tests/plotcheck.py"
L="--tick-labels --hatch-means-oom"  # every figure: every tick labelled, hatching only for OOM
cat > "$TMP/cases" <<EOF
timeline --legend-clear --no-overlap $L -- $S/plot_timeline.py -o $TMP/timeline a=$TMP/tl.csv expandable=$TMP/tl2.csv max_split_size_mb:128=$TMP/tl3.csv
timeline-peak --legend-clear --no-overlap $L --ymax allocated=$pa --ymax reserved:default=$pr --text-has 'resnet50_train__default, pytorch policy' -- $S/plot_timeline.py --summary $TMP/tlfull-sum.csv -o $TMP/tlfull.png default=$TMP/tlfull.csv ms128=$TMP/tlfull2.csv
timeline-sampled --stderr-has 'holds every 5-th event' --stderr-has 'without --every' $L -- $S/plot_timeline.py -o $TMP/tlsampled.png $TMP/tl.csv
sweep --legend-outside --no-overlap --log-ticks 3 $L --text-has 'pytorch policy: max_split_size_mb swept over 2 traces' -- $S/plot_sweep.py $TMP/sw.csv --param max_split_size_mb -o $TMP/sweep
sweep-many --legend-outside --distinct-styles --no-overlap $L -- $S/plot_sweep.py $TMP/many.csv --param max_split_size_mb -o $TMP/many.png
sweep-oom --oom 2 --xticks-match '^[0-9.]+ GiB\$' --no-overlap --legend-outside $L -- $S/plot_sweep.py $TMP/cap.csv --param capacity -o $TMP/cap.png
sweep-units-infer --oom 2 --xticks-match '^[0-9.]+ GiB\$' --text-has capacity $L -- $S/plot_sweep.py $TMP/capu.csv -o $TMP/capu.png
sweep-two --monotone-x --distinct-styles --text-has expandable_segments=True --no-overlap --legend-outside $L -- $S/plot_sweep.py $TMP/two.csv --param max_split_size_mb --width double -o $TMP/two.png
compare --legend-clear --no-overlap $L --text-has 'peak reserved by pytorch, 2 settings' -- $S/plot_compare.py $TMP/cmp.csv -o $TMP/compare
compare-policies --legend-clear --no-overlap $L --policy-colors --oom 1 -- $S/plot_compare.py $TMP/pol.csv $TMP/pol-oom.csv -o $TMP/compare-pol.png
segments --min-row-width 0.5 --no-overlap $L --text-has resnet50_train__default --text-has 'pytorch (defaults)' -- $S/plot_segments.py $TMP/seg.csv --summary $TMP/sum.csv --moment end -o $TMP/segments
latency --legend-clear --no-overlap --log-ticks 3 $L --policy-colors --text-has 'modelled device time + measured host time' -- $S/plot_latency.py -o $TMP/latency pytorch=$TMP/lat.csv passthrough=$TMP/lat2.csv
latency-zeros --exit 65 --stderr-has 'latencies are 0 ns' --stderr-has 'replay --no-timing' -- $S/plot_latency.py -o $TMP/latnt pytorch=$TMP/latnt.csv
latency-device --legend-clear --no-overlap $L --policy-colors --text-has 'modelled device time' --text-has '110 of 4600 calls' -- $S/plot_latency.py --device-calls -o $TMP/latdev pytorch=$TMP/latnt.csv passthrough=$TMP/lat2nt.csv
policies --no-overlap $L --policy-colors --min-cell-pt 4.5 --oom 1 --text-has 'n/a' --text-has 'out of memory' --text-has '2 traces × 4 policies' -- $S/plot_policies.py $TMP/pol.csv $TMP/pol-oom.csv -o $TMP/policies
policies-all --no-overlap $L --policy-colors --min-cell-pt 4.5 --text-has 'each policy with its default settings' -- $S/plot_policies.py $TMP/pol-all.csv --width double -o $TMP/policies-all.png
transfer --legend-clear --no-overlap $L -- $S/plot_transfer.py $TMP/transfer.csv -o $TMP/transfer.png
wrong-timeline --exit 65 --stderr-has 'no column event' --stderr-has 'a summary CSV' --stderr-has "reads 'allocsim replay --timeline FILE'" -- $S/plot_timeline.py -o $TMP/w1 $TMP/sum.csv
wrong-sweep --exit 65 --stderr-has 'a timeline CSV' --stderr-has "allocsim sweep" -- $S/plot_sweep.py $TMP/tl.csv -o $TMP/w2
wrong-policies --exit 65 --stderr-has 'a latency CSV' -- $S/plot_policies.py $TMP/lat.csv -o $TMP/w3
wrong-segments --exit 65 --stderr-has 'a sweep CSV' -- $S/plot_segments.py $TMP/sw.csv --trace x -o $TMP/w4
wrong-number --exit 65 --stderr-has 'sw-bad.csv:3: column' --stderr-has "not an integer" -- $S/plot_sweep.py $TMP/sw-bad.csv -o $TMP/w5
wrong-fields --exit 65 --stderr-has 'cmp-short.csv:3: ' --stderr-has 'fields where the header has' -- $S/plot_compare.py $TMP/cmp-short.csv -o $TMP/w6
wrong-binary --exit 65 --stderr-has 'trace.asbin: not' -- $S/plot_transfer.py $TMP/trace.asbin -o $TMP/w7
repro-1 --env SOURCE_DATE_EPOCH=1 -- $S/plot_compare.py $TMP/cmp.csv -o $TMP/repro1
repro-2 --env SOURCE_DATE_EPOCH=1900000000 -- $S/plot_compare.py $TMP/cmp.csv -o $TMP/repro2
EOF
"$py" "$P" --batch "$TMP/cases" > "$TMP/results" 2>&1
while read -r name rest; do
	is "$(grep "^$name: " "$TMP/results" || echo "$name: no result")" "$name: ok" "$name: the script runs and its figure passes the checks (${rest%% -- *})"
done < "$TMP/cases"

# make figures: the timeline from every event (no --every, which drops the peaks between samples),
# written outside the tracked tree (make update-figures writes doc/figures)
M="$srcdir/Makefile.am"
rule=$(awk '/^figures:/ { f = 1; next } f && /^[^\t]/ { exit } f' "$M")
tp=$(grep -c '^timeline-peak: ok$' "$TMP/results")
is "$tp,$(printf '%s\n' "$rule" | grep -c -e '--timeline'),$(printf '%s\n' "$rule" | grep -c -e '--every')" "1,1,0" \
	"make figures: the timelines hold every event (no --every), whose peaks the figure draws (timeline-peak)"
is "$tp,$(sed -n 's/^FIGDIR = //p' "$M")" "1,_build/figures" "make figures writes under _build/figures, not over the tracked doc/figures"
valid() { # FILE: PDF or PNG magic, and not tiny
	case "$1" in
	*.pdf) [ "$(head -c 5 "$1")" = "%PDF-" ] && tail -c 32 "$1" | grep -q '%%EOF' ;;
	*.png) [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ;;
	*.svg) head -c 200 "$1" | grep -q '^<?xml' && grep -q '<svg' "$1" && tail -c 16 "$1" | grep -q '</svg>' ;;
	esac && [ "$(wc -c < "$1")" -gt 2000 ]
}
for name in timeline sweep compare latency segments policies latdev; do
	for ext in pdf svg png; do valid "$TMP/$name.$ext"; ok $? "$name.$ext is a valid $ext file"; done
done
# -o NAME.png: that format alone
ok "$(valid "$TMP/many.png" && valid "$TMP/policies-all.png" && [ ! -e "$TMP/many.pdf" ] && [ ! -e "$TMP/policies-all.pdf" ] && [ ! -e "$TMP/many.svg" ]; echo $?)" "-o NAME.png writes the PNG alone"
# a refused CSV leaves no figure behind
ok "$([ "$(grep -c '^wrong-[a-z]*: ok$' "$TMP/results")" = 7 ] && ! ls "$TMP"/w[0-9]* >/dev/null 2>&1; echo $?)" "the 7 refused CSVs wrote no figure"
# fonts are embedded TrueType (Type 42), not Type 3
ok "$(grep -c '/Type3' "$TMP/sweep.pdf" | grep -q '^0$'; echo $?)" "PDF uses no Type 3 fonts"
# reproducible: the same bytes whatever the date (SOURCE_DATE_EPOCH differs above), no version inside
cmp -s "$TMP/repro1.pdf" "$TMP/repro2.pdf"; ok $? "the PDF is byte-identical on a rerun at another date"
cmp -s "$TMP/repro1.png" "$TMP/repro2.png"; ok $? "the PNG is byte-identical on a rerun at another date"
cmp -s "$TMP/repro1.svg" "$TMP/repro2.svg"; ok $? "the SVG is byte-identical on a rerun at another date"
valid "$TMP/repro1.pdf" && valid "$TMP/repro1.png" && ! grep -q -a -i 'matplotlib v' "$TMP/repro1.pdf" "$TMP/repro1.png" "$TMP/repro1.svg"
ok $? "no matplotlib version inside the PDF, SVG or PNG"
valid "$TMP/repro1.pdf" && ! grep -q -a 'CreationDate' "$TMP/repro1.pdf"; ok $? "no creation date inside the PDF"
finish
