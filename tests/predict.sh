#!/bin/sh
# predict.sh - allocsim predict on traces captured without a GPU (scripts/capture-fake.py), checked
# against the same workloads' real H200 runs (traces/predict/W.real.json: torch.cuda.memory_stats()).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
P="$srcdir/traces/predict"
real() { awk -v k="\"$2\"" '$1 == k":" { v = $2; sub(/,$/, "", v); print v }' "$P/$1.real.json"; }
row() { "$A" predict --capacity "$1" --format csv --no-advise "$2" | sed -n 2p; }
row0() { "$A" predict --capacity "$1" --margin 0 --format csv --no-advise "$2" | sed -n 2p; }

# the predicted numbers, exact (low .. high: without .. with the table's cuBLAS/cuBLASLt workspaces)
run "$A" predict --capacity 1TiB --format csv "$P/bert_infer.trace.gz"
is "$st" 0 "bert: fits 1 TiB (exit 0)"
is "$(cols "$out" peak_reserved_low peak_reserved_high num_device_alloc_low num_device_alloc_high unseen_entries unseen_bytes)" \
	"4559208448 4603248640 38 40 32 36460896" "bert: peak reserved and cudaMalloc calls, low .. high; 32 estimated entries: the 2 workspaces (32 MiB + 1 MiB) and 30 probed kernel scratch buffers (1857888 bytes)"
is "$(cols "$out" peak_reserved_high)" "$(real bert_infer reserved_bytes.all.peak)" "bert: the prediction is the real run's reserved_bytes.all.peak"
is "$(cols "$out" num_device_alloc_high)" "$(real bert_infer num_device_alloc)" "bert: ... and its num_device_alloc"
is "$(cols "$out" margin_low margin_high fits)" "1094908379136 1094952419328 yes" "bert: the margin is 1 TiB less the peak, low .. high"
# the need: the least capacity from which EVERY larger one fits (a downward scan). Fitting is not
# monotone: bert's high end fits at 2433000000 (the release-and-retry after a failed cudaMalloc), fails
# from 2440000000, fits again from its need 2506096640
T="$P/bert_infer.trace.gz"
is "$(cols "$out" fits_from_low fits_from_high)" "2464153600 2506096640" "bert: fits from 2464153600 .. 2506096640 (low .. high end)"
is "$(row0 2506096640 "$T" | cut -d, -f12)" yes "bert: fits at its need (--margin 0)"
run "$A" predict --capacity 2506096639 --margin 0 --no-advise "$T"
contains "$out" "fits: uncertain (between the two ends' needs; the replay at this capacity fits at the low end only)"; ok $? "bert: one byte below the need: only the low end's replay fits"
bad=0 k=0
while [ $k -lt 48 ]; do # every 2 MiB step (and an odd byte) over 96 MiB above the need fits
	[ "$(row0 $((2506096640 + k * 2097152 + k * 4099 % 2097152)) "$T" | cut -d, -f12)" = yes ] || bad=$((bad + 1))
	k=$((k + 1))
done
is "$bad" 0 "bert: every capacity tried in the 96 MiB above the need fits"
run "$A" predict --capacity 2433000000 --margin 0 --no-advise "$T"
is "$st" 4 "bert at 2433000000 (below the need, where its replay fits): exit 4, not 0"
contains "$out" "fits: uncertain (below the needs, where fitting is not monotone; the replay at this capacity fits at the high end only)"; ok $? "... and says why"
# --margin (default 4%): yes from 1.04 x the high end's need, no below 0.96 x the low end's where neither replay fits
is "$(row 2606340506 "$T" | cut -d, -f12,16)" "yes,4" "bert: yes at 1.04 x its need (2606340506)"
run "$A" predict --capacity 2606340505 --no-advise "$T"
is "$st" 4 "bert: one byte below 1.04 x the need: exit 4"
contains "$out" "fits: uncertain (within the margin of a need; the replay at this capacity fits)"; ok $? "... within the margin"
run "$A" predict --capacity 2365587455 --no-advise "$T"
is "$st" 3 "bert: below 0.96 x the low end's need (2365587456): exit 3"
is "$(row 2365587456 "$T" | cut -d, -f12)" uncertain "bert: at 0.96 x the low end's need: uncertain"
is "$(row 2606340505 "$T" | sed 's/.*,//'):$("$A" predict --capacity 2506096640 --margin 0.5 --format csv --no-advise "$T" | sed -n '2s/.*,//p')" "4:0.5" "--margin in the CSV"
is "$("$A" predict --capacity 2518627124 --margin 0.5 --format csv --no-advise "$T" | cut -d, -f12 | sed -n 2p)" yes "bert: --margin 0.5: yes from 1.005 x the need"
for w in llama_train:4915724288:4949278720:146:147:4911529984:4945084416 resnet50_train:6912212992:6996099072:109:133:5886705664:5995757568 unet_train:3732930560:4339007488:42:61:3376414720:3879731200 vit_train:6067060736:6297747456:128:130:6067060736:6239027200 gpt2_bf16:15883829248:15917383680:192:193:13600030720:13633585152; do
	IFS=: read -r name plo phi nlo nhi dlo dhi <<EOT
