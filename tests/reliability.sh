#!/bin/sh
# reliability.sh - invariants over every bundled trace and policy, truncation at every boundary of a
# native trace, determinism, and that an interrupted run leaves no result that looks complete.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
# --check after every event, on two bundled traces and the captured ones under default settings
# (pytorch, bestfit, passthrough, cuda-async; the zoo's policies in their own tests); every bundled and
# captured trace, pytorch with its recorded settings, is in tests/reliability-long.sh (make check-long)
for t in "$T"/seed_example__default.pickle.gz "$T"/bert_infer_varlen__default.pickle.gz "$srcdir"/traces/captured/*__default.pickle.gz; do
	for p in pytorch bestfit passthrough cuda-async; do
		run "$A" replay -p "$p" --check --no-timing "$t"
		is "$st" 0 "$p --check holds on $(basename "$t" .pickle.gz)"
	done
done
run "$A" replay -p bestfit -c "per_stream:False,min_segment:20MiB" --check "$srcdir/traces/captured/multistream__default.pickle.gz"
is "$st" 0 "bestfit with a shared pool --check holds on a multi-stream trace"

# a native trace cut at every line boundary and in the middle of every line: 0 or 65, never worse
"$A" convert "$T/seed_example__default.pickle.gz" -o "$TMP/full.trace"
head -40 "$TMP/full.trace" > "$TMP/small.trace"
size=$(wc -c < "$TMP/small.trace"); bad=0; cuts=0; pos=1
# (the cut from the text in the shell where it can: bash's substrings; else head, a process per cut)
[ -n "${BASH_VERSION:-}" ] && { slurp small "$TMP/small.trace"; small="$small$nl"; }
while [ $pos -lt "$size" ]; do
	if [ -n "${BASH_VERSION:-}" ]; then eval 'printf %s "${small:0:$pos}"' > "$TMP/cut.trace"; else head -c $pos "$TMP/small.trace" > "$TMP/cut.trace"; fi
	"$A" replay -p bestfit --check "$TMP/cut.trace" > /dev/null 2>&1; s=$?
	[ $s = 0 ] || [ $s = 65 ] || { bad=$((bad + 1)); echo "# cut at $pos: exit $s"; }
	cuts=$((cuts + 1)); pos=$((pos + 7))
done
ok "$([ $cuts -gt 0 ] && [ $bad = 0 ]; echo $?)" "native trace cut at $cuts places: always exit 0 or 65"
# the same for a gzip'd snapshot cut every 4 KiB of compressed data
sz=$(wc -c < "$T/seed_example__default.pickle.gz"); bad=0; pos=100
while [ $pos -lt "$sz" ]; do
	head -c $pos "$T/seed_example__default.pickle.gz" > "$TMP/cut.gz"
	"$A" replay "$TMP/cut.gz" > /dev/null 2>&1; s=$?
	[ $s = 65 ] || { bad=$((bad + 1)); echo "# cut at $pos: exit $s"; }
	pos=$((pos + 4096))
done
is "$bad" 0 "gzip'd snapshot cut every 4 KiB: always exit 65"

# determinism: two runs, every policy and option set, byte-identical
for p in pytorch bestfit passthrough; do
	a=$("$A" replay -p "$p" --no-timing "$T/gpt2_train_varlen__p110_ms128.pickle.gz" --capacity 18580450876)
	b=$("$A" replay -p "$p" --no-timing "$T/gpt2_train_varlen__p110_ms128.pickle.gz" --capacity 18580450876)
	is "$a" "$b" "$p: two replays give byte-identical rows"
done

# an interrupted run leaves no output under the final name (written to a temporary name first):
# the input is a pipe that stays open, so the replay is still running when it is killed
mkfifo "$TMP/pipe"
( cat "$srcdir/tests/fuzz-findings/native/crash-f513c430a7ebf3223007b7235af9c380b316e902" | head -5; sleep 3 ) > "$TMP/pipe" &
"$A" replay -p passthrough --timeline "$TMP/tl.csv" -o "$TMP/out.csv" - < "$TMP/pipe" & pid=$!
sleep 0.5; kill -9 $pid 2>/dev/null; k=$?; wait $pid 2>/dev/null
ok "$([ $k = 0 ] && [ ! -e "$TMP/out.csv" ] && [ ! -e "$TMP/tl.csv" ]; echo $?)" "a killed replay leaves neither the summary nor the timeline under its final name"
# cuda-async: the pool model's cost does not depend on the bytes asked for (a legal 2^60-1 byte
# request walked its 2^35 chunks: minutes per event, and SIGTERM waited for it)
printf '#allocsim-trace 1\na 1 1152921504606846975 0\na 2 1000 0\nf 2\na 3 576460752303423488 0\n' > "$TMP/huge.trace"
run timeout 20 "$A" replay -p cuda-async --no-timing --check "$TMP/huge.trace"
is "$st,$(col "$out" num_ooms),$(col "$out" peak_reserved_bytes)" "0,2,33554432" "cuda-async: 2^60-byte requests past the device are out of memory at once"
run timeout 20 "$A" replay -p cuda-async --no-timing --check --capacity 1048576TiB "$TMP/huge.trace"
is "$st,$(col "$out" num_ooms),$(col "$out" peak_reserved_bytes)" "0,2,33554432" "cuda-async: a capacity above the device's memory does not let the pool grow past the device"
printf '#allocsim-trace 1\na 1 100000000000 0\na 2 1000 0\nf 1\na 3 30000000000 0\na 4 20000000000 0\nf 3\ne\na 5 1000 0\na 6 50000000000 0\n' > "$TMP/huge2.trace"
run timeout 20 "$A" replay -p cuda-async --no-timing --check "$TMP/huge2.trace"
is "$st,$(col "$out" peak_reserved_bytes),$(col "$out" num_device_alloc)" "0,100025761792,3" "cuda-async: 20-100 GB blocks, freed, trimmed and taken again (as the per-chunk model did)"
# validate on a trace whose simulation holds no segment at the end: qsort got NULL (UBSan)
printf '#allocsim-trace 1\ne\n' > "$TMP/empty.trace"
run "$A" validate -c "" "$TMP/empty.trace"
is "$st: $out" "0: $TMP/empty.trace: exact (0 device calls, 0 end-state segments)" "validate: a trace without segments is exact (no NULL to qsort)"
# bestfit min_segment:2^64-1 rounded to zero-byte segments, --check failed and a segment leaked (ASan)
printf '#allocsim-trace 1\na 1 1000 0\na 2 3000 0\nf 1\n' > "$TMP/s.trace"
for o in min_segment:18446744073709551615 granule:2305843009213693952 segment_round:9223372036854775808; do
	run "$A" replay -p bestfit -c "$o" --check "$TMP/s.trace"
	is "$st: $errout" "64: allocsim: error: ${o%%:*}: at most 1024 PiB (2^60 bytes), got '${o#*:}'" "bestfit $o is refused (it overflowed)"
done
run "$A" replay -p bestfit -c min_segment:1048576TiB --check --no-timing "$TMP/s.trace"
is "$st,$(col "$out" num_ooms)" "0,2" "bestfit min_segment:2^60 is a segment too large for the device, not a zero-byte one"
# numbers are decimal everywhere, leading zeros included ("0100" was octal 64, "08" an error); hex
# only with 0x where the format says so (native traces, RMM pointers and streams)
printf '#allocsim-trace 1\na 08 0100 0\na 0x10 0x1000 010\nf 08\n' > "$TMP/zeros.trace"
run "$A" replay --no-timing "$TMP/zeros.trace"
is "$st,$(col "$out" allocs),$(col "$out" peak_requested_bytes)" "0,2,4196" "native: 0100 is 100, 08 is 8, 0x1000 is 4096"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0010,allocate,0x1000,0100,010\n1,11,free,0x1000,0100,010\n' > "$TMP/zeros.csv"
run "$A" replay --no-timing "$TMP/zeros.csv"
is "$st,$(col "$out" peak_requested_bytes)" "0,100" "rmm: size 0100 is 100"
run "$A" replay -c roundup_power2_divisions:010 "$TMP/zeros.trace"
is "$st: $errout" "64: allocsim: error: roundup_power2_divisions: 010 is not a power of 2" "-c: 010 is ten (not octal 8), not a power of two"
run "$A" replay --no-timing -c roundup_power2_divisions:08 "$TMP/zeros.trace"
is "$st,$(col "$out" config)" "0,roundup_power2_divisions:08" "-c: 08 is eight"
for v in 0x40 +64 -1 1e3 64x; do
	run "$A" replay -c "max_split_size_mb:$v" "$TMP/zeros.trace"
	is "$st" 64 "-c max_split_size_mb:'$v' is not a decimal number"
done
{ echo '#allocsim-trace 1'; for i in 1 2 3 4 5 6 7 8 9; do echo "a $i 10 0"; done; } > "$TMP/nine.trace"
run "$A" replay --every 010 --timeline "$TMP/tl.csv" --no-timing "$TMP/nine.trace"
is "$st,$(wc -l < "$TMP/tl.csv")" "0,2" "--every 010 is ten (octal 8 made two rows of nine events)"
# the native version: decimal digits only, and no wrap-around (2^32+1 read as 1)
for v in 4294967297 18446744073709551617 01x "+1" "-1" ""; do
	printf '#allocsim-trace %s\na 1 10 0\n' "$v" > "$TMP/ver.trace"
	run "$A" replay "$TMP/ver.trace"
	case "$v" in 4294967297|18446744073709551617) m="$TMP/ver.trace:1: unsupported trace format version $v (this allocsim reads version 1)";;
	*) m="$TMP/ver.trace:1: bad header line '#allocsim-trace $v' (expected '#allocsim-trace 1')";; esac
	is "$st: $errout" "65: allocsim: error: $m" "native version '$v' is refused"
done
printf '#allocsim-trace 01\na 1 10 0\n' > "$TMP/ver.trace"
run "$A" replay "$TMP/ver.trace"
is "$st" 0 "native version 01 is 1"
# --capacity 0 meant "no limit": now a usage error in every command that takes it, in the same words
# (src/cli/devopts.c; advise and predict had their own until issue 36)
for c in "replay" "validate" "fit param max_split_size_mb" "sweep --param max_split_size_mb=100" "advise" "predict" "compare"; do
	run "$A" $c --capacity 0 -- "$TMP/zeros.trace"
	[ "${c%% *}" = sweep ] && run "$A" $c --capacity 0 -t "$TMP/zeros.trace"
	is "$st: $errout" "64: allocsim: error: ${c%% *}: --capacity: a capacity of 0 bytes holds nothing (leave the option out for the device's whole memory)
Try 'allocsim ${c%% *} --help'." "${c%% *} --capacity 0 is refused"
done
# the other device options: one parser, the same words in every command (src/cli/devopts.c)
for c in advise blame compare convert "fit capacity" info sweep validate; do
	run "$A" $c --device 4096 -- "$TMP/zeros.trace"
	is "$st: $errout" "64: allocsim: error: ${c%% *}: --device: '4096' is not a device number (0 .. 4095)
Try 'allocsim ${c%% *} --help'." "${c%% *} --device 4096 is refused"
done
run "$A" replay --device 1025 "$TMP/zeros.trace"
is "$st: $(printf '%s\n' "$errout" | head -n 1)" "64: allocsim: error: replay: --device: '1025' is not a device number (0 .. 1024) or host" "replay --device: the GPU ordinal's range, or host"
# --device host (a 2.14+ snapshot's pinned host history) goes through the same parser: info counts the
# host history's 3 allocations, not the device's 1
run "$A" info --device host "$srcdir/traces/fixtures/versions/fields-host.pickle.gz"
is "$st: $(printf '%s\n' "$out" | grep '^alloc_events')" "0: alloc_events: 3" "info --device host reads the host history"
for c in advise replay validate; do
	run "$A" $c --fraction 1.5 "$TMP/zeros.trace"
	is "$st: $(printf '%s\n' "$errout" | head -n 1)" "64: allocsim: error: $c: --fraction: '1.5' is not a number in (0, 1]" "$c --fraction 1.5 is refused"
	run "$A" $c --device-total 0 "$TMP/zeros.trace"
	is "$st: $(printf '%s\n' "$errout" | head -n 1)" "64: allocsim: error: $c: --device-total: a capacity of 0 bytes holds nothing (leave the option out for the device's whole memory)" "$c --device-total 0 is refused"
done
run "$A" replay --backend gpu "$TMP/zeros.trace"
is "$st: $(printf '%s\n' "$errout" | head -n 1)" "64: allocsim: error: replay: --backend: sim, cuda or shuffled, not 'gpu'" "replay --backend gpu is refused"
run "$A" sweep --param capacity=0,1GiB -t "$TMP/zeros.trace"
is "$st" 64 "sweep --param capacity=0 is refused"
printf '#allocsim-trace 1\n#capacity: 0\na 1 10 0\n' > "$TMP/cap0.trace"
run "$A" replay "$TMP/cap0.trace"
is "$st: $errout" "65: allocsim: error: $TMP/cap0.trace:2: capacity of 0 bytes in header (leave the line out when unknown)" "native #capacity: 0 is refused"
# times, recorded addresses and segment sizes (doc/trace-format.md, Checks): each was accepted
bad_trace() { # FILE LINE MESSAGE: exit 65 and FILE:LINE: MESSAGE
	run "$A" replay "$1"
	is "$st: $errout" "65: allocsim: error: $1:$2: $3" "$3"
}
printf '#allocsim-trace 1\na 1 10 0 t=10\na 2 10 0 t=5\n' > "$TMP/back.trace"
bad_trace "$TMP/back.trace" 3 "time goes backwards: 5 us after 10 us"
printf '#allocsim-trace 1\na 1 10 0 t=10\np x\nf 1 t=10\na 3 10 0\nf 3 t=11\n' > "$TMP/fwd.trace"
run "$A" replay "$TMP/fwd.trace"; is "$st" 0 "equal times and records without a time are fine"
printf '#allocsim-trace 1\na 1 4096 0 addr=0x10000\na 2 16 0 addr=0x10ff0\n' > "$TMP/ovl.trace"
bad_trace "$TMP/ovl.trace" 3 "allocation 2 at 0x10ff0 (16 bytes) overlaps live allocation 1 at 0x10000 (4096 bytes)"
printf '#allocsim-trace 1\na 1 4096 0 addr=0x10000\na 2 16 0 addr=0xfff1\n' > "$TMP/ovl2.trace"
bad_trace "$TMP/ovl2.trace" 3 "allocation 2 at 0xfff1 (16 bytes) overlaps live allocation 1 at 0x10000 (4096 bytes)"
printf '#allocsim-trace 1\na 1 4096 0 addr=0x10000\nr 1\na 2 16 0 addr=0x10000\n' > "$TMP/ovl3.trace"
bad_trace "$TMP/ovl3.trace" 4 "allocation 2 at 0x10000 (16 bytes) overlaps live allocation 1 at 0x10000 (4096 bytes)"
printf '#allocsim-trace 1\na 1 4096 0 addr=0x10000\na 2 16 0 addr=0xfff0\na 3 16 0 addr=0x11000\nf 1\na 4 4096 0 addr=0x10000\n' > "$TMP/adj.trace"
run "$A" replay "$TMP/adj.trace"; is "$st" 0 "adjacent allocations, and an address used again after its free, are fine"
printf '#allocsim-trace 1\na 1 4096 0 addr=0xfffffffffffff001\n' > "$TMP/wrap.trace"
bad_trace "$TMP/wrap.trace" 2 "allocation 1 at 0xfffffffffffff001 of 4096 bytes runs past the 64-bit address space"
printf '#allocsim-trace 1\nS 0x200000 2097152 0\nS 0x3fffff 2097152 0\n' > "$TMP/sovl.trace"
bad_trace "$TMP/sovl.trace" 3 "segment_alloc at 0x3fffff (2097152 bytes) overlaps the live segment at 0x200000 (2097152 bytes)"
printf '#allocsim-trace 1\nS 0x200000 2097152 0\nX 0x200000 4194304 0\n' > "$TMP/sfree.trace"
bad_trace "$TMP/sfree.trace" 3 "segment_free of 4194304 bytes at 0x200000, but the segment there has 2097152 bytes"
for r in "S 0x200000 0 0" "M 0x200000 1152921504606846976 0" "U 0xffffffffffe00001 2097152 0"; do
	printf '#allocsim-trace 1\n%s\n' "$r" > "$TMP/seg.trace"
	case "$r" in S*) m="segment_alloc of 0 bytes (must be 1 .. 2^60-1)";; M*) m="segment_map of 1152921504606846976 bytes (must be 1 .. 2^60-1)";;
	*) m="segment_unmap at 0xffffffffffe00001 of 2097152 bytes runs past the 64-bit address space";; esac
	bad_trace "$TMP/seg.trace" 2 "$m"
done
printf '#allocsim-trace 1\nS 0x200000 2097152 0\nX 0x200000 2097152 0\nS 0x200000 2097152 0\nX 0x800000 2097152 0\n' > "$TMP/sok.trace"
run "$A" replay "$TMP/sok.trace"; is "$st" 0 "a segment freed and allocated again; a free of a segment from before the history"
# RMM: times may go backwards (the logger can write two threads' lines out of order); addresses not
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,20,allocate,0x1000,100,0\n2,10,allocate,0x2000,100,0\n' > "$TMP/rb.csv"
run "$A" replay "$TMP/rb.csv"; is "$st" 0 "rmm: a time before the previous line's is accepted"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,20,allocate,0x1000,100,0\n2,10,allocate,0x1010,100,0\n' > "$TMP/ro.csv"
bad_trace "$TMP/ro.csv" 3 "allocation 2 at 0x1010 (100 bytes) overlaps live allocation 1 at 0x1000 (100 bytes)"
for t in -5 1.5 12:00 nan 1::2:3 99:99:99:0 1:2.3 1:2:3.4.5 1.2:3:4 1:2:3:4.5 1:2:3. 1:2:3.x; do
	printf 'Thread,Time,Action,Pointer,Size,Stream\n1,%s,allocate,0x1000,100,0\n' "$t" > "$TMP/rt.csv"
	bad_trace "$TMP/rt.csv" 2 "invalid time (expected HH:MM:SS.microseconds, HH:MM:SS:microseconds or microseconds) '$t'"
done
# a snapshot whose time_us is NaN, negative or fractional (was read as "no time")
py=$(command -v python3)
if [ -n "$py" ]; then
	for t in "float('nan')" -1 1.5; do
		"$py" -c "import pickle,sys; e=dict(action='alloc',addr=4096,size=512,stream=0,time_us=$t); sys.stdout.buffer.write(pickle.dumps(dict(segments=[],device_traces=[[e]]),protocol=4))" > "$TMP/t.pickle"
		run "$A" replay -c "" "$TMP/t.pickle"
		is "$st,$(printf '%s' "$errout" | sed 's/byte offset [0-9]*/byte offset N/')" "65,allocsim: error: $TMP/t.pickle: byte offset N: trace entry 0 (alloc) has an invalid 'time_us' (must be a whole number 0 .. 2^63-1)" "snapshot time_us=$t is refused"
	done
