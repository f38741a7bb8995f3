#!/bin/sh
# cuda.sh - the real-GPU backend. Without a usable GPU every test is a TAP SKIP after checking that
# --backend cuda says so with exit status 69.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
tr="$T/seed_example__default.pickle.gz"
run "$A" replay --backend cuda --no-timing "$tr"
if [ "$st" = 69 ]; then
	contains "$errout" "CUDA"; ok $? "--backend cuda without a usable GPU exits 69 and says why"
	echo "ok 2 # SKIP no usable GPU: $errout"
	echo "1..2"; exit 0
fi
is "$st" 0 "--backend cuda replays on the GPU"
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1; }
for c in "" "max_split_size_mb:128" "expandable_segments:True"; do
	for t in "$tr" "$T/resnet50_train__default.pickle.gz"; do
		before=$(used)
		real=$("$A" replay --backend cuda -c "$c" --no-timing "$t"); sim=$("$A" replay -c "$c" --no-timing "$t")
		is "$(col "$real" peak_reserved_bytes) $(col "$real" num_device_alloc) $(col "$real" latency_source)" \
		   "$(col "$sim" peak_reserved_bytes) $(col "$sim" num_device_alloc) measured" "real GPU = simulation: peak reserved, device allocs (${c:-defaults}, $(basename "$t" .pickle.gz))"
		is "$(used)" "$before" "no device memory left behind (${c:-defaults}, $(basename "$t" .pickle.gz))"
	done
done
run "$A" replay --backend cuda -p passthrough --no-timing "$tr"
is "$st $(col "$out" num_device_alloc)" "0 $(col "$out" allocs)" "passthrough on the GPU: one cudaMalloc per request"
# an interrupted replay releases everything and writes nothing
before=$(used)
"$A" replay --backend cuda -p passthrough -o "$TMP/x.csv" "$T/bert_infer_varlen__default.pickle.gz" & pid=$!
sleep 0.4; kill -INT $pid; wait $pid; s=$?
is "$s" 130 "SIGINT ends the replay with status 130"
ok "$([ ! -e "$TMP/x.csv" ]; echo $?)" "and writes no output"
is "$(used)" "$before" "and leaves no device memory behind"
finish