$w
EOT
	run "$A" predict --capacity 1TiB --format csv "$P/$name.trace.gz"
	is "$(cols "$out" peak_reserved_low peak_reserved_high num_device_alloc_low num_device_alloc_high fits_from_low fits_from_high)" \
		"$plo $phi $nlo $nhi $dlo $dhi" "$name: the predicted range"
	rr=$(real "$name" reserved_bytes.all.peak)
	# within the issue's worst-case target (10%) of the real run
	got=$(cols "$out" peak_reserved_high)
	e=$(awk -v p="$got" -v r="$rr" 'BEGIN { d = (p - r) / r; if (d < 0) d = -d; print (d <= 0.10) ? "within" : "beyond" }')
	if [ "$name" = "" ]; then want=beyond; else want=within; fi
	is "$got:$e" "$phi:$want" "$name: prediction $phi vs the real peak $rr: $want 10%"
	# at the need (--margin 0): every capacity from it up fits, one byte below the replay does not
	is "$(row0 "$dhi" "$P/$name.trace.gz" | cut -d, -f12)" yes "$name: fits at its need $dhi bytes (--margin 0)"
	if [ "$dlo" = "$dhi" ]; then below=no; else below=uncertain; fi
	is "$(row0 $((dhi - 1)) "$P/$name.trace.gz" | cut -d, -f12)" $below "$name: $below one byte below (--margin 0)"
	is "$(row "$dhi" "$P/$name.trace.gz" | cut -d, -f12)" uncertain "$name: uncertain at its need with the default 4% margin"
done
# llama: the needs are 4911529984 .. 4945084416 (low .. high end)
run "$A" predict --capacity $((4945084416 - 1)) --no-advise "$P/llama_train.trace.gz"
is "$st" 4 "llama: exit 4 between the two ends' needs"
contains "$out" "fits: uncertain (between the two ends' needs; the replay at this capacity fits at the low end only)"; ok $? "... and says so"
run "$A" predict --capacity 4715068784 --no-advise "$P/llama_train.trace.gz"
is "$st" 3 "llama: exit 3 below 0.96 x the low end's need"
contains "$out" "fits: no"; ok $? "llama: the table says so"
contains "$out" "margin: -234209936 bytes (-0.22 GiB) .. -200655504 bytes (-0.19 GiB)"; ok $? "llama: the margin is a range, negative"
run "$A" predict --capacity $((4715068784 + 1)) --no-advise "$P/llama_train.trace.gz"
is "$st" 4 "llama: exit 4 one byte above (within the margin)"
# advise behind a no-fit: its table at the same capacity
run "$A" predict --capacity 4GiB "$P/llama_train.trace.gz"
is "$st" 3 "llama at 4 GiB: does not fit"
contains "$out" "advise at the same capacity:"; ok $? "advise runs when it does not fit"
contains "$out" "target: 4.00 GiB (4294967296 bytes, --capacity)"; ok $? "advise's target is predict's capacity"
# --gpu: the table's memory, less --context
run "$A" predict --gpu H200 --context 1GiB --format csv "$P/unet_train.trace.gz"
is "$(cols "$out" capacity_bytes fits)" "149036138496 yes" "--gpu H200 --context 1GiB: 150109880320 - 2^30 bytes"
run "$A" predict --gpu H200 "$P/unet_train.trace.gz"
contains "$out" "capacity: 150109880320 (139.80 GiB) (--gpu H200 less a context of 0 bytes)"; ok $? "--gpu H200 in the table"
run "$A" predict --capacity 17.30GiB --format csv "$P/unet_train.trace.gz"
is "$(cols "$out" capacity_bytes)" 18575733555 "--capacity 17.30GiB is rounded down to bytes"

# cross-stream frees (a real snapshot): low = completed when requested, high = as recorded = the real run
M="$srcdir/traces/captured/multistream__default"
run "$A" predict --capacity 1TiB --format csv "$M.pickle.gz"
is "$(cols "$out" peak_reserved_low peak_reserved_high num_device_alloc_low num_device_alloc_high pending_frees unseen_entries)" \
	"367001600 446693376 18 22 39 0" "multistream: the range of 39 cross-stream frees"
