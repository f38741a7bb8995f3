#!/bin/sh
# rmm.sh - the RMM policies replaying the bundled RMM log (traces/rmm/example.csv: two threads, the
# per-thread default stream 0x2, a created stream, a recorded allocation failure). Every expected
# number is derived by hand from RMM v26.06.00's rules in traces/rmm/README.md.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
L="$srcdir/traces/rmm/example.csv"
# peak requested, peak allocated, peak reserved, final reserved, device allocs, device frees, OOMs
nums() {
	run "$A" replay --no-timing --check "$@" "$L"
	printf '%s %s %s %s %s %s %s %s' "$st" "$(col "$out" peak_requested_bytes)" "$(col "$out" peak_allocated_bytes)" "$(col "$out" peak_reserved_bytes)" \
		"$(col "$out" final_reserved_bytes)" "$(col "$out" num_device_alloc)" "$(col "$out" num_device_free)" "$(col "$out" num_ooms)"
}
stat() { grep "^$1," "$2" | cut -d, -f2; }

# rmm-pool: 4 MiB initial pool, 8 MiB maximum. 3000000 bytes find no block in any list even after
# thread 51240's list is merged into the legacy one: the pool grows by max(3000064, 4 MiB / 2); the
# 200 GB request finds remaining = 1194240 < its size (size_to_grow 0): out of memory.
P='initial_pool_size:4MiB,maximum_pool_size:8MiB'
is "$(nums -p rmm-pool -c "$P")" "0 3304696 3304960 7194368 7194368 2 0 1" "rmm-pool on the RMM log: the pool grows once, by 3000064 bytes; one OOM"
"$A" replay --no-timing -p rmm-pool -c "$P" --stats "$TMP/ps" --segments "$TMP/pg" -o /dev/null "$L"
is "$(stat taken_from_other_stream "$TMP/ps") $(stat merged_stream_lists "$TMP/ps") $(stat stream_free_lists "$TMP/ps") $(stat free_blocks "$TMP/ps")" "3 1 3 5" \
	"rmm-pool: three requests served from another stream's list, one list merged; legacy, thread 51240's 0x2 and the created stream's lists; five free blocks at the end"
# the initial pool at the peak: the log's own pointers (offsets from 0x7f5e4c000000) with their free gaps
is "$(awk -F, '$1 == "peak" && $4 == 4194304 { printf "%s:%s:%s ", $8, $9, $10 }' "$TMP/pg")" \
	"0:768:allocated 768:256:free 1024:300032:allocated 301056:2000128:free 2301184:4096:allocated 2305280:1889024:free " \
	"rmm-pool: at the peak the initial pool holds the log's blocks at the log's offsets (best fit, 600 bytes in the freed 1000-byte block)"
is "$(awk -F, '$1 == "end" && $4 == 4194304 { printf "%s:%s ", $8, $9 }' "$TMP/pg")" "0:768 768:2300416 2301184:4096 2305280:1889024 " \
	"rmm-pool: at the end the free blocks of different streams' lists stay apart (0x5600a1b2c3d0's, legacy's, thread 51240's, legacy's)"
is "$(nums -p rmm-pool)" "0 3304696 3304960 75054940160 75054940160 1 0 1" "rmm-pool's default initial pool: half of the free memory of the simulated H200"

# rmm-arena: an 8 MiB arena. The 200 GB request defragments once (every arena's superblocks go to
# the global arena) and fails; the frees then merge every superblock back into one.
is "$(nums -p rmm-arena -c arena_size:8MiB)" "0 3304696 3304960 8388608 8388608 1 0 1" "rmm-arena on the RMM log: one upstream allocation of 8 MiB; one OOM"
"$A" replay --no-timing -p rmm-arena -c arena_size:8MiB --stats "$TMP/as" --segments "$TMP/ag" -o /dev/null "$L"
is "$(awk -F, '$1 == "end" { printf "%s:%s:%s:%s ", $4, $8, $9, $10 }' "$TMP/ag")" "8388608:0:8388608:free " "rmm-arena --segments: the arena is one segment, whole and free at the end"
is "$(stat thread_arenas "$TMP/as") $(stat stream_arenas "$TMP/as") $(stat defragmentations "$TMP/as") $(stat superblocks "$TMP/as")" "1 2 1 1" \
	"rmm-arena: thread 51240's arena (stream 0x2), the arenas of streams 0 and 0x5600a1b2c3d0; one defragmentation; one superblock at the end"

