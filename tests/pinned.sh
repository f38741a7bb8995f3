#!/bin/sh
# pinned.sh - pinned host memory: 'replay -p pytorch-pinned' on a host log and 'transfer HOSTTRACE',
# what pinning costs and gains, with numbers worked out by hand from a made-up transfer table.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
H="$srcdir/traces/fixtures/pinned-synthetic.host.csv"

run "$A" replay -p pytorch-pinned --no-timing "$H"
is "$st $(col "$out" peak_reserved_bytes) $(col "$out" final_reserved_bytes) $(col "$out" num_device_alloc) $(col "$out" num_device_free)" \
	"0 24593 24593 6 1" "replay: pinned bytes at the peak and the end, cudaHostAlloc and cudaFreeHost calls of the synthetic log"

# a table with round numbers: cudaHostAlloc 400 us up to 4 KiB, 800 us at 8 KiB; cudaFreeHost 100 us at
# 4 KiB (and at 4 KiB's rate above it); pinned H2D 2 us .. 4 us, pageable 5x that
cat > "$TMP/t.csv" <<'T'
size_bytes,host_memory,operation,median_us,gb_per_s
4096,pinned,cudaHostAlloc,400,
8192,pinned,cudaHostAlloc,800,
4096,pinned,cudaFreeHost,100,
4096,pageable,H2D,10,
8192,pageable,H2D,20,
4096,pageable,D2H,10,
4096,pinned,H2D,2,
8192,pinned,H2D,4,
4096,pinned,D2H,2,
T
run "$A" transfer --table "$TMP/t.csv" "$H"
# cudaHostAlloc: 16 B and 1 B blocks 400 us each, four 8 KiB blocks 800 us each = 4000; one 8 KiB
# cudaFreeHost (empty_cache) = 100 x 8192/4096 = 200. Copies of 10, 4097, 5000, 8000, 6000, 16, 1, 8192
# and 7000 bytes (38316): pinned 2 us each up to 4 KiB, linear to 4 us at 8 KiB = 24.696 us; pageable
# 5x = 123.479 us. Pageable memory holds the live requested bytes: peak and end 21193.
is "$st|$out" "0|host_memory,host_bytes_peak,host_bytes_final,host_alloc_calls,host_alloc_us,host_free_calls,host_free_us,copies,direction,copy_bytes,copy_us,copy_gb_per_s,total_us
pageable,21193,21193,0,0.000,0,0.000,9,H2D,38316,123.479,0.310,123.479
pinned,24593,24593,6,4000.000,1,200.000,9,H2D,38316,24.696,1.552,4224.696" "transfer HOSTTRACE: pageable vs pinned from the table, by hand"

# a 1 MiB reserve: one cudaHostAlloc of 1 MiB (above the table's largest size at its rate, 800 us per
# 8 KiB: 102400 us), every block carved from it, nothing freed; pinned D2H has one point, 2 us at 4 KiB,
# so 2 us up to 4 KiB and 2 us per 4 KiB above: the same 24.696 us
run "$A" transfer --table "$TMP/t.csv" -c pinned_reserve_segment_size_mb:1 --direction D2H -o "$TMP/r.csv" "$H"
is "$st|$(tail -1 "$TMP/r.csv")" "0|pinned,1048576,1048576,1,102400.000,0,0.000,9,D2H,38316,24.696,1.552,102424.696" \
	"transfer -c pinned_reserve_segment_size_mb:1 --direction D2H: one reserve, D2H copies"

run "$A" transfer "$H"
is "$st $(printf '%s\n' "$out" | sed -n 3p | cut -d, -f1-4)" "0 pinned,24593,24593,6" "transfer HOSTTRACE without --table uses the bundled H200 table"

