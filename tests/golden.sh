#!/bin/sh
# golden.sh - whole summary rows pinned for the bundled traces (Dinero IV's "good output" tests).
# Regenerate after an intended change with: REGEN=1 srcdir=. ALLOCSIM=./allocsim sh tests/golden.sh
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
cd "$srcdir" || exit 99
for policy_conf in "passthrough|" "bestfit|" "bestfit|per_stream:False,min_segment:20MiB,split_threshold:1MiB" \
		"pytorch|" "pytorch|max_split_size_mb:64,roundup_power2_divisions:[64:8,>:2]" "pytorch|expandable_segments:True" "cuda-async|"; do
	p=${policy_conf%%|*}; c=${policy_conf#*|}
	tag=$(printf '%s_%s' "$p" "$c" | tr -c 'A-Za-z0-9_\n' '-' | cut -c1-48)
	gold="tests/golden-rows/$tag.csv"
	: > "$TMP/got.csv"
	for t in traces/pytorch-h200/resnet50_train__default.pickle.gz traces/pytorch-h200/bert_infer_varlen__default.pickle.gz \
		 traces/pytorch-h200/seed_example__default.pickle.gz; do
		"$A" replay -p "$p" -c "$c" --no-timing --addresses model "$t" | { [ -s "$TMP/got.csv" ] && tail -n +2 || cat; } >> "$TMP/got.csv"
	done
	if [ -n "$REGEN" ]; then cp "$TMP/got.csv" "$gold"; fi
	if cmp -s "$TMP/got.csv" "$gold"; then ok 0 "golden rows for $p ${c:-(defaults)}"; else ok 1 "golden rows for $p ${c:-(defaults)}"; diff "$gold" "$TMP/got.csv" | sed 's/^/# /' | head -10; fi
done
finish
