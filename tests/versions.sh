#!/bin/sh
# versions.sh - snapshots of every PyTorch release from 2.1 on: pickle protocols 2 to 5 give the same
# rows, info names the release range a snapshot's fields imply, the pytorch policy's version setting.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
F="$srcdir/traces/fixtures/versions"
seed="$srcdir/traces/pytorch-h200/seed_example__default.pickle.gz"

# --- pickle protocols 2, 3, 4, 5 (the same dict; PyTorch wrote protocol 4, Python 3.14 writes 5) ---
gzip -dc "$seed" > "$TMP/p4.pickle"
gzip -dc "$F/seed-p2.pickle.gz" > "$TMP/p2.pickle"
if [ -n "$PYTHON" ] && "$PYTHON" -c 'import pickle' 2>/dev/null; then
	for pr in 3 5; do
		"$PYTHON" -c "import pickle,sys; sys.stdout.buffer.write(pickle.dumps(pickle.load(open(sys.argv[1],'rb')), protocol=$pr))" \
			"$TMP/p4.pickle" > "$TMP/p$pr.pickle"
	done
else	# Python writes this dict with protocol 3 (5) byte for byte as with 2 (4) but for the PROTO byte
	{ printf '\200\003'; tail -c +3 "$TMP/p2.pickle"; } > "$TMP/p3.pickle"
	{ printf '\200\005'; tail -c +3 "$TMP/p4.pickle"; } > "$TMP/p5.pickle"
fi
"$A" replay --no-timing "$seed" | tail -n +2 | cut -d, -f2- > "$TMP/ref.csv"
for pr in 2 3 4 5; do
	run "$A" replay --no-timing "$TMP/p$pr.pickle"
	printf '%s\n' "$out" | tail -n +2 | cut -d, -f2- > "$TMP/got$pr.csv"
	hdr=$(od -An -tx1 -N2 "$TMP/p$pr.pickle" | tr -d ' ')   # the file really is protocol $pr
	ok $(( (st == 0 ? 0 : 1) + ($(wc -c < "$TMP/ref.csv") > 100 ? 0 : 1) + ($hdr == 800$pr ? 0 : 1) )) "protocols: protocol $pr ($hdr) replays (exit $st)"
	if cmp -s "$TMP/ref.csv" "$TMP/got$pr.csv"; then ok 0 "protocols: protocol $pr gives the bundled snapshot's row byte for byte"
	else ok 1 "protocols: protocol $pr gives the bundled snapshot's row byte for byte"; diff "$TMP/ref.csv" "$TMP/got$pr.csv" | head -4 | sed 's/^/# /'; fi
done
# protocol 5's in-band bytearray (BYTEARRAY8) is read like bytes: {'segments': [], 'device_traces':
# [[{'action': 'alloc', 'addr': 4096, 'size': 1000, 'stream': 0}]], 'x': bytearray(b'abc')}
printf '\200\005\225m\000\000\000\000\000\000\000}\224(\214\010segments\224]\224\214\015device_traces\224]\224]\224}\224(\214\006action\224\214\005alloc\224\214\004addr\224M\000\020\214\004size\224M\350\003\214\006stream\224K\000uaa\214\001x\224\226\003\000\000\000\000\000\000\000abc\224u.' > "$TMP/ba.pickle"
run "$A" info "$TMP/ba.pickle"
ok $(( (st == 0 ? 0 : 1) + ($(printf '%s\n' "$out" | grep -c '^peak_live_requested_bytes: 1000$') == 1 ? 0 : 1) )) "protocol 5: BYTEARRAY8 is read (exit $st)"
# out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are not in the file: refused, exit 65
printf '\200\005\225\030\000\000\000\000\000\000\000}\224(\214\010segments\224]\224\214\001x\224\227\230u.' > "$TMP/oob.pickle"
run "$A" info "$TMP/oob.pickle"
is "$st" 65 "protocol 5: NEXT_BUFFER exits 65"
contains "$errout" "oob.pickle: byte offset 31: pickle opcode NEXT_BUFFER (0x97) needs an out-of-band buffer"; ok $? "protocol 5: NEXT_BUFFER message names the file, offset and opcode"
rm -f "$TMP/o.csv"
run "$A" replay -o "$TMP/o.csv" "$TMP/oob.pickle"
ok $(( (st == 65 ? 0 : 1) + ($(ls "$TMP"/o.csv* 2>/dev/null | wc -l)) )) "protocol 5: NEXT_BUFFER: replay exits 65 and writes no output"
printf '\200\005\225\030\000\000\000\000\000\000\000}\224(\214\010segments\224]\224\214\001x\224\230u.' > "$TMP/ro.pickle"
run "$A" info "$TMP/ro.pickle"
ok $(( (st == 65 ? 0 : 1) + $(contains "$errout" "READONLY_BUFFER (0x98) needs an out-of-band buffer"; echo $?) )) "protocol 5: READONLY_BUFFER exits 65 with its name"


