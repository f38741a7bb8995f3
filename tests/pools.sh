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
	ALLOCSIM_POOLS=annotation run "$A" replay -c recorded --no-timing "$TMP/unnamed.pickle.gz"
	contains "$errout" "unnamed.pickle.gz: 1 segment(s) belong to private pools (CUDA graphs or torch.cuda.MemPool), but the trace does not say which requests went to them"
	ok $? "... the same without its metadata, ALLOCSIM_POOLS=annotation: a warning that private pools are replayed as the default pool"
	is "$(col "$out" num_device_alloc)" 21 "... and the replay is not PyTorch's (it made 28 cudaMallocs)"
fi

# Pools inferred from the segments (src/readers/poolinfer.c; doc/pytorch-policy.md, "Private pools without
# annotation"). The annotated captures, their names ignored (ALLOCSIM_POOLS=infer): every row equals the
# one the names give (PyTorch's numbers: tests/fidelity.sh), the retry count of graph_*__p110_exp included.
same=0 total=0
for f in "$srcdir"/traces/captured/graph_*.pickle.gz "$srcdir"/traces/captured/compile_ro__*.pickle.gz "$srcdir"/traces/captured/mempool*.pickle.gz; do
	name=$(basename "$f" .pickle.gz)
	line=$(grep "^$name," "$srcdir/traces/captured/ground-truth.csv" | csv_bars)
	conf=$(echo "$line" | cut -d'|' -f4) cap=$(echo "$line" | cut -d'|' -f6)
	capa=; [ -n "$cap" ] && capa="--capacity $cap"
	a=$(ALLOCSIM_POOLS=annotation "$A" replay -c "$conf" $capa --no-timing "$f" 2>/dev/null | tail -1 | cut -d, -f2-)
	b=$(ALLOCSIM_POOLS=infer "$A" replay -c "$conf" $capa --no-timing "$f" 2>/dev/null | tail -1 | cut -d, -f2-)
	total=$((total + 1))
	[ -n "$a" ] && [ "$a" = "$b" ] && same=$((same + 1))