# rmm-binning over the device: bins of 1, 2 and 4 KiB preallocate 128 blocks each (917504 bytes);
# 300000, 2000000 and 3000000 bytes go to the device unaligned.
is "$(nums -p rmm-binning -c min_size_exponent:10,max_size_exponent:12)" "0 3304696 3305120 4217504 917504 6 3 1" \
	"rmm-binning on the RMM log: three bin chunks and three direct device allocations"
# rmm-binning over rmm-pool: the chunks and the large requests come from the pool
is "$(nums -p 'rmm-binning>rmm-pool' -c "min_size_exponent:10,max_size_exponent:12;$P")" "0 3304696 3305120 7194368 7194368 2 0 1" \
	"rmm-binning>rmm-pool on the RMM log: the pool holds the bins' chunks and grows once"

# a free on another stream than the allocation's: the block goes into the freeing stream's list
# (deallocate(stream) -> stream_free_blocks_[get_event(stream)]); the stream survives convert
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x1000000,1024,0x5\n1,2,free,0x1000000,1024,0x7\n1,3,allocate,0x1000000,1024,0x7\n1,4,free,0x1000000,1024,0x7\n' > "$TMP/xs.csv"
"$A" replay --no-timing -p rmm-pool -c initial_pool_size:0 --stats "$TMP/xs1" -o /dev/null "$TMP/xs.csv"
is "$(stat taken_from_other_stream "$TMP/xs1") $(stat stream_free_lists "$TMP/xs1")" "0 2" "rmm-pool: a block freed on stream 0x7 serves stream 0x7 from its own list"
run "$A" convert "$TMP/xs.csv" -o "$TMP/xs.trace"
is "$(grep '^f' "$TMP/xs.trace" | tr '\n' '|')" "f 1 t=2 th=1 s=0x7|f 2 t=4 th=1 s=0x7|" "convert keeps a free's stream as s= (native format)"
"$A" convert "$TMP/xs.csv" -o "$TMP/xs.asbin"
for f in xs.trace xs.asbin; do
	"$A" replay --no-timing -p rmm-pool -c initial_pool_size:0 --stats "$TMP/xs2" -o /dev/null "$TMP/$f"
	is "$(stat taken_from_other_stream "$TMP/xs2")" "0" "the $f conversion replays the free's stream too"
done
printf '#allocsim-trace 1\na 1 100 5 s=7\n' > "$TMP/sa.trace"
run "$A" replay "$TMP/sa.trace"
is "$st" 65 "s= belongs to free records only"
contains "$errout" "invalid field 's=7'"; ok $? "... and is refused on an allocation"

# options: sizes with units, percentages, RMM's own refusals
run "$A" replay -p rmm-pool -c initial_pool_size:1000031 "$L"
is "$st" 64 "rmm-pool: an initial pool size that is not a multiple of 256 is a usage error"
contains "$errout" "Error, Initial pool size required to be a multiple of 256 bytes"; ok $? "... with RMM's message"
run "$A" replay -p rmm-pool -c initial_pool_size:2MiB,maximum_pool_size:1MiB "$L"
contains "$errout" "Initial pool size exceeds the maximum pool size"; ok $? "rmm-pool: initial above maximum is refused with RMM's message"
run "$A" replay -p rmm-pool -c initial_pool_size:150% "$L"
contains "$errout" "option initial_pool_size: '150%' is not a percentage above 0% and at most 100%"; ok $? "rmm-pool: a percentage above 100 is refused"
run "$A" replay -p rmm-arena -c arena_size:512KiB "$L"
is "$st" 64 "rmm-arena: an arena below 1 MiB is a usage error"
contains "$errout" "Arena size smaller than minimum superblock size"; ok $? "... with RMM's message"
run "$A" replay -p rmm-binning -c min_size_exponent:10 "$L"
contains "$errout" "give both min_size_exponent and max_size_exponent"; ok $? "rmm-binning: one exponent alone is refused"
run "$A" replay -p rmm-binning -c min_size_exponent:18,max_size_exponent:22 --capacity 512MiB "$L"
is "$st" 64 "rmm-binning: bins whose preallocation does not fit the device cannot be constructed"
contains "$errout" "cannot preallocate"; ok $? "... and say so"
finish