# --- info: which release wrote a snapshot, from its fields (synthetic snapshots with each release's
# field set, made by scripts/make-version-fixtures.py, and the bundled 2.11 recordings) ---
pyver() { run "$A" info "$1"; printf '%s\n' "$out" | sed -n 's/^pytorch_version: //p'; }
is "$(pyver "$F/fields-2.1.pickle.gz")" "2.1 or older (entries have no time_us (<= 2.1))" "info: a 2.1 field set"
is "$(pyver "$F/fields-2.2.pickle.gz")" "2.2 (entries have time_us (>= 2.2); no allocator_settings (<= 2.2))" "info: a 2.2 field set"
is "$(pyver "$F/fields-2.3.pickle.gz")" "2.3 to 2.8 (allocator_settings (>= 2.3); allocator_settings has no graph_capture_record_stream_reuse (<= 2.8))" "info: a 2.3 field set"
is "$(pyver "$F/fields-2.5.pickle.gz")" "2.5 to 2.8 (external_annotations (>= 2.5); allocator_settings has no graph_capture_record_stream_reuse (<= 2.8))" "info: a 2.5 field set"
is "$(pyver "$F/fields-2.6.pickle.gz")" "2.6 to 2.8 (entries have compile_context (>= 2.6); allocator_settings has no graph_capture_record_stream_reuse (<= 2.8))" "info: a 2.6 field set"
is "$(pyver "$F/fields-2.7.pickle.gz")" "2.7 to 2.8 (entries have user_metadata (>= 2.7); allocator_settings has no graph_capture_record_stream_reuse (<= 2.8))" "info: a 2.7 field set"
is "$(pyver "$F/fields-2.9.pickle.gz")" "2.9 to 2.11 (allocator_settings has graph_capture_record_stream_reuse (>= 2.9); entries have no pool_id (<= 2.11))" "info: a 2.9 field set"
# 2.12-2.14: the writer's own layout (Module.cpp 25c86035 THCPModule_memorySnapshot; memory_snapshot.cpp 021c4c1a)
is "$(pyver "$F/fields-2.12.pickle.gz")" "2.12 to 2.13 (entries have pool_id (>= 2.12); no host_segments/host_traces (<= 2.13))" \
	"info: a 2.12 field set (pool_id on entries, PR #177717; no host lists, which 2.14 writes always)"
is "$(pyver "$F/fields-2.13.pickle.gz")" "2.13 (allocator_settings has max_round_threshold/max_cached_size (>= 2.13); no host_segments/host_traces (<= 2.13))" \
	"info: a 2.13 field set (the pinned settings of #171662 in allocator_settings)"
