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
# The card's total memory (cuDeviceTotalMem = cudaMemGetInfo's total), for the simulation's device
# (--device-total): rmm-pool's default pool is half the free memory and expandable segments reserve
# address space by it; the simulation's default is an H200's. nvidia-smi's MiB where Python cannot
# call the driver (not exact on every card).
gpu_total=$(python3 -c 'import ctypes as c; l = c.CDLL("libcuda.so.1"); d = c.c_int(); t = c.c_size_t()
assert l.cuInit(0) == 0 and l.cuDeviceGet(c.byref(d), 0) == 0 and l.cuDeviceTotalMem_v2(c.byref(t), d) == 0; print(t.value)' 2>/dev/null) ||
	gpu_total=$(( $(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1) * 1048576 ))
G="--device-total $gpu_total"
for c in "" "max_split_size_mb:128" "expandable_segments:True"; do
	for t in "$tr" "$T/resnet50_train__default.pickle.gz"; do
		before=$(used)
		real=$("$A" replay --backend cuda -c "$c" --no-timing "$t"); sim=$("$A" replay $G -c "$c" --no-timing "$t")
		is "$(col "$real" peak_reserved_bytes) $(col "$real" num_device_alloc) $(col "$real" latency_source)" \
		   "$(col "$sim" peak_reserved_bytes) $(col "$sim" num_device_alloc) measured" "real GPU = simulation: peak reserved, device allocs (${c:-defaults}, $(basename "$t" .pickle.gz))"
		is "$(used)" "$before" "no device memory left behind (${c:-defaults}, $(basename "$t" .pickle.gz))"
	done
done
run "$A" replay --backend cuda -p passthrough --no-timing "$tr"
is "$st $(col "$out" num_device_alloc)" "0 $(col "$out" allocs)" "passthrough on the GPU: one cudaMalloc per request"
# cupy on the GPU: cudaMalloc of exactly the rounded sizes, the same numbers as the simulation
for t in "$tr" "$T/resnet50_train__default.pickle.gz"; do
	real=$("$A" replay --backend cuda -p cupy --no-timing "$t"); sim=$("$A" replay $G -p cupy --no-timing "$t")
	is "$(col "$real" peak_reserved_bytes) $(col "$real" peak_allocated_bytes) $(col "$real" num_device_alloc) $(col "$real" latency_source)" \
	   "$(col "$sim" peak_reserved_bytes) $(col "$sim" peak_allocated_bytes) $(col "$sim" num_device_alloc) measured" "cupy: real GPU = simulation ($(basename "$t" .pickle.gz))"
done
# stitch (GMLake) on CUDA VMM: segments of granules (cuMemCreate + cuMemMap each), stitched ranges
# mapping existing handles again, unmapped and freed when dropped: the simulation's numbers, call for
# call, and nothing left behind. The native trace stitches, reuses the stitched range, releases a
# segment that an active stitched range maps in its unused tail (empty_cache), and frees it all.
M=1048576
printf '#allocsim-trace 1\na 1 %d 0\na 2 %d 0\na 3 %d 0\na 4 %d 0\nf 1\nf 2\nf 3\na 5 %d 0\nf 5\na 6 %d 0\ne\nf 6\nf 4\na 7 %d 0\na 8 %d 0\nf 7\na 9 %d 0\nf 8\nf 9\ne\n' \
	$((30*M)) $((30*M)) $((20*M)) $((20*M)) $((80*M)) $((60*M)) $((40*M)) $((40*M)) $((60*M)) > "$TMP/stitch.trace"
for ct in "frag_limit:0|$TMP/stitch.trace" "|$T/gpt2_train_varlen__default.pickle.gz" "frag_limit:0|$T/resnet50_train__default.pickle.gz" \
	"frag_limit:0,gc_limit:1GiB|$T/bert_infer_varlen__p110_default.pickle.gz"; do
	c=${ct%%|*}; t=${ct#*|}
	before=$(used)
	rm -f "$TMP/dr.csv" "$TMP/ds.csv" "$TMP/sr.csv" "$TMP/ss.csv"
	real=$("$A" replay --backend cuda -p stitch -c "$c" --no-timing --stats "$TMP/sr.csv" --device-log "$TMP/dr.csv" "$t")
	sim=$("$A" replay $G -p stitch -c "$c" --no-timing --stats "$TMP/ss.csv" --device-log "$TMP/ds.csv" "$t")
	is "$(col "$real" peak_reserved_bytes) $(col "$real" peak_allocated_bytes) $(col "$real" num_device_alloc) $(col "$real" num_device_free) $(col "$real" device_calls) $(grep -E '^(stitches|sblock_reuses|sblocks_dropped_by_gc),' "$TMP/sr.csv" | tr '\n' ' ')$(col "$real" latency_source)" \
	   "$(col "$sim" peak_reserved_bytes) $(col "$sim" peak_allocated_bytes) $(col "$sim" num_device_alloc) $(col "$sim" num_device_free) $(col "$sim" device_calls) $(grep -E '^(stitches|sblock_reuses|sblocks_dropped_by_gc),' "$TMP/ss.csv" | tr '\n' ' ')measured" \
	   "stitch: real GPU = simulation: peak reserved and allocated, device allocs and frees, calls, stitches (${c:-defaults}, $(basename "$t"))"
	[ -s "$TMP/dr.csv" ] && [ "$(cut -d, -f2,4,6,7,8,10 "$TMP/dr.csv" | md5sum)" = "$(cut -d, -f2,4,6,7,8,10 "$TMP/ds.csv" | md5sum)" ]
	ok $? "stitch: the same device calls in the same order, sizes, simulated addresses and results ($(basename "$t"))"
	is "$(used)" "$before" "stitch leaves no device memory behind ($(basename "$t"))"
done
# cuda-async on a real cudaMallocAsync pool: runs, measured, releases its pool
before=$(used)
run "$A" replay --backend cuda -p cuda-async --no-timing "$T/resnet50_train__default.pickle.gz"
is "$st $(col "$out" latency_source)" "0 measured" "cuda-async replays on a real memory pool"
ok "$([ "$(col "$out" peak_reserved_bytes)" -ge "$(col "$out" peak_requested_bytes)" ]; echo $?)" "the pool's peak reserved ($(col "$out" peak_reserved_bytes)) covers the peak requested bytes"
is "$(used)" "$before" "cuda-async leaves no device memory behind"
# the device log on the GPU: one row per call, labelled for calibrate --from-log
run "$A" replay --backend cuda -p cuda-async --no-timing --device-log "$TMP/dl.csv" "$tr"
is "$(($(wc -l < "$TMP/dl.csv") - 1))" "$(col "$out" device_calls)" "real device log: one row per device call"
is "$(sed -n 2p "$TMP/dl.csv" | cut -d, -f4,5)" "cudaMallocAsync,pool_init" "the first cudaMallocAsync is labelled pool_init"
sim=$("$A" replay $G -p cuda-async --no-timing "$tr")
is "$(col "$out" device_calls)" "$(col "$sim" device_calls)" "cuda-async: the pool model makes as many calls as the real pool"
# the pool probes (traces/h200-pool-probes.txt) on this GPU's real pool, through allocsim: the model
# places every allocation where the real pool does
probe_scenarios > "$TMP/probes"
pm=0; pn=0
while IFS='|' read -r name ops result; do
	probe_trace "$ops" "$TMP/p.trace" "$TMP/p.names"
	"$A" replay --backend cuda -p cuda-async --no-timing --device-log "$TMP/pr.csv" -o /dev/null "$TMP/p.trace" || continue
	"$A" replay -p cuda-async --no-timing --device-log "$TMP/ps.csv" -o /dev/null "$TMP/p.trace" || continue
	pn=$((pn + 1)); real=$(probe_offsets "$TMP/p.names" "$TMP/pr.csv"); model=$(probe_offsets "$TMP/p.names" "$TMP/ps.csv")
	if [ "$real" = "$model" ]; then pm=$((pm + 1)); else echo "# probe $name: real '$real', model '$model'"; fi
done < "$TMP/probes"
is "$pm/$pn" "150/150" "pool probes replayed on the real pool: the model places every allocation as it does"
"$A" replay --backend cuda -p passthrough --no-timing --device-log "$TMP/dl2.csv" -o /dev/null "$tr"
run "$A" calibrate --from-log -o "$TMP/fit.csv" "$TMP/dl.csv" "$TMP/dl2.csv"
ok "$([ "$st" = 0 ] && grep -q '^pool_malloc,' "$TMP/fit.csv" && grep -q '^malloc,' "$TMP/fit.csv"; echo $?)" "calibrate --from-log fits real device logs"
# calibrate: the primitives, measured (few calls per point to keep the test short)
run "$A" calibrate -n 3 -o "$TMP/model.csv" --raw "$TMP/raw.csv"
is "$st" 0 "calibrate measures the primitives"
for op in malloc free map unmap pool_malloc pool_grow pool_free pool_init vmm_create vmm_map vmm_setaccess vmm_unmap vmm_release; do
	ok "$(grep -q "^$op," "$TMP/raw.csv"; echo $?)" "calibrate measured $op"
done
run "$A" replay --no-timing --latency-model "$TMP/model.csv" "$tr"
is "$st $(col "$out" latency_source)" "0 model" "its model drives the simulation"
# transfer: pinned host memory copies faster than pageable for large copies
run "$A" transfer -n 5 -o "$TMP/transfer.csv"
is "$st" 0 "allocsim transfer runs"
pin=$(awk -F, '$1==67108864 && $2=="pinned" && $3=="H2D"{print $5}' "$TMP/transfer.csv")
pag=$(awk -F, '$1==67108864 && $2=="pageable" && $3=="H2D"{print $5}' "$TMP/transfer.csv")
ok "$(awk -v a="$pin" -v b="$pag" 'BEGIN{exit !(a > b)}'; echo $?)" "64 MiB host-to-device: pinned $pin GB/s > pageable $pag GB/s"
# a real out-of-memory: another replay holds most of the GPU, and the driver's refusals go through
# the pytorch policy's fallback chain. The holder replays a long trace from a file (its first event
# takes the memory) and is stopped (SIGSTOP) once the memory is taken: a pipe would be read to its
# end first (a non-seekable input is spooled before the replay), so it cannot hold the memory open.
free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 | head -1)
hold=$(( (free_mib - 12000) * 1048576 ))
before=$(used)
awk -v h="$hold" 'BEGIN { print "#allocsim-trace 1"; print "a 1 " h " 0"
	for (i = 2; i <= 1000000; i++) { print "a " i " 512 0"; print "f " i } }' > "$TMP/hold.trace"
