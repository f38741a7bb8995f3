#!/bin/sh
# messages.sh - the messages that name the fix: a recording's memory limit (OOMs in its history)
# and --fraction, garbage_collection_threshold without a capacity, sizes with units in sweep ranges,
# sizes shown in GiB beside bytes, and every exit status a command gives listed in the man page.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
lim="$T/gpt2_train_varlen__p110_ms128.pickle.gz"   # recorded with set_per_process_memory_fraction(0.123779) on 150109880320 bytes
seed="$T/seed_example__default.pickle.gz"
warn="allocsim: warning: $lim: the recorded run ran out of memory 1 time(s), so it had a memory limit, and this replay has none: --capacity SIZE or --fraction F (set_per_process_memory_fraction(F) x the device's total memory: --device-total SIZE) reproduces it"

# a snapshot whose history holds an OOM, replayed without a capacity: one warning line naming the fix
run "$A" replay -c recorded --no-timing "$lim"
is "$st: $errout" "0: $warn" "replay of a recording with an OOM, without --capacity: one warning naming --capacity and --fraction"
run "$A" replay -c recorded --no-timing --capacity 18580450876 "$lim"; withcap=$out
is "$st: $errout" "0: " "with the recorded capacity: no warning"
# --fraction F --device-total SIZE is set_per_process_memory_fraction(F) x the device's memory
run "$A" replay -c recorded --no-timing --fraction 0.123779 --device-total 150109880320 "$lim"
is "$st,$(col "$out" capacity_bytes),$(col "$out" num_ooms)" "0,18580450876,1" "--fraction 0.123779 of 150109880320 bytes is the recorded capacity, and the OOM is reproduced"
is "$out" "$withcap" "--fraction gives the row of the same --capacity"
run "$A" replay --fraction 0.5 "$seed"
is "$st: $errout" "64: allocsim: error: --fraction: $seed does not record the device's total memory: add --device-total SIZE (torch.cuda.get_device_properties(0).total_memory)" \
	"--fraction on a trace without the device's total memory says what to add"
run "$A" replay --fraction 0.5 --capacity 1GiB "$seed"
is "$st: $errout" "64: allocsim: error: give --capacity or --fraction, not both" "--fraction and --capacity together are refused"
run "$A" replay --fraction 1.5 "$seed"
is "$st" 64 "--fraction 1.5 is refused"
# validate says the same beside the divergence, and is exact with --fraction
run "$A" validate "$lim"
is "$st: $errout" "1: $warn" "validate of a recording with an OOM, without --capacity: the warning beside the divergence"
contains "$out" ": diverged at"; ok $? "and the divergence"
run "$A" validate --fraction 0.123779 --device-total 150109880320 "$lim"
is "$st: $out" "0: $lim: exact (503 device calls, 231 end-state segments)" "validate --fraction: exact"

# --device-total alone is the simulated device's total memory (cudaMemGetInfo's): rmm-pool's default pool
# is half the free memory, and expandable segments reserve address space by it; default: the trace's
# device_total, else an H200's 150109880320 bytes
rn="$T/resnet50_train__default.pickle.gz"
run "$A" replay -p rmm-pool --no-timing "$rn"
is "$st,$(col "$out" peak_reserved_bytes)" "0,75054940160" "rmm-pool on the default device (an H200): half of 150109880320 bytes"
run "$A" replay -p rmm-pool --no-timing --device-total 85520809984 "$rn"
is "$st,$(col "$out" peak_reserved_bytes)" "0,42760404992" "--device-total 85520809984 (an H100 80GB): half of it"
run "$A" replay -p rmm-pool --no-timing --backend shuffled --device-total 85520809984 "$rn"
is "$st,$(col "$out" peak_reserved_bytes)" "0,42760404992" "and the same on the shuffled backend"
printf '#allocsim-trace 1\n#device_total: 1000000000\na 1 1000 0\nf 1\n' > "$TMP/dt.trace"
run "$A" replay -p rmm-pool --no-timing "$TMP/dt.trace"
is "$st,$(col "$out" peak_reserved_bytes)" "0,500000000" "a trace's #device_total is the simulated device's"
run "$A" sweep -t "$TMP/dt.trace" -p rmm-pool
is "$st,$(col "$out" peak_reserved_bytes)" "0,500000000" "in sweep too"
run "$A" replay -p rmm-pool --no-timing --device-total 2000000000 "$TMP/dt.trace"
is "$st,$(col "$out" peak_reserved_bytes)" "0,1000000000" "and --device-total overrides it"
g2="$T/gpt2_train_varlen__default.pickle.gz"
"$A" replay -c expandable_segments:True --no-timing --device-log "$TMP/dl1.csv" "$g2" > /dev/null
"$A" replay -c expandable_segments:True --no-timing --device-total 80GiB --device-log "$TMP/dl2.csv" "$g2" > /dev/null
is "$(sed -n 3p "$TMP/dl1.csv" | cut -d, -f4,7) $(sed -n 3p "$TMP/dl2.csv" | cut -d, -f4,7)" "map,0x2a54400000 map,0x1982000000" \
	"expandable segments: a second stream's reservation follows the device total (150109880320 vs 80 GiB)"