done
is "$same/$total" "30/30" "the 30 annotated graph/MemPool captures replay to the same row with their pools inferred as with their names"
# ... and on traces without pools, inference finds none: the same rows, no pool warning
# (the default, auto, reads each of them once: its first read sees no sign of a private pool)
same=0 total=0 warned=0 once=0
for f in "$T"/*__default.pickle.gz "$T"/*__p110_exp.pickle.gz "$srcdir"/traces/captured/emptycache__*.pickle.gz "$srcdir"/traces/captured/streams__s1__*.pickle.gz; do
	a=$(ALLOCSIM_POOLS=annotation "$A" replay -c recorded --no-timing "$f" 2>/dev/null | tail -1 | cut -d, -f2-)
	b=$(ALLOCSIM_POOLS=infer "$A" replay -c recorded --no-timing "$f" 2>/dev/null | tail -1 | cut -d, -f2-)
	ALLOCSIM_POOLS_DEBUG=1 "$A" replay -c recorded --no-timing "$f" 2>"$TMP/dbg" >/dev/null
	grep -v "^allocsim: pools: " "$TMP/dbg" | grep -q "private pools" && warned=$((warned + 1))
	[ "$(grep -c ': read (' "$TMP/dbg")" = 1 ] && grep -q ': read (ordinary)$' "$TMP/dbg" && once=$((once + 1))
	total=$((total + 1))
	[ -n "$a" ] && [ "$a" = "$b" ] && same=$((same + 1))
done
is "$same $warned" "$total 0" "$total traces without pools: the same rows inferred, and no pool warning"
is "$once" "$total" "... and auto reads each of the $total once (ALLOCSIM_POOLS_DEBUG counts the reads)"
# the flags: MemPool(no_split=True) from a request that took a new segment beside its pool's free gap,
# a custom allocator's MemPool from plain segments under expandable_segments:True
U="$srcdir/traces/captured/unannotated"
is "$(ALLOCSIM_POOLS=infer "$A" convert -o - "$U/mempool_flags__default.pickle.gz" | grep -o 'pool=[0-9]*.*$' | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
	" 10 pool=1 nosplit; 6 pool=2;" "mempool_flags without names: the no_split pool (10 requests) and the use_on_oom one (6; the flag is not seen)"
is "$(ALLOCSIM_POOLS=infer "$A" convert -o - "$srcdir/traces/captured/mempool_custom__exp.pickle.gz" | grep -o 'pool=[0-9]*.*$' | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
	" 60 pool=1 custom;" "mempool_custom__exp without names: a custom allocator's pool (plain segments under expandable_segments)"
# auto infers where the end state has private segments; a MemPool released before the snapshot leaves
# none, but its use shows as the trace is read: auto reads it again, inferring (28 cudaMallocs, PyTorch's)
run "$A" replay -c recorded --no-timing "$U/graph_many__default.pickle.gz"
is "$st:$errout:$(col "$out" num_device_alloc)" "0::33" "graph_many without names: auto infers its pools, no warning, PyTorch's 33 cudaMallocs"
run "$A" replay -c recorded --no-timing "$U/mempool__default.pickle.gz"
is "$st:$errout:$(col "$out" num_device_alloc)" "0::28" "mempool without names, all its segments released: auto places them, no warning, PyTorch's 28 cudaMallocs"
is "$(ALLOCSIM_POOLS_DEBUG=1 "$A" replay -c recorded --no-timing "$U/mempool__default.pickle.gz" 2>&1 >/dev/null | sed -n 's/^allocsim: pools: .*: read (\(.*\))$/\1/p' | tr '\n' ';')" \
	"ordinary;again: private pools were released before its end;the inference's first pass;" \
	"... read once, then again with the inference (its own first pass)"
is "$(ALLOCSIM_POOLS_DEBUG=1 "$A" replay -c recorded --no-timing "$U/mempool__default.pickle.gz" 2>&1 >/dev/null | sed -n 's/^allocsim: pools: .*: decision: //p' | tr '\n' ';')" \
	"no private segment in its end state: watching for released pools;23 segment(s) show private pools released before its end, 0 held at its end outside its end state not counted: read again, inferring;read again: inferring;" \
	"... ALLOCSIM_POOLS_DEBUG prints each decision: 23 segments show its released MemPool"
if [ -n "$py" ]; then
	# a made snapshot: two copies of a history (the second's addresses and times moved on), its end state
	# emptied (bench.sh's x10 is ten). The first copy's segments are held at the history's end, kept free
	# through the second's empty_cache(): were they real, the end state would hold them. They show no
	# pool: auto reads it once (it read it three times), and replays it as annotation does
	"$py" -c 'import gzip,pickle,sys
d=pickle.load(gzip.open(sys.argv[1])); h=d["device_traces"][0]
ts=[e["time_us"] for e in h if "time_us" in e]; span=max(ts)-min(ts)+1; out=[]
for i in range(2):
	for e in h:
		e=dict(e)
		if "addr" in e: e["addr"]+=i<<40
		if "time_us" in e: e["time_us"]+=i*span
		out.append(e)
d["device_traces"]=[out]; d["segments"]=[]
pickle.dump(d, gzip.open(sys.argv[2], "wb"), protocol=4)' "$srcdir/traces/captured/emptycache__p110_default.pickle.gz" "$TMP/x2.pickle.gz"
	ALLOCSIM_POOLS_DEBUG=1 "$A" replay -c recorded --no-timing "$TMP/x2.pickle.gz" 2>"$TMP/dbg" >"$TMP/x2.auto"
	is "$(grep -c ': read (' "$TMP/dbg"):$(sed -n 's/^allocsim: pools: .*: decision: \([0-9].*\)$/\1/p' "$TMP/dbg")" \
		"1:0 segment(s) show private pools released before its end, 24 held at its end outside its end state not counted: none inferred, read once" \
		"two copies of emptycache__p110_default, end state emptied: read once, its 24 held segments not counted"
	ALLOCSIM_POOLS=annotation "$A" replay -c recorded --no-timing "$TMP/x2.pickle.gz" 2>/dev/null >"$TMP/x2.ann"
	is "$(tail -1 "$TMP/x2.auto" | cut -d, -f2-)" "$(tail -1 "$TMP/x2.ann" | cut -d, -f2-)" "... and replays to ALLOCSIM_POOLS=annotation's row"
fi
ALLOCSIM_POOLS=infer run "$A" replay -c recorded --no-timing "$U/mempool__default.pickle.gz"
is "$st:$errout:$(col "$out" num_device_alloc)" "0::28" "... ALLOCSIM_POOLS=infer: the same"
ALLOCSIM_POOLS=annotation run "$A" replay -c recorded --no-timing "$U/mempool__default.pickle.gz"
is "$st:$(col "$out" num_device_alloc)" "0:21" "... ALLOCSIM_POOLS=annotation: all in the default pool (21 cudaMallocs)"
# what reads the trace again forgets the first read: info's counts, convert's sites, blame's blocks
for c in info convert blame; do
	case $c in convert) args="-o -" ;; *) args= ;; esac
	x=$("$A" $c $args "$U/mempool__default.pickle.gz" 2>&1); y=$(ALLOCSIM_POOLS=infer "$A" $c $args "$U/mempool__default.pickle.gz" 2>&1)
	[ -n "$x" ] && [ "$x" = "$y" ]; ok $? "mempool__default: $c under auto prints what it prints under ALLOCSIM_POOLS=infer"
done
contains "$("$A" info "$U/mempool__default.pickle.gz")" "private_pools: 1 (inferred from its segments"; ok $? "... info: one private pool, inferred"
is "$("$A" convert -o - "$U/mempool__default.pickle.gz" | grep -c ' pool=1')" 60 "... convert: its 60 MemPool entries name pool 1"
# the inferred pools travel with a conversion: the binary and native forms replay to the snapshot's row
f="$U/graph_many__p110_exp.pickle.gz"
"$A" convert -o "$TMP/gm.asbin" "$f" && "$A" convert -o "$TMP/gm.trace" "$f"
r0=$("$A" replay -c expandable_segments:True --capacity 1686034175 --no-timing "$f" | tail -1 | cut -d, -f2-)
case "$r0" in *,1686110208,*) ;; *) r0="(not PyTorch's peak reserved: $r0)" ;; esac
is "$("$A" replay -c expandable_segments:True --capacity 1686034175 --no-timing "$TMP/gm.asbin" | tail -1 | cut -d, -f2-)|$("$A" replay -c expandable_segments:True --capacity 1686034175 --no-timing "$TMP/gm.trace" | tail -1 | cut -d, -f2-)" \
	"$r0|$r0" "graph_many__p110_exp converted (binary, native) with its inferred pools replays to the snapshot's row"
is "$(grep -c ' pool=' "$TMP/gm.trace")" 17 "... the native form names the pools of its 17 private-pool requests"
ALLOCSIM_POOLS=bogus run "$A" replay --no-timing "$U/mempool__default.pickle.gz"
is "$st" 64 "ALLOCSIM_POOLS=bogus is a usage error (exit 64)"
contains "$errout" "ALLOCSIM_POOLS='bogus': must be auto, annotation or infer"; ok $? "... naming the choices"
if [ -n "$py" ]; then
	# a history cut short (the ring buffer) inside the first capture: the segments made before it and held
	# at the end take the end state's pool; those freed before the end are placed by the requests around
	# them alone, and a warning counts their requests
	"$py" -c 'import gzip,pickle,sys
s=pickle.load(gzip.open(sys.argv[1]))
del s["device_traces"][0][:146]
pickle.dump(s, gzip.open(sys.argv[2], "wb"), protocol=4)' "$U/graph_own__default.pickle.gz" "$TMP/cut.pickle.gz"
	run "$A" replay -c recorded --no-timing "$TMP/cut.pickle.gz"
	contains "$errout" "cut.pickle.gz: 14 request(s) lie in segments made before the history began (it was cut short) that the end state does not hold"
	ok $? "graph_own cut inside its first capture: a warning counts the 14 requests (eager ones too) placed by their neighbours alone"
	# (9 of the graphs' 14 requests after the cut: the two graphs' pools, told apart by what the cut took,
	# are one here, and a segment that the release after del g1 sets apart from graph 2's goes to the default)
	is "$("$A" convert -o - "$TMP/cut.pickle.gz" 2>/dev/null | grep '^a ' | grep -c 'pool=')" 9 "... and 9 of the 14 requests of the two graphs after the cut are in a private pool"
fi
finish
