#!/bin/sh
# pools.sh - private memory pools (CUDA graphs' and torch.cuda.MemPool's): the native trace's
# pool=N and 'P N' records, the binary format's version 2, and the pytorch policy's rules
# (doc/pytorch-policy.md, "Private pools"; reference §9, §18).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
M=1048576
mk() { { echo '#allocsim-trace 1'; printf '%s\n' "$@"; } > "$TMP/p.trace"; }
rep() { run "$A" replay --no-timing --stats "$TMP/st.csv" "$@" "$TMP/p.trace"; }
stat() { grep "^$1," "$TMP/st.csv" | cut -d, -f2; }

# a pool's free block serves only its own pool
mk "a 1 $M 0 pool=1" "f 1" "a 2 $M 0"
rep
is "$st $(col "$out" num_device_alloc) $(col "$out" peak_reserved_bytes)" "0 2 4194304" \
	"a default-pool request does not take a private pool's free block: two 2 MiB segments"
mk "a 1 $M 0" "f 1" "a 2 $M 0"
rep
is "$(col "$out" num_device_alloc) $(col "$out" peak_reserved_bytes)" "1 2097152" "... the same trace without the pool: one segment"
mk "a 1 $M 0 pool=1" "f 1" "a 2 $M 0 pool=1"
rep
is "$(col "$out" num_device_alloc)" 1 "a pool's request takes its own pool's free block"
mk "a 1 $M 0 pool=1" "f 1" "a 2 $M 0 pool=2"
rep
is "$(col "$out" num_device_alloc)" 2 "... and not another private pool's"

# empty_cache leaves a live pool alone; after its release, it gives the pool's free segments back
mk "a 1 $M 0 pool=1" "f 1" "a 2 $M 0" "f 2" "e"
rep
is "$(stat num_device_free) $(stat reserved_bytes.all.current)" "1 2097152" "empty_cache releases the default pool's segment, not the live pool's"
mk "a 1 $M 0 pool=1" "f 1" "a 2 $M 0" "f 2" "e" "P 1" "e"
rep
is "$(stat num_device_free) $(stat reserved_bytes.all.current) $(stat num_sync_all_streams)" "2 0 2" "after 'P 1' empty_cache releases the pool's segment too"
# a request into a released pool takes it back (beginAllocateToPool raises the use count again)
mk "a 1 $M 0 pool=1" "f 1" "P 1" "a 2 $M 0 pool=1" "f 2" "e"
rep
is "$(stat num_device_alloc) $(stat num_device_free) $(stat reserved_bytes.all.current)" "1 0 2097152" \
	"a request into a released pool reuses its block and makes it live again: empty_cache keeps it"

# the out-of-memory flush releases released pools too (release_cached_blocks), live ones not
mk "a 1 $M 0 pool=1" "f 1" "a 2 $M 0" "a 3 $M 0" "a 4 $M 0"
rep --capacity 4MiB
is "$(col "$out" num_ooms) $(col "$out" num_alloc_retries)" "1 1" "capacity 4 MiB: the third default segment does not fit while the pool is live (one retry, OOM)"
mk "a 1 $M 0 pool=1" "f 1" "P 1" "a 2 $M 0" "a 3 $M 0" "a 4 $M 0"
rep --capacity 4MiB
is "$(col "$out" num_ooms) $(col "$out" num_alloc_retries) $(col "$out" num_device_free)" "0 1 1" \
	"... after the pool's release the flush gives its segment back and the retry succeeds"

# a MemPool with its own allocator gets no expandable segments; other private pools do
mk "a 1 $((30 * M)) 0 pool=1 custom" "a 2 $((30 * M)) 0 pool=2" "a 3 $((30 * M)) 0"
rep -c expandable_segments:True --segments "$TMP/seg.csv"
is "$st" 0 "expandable_segments with a custom-allocator pool replays"
is "$(stat num_device_alloc) $(stat reserved_bytes.all.current)" "3 115343360" \
	"custom pool: one 30 MiB cudaMalloc; pool 2 and the default pool: two 20 MiB pages each (30 + 40 + 40 MiB)"

# MemPool(no_split=True): blocks are handed out whole; MemPool(use_on_oom=True): an ordinary request
# that finds no new device memory takes the pool's cached block (plain segments only)
mk "a 1 $((30 * M)) 0 pool=1 nosplit" "f 1" "a 2 $((10 * M)) 0 pool=1 nosplit"
rep
is "$(stat allocated_bytes.all.current) $(stat num_device_alloc)" "31457280 1" "no_split: a 10 MiB request takes the free 30 MiB block whole"
mk "a 1 $((30 * M)) 0 pool=1" "f 1" "a 2 $((10 * M)) 0 pool=1"
rep
is "$(stat allocated_bytes.all.current) $(stat num_device_alloc)" "10485760 1" "... without no_split it is split"
mk "a 1 $((30 * M)) 0 pool=1 use_on_oom" "f 1" "a 2 $((30 * M)) 0"
rep --capacity 40MiB
is "$(col "$out" num_ooms) $(col "$out" num_device_alloc) $(col "$out" num_alloc_retries)" "0 1 0" \
	"use_on_oom: at the limit a default-pool request takes the pool's free block, before any flush"
