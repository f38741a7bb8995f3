#!/bin/sh
# stack.sh - policies stacked on upstream policies (-p 'A>B', src/policies/stack.c).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
# the row without its policy column: a transparent upstream must change nothing else
row() { "$A" replay --no-timing "$@" | tail -1 | csv_bars | cut -d'|' -f1,3-; }
for t in "$T/gpt2_train_varlen__ms40.pickle.gz" "$T/resnet50_train__default.pickle.gz" "$srcdir/traces/captured/emptycache__default.pickle.gz"; do
	b=$(basename "$t" .pickle.gz)
	is "$(row -p 'pytorch>passthrough' -c recorded "$t")" "$(row -p pytorch -c recorded "$t")" \
		"$b: pytorch over passthrough replays exactly as pytorch alone (every column)"
	is "$(row -p 'bestfit>passthrough' -c '' "$t")" "$(row -p bestfit -c '' "$t")" "$b: bestfit over passthrough is bestfit"
done
t="$T/bert_infer_varlen__default.pickle.gz"
is "$(row -p 'passthrough>bestfit>passthrough' -c '' "$t")" "$(row -p 'passthrough>bestfit' -c '' "$t")" "three layers: a passthrough at the bottom changes nothing"
# ';' gives each layer its settings, top first
is "$(row -p 'bestfit>passthrough' -c 'min_segment:20MiB;granule:2MiB' "$t" | cut -d'|' -f1,3-)" "$(row -p bestfit -c 'min_segment:20MiB' "$t" | cut -d'|' -f1,3-)" \
	"-c 'min_segment:20MiB;granule:2MiB' sets the top's and the upstream's options"
run "$A" replay -p 'bestfit>passthrough' -c 'a:1;b:2;c:3' "$t"
is "$st" 64 "more ';' parts than layers is a usage error"
contains "$errout" "more settings than the 2 layers of 'bestfit>passthrough'"; ok $? "... and says so"
run "$A" replay -p 'bestfit>passthrough' -c ';granule:3' "$t"
is "$st" 64 "a bad upstream setting is a usage error"
contains "$errout" "granule: must be a power of two"; ok $? "... naming the upstream's option"
# sweep and fit add a parameter to the top layer's settings
out=$("$A" sweep -t "$t" -p 'bestfit>passthrough' -c ';granule:1024' --param min_segment=20MiB -o -)
is "$(col "$out" config) $(col "$out" peak_reserved_bytes)" "min_segment:20MiB;granule:1024 $(col "$("$A" replay --no-timing -p bestfit -c min_segment:20MiB "$t")" peak_reserved_bytes)" \
	"sweep --param on a stack sets the top layer's option"
run "$A" replay -p 'bestfit>nosuch' "$t"
is "$st" 64 "an unknown layer is a usage error"
run "$A" replay -p 'pytorch>cuda-async' --check --no-timing "$t"
is "$st" 0 "pytorch over cuda-async passes --check"
run "$A" replay -p 'cuda-async>pytorch' "$t"
is "$st" 69 "cuda-async needs a device pool: it cannot sit on an upstream policy"
# the upstream caches what the downstream frees; empty_cache empties every layer
printf '#allocsim-trace 1\na 1 1048576 0\nf 1\n' > "$TMP/one.trace"
out=$("$A" replay -p 'passthrough>bestfit' --no-timing "$TMP/one.trace")
is "$(col "$out" num_device_alloc) $(col "$out" peak_reserved_bytes) $(col "$out" final_reserved_bytes)" "1 2097152 2097152" \
	"1 MiB through passthrough into bestfit: one 2 MiB segment, still cached by bestfit after the free"
printf 'e\n' >> "$TMP/one.trace"
out=$("$A" replay -p 'passthrough>bestfit' --no-timing "$TMP/one.trace")
is "$(col "$out" num_device_free) $(col "$out" final_reserved_bytes)" "1 0" "empty_cache reaches the upstream: the segment is freed"
out=$("$A" replay -p passthrough --no-timing "$TMP/one.trace")
is "$(col "$out" num_device_alloc) $(col "$out" peak_reserved_bytes)" "1 1048576" "passthrough alone: 1 MiB straight from the device"
finish