is "$(pyver "$F/fields-writer.pickle.gz")" "2.14 (host_segments/host_traces (>= 2.14))" "info: the 2.14 writer's layout (empty host lists)"
is "$(pyver "$F/fields-host.pickle.gz")" "2.14 (host_segments/host_traces (>= 2.14))" "info: host_segments/host_traces date a snapshot 2.14 (v2.14.0 release notes, PR #182407)"
run "$A" info "$F/fields-writer.pickle.gz"
is "$st|$(printf '%s\n' "$out" | grep -E '^(host_history|alloc_events|recorded_ooms|events):' | tr '\n' ' ')" \
	"0|host_history: 0 entries (recorded without record_pinned_host_memory=True) alloc_events: 3 events: 5 recorded_ooms: 1 " \
	"info: the writer's layout is read whole (annotate skipped, internal_metadata, an oom's device_free)"
is "$st:$(printf '%s\n' "$out" | grep -c '^trace_ring')" 0:0 "info: the writer writes no ring flags: no trace_ring line"
run "$A" info "$F/fields-host.pickle.gz"
is "$(printf '%s\n' "$out" | grep '^host_history')" "host_history: 11 entries (pinned host memory: replay --device host -p pytorch-pinned)" \
	"info: the pinned host history's entries counted"
# --device host: the host history replayed by pytorch-pinned (1000 B, again 1000 B from the cache, 5000 B:
# blocks of 1 KiB and 8 KiB, two cudaHostAlloc calls)
run "$A" replay --no-timing --device host -p pytorch-pinned "$F/fields-host.pickle.gz"
is "$st|$(col "$out" policy)|$(col "$out" allocs)|$(col "$out" frees)|$(col "$out" peak_requested_bytes)|$(col "$out" peak_reserved_bytes)|$(col "$out" num_device_alloc)" \
	"0|pytorch-pinned|3|3|6000|9216|2" "replay --device host -p pytorch-pinned replays host_traces (2 blocks, 9216 bytes)"
run "$A" replay --no-timing --device host -p pytorch-pinned "$F/fields-host-keys.pickle.gz"
is "$st|$(col "$out" peak_reserved_bytes)" "0|9216" "a host history recorded with pinned_max_round_threshold_mb replays (2.11's rounding)"
contains "$errout" "the recording set pinned host keys of PyTorch 2.12+ (pinned_max_round_threshold_mb:1) that the replayed host cache (2.11's) does not apply"
ok $? "... and says that the recording's pinned key is not applied"
run "$A" replay --no-timing --device host "$F/fields-host.pickle.gz"
contains "$errout" "warning: --device host: the history is PyTorch's pinned host cache's (CachingHostAllocator), replayed here with the pytorch policy"; ok $? "--device host with another policy warns"
run "$A" replay --no-timing --device host -p pytorch-pinned "$F/fields-writer.pickle.gz"
ok $(( (st == 65 ? 0 : 1) + $(contains "$errout" "the snapshot has no pinned host-memory history (its 'host_traces' is empty): record it with torch.cuda.memory._record_memory_history(record_pinned_host_memory=True)"; echo $?) )) \
	"--device host on an empty host history: exit 65, says how to record one"
run "$A" replay --no-timing --device host -p pytorch-pinned "$F/fields-2.12.pickle.gz"
ok $(( (st == 65 ? 0 : 1) + $(contains "$errout" "no pinned host-memory history (no 'host_traces')"; echo $?) )) "--device host on a 2.12 snapshot: exit 65"
# the ring-buffer flags (the visualizer reads them, process_alloc_data.js; the writer read does not write
# them): read, and an overflowed ring is a truncated history
run "$A" info "$F/fields-overflow.pickle.gz"
is "$(printf '%s\n' "$out" | grep '^trace_ring\|^history_truncated')" "history_truncated: yes (0 frees of earlier allocations skipped)
trace_ring: 3 entries (trace_alloc_max_entries), overflowed: the oldest entries were overwritten" "info: trace_alloc_overflowed makes the history truncated"
run "$A" replay --no-timing "$F/fields-overflow.pickle.gz"
ok $(( (st == 0 ? 0 : 1) + $(contains "$errout" "the snapshot's history ring overflowed (trace_alloc_overflowed; it keeps 3 entries)"; echo $?) )) \
	"replay warns that the ring overflowed (exit $st)"