fi
# convert: strings from the input (settings, device, source, phase labels) are escaped in the
# line-based native format, so a newline in them cannot forge records; they read back the same
if [ -n "$py" ]; then
	"$py" -c "import pickle,sys; e=[dict(action='alloc',addr=4096,size=512,stream=0,time_us=1),dict(action='free_completed',addr=4096,size=512,stream=0,time_us=2)]; sys.stdout.buffer.write(pickle.dumps(dict(segments=[],device_traces=[e],allocator_settings=dict(PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128\\na 99 4096 0\\n#capacity: 1')),protocol=4))" > "$TMP/forge.pickle"
	run "$A" convert "$TMP/forge.pickle" -o "$TMP/forge.trace"
	is "$st,$(grep -c '^a ' "$TMP/forge.trace"),$(grep -c '^#capacity' "$TMP/forge.trace")" "0,1,0" "convert: a newline in the settings forges no record and no header"
	is "$(grep '^#allocator_settings' "$TMP/forge.trace")" '#allocator_settings: max_split_size_mb:128\x0aa 99 4096 0\x0a#capacity: 1' "convert: the settings' control bytes are escaped"
	is "$("$A" info "$TMP/forge.trace" | grep '^allocator_settings')" "$("$A" info "$TMP/forge.pickle" | grep '^allocator_settings')" "the escaped settings read back as the snapshot's (info shows both escaped)"
