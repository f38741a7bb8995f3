#!/bin/sh
# reliability-long.sh - the invariants (--check after every event) on every bundled and captured
# trace: pytorch with the trace's recorded settings and capacity (the runs tests/fidelity.sh compares
# with PyTorch's numbers), and the other policies: make check-long. tests/reliability.sh checks two
# bundled ones and the captured ones under default settings.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
for dir in "$T" "$srcdir/traces/captured"; do
	tail -n +2 "$dir/ground-truth.csv" | csv_bars > "$TMP/gt"
	while IFS='|' read -r name wl tag conf frac cap rest; do
		run "$A" replay -p pytorch -c "$conf" ${cap:+--capacity "$cap"} --check --no-timing "$dir/$name.pickle.gz"
		is "$st" 0 "pytorch --check holds on $name${conf:+ (-c $conf)}${cap:+ (--capacity $cap)}"
	done < "$TMP/gt"
done
for t in "$T"/*.pickle.gz "$srcdir"/traces/captured/*.pickle.gz; do
	for p in bestfit passthrough cuda-async; do
		run "$A" replay -p "$p" --check --no-timing "$t"
		is "$st" 0 "$p --check holds on $(basename "$t" .pickle.gz)"
	done
done
# the zoo's runs of tests/zoo-stitch.sh (one trace of each distinct request sequence)
for name in bert_infer_varlen__default bert_infer_varlen__p110_default gpt2_train_varlen__default gpt2_train_varlen__p110_default \
	resnet50_train__default seed_example__default; do
	for pc in "stitch|" "stitch|frag_limit:0" "buddy|" "stitch|stitch:False"; do
		p=${pc%%|*}; c=${pc#*|}
		run "$A" replay -p "$p" -c "$c" --check --no-timing "$T/$name.pickle.gz"
		is "$st" 0 "$p${c:+ -c $c} --check holds on $name"
	done
done
finish