"$A" convert "$F/fields-overflow.pickle.gz" -o "$TMP/ovf.asbin" && run "$A" info "$TMP/ovf.asbin"
contains "$out" "history_truncated: yes"; ok $? "the binary form keeps the truncation"
run "$A" replay --no-timing "$F/fields-host.pickle.gz"
is "$st|$(col "$out" config)|$(col "$out" allocs)" "0||1" "a snapshot with host traces replays its device trace with the 2.11 rules"
is "$(pyver "$F/fields-contradict.pickle.gz")" "unknown (the fields contradict each other: entries have compile_context (>= 2.6); entries have no time_us (<= 2.1))" "info: contradicting fields are said to be so"
for t in seed_example__default resnet50_train__exp bert_infer_varlen__ms128; do
	is "$(pyver "$srcdir/traces/pytorch-h200/$t.pickle.gz")" "2.9 to 2.11 (allocator_settings has graph_capture_record_stream_reuse (>= 2.9); entries have no pool_id (<= 2.11))" "info: the 2.11 recording $t"
done
printf '#allocsim-trace 1\na 1 4096 0\n' > "$TMP/n.trace"; run "$A" info "$TMP/n.trace"
ok $(( (st == 0 ? 0 : 1) + $(contains "$out" "pytorch_version"; echo $((1 - $?))) )) "info: a native trace has no pytorch_version line"


# --- the pytorch policy's version:2.N (unit tests per rule: tests/t_versions.c) ---
printf '#allocsim-trace 1\na 1 1153433600 0\n' > "$TMP/r.trace"   # 1100 MiB
for v in 2.8 2.9; do
	run "$A" replay -p pytorch --no-timing -c "roundup_power2_divisions:[256:1,512:2,1024:4,>:8],version:$v" "$TMP/r.trace"
	eval "peak_$(echo $v | tr -d .)=\"$st $(col "$out" peak_allocated_bytes)\""
done
is "$peak_28" "0 1207959552" "version:2.8: '>:8' covers the 1 GiB interval, 1100 MiB -> 1152 MiB"
is "$peak_29" "0 1342177280" "version:2.9: '>:8' starts after it, 1100 MiB -> 1280 MiB (4 divisions)"
run "$A" replay -p pytorch --no-timing -c "version:2.5,max_non_split_rounding_mb:40" "$TMP/r.trace"
ok $(( (st == 64 ? 0 : 1) + $(contains "$errout" "Unrecognized key 'max_non_split_rounding_mb' in allocator config: not a key in PyTorch 2.5 (version:2.5); it came with 2.6"; echo $?) )) \
	"version:2.5 refuses max_non_split_rounding_mb, exit 64"
# throw_on_cudamalloc_oom (2.12+; tests/t_versions.c has the rule's cases): 15 requests of 1 MiB, two
# to a 2 MiB segment; fraction 0.0001 of the H200's 150109880320 bytes bounds 7 segments
{ printf '#allocsim-trace 1\n'; i=1; while [ $i -le 15 ]; do printf 'a %d 1048576 0\n' $i; i=$((i + 1)); done; } > "$TMP/t.trace"
run "$A" replay -p pytorch --no-timing -c "throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.0001" --stats "$TMP/ts.csv" "$TMP/t.trace"
is "$st|$(col "$out" num_ooms)|$(col "$out" peak_reserved_bytes)|$(grep -E '^(num_oom_rejections|num_ooms|num_alloc_retries),' "$TMP/ts.csv" | tr '\n' ' ')" \
	"0|1|14680064|num_alloc_retries,0 num_oom_rejections,1 num_ooms,0 " \
	"throw_on_cudamalloc_oom: the 8th segment is rejected (num_oom_rejections 1, no retry; the row counts the failed request)"
