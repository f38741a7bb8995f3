#!/bin/sh
# predict.sh - allocsim predict on traces captured without a GPU (scripts/capture-fake.py), checked
# against the same workloads' real H200 runs (traces/predict/W.real.json: torch.cuda.memory_stats()).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
P="$srcdir/traces/predict"
real() { awk -v k="\"$2\"" '$1 == k":" { v = $2; sub(/,$/, "", v); print v }' "$P/$1.real.json"; }
row() { "$A" predict --capacity "$1" --format csv --no-advise "$2" | sed -n 2p; }

# the predicted numbers, exact (low .. high: without .. with the table's cuBLAS/cuBLASLt workspaces)
run "$A" predict --capacity 1TiB --format csv "$P/bert_infer.trace.gz"
is "$st" 0 "bert: fits 1 TiB (exit 0)"
is "$(cols "$out" peak_reserved_low peak_reserved_high num_device_alloc_low num_device_alloc_high unseen_entries unseen_bytes)" \
	"4559208448 4603248640 38 40 2 34603008" "bert: peak reserved and cudaMalloc calls, low .. high; 2 workspaces (32 MiB + 1 MiB)"
is "$(cols "$out" peak_reserved_high)" "$(real bert_infer reserved_bytes.all.peak)" "bert: the prediction is the real run's reserved_bytes.all.peak"
is "$(cols "$out" num_device_alloc_high)" "$(real bert_infer num_device_alloc)" "bert: ... and its num_device_alloc"
is "$(cols "$out" margin_low margin_high fits)" "1094908379136 1094952419328 yes" "bert: the margin is 1 TiB less the peak, low .. high"
for w in llama_train:4915724288:4949278720:146:147:4911529984:4945084416 resnet50_train:6912212992:6945767424:133:134:5886705664:5924454400 \
	 unet_train:3732930560:3732930560:61:61:3376414720:3376414720; do
	IFS=: read -r name plo phi nlo nhi dlo dhi <<EOT
$w
EOT
	run "$A" predict --capacity 1TiB --format csv "$P/$name.trace.gz"
	is "$(cols "$out" peak_reserved_low peak_reserved_high num_device_alloc_low num_device_alloc_high needs_low needs_high)" \
		"$plo $phi $nlo $nhi $dlo $dhi" "$name: the predicted range"
	rr=$(real "$name" reserved_bytes.all.peak)
	# within the issue's worst-case target (10%) of the real run, except unet (cuDNN workspaces, doc/predict.md)
	got=$(cols "$out" peak_reserved_high)
	e=$(awk -v p="$got" -v r="$rr" 'BEGIN { d = (p - r) / r; if (d < 0) d = -d; print (d <= 0.10) ? "within" : "beyond" }')
	if [ "$name" = unet_train ]; then want=beyond; else want=within; fi
	is "$got:$e" "$phi:$want" "$name: prediction $phi vs the real peak $rr: $want 10%"
	# fit / no fit at the capacity it needs and one byte below, at both ends of the range
	is "$(row "$dhi" "$P/$name.trace.gz" | cut -d, -f12)" yes "$name: fits at $dhi bytes"
	if [ "$dlo" != "$dhi" ]; then
		is "$(row $((dhi - 1)) "$P/$name.trace.gz" | cut -d, -f12)" uncertain "$name: uncertain one byte below"
		is "$(row "$dlo" "$P/$name.trace.gz" | cut -d, -f12)" uncertain "$name: uncertain at the low end's need"
	fi
	is "$(row $((dlo - 1)) "$P/$name.trace.gz" | cut -d, -f12)" no "$name: does not fit one byte below the low end's need"
done
run "$A" predict --capacity 4945084415 --no-advise "$P/llama_train.trace.gz"
is "$st" 4 "llama: exit 4 when only the low end fits"
run "$A" predict --capacity 4911529983 --no-advise "$P/llama_train.trace.gz"
is "$st" 3 "llama: exit 3 when it does not fit"
contains "$out" "fits: no"; ok $? "llama: the table says so"
contains "$out" "margin: -37748737 bytes (-0.04 GiB) .. -4194305 bytes (-0.00 GiB)"; ok $? "llama: the margin is a range, negative"
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
is "$st:$(cols "$out" peak_reserved_low peak_reserved_high needs_low needs_high unseen_entries unseen_bytes)" \
	"0:314572800 316669952 209715200 209715200 1 1048576" "an estimated entry's slot reused: both ends replay"

# the fit/no-fit answer at recorded pressure limits: real H200 runs under set_per_process_memory_fraction
# (traces/predict/pressure.csv, scripts/predict-pressure.py): predict's answer at each run's exact limit
# must match the run's outcome (yes = ran, no = out of memory), except the misses named here (doc/predict.md):
# "fits" where the real run ran out of memory (the prediction is below the real peak) and one "uncertain"
miss="llama_train:need resnet50_train:need vit_train:need vit_train:real_peak_x0.97"
unsure="bert_infer:need"
np=0 nagree=0
while IFS=, read -r w basis lim _frac room _nooms _rpk; do
	[ "$w" = workload ] && continue
	np=$((np + 1))
	if [ "$room" = 1 ]; then real_out=oom; right=no; wrong=yes; else real_out=ran; right=yes; wrong=no; fi
	case " $miss " in *" $w:$basis "*) want=$wrong; verdict=wrong ;; *) want=$right; verdict=right ;; esac
	case " $unsure " in *" $w:$basis "*) want=uncertain; verdict=uncertain ;; esac
	got=$(row "$lim" "$P/$w.trace.gz" | cut -d, -f12)
	[ "$got" = "$right" ] && nagree=$((nagree + 1))
	is "$got (real: $real_out)" "$want (real: $real_out)" "pressure: $w at $lim bytes ($basis): predict says $want, the real run: $real_out ($verdict)"
done < "$P/pressure.csv"
is "$(sed -n 1p "$P/pressure.csv"): $np runs, $nagree answered right" \
	"workload,basis,limit_bytes,fraction,real_oom,real_num_ooms,real_peak_reserved: 25 runs, 20 answered right" "pressure: 20 of 25 answers right"

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
echo "1..$n"
[ "$failed" = 0 ]
