#!/bin/sh
# zoo-stitch.sh - stitch (GMLake) and buddy replaying the bundled real traces (one of each distinct
# request sequence) under --check: invariants, and the numbers the models give, pinned (doc/policies.md,
# sections stitch and buddy). GMLake stitches only requests of at least fragLimit (512 MiB by default):
# of these traces only GPT-2 has them, where stitching holds 25% less than PyTorch's allocator; with
# frag_limit:0 it stitches everywhere and holds less than PyTorch on every trace but the seed example.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
# trace  pytorch  stitch  stitch:frag_limit:0  buddy (peak reserved bytes)  stitch's device allocations, stitches
while read -r name pt stv st0 bd nalloc nst; do
	f="$T/$name.pickle.gz"
	# (the same runs under --check, the invariants after every event: tests/reliability-long.sh)
	for pc in "pytorch|" "stitch|" "stitch|frag_limit:0" "buddy|" "stitch|stitch:False"; do
		p=${pc%%|*}; c=${pc#*|}
		run "$A" replay -p "$p" -c "$c" --no-timing --stats "$TMP/s.$p.${c%%:*}.csv" "$f"
		is "$st" 0 "$name: replay -p $p ${c:+-c $c} exits 0"
		v=$(cols "$out" peak_reserved_bytes peak_allocated_bytes peak_requested_bytes num_device_alloc waste_rounding \
			waste_free_cached waste_pending_free requested_at_peak_reserved)
		case "$v" in *[!0-9\ ]*|"") bad=1; set -- x x x x ;; *) bad=; set -- $v ;; esac # (no arithmetic on a missing column)
		eval "r_${p}_$(printf %s "${c%%:*}" | tr -c 'a-z0-9\n' _)=\"\$1 \$4\""
		ok "$([ -z "$bad" ] && [ "$1" -ge "$2" ] && [ "$2" -ge "$3" ]; echo $?)" "$name, $p ${c}: peak reserved >= peak allocated >= peak requested"
		[ "$p" = pytorch ] || is "$([ -z "$bad" ] && echo $(($5 + $6 + $7)))" "$([ -z "$bad" ] && echo $(($1 - $8)))" \
			"$name, $p ${c}: the waste attribution sums to reserved - requested at the peak"
	done
	# r_*: "peak_reserved_bytes num_device_alloc"
	is "${r_pytorch_% *}" "$pt" "$name: pytorch's peak reserved"
	is "$r_stitch_" "$stv $nalloc" "$name: stitch's peak reserved and device allocations"
	is "$(grep '^stitches,' "$TMP/s.stitch..csv" | cut -d, -f2)" "$nst" "$name: stitch's stitches (fragLimit 512 MiB)"
	is "${r_stitch_frag_limit% *}" "$st0" "$name: stitch -c frag_limit:0's peak reserved"
	is "${r_buddy_% *}" "$bd" "$name: buddy's peak reserved"
	# without stitching GMLake is PyTorch's allocator with 2 MiB rounding: stitching can only help
	ok "$([ "${r_stitch_% *}" -le "${r_stitch_stitch% *}" ]; echo $?)" \
		"$name: stitch holds no more than with stitch:False (${r_stitch_% *} <= ${r_stitch_stitch% *})"
done <<'PIN'
bert_infer_varlen__default 3837788160 3911188480 1707081728 3221225472 53 0
bert_infer_varlen__p110_default 1965031424 2451570688 1707081728 3221225472 49 0
gpt2_train_varlen__default 24509415424 18433966080 18622709760 25769803776 256 5
gpt2_train_varlen__p110_default 19711131648 18433966080 18622709760 25769803776 256 5
resnet50_train__default 7029653504 7371489280 6016729088 8589934592 115 0
seed_example__default 69206016 69206016 69206016 1073741824 3 0
PIN
# where stitching pays: GPT-2 holds less than under PyTorch's allocator, by the numbers above
for name in gpt2_train_varlen__default gpt2_train_varlen__p110_default; do
	pt=$("$A" replay -p pytorch --no-timing "$T/$name.pickle.gz"); sv=$("$A" replay -p stitch --no-timing "$T/$name.pickle.gz")
	ok "$([ "$(col "$sv" peak_reserved_bytes)" -lt "$(col "$pt" peak_reserved_bytes)" ]; echo $?)" "$name: stitch reserves less than pytorch"
done
# fit param frag_limit with the policy's own values: 0, 2 MiB .. 1 GiB (x2); on GPT-2 the least reserved
# from 128 MiB up (GMLake's default, 512 MiB, among them), stitching below that holds more
run "$A" fit param frag_limit -p stitch --capacity 20GiB "$T/gpt2_train_varlen__default.pickle.gz"
is "$st $(printf '%s\n' "$out" | tail -1) $(printf '%s\n' "$out" | grep -c '^[0-9]*,')" "0 134217728 11" "fit param frag_limit on GPT-2: 11 values tried, 128 MiB the best"
is "$(printf '%s\n' "$out" | grep '^536870912,')" "536870912,18433966080,256,0" "fit param frag_limit: GMLake's default gives the replay's numbers"
# determinism and -j: one sweep over the policies, twice
"$A" sweep -j 2 -p stitch -t "$T/gpt2_train_varlen__default.pickle.gz" "$T/resnet50_train__default.pickle.gz" --param frag_limit=0,512MiB -o "$TMP/a.csv" 2>/dev/null
"$A" sweep -j 1 -p stitch -t "$T/gpt2_train_varlen__default.pickle.gz" "$T/resnet50_train__default.pickle.gz" --param frag_limit=0,512MiB -o "$TMP/b.csv" 2>/dev/null
ok "$(cmp -s "$TMP/a.csv" "$TMP/b.csv" && [ "$(wc -l < "$TMP/a.csv")" = 5 ]; echo $?)" "stitch: a sweep gives byte-identical rows with -j 2 and -j 1"
# a stack cannot offer virtual ranges: stitch refuses to sit on top of another policy
run "$A" replay -p 'stitch>passthrough' --no-timing "$T/seed_example__default.pickle.gz"
is "$st" 64 "stitch>passthrough exits 64"
contains "$errout" "stitch: the device offers no virtual address ranges (CUDA VMM); stitch sits at the bottom of a stack, or use stitch:False"; ok $? "and says why"
finish