# errors: the table's file and line, 65; a missing table 66; usage 64; nothing written
printf 'size_bytes,host_memory,operation,median_us,gb_per_s\n4096,pinned,cudaHostAlloc,fast,\n' > "$TMP/bad.csv"
run "$A" transfer --table "$TMP/bad.csv" -o "$TMP/never.csv" "$H"
is "$st|$errout|$(ls "$TMP"/never.csv* 2>/dev/null)" "65|allocsim: error: $TMP/bad.csv:2: invalid time 'fast' (microseconds > 0)|" "a bad time in the table: 65, file and line, nothing written"
printf 'size_bytes,host_memory,operation,median_us,gb_per_s\n4096,pinned,cudaHostAlloc,1,\n' > "$TMP/few.csv"
run "$A" transfer --table "$TMP/few.csv" "$H"
is "$st|$errout" "65|allocsim: error: $TMP/few.csv: no pageable H2D rows" "a table without a series: 65"
printf 'size_bytes,host_memory,operation,median_us,gb_per_s\n8192,pinned,H2D,1,\n4096,pinned,H2D,1,\n' > "$TMP/ord.csv"
run "$A" transfer --table "$TMP/ord.csv" "$H"
is "$st|$errout" "65|allocsim: error: $TMP/ord.csv:3: sizes of pinned H2D must increase" "sizes out of order: 65"
run "$A" transfer --table "$TMP/t.csv" --direction sideways "$H"
is "$st|$(head -1 "$TMP/err")" "64|allocsim: error: transfer: --direction: 'sideways' is not H2D or D2H" "a bad direction is a usage error"
run "$A" transfer --table "$TMP/nonexistent.csv" "$H"
is "$st" 66 "a missing table: 66"
run "$A" transfer --table "$TMP/t.csv" -c pinned_num_register_threads:3 "$H"
is "$st|$errout" "64|allocsim: error: Number of register threads has to be power of 2, got 3" "a bad pinned option: PyTorch's message, 64"
run "$A" transfer --table "$TMP/t.csv"
is "$st|$(head -1 "$TMP/err")" "64|allocsim: error: transfer: --table, -c and --direction take one HOSTTRACE" "--table without a trace is a usage error"

# doc/policies.md's three examples print what the page shows
D="$srcdir/doc/policies.md"
awk 'BEGIN { print "op,id,size,ptr"; for (i = 1; i <= 100; i++) { print "a," i ",25165824,0";
    if (i > 2) { print "f," i-2 ",0,0"; print "d," i-2 ",0,0" } } }' > "$TMP/loader.host.csv"
for t in "$H" "$TMP/loader.host.csv" "$srcdir/traces/captured/pinned__default.host.csv"; do
	run "$A" transfer "$t"
	miss=$(printf '%s\n' "$out" | while IFS= read -r l; do grep -qxF "$l" "$D" || echo "$l"; done)
	is "$st:$(printf '%s\n' "$out" | wc -l):${miss:-none}" "0:3:none" "doc/policies.md shows what 'transfer $(basename "$t")' prints"
done

# real captures (scripts/capture-beyond.py's pinned scenario; traces/captured/NAME.host.csv beside
# NAME.meta.json): every host_memory_stats() key the policy keeps equals PyTorch's (the timings are
# wall-clock and only their counts are kept); t_pinned checks their addresses
for h in "$srcdir"/traces/captured/*.host.csv; do
	[ -f "$h" ] || continue
	m=${h%.host.csv}.meta.json
	run "$A" replay -p pytorch-pinned --no-timing --stats "$TMP/hs.csv" -o /dev/null "$h"
	# the meta's "host_memory_stats": { "key": value, ... } block (json.dump, indent 1)
	awk '/"host_memory_stats": *\{/ { f = 1; next } f && /^ *\}/ { exit } f { gsub(/[ ",]/, ""); sub(/:/, ","); print }' "$m" | sort > "$TMP/want"
	grep -v '^summary\.\|^key,' "$TMP/hs.csv" | sort > "$TMP/got"
	join -t, "$TMP/got" "$TMP/want" | awk -F, '$2 != $3' > "$TMP/diff"
	k=$(join -t, "$TMP/got" "$TMP/want" | wc -l)
	is "$st:$k:$(tr '\n' ' ' < "$TMP/diff")" "0:20:" "$(basename "$h"): all 20 host_memory_stats() keys equal PyTorch's"
done
finish