fi
printf '#allocsim-trace 1\n#device: H200\\x0aa 7 1 0\\x5c\n#source: \\x20lead\n#allocator_settings: \n#x: \\x00\na 1 10 0\np a\\x0ab\\x20c\\x09\\\\d\np \\x0d\nf 1\n' > "$TMP/esc.trace"
"$A" convert "$TMP/esc.trace" -o "$TMP/esc2.trace"; "$A" convert "$TMP/esc2.trace" -o "$TMP/esc3.trace"
is "$(cat "$TMP/esc2.trace")" "#allocsim-trace 1
#source: \x20lead
#device: H200\x0aa 7 1 0\x5c
#allocator_settings: 
a 1 10 0
p a\x0ab\x20c\x09\x5c\x5cd
p \x0d
f 1" "convert: header values and phase labels escaped (\\xHH), a plain backslash kept"
ok "$(cmp -s "$TMP/esc2.trace" "$TMP/esc3.trace"; echo $?)" "convert of the converted trace is byte-identical (escaping round-trips)"
printf '#allocsim-trace 1\n#device: a\\x00b\na 1 10 0\n' > "$TMP/nul.trace"
bad_trace "$TMP/nul.trace" 2 "escaped NUL byte in header value 'a\\x00b'"
# SIGINT/SIGTERM stop every long command at its next event (or the read it cuts short): exit 130,
# a message, no output under its final name
interrupted() { # SIGNAL NAME COMMAND...: run COMMAND on a pipe that stays open, signal it
	sig=$1; name=$2; shift 2
	rm -f "$TMP/int.fifo"; mkfifo "$TMP/int.fifo"
	( printf '#allocsim-trace 1\na 1 4096 0\na 2 4096 0\n'; exec sleep 10 ) > "$TMP/int.fifo" & wpid=$!
	"$@" < "$TMP/int.fifo" > "$TMP/int.out" 2> "$TMP/int.err" & pid=$!
	# (the signal cuts the blocked read short: the command ends well before the writer's 10 s)
	sleep 0.5; t0=$(date +%s); kill -"$sig" $pid; wait $pid; st=$?; t1=$(date +%s)
	kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
	e=$(cat "$TMP/int.err")
	is "$st: ${e%%;*}, $([ $((t1 - t0)) -lt 5 ] && echo at once || echo "after $((t1 - t0)) s")" "130: allocsim: error: interrupted, at once" \
		"$name stops on SIG$sig with 130, at once (while its read of the pipe waits)"
}
interrupted TERM "replay" "$A" replay -o "$TMP/int.csv" -
ok "$([ "$st" = 130 ] && [ ! -e "$TMP/int.csv" ]; echo $?)" "the interrupted replay wrote no summary"
interrupted INT "replay -p cuda-async" "$A" replay -p cuda-async -o "$TMP/int.csv" -
interrupted TERM "info" "$A" info -
interrupted INT "convert" "$A" convert - -o "$TMP/int.trace"
ok "$([ "$st" = 130 ] && [ ! -e "$TMP/int.trace" ]; echo $?)" "the interrupted convert left no trace"
interrupted TERM "validate" "$A" validate -c "" -
# fit's bisection (every replay through as_run) stops too
awk 'BEGIN { print "#allocsim-trace 1"; for (i = 1; i <= 200000; i++) { print "a " i " " (i % 977 + 1) * 4096 " 0"; if (i > 50) print "f " i - 50 } }' > "$TMP/long.trace"
# (fit decodes the trace once, so its bisection alone ends in well under a second: 2,000
# monotonicity samples keep it busy for many seconds when the signal comes; --exact, as fit replays a
# capacity once, and to 2 MiB most of the samples fall on a few)
"$A" fit capacity --exact --samples 1000 "$TMP/long.trace" > /dev/null 2> "$TMP/int.err" & pid=$!
sleep 1; kill -INT $pid; wait $pid; st=$?
e=$(cat "$TMP/int.err")
is "$st: ${e%% after*}" "130: allocsim: error: interrupted" "fit stops on SIGINT with 130"
# the simulated device places a segment in O(log n): it walked every live range (passthrough keeps
# one per live allocation: 40,000 took 38 s)
awk 'BEGIN { print "#allocsim-trace 1"; for (i = 1; i <= 60000; i++) print "a " i " 4096 0"; for (i = 1; i <= 60000; i += 2) print "f " i; for (i = 1; i <= 15000; i++) print "a " 200000 + i " 3000000 0" }' > "$TMP/many.trace"
run timeout 20 "$A" replay -p passthrough --no-timing "$TMP/many.trace"
is "$st,$(col "$out" peak_reserved_bytes),$(col "$out" num_device_alloc),$(col "$out" num_ooms)" "0,45127680000,75000,0" "passthrough: 60,000 live segments, 30,000 freed, then 15,000 that fit none of the 2 MiB holes"
finish