"$A" replay --backend cuda -p passthrough --no-timing -o /dev/null "$TMP/hold.trace" & holder=$!
want=$(( before + (free_mib - 12000) * 9 / 10 )); w=0
while [ "$(used)" -lt "$want" ] && [ $w -lt 200 ]; do sleep 0.05; w=$((w + 1)); done
kill -STOP $holder 2>/dev/null
run "$A" replay --backend cuda -c "" --no-timing "$T/gpt2_train_varlen__default.pickle.gz"
is "$st" 0 "a replay that runs out of real GPU memory exits 0"
ok "$([ "$(col "$out" num_ooms)" -gt 0 ] && [ "$(col "$out" num_alloc_retries)" -gt 0 ]; echo $?)" "driver refusals counted: $(col "$out" num_ooms) OOMs after $(col "$out" num_alloc_retries) flush-and-retry"
kill -TERM $holder 2>/dev/null; kill -CONT $holder 2>/dev/null; wait $holder 2>/dev/null
sleep 1
is "$(used)" "$before" "the holder's memory is released on SIGTERM"
# an interrupted replay releases everything and writes nothing
before=$(used)
"$A" replay --backend cuda -p passthrough -o "$TMP/x.csv" "$T/bert_infer_varlen__default.pickle.gz" & pid=$!
sleep 0.4; kill -INT $pid; wait $pid; s=$?
is "$s" 130 "SIGINT ends the replay with status 130"
ok "$([ "$s" = 130 ] && [ ! -e "$TMP/x.csv" ]; echo $?)" "and writes no output"
is "$(used)" "$before" "and leaves no device memory behind"
# The other device-backed policies on CUDA: each policy's real-GPU replay equals its simulation,
# call for call (sizes, order, results), and leaves nothing behind.
for pt in "bfc|" "rmm-pool|" "rmm-binning>rmm-pool|" "buddy|" "optimal|" "bestfit|"; do
	p=${pt%%|*}; c=${pt#*|}
	for t in "$T/resnet50_train__default.pickle.gz" "$T/bert_infer_varlen__p110_default.pickle.gz"; do
		before=$(used)
		rm -f "$TMP/dr.csv" "$TMP/ds.csv"
		real=$("$A" replay --backend cuda -p "$p" -c "$c" --no-timing --device-log "$TMP/dr.csv" "$t")
		sim=$("$A" replay $G -p "$p" -c "$c" --no-timing --device-log "$TMP/ds.csv" "$t")
		is "$(col "$real" peak_reserved_bytes) $(col "$real" peak_allocated_bytes) $(col "$real" num_device_alloc) $(col "$real" num_device_free) $(col "$real" num_ooms) $(col "$real" device_calls)" \
		   "$(col "$sim" peak_reserved_bytes) $(col "$sim" peak_allocated_bytes) $(col "$sim" num_device_alloc) $(col "$sim" num_device_free) $(col "$sim" num_ooms) $(col "$sim" device_calls)" \
		   "$p: real GPU = simulation: peak reserved and allocated, device allocs and frees, OOMs, calls ($(basename "$t"))"
		[ -s "$TMP/dr.csv" ] && [ "$(cut -d, -f2,4,6,8 "$TMP/dr.csv" | md5sum)" = "$(cut -d, -f2,4,6,8 "$TMP/ds.csv" | md5sum)" ]
		ok $? "$p: the same device calls in the same order, sizes and results ($(basename "$t"))"
		is "$(used)" "$before" "$p leaves no device memory behind ($(basename "$t"))"
	done
done
# rmm-arena's per-thread arenas need a log with threads: the bundled RMM example (2 threads) and a
# generated one (4 threads, 20,000 events, 1 KiB..64 MiB, 2 streams; mawk's %x stops at 32 bits, so an
# address is written as two hex parts).
awk 'BEGIN { srand(11); print "Thread,Time,Action,Pointer,Size,Stream"; live = 0; next_p = 4096
	for (i = 0; i < 20000; i++) {
		t = sprintf("00:00:%02d.%06d", int(i / 1000000), i % 1000000)
		if (live > 0 && (live >= 512 || rand() < 0.48)) {
			k = int(rand() * live); printf "%d,%s,free,0x%x%07x,%d,%d\n", th[k], t, int(pt[k] / 268435456), pt[k] % 268435456, sz[k], st[k]
			th[k] = th[live - 1]; pt[k] = pt[live - 1]; sz[k] = sz[live - 1]; st[k] = st[live - 1]; live--
		} else {
			s = rand() < 0.7 ? int(1024 + rand() * 1048576) : int(1048576 + rand() * 66060288)
			th[live] = 100 + int(rand() * 4); pt[live] = next_p; sz[live] = s; st[live] = int(rand() * 2)
			printf "%d,%s,allocate,0x%x%07x,%d,%d\n", th[live], t, int(next_p / 268435456), next_p % 268435456, s, st[live]; next_p += s + 4096; live++
		} } }' > "$TMP/threads.csv"