mk "a 1 $((30 * M)) 0 pool=1" "f 1" "a 2 $((30 * M)) 0"
rep --capacity 40MiB
is "$(col "$out" num_ooms) $(col "$out" num_alloc_retries)" "1 1" "... a pool without use_on_oom serves no one else: flush, retry, out of memory"
rep -c expandable_segments:True --capacity 40MiB
mk "a 1 $((30 * M)) 0 pool=1 use_on_oom" "f 1" "a 2 $((30 * M)) 0"
rep -c expandable_segments:True --capacity 40MiB
is "$(col "$out" num_ooms)" 1 "use_on_oom under expandable segments: the fallback passes over expandable blocks (mempool_flags__p110_exp)"
# conversions keep pools, in both formats; a trace with pools is binary version 2
mk "a 1 $M 0 pool=3 custom" "f 1" "a 2 $M 0" "P 3" "e"
"$A" convert -o "$TMP/p.asbin" "$TMP/p.trace"
is "$(od -An -tu4 -j8 -N4 "$TMP/p.asbin" | tr -d ' ')" 2 "a binary trace with pools is version 2"
is "$("$A" convert -o - "$TMP/p.asbin" | grep -v '^#' | tr '\n' ';')" "a 1 1048576 0 pool=3 custom;f 1;a 1 1048576 0;P 3;e;" \
	"native -> binary -> native keeps pool=3 custom and 'P 3'"
mk "a 1 $M 0" "f 1"
"$A" convert -o "$TMP/q.asbin" "$TMP/p.trace"
is "$(od -An -tu4 -j8 -N4 "$TMP/q.asbin" | tr -d ' ')" 1 "a trace without pools stays binary version 1"

# bad pool fields are data errors with the line
for bad in "a 1 $M 0 pool=0|invalid pool in 'pool=0'" "a 1 $M 0 pool=4096|invalid pool in 'pool=4096'" \
	"a 1 $M 0 pool=x|invalid pool in 'pool=x'" "P 0|pool_release of pool '0'" "a 1 $M 0 custom|invalid field 'custom'" \
	"f 1 pool=1|invalid field 'pool=1'"; do
	rec=${bad%%|*}; msg=${bad#*|}
	mk "$rec"
	run "$A" replay "$TMP/p.trace"
	is "$st" 65 "'$rec' is bad data (exit 65)"
	contains "$errout" "p.trace:2: $msg"; ok $? "... '$msg' at line 2"
done
# a snapshot's pools survive conversion: the binary form replays the same row (regression: segment
# entries carried their pool into records that may not have one, and convert refused the file)
"$A" convert -o "$TMP/mc.asbin" "$srcdir/traces/captured/mempool_custom__exp.pickle.gz"; cst=$?
is "$cst:$(od -An -tu4 -j8 -N4 "$TMP/mc.asbin" | tr -d ' ')" "0:2" "a MemPool capture converts to a version 2 binary trace"
is "$("$A" replay -c recorded --no-timing "$TMP/mc.asbin" | tail -1 | cut -d, -f2-)" \
	"$("$A" replay -c recorded --no-timing "$srcdir/traces/captured/mempool_custom__exp.pickle.gz" | tail -1 | cut -d, -f2-)" "... and replays to the same row"
# snapshots: a 2.11 capture names its pools in user_metadata (scripts/capture-beyond.py); without
# that, replay warns that the private pools' requests are replayed in the default pool
C="$srcdir/traces/captured/mempool__default.pickle.gz"
run "$A" replay -c recorded --no-timing "$C"
is "$st:$errout" "0:" "an annotated MemPool capture replays without a warning"
py=${PYTHON:-$(command -v python3)}
if [ -n "$py" ]; then
	"$py" -c 'import gzip,pickle,sys
s=pickle.load(gzip.open(sys.argv[1]))
for d in s["device_traces"]:
	for e in d: e.pop("user_metadata", None)
s["segments"][0]["segment_pool_id"] = (0, 1)  # as a pool still alive at the snapshot shows
pickle.dump(s, gzip.open(sys.argv[2], "wb"), protocol=4)' "$C" "$TMP/unnamed.pickle.gz"
	run "$A" replay -c recorded --no-timing "$TMP/unnamed.pickle.gz"
	contains "$errout" "unnamed.pickle.gz: 1 segment(s) belong to private pools (CUDA graphs or torch.cuda.MemPool), but the trace does not say which requests went to them"
	ok $? "... the same without its metadata: a warning that private pools are replayed as the default pool"
	is "$(col "$out" num_device_alloc)" 21 "... and the replay is not PyTorch's (it made 28 cudaMallocs)"
fi
finish