contains "$errout" "warning: per_process_memory_fraction in -c is not this run's limit (PyTorch sets its limit from it at start): give --fraction F or --capacity; without one, throw_on_cudamalloc_oom rejects"
ok $? "a fraction in -c without a capacity warns"
run "$A" replay -p pytorch --no-timing -c "throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.0001" --fraction 0.0001 --device-total 150109880320 --stats "$TMP/ts.csv" "$TMP/t.trace"
is "$st|$(col "$out" capacity_bytes)|$(grep -E '^(num_oom_rejections|num_ooms|num_alloc_retries),' "$TMP/ts.csv" | tr '\n' ' ')|$(printf '%s' "$errout" | grep -c 'not this run')" \
	"0|15010988|num_alloc_retries,1 num_oom_rejections,0 num_ooms,1 |0" \
	"with --fraction F (PyTorch's limit from the key) the fraction check fails first: an ordinary OOM after a retry, no rejection"
run "$A" replay -p pytorch --no-timing --stats "$TMP/ts.csv" "$TMP/t.trace"
is "$(grep -c '^num_oom_rejections' "$TMP/ts.csv")" 0 "without the key --stats has no num_oom_rejections (2.11's keys)"
run "$A" replay -p pytorch --no-timing -c "throw_on_cudamalloc_oom:True,version:2.11" "$TMP/t.trace"
ok $(( (st == 64 ? 0 : 1) + $(contains "$errout" "Unrecognized key 'throw_on_cudamalloc_oom' in allocator config: not a key in PyTorch 2.11 (version:2.11); it came with 2.12"; echo $?) )) \
	"version:2.11 refuses throw_on_cudamalloc_oom, exit 64"
# reserved_bytes_by_private_pools (printed with an explicit version:2.12+): on a 2.11 recording of CUDA
# graphs, the end state's private segments (segment_pool_id (0, 1): 35651584 bytes; pool (0, 2) freed)
g="$srcdir/traces/captured/graph_own__default.pickle.gz"
run "$A" replay --no-timing -c version:2.14 --stats "$TMP/gs.csv" "$g"
is "$st|$(grep -E '^reserved_bytes_by_private_pools\.[12]\.all\.(current|peak),' "$TMP/gs.csv" | tr '\n' ' ')" \
	"0|reserved_bytes_by_private_pools.1.all.current,35651584 reserved_bytes_by_private_pools.1.all.peak,123731968 reserved_bytes_by_private_pools.2.all.current,0 reserved_bytes_by_private_pools.2.all.peak,33554432 " \
	"graph_own: each private pool's reserved bytes; pool 1's current is the end state's segments of pool (0, 1)"
run "$A" replay --no-timing --stats "$TMP/gs.csv" "$g"
is "$(grep -c '^reserved_bytes_by_private_pools' "$TMP/gs.csv")" 0 "... not printed without version:2.12+ (2.11's keys)"
# ... and on every captured 2.11 recording with private pools at its end, under its own settings and
# limit (meta.json), the pools' reserved bytes add up to the end state's private segments
bad=""
while IFS='|' read -r t c fr endb; do
	set -- ; [ -n "$fr" ] && set -- --fraction "$fr" --device-total 150109880320
	"$A" replay --no-timing -c "${c:+$c,}version:2.14" "$@" --stats "$TMP/ps.csv" "$srcdir/traces/captured/$t.pickle.gz" > /dev/null 2>&1 || { bad="$bad $t(exit)"; continue; }
	sum=$(awk -F, '/^reserved_bytes_by_private_pools\.[0-9]+\.all\.current,/ { s += $2 } END { printf "%d", s }' "$TMP/ps.csv")
	[ "$sum" = "$endb" ] || bad="$bad $t($sum!=$endb)"