mr=$(awk '/"reserved_bytes.all.peak"/ { v = $2; sub(/,$/, "", v); print v }' "$M.meta.json")
is "$(cols "$out" peak_reserved_high)" "$mr" "multistream: the high end is the real run's reserved_bytes.all.peak"
# an estimated entry freed, its slot reused by a later request (was: "internal: allocation into live slot 0")
printf '#allocsim-trace 1\np unseen:test\na 1 1048576 0\nf 1\na 2 104857600 0\nf 2\na 3 209715200 0\n' > "$TMP/reuse.trace"
run "$A" predict --capacity 1TiB --format csv "$TMP/reuse.trace"
is "$st:$(cols "$out" peak_reserved_low peak_reserved_high fits_from_low fits_from_high unseen_entries unseen_bytes)" \
	"0:314572800 316669952 209715200 209715200 1 1048576" "an estimated entry's slot reused: both ends replay"

# the fit/no-fit answer at recorded pressure limits: real runs under set_per_process_memory_fraction
# (traces/predict/pressure.csv, scripts/predict-pressure.py): predict's answer at each run's exact limit
# is yes where the run ran, no where it ran out of memory, or uncertain (the rows named here, within the
# 4% margin of a need); never the wrong one (doc/predict.md)
unsure="bert_infer:need_x0.97 bert_infer:need bert_infer:need_x1.03 gpt2_train:need_x0.97 gpt2_train:need gpt2_train:need_x1.03 llama_train:need_x0.97 llama_train:need llama_train:need_x1.03 llama_train:real_peak_x0.97 llama_train:real_peak_x1.03 resnet50_train:need_x0.97 resnet50_train:need resnet50_train:need_x1.03 vit_train:need_x0.97 vit_train:need vit_train:need_x1.03 vit_train:real_peak_x0.97"
np=0 nright=0 nunsure=0 nwrong=0
while IFS=, read -r w basis lim _frac room _nooms _rpk; do
	[ "$w" = workload ] && continue
	np=$((np + 1))
	if [ "$room" = 1 ]; then real_out=oom; right=no; else real_out=ran; right=yes; fi
	case " $unsure " in *" $w:$basis "*) want=uncertain ;; *) want=$right ;; esac
	got=$(row "$lim" "$P/$w.trace.gz" | cut -d, -f12)
	case $got in "$right") nright=$((nright + 1)) ;; uncertain) nunsure=$((nunsure + 1)) ;; *) nwrong=$((nwrong + 1)) ;; esac
	is "$got (real: $real_out)" "$want (real: $real_out)" "pressure: $w at $lim bytes ($basis): predict says $want, the real run: $real_out"
done < "$P/pressure.csv"
is "$(sed -n 1p "$P/pressure.csv"): $np runs, $nright right, $nunsure uncertain, $nwrong wrong" \
	"workload,basis,limit_bytes,fraction,real_oom,real_num_ooms,real_peak_reserved: 25 runs, 7 right, 18 uncertain, 0 wrong" "pressure: 7 of 25 right, none wrong"

# errors: usage (64), a missing trace (66), a malformed one (65); nothing on standard output
run "$A" predict "$P/unet_train.trace.gz"
is "$st:$out" "64:" "no capacity: exit 64"
contains "$errout" "give one of --gpu NAME and --capacity SIZE"; ok $? "... with a message"
run "$A" predict --gpu H200 --capacity 1GiB "$P/unet_train.trace.gz"
is "$st:$out" "64:" "--gpu and --capacity together: exit 64"
run "$A" predict --gpu B300X "$P/unet_train.trace.gz"
is "$st" 64 "unknown GPU: exit 64"
contains "$errout" "unknown GPU 'B300X'"; ok $? "... named"
run "$A" predict --capacity 12XB "$P/unet_train.trace.gz"
is "$st" 64 "bad size: exit 64"
run "$A" predict --capacity 1GiB --context 1GiB "$P/unet_train.trace.gz"
is "$st" 64 "--context without --gpu: exit 64"
run "$A" predict --gpu H200 --context 200GiB "$P/unet_train.trace.gz"
is "$st" 64 "a context larger than the GPU: exit 64"
run "$A" predict --capacity 1GiB "$TMP/none.trace"
is "$st:$out" "66:" "a missing trace: exit 66"
printf '#allocsim-trace 1\na 1 4096 0\nf 2\n' > "$TMP/bad.trace"
run "$A" predict --capacity 1GiB "$TMP/bad.trace"
is "$st:$out" "65:" "a free of an unknown id: exit 65, nothing printed"
contains "$errout" "bad.trace:3"; ok $? "... the message names the file and line"
run "$A" predict --capacity 1GiB --format json "$P/unet_train.trace.gz"
is "$st" 64 "--format json: exit 64"
for m in -1 100 4x ""; do
	run "$A" predict --capacity 1GiB --margin "$m" "$P/unet_train.trace.gz"
	is "$st:$out" "64:" "--margin '$m': exit 64"
done
contains "$errout" "is not a percentage in [0, 100)"; ok $? "... with a message"
echo "1..$n"
[ "$failed" = 0 ]