run "$A" validate --device-total 150109880320 "$T/bert_infer_varlen__default.pickle.gz"
is "$st" 0 "validate takes --device-total alone (the H200's: exact as without)"

# garbage_collection_threshold acts only under a capacity
run "$A" replay -c garbage_collection_threshold:0.6 --no-timing "$seed"
is "$st: $errout" "0: allocsim: warning: garbage_collection_threshold does nothing without a capacity (PyTorch applies it only under set_per_process_memory_fraction): give --capacity or --fraction" \
	"garbage_collection_threshold without a capacity: a warning that it does nothing"
run "$A" replay -c garbage_collection_threshold:0.6 --capacity 1GiB --no-timing "$seed"
is "$st: $errout" "0: " "with a capacity: no warning"

# sizes with units in sweep ranges
run "$A" sweep -t "$seed" --param capacity=16GiB..24GiB:+2GiB
is "$st: $(printf '%s\n' "$out" | tail -n +2 | cut -d, -f2 | tr '\n' ' ')" "0: 17179869184 19327352832 21474836480 23622320128 25769803776 " \
	"sweep --param capacity=16GiB..24GiB:+2GiB: five capacities"
run "$A" sweep -t "$seed" --param capacity=1GiB..4GiB:x2
is "$st: $(printf '%s\n' "$out" | tail -n +2 | cut -d, -f6 | tr '\n' ' ')" "0: 1073741824 2147483648 4294967296 " "a geometric range of sizes"
run "$A" sweep -t "$seed" --param capacity=4GiB..1GiB:+1GiB
is "$st" 64 "a range that runs backwards is refused"

# GiB beside bytes in info and fit
run "$A" info "$T/gpt2_train_varlen__ms40.pickle.gz"
is "$st: $(printf '%s\n' "$out" | grep '^peak_live')" "0: peak_live_requested_bytes: 16864870120 (15.71 GiB)" "info shows GiB beside bytes"
run "$A" fit capacity "$T/gpt2_train_varlen__ms40.pickle.gz"
is "$st: $(printf '%s\n' "$out" | grep -e '^unlimited' -e '^checked' | cut -d';' -f1 | tr '\n' '|')" \
	"0: unlimited: peak_reserved_bytes 24509415424 (22.83 GiB), peak_requested_bytes 16864870120 (15.71 GiB)|checked: 19560136704 (18.22 GiB) fits, 19558039552 runs out of memory|" \
	"fit capacity shows GiB beside bytes"
is "$(printf '%s\n' "$out" | tail -1)" 19560136704 "and its last line stays the number alone"

# a misspelt fit subcommand
run "$A" fit capcity "$seed"
is "$st: $errout" "64: allocsim: error: fit: expected 'capacity' or 'param', not 'capcity': did you mean 'capacity'?
Try 'allocsim fit --help'." "fit capcity: did you mean capacity"
# every exit status: fit param with no value that fits exits 2, and the man page says so
run "$A" fit param max_split_size_mb --values 20,40 --capacity 10MiB "$seed"
is "$st: $errout" "2: allocsim: error: no value of max_split_size_mb avoids out-of-memory at this capacity" "fit param with no value that fits: exit 2"
for s in 0 1 2 3 4 5 64 65 66 69 70 74 75 130; do
	grep -qx "\.B $s" "$srcdir/doc/allocsim.1" || echo "# exit status $s is not in doc/allocsim.1"
done
is "$st:$(for s in 0 1 2 3 4 5 64 65 66 69 70 74 75 130; do grep -qx "\.B $s" "$srcdir/doc/allocsim.1" || printf ' %s' $s; done)" "2:" \
	"doc/allocsim.1 lists every exit status (0 1 2 3 4 5 64 65 66 69 70 74 75 130)"
# sweep warns as replay does: a limited recording swept without a capacity, gc without one (once each)
run "$ALLOCSIM" sweep -t "$T/bert_infer_varlen__p110_default.pickle.gz" -t "$T/resnet50_train__default.pickle.gz" \
	--param garbage_collection_threshold=0.6,none -o "$TMP/sw.csv"
is "$st $(printf '%s\n' "$errout" | grep -c 'warning: garbage_collection_threshold does nothing without a capacity') $(printf '%s\n' "$errout" | grep -c 'bert_infer_varlen__p110_default.pickle.gz: the recorded run ran out of memory 1 time(s)')" "0 1 1" \
	"sweep warns once about gc without a capacity and once about the limited recording"
run "$ALLOCSIM" sweep -t "$T/bert_infer_varlen__p110_default.pickle.gz" --capacity 2GiB --param garbage_collection_threshold=0.6 -o "$TMP/sw.csv"
is "$st:$errout" "0:" "... and says nothing with a capacity"
finish