# The arena is one upstream allocation made when the policy is created, sized here (RMM's default,
# half the free memory, differs between the GPU and the model); what it serves and refuses
# (out-of-memory counts) is the policy's own work on real addresses.
for tc in "$srcdir/traces/rmm/example.csv|arena_size:1MiB" "$TMP/threads.csv|arena_size:4GiB"; do
	t=${tc%%|*}; c=${tc#*|}
	before=$(used)
	real=$("$A" replay --backend cuda -p rmm-arena -c "$c" --no-timing "$t")
	sim=$("$A" replay $G -p rmm-arena -c "$c" --no-timing "$t")
	is "$(col "$real" peak_reserved_bytes) $(col "$real" peak_allocated_bytes) $(col "$real" num_device_alloc) $(col "$real" num_ooms) $(col "$real" final_allocated_bytes) $(col "$real" latency_source)" \
	   "$(col "$sim" peak_reserved_bytes) $(col "$sim" peak_allocated_bytes) $(col "$sim" num_device_alloc) $(col "$sim" num_ooms) $(col "$sim" final_allocated_bytes) measured" \
	   "rmm-arena ($c): real GPU = simulation: peak reserved and allocated, device allocs, OOMs, final bytes ($(basename "$t"))"
	is "$(used)" "$before" "rmm-arena leaves no device memory behind ($(basename "$t"))"
done
# Issue 31: the policy decides on the simulated addresses (src/device/device_map.c), so the GPU's
# device log is the simulation's in every column but the time (addresses included), under the
# recorded settings and memory limit of a pressure run (garbage collection and splits), with
# expandable segments, and for the policies that break ties by address.
for pct in "pytorch|recorded --fraction 0.123779 --device-total 150109880320|$T/gpt2_train_varlen__p110_gc06.pickle.gz" \
	"pytorch|recorded --fraction 0.011036 --device-total 150109880320|$T/bert_infer_varlen__p110_ms128.pickle.gz" \
	"pytorch|expandable_segments:True|$T/gpt2_train_varlen__default.pickle.gz" "bestfit||$T/gpt2_train_varlen__p110_default.pickle.gz" \
	"buddy||$T/gpt2_train_varlen__rp4.pickle.gz" "bfc||$srcdir/traces/captured/multistream__p110_default.pickle.gz"; do
	p=${pct%%|*}; c=${pct#*|}; t=${c#*|}; c=${c%%|*}
	set -- ${c#* }; [ "$c" = "${c#* }" ] && set --; c=${c%% *}
	before=$(used)
	rm -f "$TMP/dr.csv" "$TMP/ds.csv"
	real=$("$A" replay --backend cuda -p "$p" -c "$c" "$@" --no-timing --device-log "$TMP/dr.csv" "$t")
	case " $* " in *" --device-total "*) g= ;; *) g=$G ;; esac # the fraction's total is the recording's
	sim=$("$A" replay $g -p "$p" -c "$c" "$@" --no-timing --device-log "$TMP/ds.csv" "$t")
	is "$(cols "$real" peak_reserved_bytes peak_allocated_bytes num_device_alloc num_device_free num_ooms num_alloc_retries device_calls)" \
	   "$(cols "$sim" peak_reserved_bytes peak_allocated_bytes num_device_alloc num_device_free num_ooms num_alloc_retries device_calls)" \
	   "$p $c $*: real GPU = simulation ($(basename "$t" .pickle.gz))"
	[ -s "$TMP/dr.csv" ] && [ "$(cut -d, -f1-8,10 "$TMP/dr.csv" | md5sum)" = "$(cut -d, -f1-8,10 "$TMP/ds.csv" | md5sum)" ]
	ok $? "$p $c: the device log is the simulation's but for the times, addresses included ($(basename "$t" .pickle.gz))"
	is "$(used)" "$before" "$p leaves no device memory behind ($(basename "$t" .pickle.gz))"
done
finish