done <<'ROWS'
compile_ro__default|||117440512
compile_ro__exp|expandable_segments:True||125829120
compile_ro__ms128|max_split_size_mb:128||117440512
compile_ro__p110_default||0.009068|71303168
compile_ro__p110_exp|expandable_segments:True|0.009068|83886080
graph_own__default|||35651584
graph_own__exp|expandable_segments:True||65011712
graph_own__ms128|max_split_size_mb:128||35651584
graph_own__p110_default||0.009401|123731968
graph_own__p110_exp|expandable_segments:True|0.009401|148897792
graph_shared__default|||35651584
graph_shared__exp|expandable_segments:True||65011712
graph_shared__ms128|max_split_size_mb:128||35651584
graph_shared__p110_default||0.009401|123731968
graph_shared__p110_exp|expandable_segments:True|0.009401|65011712
mempool_flags__default|||69206016
mempool_flags__exp|expandable_segments:True||88080384
mempool_flags__ms128|max_split_size_mb:128||69206016
mempool_flags__p110_default||0.006722|69206016
mempool_flags__p110_exp|expandable_segments:True|0.006722|88080384
ROWS
is "${bad:-none}" none "20 graph/MemPool recordings: the private pools' reserved bytes at the end = the end state's private segments"
# fit and advise run a snapshot's release too (as_run prepares every run's settings through the policy)
run "$A" fit param max_split_size_mb "$F/fields-2.1.pickle.gz" --capacity 1G --values 20
ok $(( (st == 64 ? 0 : 1) + $(contains "$errout" "max_split_size_mb: 20 is too small: more than 20 up to PyTorch 2.8 (version:2.1)"; echo $?) )) \
	"fit of a 2.1 snapshot runs 2.1's rules: max_split_size_mb 20 refused, exit 64"
# the default: the newest release the snapshot's fields allow (2.11 for 2.9-2.11 and newer snapshots)
for f in 2.1:version:2.1 2.2:version:2.2 2.3:version:2.8 2.7:version:2.8 2.9: 2.12: 2.13: writer:; do
	run "$A" replay --no-timing "$F/fields-${f%%:*}.pickle.gz"
	is "$st|$(col "$out" config)" "0|${f#*:}" "replay of a ${f%%:*} field set runs the rules of ${f#*:}"
done
run "$A" replay --no-timing -c "max_split_size_mb:64" "$F/fields-2.3.pickle.gz"
is "$(col "$out" config)" "max_split_size_mb:64,version:2.8" "the default version is added to a given config"
run "$A" replay --no-timing -c "max_split_size_mb:64,version:2.11" "$F/fields-2.3.pickle.gz"
is "$(col "$out" config)" "max_split_size_mb:64,version:2.11" "a given version wins over the snapshot's"
run "$A" replay --no-timing -c recorded "$F/fields-2.5.pickle.gz"
is "$st|$(col "$out" config)" "0|version:2.8" "-c recorded gets the default version too"
run "$A" replay -p bestfit --no-timing "$F/fields-2.3.pickle.gz"
is "$st|$(col "$out" policy)|$(col "$out" config)|$(col "$out" allocs)" "0|bestfit||1" "other policies get no version"

# one trace under one setting: the same row whatever command produced it (issue 36: sweep and compare
# ran 2.11's rules where replay ran the snapshot's 2.1)
for c in "" max_split_size_mb:128; do
	v1=$("$A" replay --no-timing --latency-model none -c "$c" "$F/fields-2.1.pickle.gz" | tail -1)
	if [ -n "$c" ]; then v2=$("$A" sweep -t "$F/fields-2.1.pickle.gz" --param "max_split_size_mb=128" | tail -1 | cut -d, -f3-)
	else v2=$("$A" sweep -t "$F/fields-2.1.pickle.gz" | tail -1 | cut -d, -f2-); fi
	is "$v2" "$v1" "sweep's row of a 2.1 snapshot is replay's (${c:-defaults}; config version:2.1 appended)"
done
v3=$("$A" compare -p pytorch,bestfit --latency-model none "$F/fields-2.1.pickle.gz" | sed -n 2p)
is "$v3" "$("$A" replay --no-timing --latency-model none "$F/fields-2.1.pickle.gz" | tail -1)" "compare's row of a 2.1 snapshot is replay's"
is "$("$A" compare -p pytorch,bestfit --latency-model none "$F/fields-2.1.pickle.gz" | sed -n 3p | cut -d, -f2-3)" "bestfit," \
	"... and compare gives other policies no version"

finish
