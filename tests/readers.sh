#!/bin/sh
# readers.sh - every reader on good input, and every class of malformed input: exit status 65,
# a message naming the file and the line or byte offset, and no output written.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
snap="$T/resnet50_train__default.pickle.gz"

# expect_bad FILE PATTERN DESCRIPTION: info and replay both fail with 65, the message has PATTERN.
expect_bad() {
	run "$A" info "$1"
	is "$st" 65 "$3: info exits 65"
	if contains "$errout" "$2"; then ok 0 "$3: message names the position ($2)"; else ok 1 "$3: message names the position ($2)"; echo "# $errout"; fi
	rm -f "$TMP/o.csv"
	run "$A" replay -p bestfit -o "$TMP/o.csv" "$1"
	ok $(( (st == 65 ? 0 : 1) + ($(ls "$TMP"/o.csv* 2>/dev/null | wc -l)) )) "$3: replay exits 65 and writes no output"
}

# --- native format ---
printf '#allocsim-trace 1\n#source: test\n#capacity: 4MiB\na 1 1000 0\na 2 3000000 0 t=5\nr 1\nf 1\ne\np warmup\nf 2\n' > "$TMP/ok.trace"
run "$A" info "$TMP/ok.trace"
is "$st" 0 "native: info reads a valid trace"
contains "$out" "peak_live_requested_bytes: 3001000"; ok $? "native: peak live requested bytes"
# recorded OOMs take a slot (and free it when freed) but no live bytes; slots reused; three streams
printf '#allocsim-trace 1\na 1 100 0\na 2 200 7\na 3 300 0 oom\nf 3\na 4 400 7\nf 1\na 5 50 0\na 6 60 3 oom\nf 2\n' > "$TMP/oomfree.trace"
run "$A" info "$TMP/oomfree.trace"
is "$st $(printf '%s\n' "$out" | grep -E '^(recorded_ooms|streams|live_at_end|peak_live_requested_bytes):' | tr '\n' ' ')" \
	"0 recorded_ooms: 2 streams: 3 live_at_end: 2 peak_live_requested_bytes: 700 " "native: info's live bytes with OOM requests freed and their slots reused"
printf '#allocsim-trace 1\r\na 1 4096 0\r\nf 1\r\n' > "$TMP/crlf.trace"
run "$A" replay -p passthrough --no-timing "$TMP/crlf.trace"
is "$st $(col "$out" peak_reserved_bytes)" "0 4096" "native: CRLF line ends are accepted"

printf '#allocsim-trace 1\na 1 10 0\na 1 20 0\n' > "$TMP/dup.trace";       expect_bad "$TMP/dup.trace" "dup.trace:3: allocation id 1 is already live" "native duplicate live id"
printf '#allocsim-trace 1\na 1 10 0\nf 7\n' > "$TMP/unk.trace";            expect_bad "$TMP/unk.trace" "unk.trace:3: free of unknown id 7" "native free of unknown id"
printf '#allocsim-trace 1\na 1 0 0\n' > "$TMP/zero.trace";                 expect_bad "$TMP/zero.trace" "zero.trace:2: allocation 1 has size 0" "native size 0"
printf '#allocsim-trace 1\na 1 1152921504606846976 0\n' > "$TMP/huge.trace"; expect_bad "$TMP/huge.trace" "huge.trace:2: allocation 1 has size" "native size 2^60"
printf '#allocsim-trace 1\na 1 12x 0\n' > "$TMP/num.trace";                expect_bad "$TMP/num.trace" "num.trace:2: invalid number '12x'" "native bad number"
printf '#allocsim-trace 1\na 1 99999999999999999999999 0\n' > "$TMP/ovf.trace"; expect_bad "$TMP/ovf.trace" "ovf.trace:2: invalid number" "native number overflow"
printf '#allocsim-trace 1\nz 1\n' > "$TMP/kind.trace";                     expect_bad "$TMP/kind.trace" "kind.trace:2: unknown record type 'z'" "native unknown record"
printf '#allocsim-trace 7\n' > "$TMP/ver.trace";                           expect_bad "$TMP/ver.trace" "ver.trace:1: unsupported trace format version 7" "native future version"
: > "$TMP/empty.trace";                                                   expect_bad "$TMP/empty.trace" "empty.trace: empty file" "empty file"
head -c 3000 /dev/urandom | tr -d '\200' > "$TMP/garbage.bin" 2>/dev/null; printf 'XY' | cat - "$TMP/garbage.bin" > "$TMP/garbage2.bin"
expect_bad "$TMP/garbage2.bin" "garbage2.bin: byte offset 0: unknown trace format" "binary garbage"

# --- PyTorch snapshots ---
gzip -dc "$snap" > "$TMP/snap.pickle"
run "$A" replay -c "" --no-timing "$TMP/snap.pickle"
is "$st $(col "$out" peak_reserved_bytes)" "0 7029653504" "pickle: uncompressed snapshots read the same"
size=$(wc -c < "$TMP/snap.pickle")
for cut in 1 2 11 300 $((size / 2)) $((size - 1)); do
	head -c $cut "$TMP/snap.pickle" > "$TMP/trunc$cut.pickle"
	expect_bad "$TMP/trunc$cut.pickle" "trunc$cut.pickle: byte offset" "pickle truncated at byte $cut"
done
head -c $(( $(wc -c < "$snap") / 2 )) "$snap" > "$TMP/trunc.pickle.gz"
expect_bad "$TMP/trunc.pickle.gz" "trunc.pickle.gz: truncated gzip data" "gzip truncated"
printf '\200\004cos\nsystem\n.' > "$TMP/evil.pickle"
expect_bad "$TMP/evil.pickle" "evil.pickle: byte offset 2: pickle opcode GLOBAL (0x63) would call code" "pickle GLOBAL opcode is refused"
printf '\200\004\225\000\000\000\000\000\000\000\000}\224\214\001x\224\223.' > "$TMP/sg.pickle"
expect_bad "$TMP/sg.pickle" "sg.pickle: byte offset 17: pickle opcode STACK_GLOBAL" "pickle STACK_GLOBAL opcode is refused"
printf '\200\004\377' > "$TMP/op.pickle";                                  expect_bad "$TMP/op.pickle" "op.pickle: byte offset 2: unsupported pickle opcode 0xff" "pickle unknown opcode"
printf '\200\004K\001.' > "$TMP/notdict.pickle";                          expect_bad "$TMP/notdict.pickle" "pickle is not a dict" "pickle that is not a snapshot"
# 5000 nested MARKs
{ printf '\200\004'; i=0; while [ $i -lt 5000 ]; do printf '('; i=$((i+1)); done; } > "$TMP/deep.pickle"
expect_bad "$TMP/deep.pickle" "nesting deeper than 4096" "pickle nested too deep"
printf '\200\004\212\011\001\002\003\004\005\006\007\010\011.' > "$TMP/long.pickle"; expect_bad "$TMP/long.pickle" "does not fit 64 bits" "pickle integer too large"
# a snapshot whose history lost its oldest entries (ring buffer): frees of blocks never seen are
# skipped and reported, not an error (traces/fixtures/truncated-history.pickle.gz drops 1000 entries)
run "$A" replay -c "" "$srcdir/traces/fixtures/truncated-history.pickle.gz"
is "$st" 0 "truncated history: replay succeeds"
contains "$errout" "history is truncated (19 frees"; ok $? "truncated history: reported on stderr with the count"
run "$A" info "$srcdir/traces/fixtures/truncated-history.pickle.gz"
contains "$out" "history_truncated: yes (19 frees"; ok $? "truncated history: info reports it"
run "$A" validate "$srcdir/traces/fixtures/truncated-history.pickle.gz"
is "$st" 1 "truncated history: validate cannot be exact and says why"
contains "$out" "history is truncated"; ok $? "truncated history: validate names the truncation"

# --- hostile snapshots: nesting, memo amplification, long runs (doc/reliability.md, reader limits) ---
# 500,000 nested TUPLE1 (no MARK) in a 500 KB file: refused at the 129th level, no stack overflow
{ printf '\200\004K\001'; head -c 500000 /dev/zero | tr '\000' '\205'; printf '.'; } > "$TMP/deeptuple.pickle"
expect_bad "$TMP/deeptuple.pickle" "deeptuple.pickle: byte offset 132: pickle nests containers deeper than 128" "pickle 500,000 nested tuples"
# 300,000 empty lists appended into each other
{ printf '\200\004'; head -c 300000 /dev/zero | tr '\000' ']'; head -c 300000 /dev/zero | tr '\000' 'a'; printf '.'; } > "$TMP/deeplist.pickle"
expect_bad "$TMP/deeplist.pickle" "deeplist.pickle: byte offset 300130: pickle nests containers deeper than 128" "pickle 300,000 nested lists"
# a 1 MiB string memoized once and fetched 400 times: shared, not copied (400 MiB before)
{ printf '\200\004}X\000\000\020\000'; head -c 1048576 /dev/zero | tr '\000' 'x'; printf 'q\001'
  i=0; while [ $i -lt 400 ]; do printf 'h\001'; i=$((i+1)); done; printf '.'; } > "$TMP/memo.pickle"
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f %M -o "$TMP/rss" "$A" info "$TMP/memo.pickle" > /dev/null 2> "$TMP/memo.err"; st=$?
	ok $(( (st == 65 ? 0 : 1) + ($(cat "$TMP/rss" | tail -1) < 150000 ? 0 : 1) )) "pickle memo GETs share a 1 MiB string: exit 65 with $(tail -1 "$TMP/rss") KiB peak (< 150 MiB)"
else
	ok 0 "# SKIP no /usr/bin/time"
fi
contains "$(cat "$TMP/memo.err")" "pickle STOP with 402 values"; ok $? "pickle memo amplification: the message counts the shared values"
# 262,145 segment_free entries in a row (a 25 KB .gz): the run buffer is bounded
{ printf '\200\004}(\214\015device_traces]]}(\214\006actionq\001\214\014segment_freeq\002\214\004addrq\003K\020\214\004sizeq\004K\020ua'; } > "$TMP/run.head"
printf '}(h\001h\002h\003K\020h\004K\020ua' > "$TMP/run.body"
i=0; while [ $i -lt 18 ]; do cat "$TMP/run.body" "$TMP/run.body" > "$TMP/run.2"; mv "$TMP/run.2" "$TMP/run.body"; i=$((i+1)); done
cat "$TMP/run.head" "$TMP/run.body" | { cat; printf 'au.'; } | gzip -1 > "$TMP/run.pickle.gz"
run "$A" info "$TMP/run.pickle.gz"
is "$st" 65 "pickle 262,145 segment releases in a row: exit 65"
contains "$errout" "run.pickle.gz: byte offset 4194359: trace entry 262144: more than 262144 segment releases in a row"; ok $? "pickle long release run: the message names the entry and the limit"

# --- which history: snapshot['device_traces'] of the top-level dict, last key wins, one device ---
pstr() { printf '\214'; printf "\\$(printf %03o ${#1})"; printf '%s' "$1"; }
pint() { printf "K\\$(printf %03o "$1")"; }
# pent ACTION ADDR SIZE [KEY VALUE]...: one trace entry dict
pent() { printf '}('; pstr action; pstr "$1"; pstr addr; pint "$2"; pstr size; pint "$3"; shift 3
	while [ $# -gt 0 ]; do pstr "$1"; pint "$2"; shift 2; done; printf 'u'; }
hist() { printf '\200\004}('; pstr segments; printf ']'; pstr device_traces; printf ']'; }
{ hist; printf ']'; pent alloc 16 200; printf 'aa'; pstr device_traces; printf ']]'; pent alloc 16 100; printf a; pent alloc 32 50; printf 'aau.'; } > "$TMP/dupkey.pickle"
run "$A" info "$TMP/dupkey.pickle"
is "$st $(printf '%s\n' "$out" | grep -E '^(alloc_events|peak_live_requested_bytes):' | tr '\n' ' ')" "65 " "pickle: a second 'device_traces' key after a replayed one is refused"
contains "$errout" "a second 'device_traces' key after a replayed one: Python keeps the last"; ok $? "pickle duplicate device_traces: the message says why"
{ hist; printf ']a'; pstr device_traces; printf ']]'; pent alloc 16 100; printf a; pent alloc 128 50; printf 'aau.'; } > "$TMP/dupkey2.pickle"
run "$A" info "$TMP/dupkey2.pickle"
is "$st $(printf '%s\n' "$out" | grep -E '^(alloc_events|peak_live_requested_bytes):' | tr '\n' ' ')" "0 alloc_events: 2 peak_live_requested_bytes: 150 " "pickle: duplicate 'device_traces' keys: the last one is the history, as in Python"
{ hist; printf ']'; pent alloc 16 100 size 200; printf 'aau.'; } > "$TMP/dupsize.pickle"
run "$A" info "$TMP/dupsize.pickle"
is "$st $(printf '%s\n' "$out" | grep -E '^peak_live_requested_bytes:')" "0 peak_live_requested_bytes: 200" "pickle: a trace entry's duplicate key takes the last value, as in Python"
# trace entries in a batch (MARK ... APPENDS, as the writer lays them out): turned into events as they are read
{ hist; printf ']('; pent alloc 16 100; pent alloc 128 50; pent free_requested 16 100; pent alloc 200 8; printf 'eau.'; } > "$TMP/batch.pickle"
run "$A" info "$TMP/batch.pickle"
is "$st $(printf '%s\n' "$out" | grep -E '^(alloc_events|free_requested_events|peak_live_requested_bytes):' | tr '\n' ' ')" \
	"0 alloc_events: 3 free_requested_events: 1 peak_live_requested_bytes: 158 " "pickle: a batch of trace entries (MARK ... APPENDS)"
# ... so a pickle that fetches one of them again, or pops one, before its batch is appended is refused
# (the writer never does; the old decoder read the first pickle, replaying the entry once)
{ hist; printf ']('; printf '}\224('; pstr action; pstr snapshot; pstr addr; pint 0; pstr size; pint 0; printf 'u'; pent alloc 16 100; printf 'h\000eau.'; } > "$TMP/refetch.pickle"
expect_bad "$TMP/refetch.pickle" "refetch.pickle: byte offset 105: pickle memo index 0 is undefined (or a trace entry already replayed" "pickle trace entry fetched from the memo before its batch is appended"
{ hist; printf ']('; pent alloc 16 100; pent alloc 128 50; printf '00eau.'; } > "$TMP/pop.pickle"
expect_bad "$TMP/pop.pickle" "pop.pickle: byte offset 102: pickle drops or moves a trace entry of a device's list after reading it" "pickle trace entry popped before its batch is appended"
{ hist; printf ']'; pent alloc 16 100; printf a; pent free_requested 16 100; printf a; pent free_requested 16 100; printf a; pent alloc 64 8; printf 'aau.'; } > "$TMP/req2.pickle"
expect_bad "$TMP/req2.pickle" "req2.pickle: byte offset 111: free of id 1 requested twice" "pickle free requested twice"
{ printf '\200\004}('; pstr segments; printf ']'; pstr other; printf '}'; pstr device_traces; printf ']]'; pent alloc 16 200; printf 'aasu.'; } > "$TMP/nested.pickle"
expect_bad "$TMP/nested.pickle" "nested.pickle: byte offset 78: the snapshot has no allocation history (no 'device_traces', only the end state): record it with torch.cuda.memory._record_memory_history()" "pickle 'device_traces' nested in another key is not the history"
{ printf '\200\004}('; pstr segments; printf ']u.'; } > "$TMP/nohist.pickle"
expect_bad "$TMP/nohist.pickle" "nohist.pickle: byte offset 16: the snapshot has no allocation history (no 'device_traces'" "pickle snapshot without history"
{ hist; printf ']au.'; } > "$TMP/emptyhist.pickle"
expect_bad "$TMP/emptyhist.pickle" "the snapshot has no allocation history ('device_traces' holds 1 empty device list)" "pickle snapshot with an empty history"
{ printf '\200\004}('; pstr device_traces; pint 1; printf 'u.'; } > "$TMP/notlist.pickle"
expect_bad "$TMP/notlist.pickle" "notlist.pickle: byte offset 22: the snapshot's 'device_traces' is not a list" "pickle 'device_traces' that is not a list"
{ hist; printf ']'; pint 7; printf 'aau.'; } > "$TMP/notdict.pickle"
expect_bad "$TMP/notdict.pickle" "notdict.pickle: byte offset 32: device 0's trace entry 0 is not a dict" "pickle trace entry that is not a dict"
# history on device 1 only (device 0's list empty): the default is device 1; --device 0 says so
{ hist; printf ']a]'; pent alloc 16 100; printf 'aau.'; } > "$TMP/dev1.pickle"
run "$A" info "$TMP/dev1.pickle"
is "$st $(printf '%s\n' "$out" | grep -E '^(devices|device_._history_entries|replayed_device|alloc_events):' | tr '\n' ' ')" \
	"0 devices: 2 device_0_history_entries: 0 device_1_history_entries: 1 replayed_device: 1 alloc_events: 1 " "pickle history on device 1 only: info lists the devices and reads device 1"
run "$A" replay --no-timing --device 0 "$TMP/dev1.pickle"
is "$st" 65 "pickle history on device 1 only: --device 0 exits 65"
contains "$errout" "dev1.pickle: byte offset 71: device 0 has no allocation history in this snapshot (devices with history: 1 (1 entries))"; ok $? "pickle --device 0 without history: the message lists the devices with history"
{ hist; printf '(]'; pent alloc 16 100; printf 'a]'; pent alloc 16 40; printf a; pent alloc 128 60; printf 'aeu.'; } > "$TMP/dev2.pickle"
run "$A" replay --no-timing "$TMP/dev2.pickle"
is "$st" 65 "pickle history on two devices, no --device: exit 65"
contains "$errout" "the snapshot has allocation history on 2 devices (0 (1 entries), 1 (2 entries)): choose one with --device N"; ok $? "pickle two devices: the message says how to choose"
run "$A" replay --no-timing --device 1 -p passthrough "$TMP/dev2.pickle"
is "$st $(col "$out" allocs) $(col "$out" peak_requested_bytes)" "0 2 100" "pickle --device 1 replays device 1's history"
run "$A" replay --no-timing --device 0 -p passthrough "$TMP/dev2.pickle"
is "$st $(col "$out" allocs) $(col "$out" peak_requested_bytes)" "0 1 100" "pickle --device 0 replays device 0's history"
run "$A" convert --device 1 "$TMP/dev2.pickle" -o "$TMP/dev2.trace"
is "$st $(grep -c '^a ' "$TMP/dev2.trace")" "0 2" "convert --device 1 writes device 1's history"
run "$A" sweep -t "$TMP/dev2.pickle" -p passthrough --device 1
is "$st $(col "$out" allocs) $(col "$out" peak_requested_bytes)" "0 2 100" "sweep --device 1 replays device 1's history"
run "$A" fit capacity -p passthrough --device 0 "$TMP/dev2.pickle"
is "$st $(printf '%s\n' "$out" | tail -1)" "0 2097152" "fit capacity --device 0 fits device 0's history"
run "$A" sweep -t "$TMP/dev2.pickle" -p passthrough
is "$st" 65 "sweep of a two-device snapshot without --device exits 65"
run "$A" info --device 7 "$TMP/dev2.pickle"
is "$st" 65 "info --device 7 of a two-device snapshot exits 65"
run "$A" replay --device 1 "$TMP/ok.trace"
contains "$errout" "ok.trace: a native trace holds one device (0), not device 1"; ok $? "--device 1 on a native trace is refused"
# a binary trace (convert's .asbin) holds the one device it was converted from: mapped, decoded
# for a sweep, or streamed from standard input, --device 1 is refused alike
"$A" convert --device 1 "$TMP/dev2.pickle" -o "$TMP/dev2.asbin"
run "$A" replay --device 1 "$TMP/dev2.asbin"
is "$st" 65 "replay --device 1 of a binary trace exits 65"
contains "$errout" "dev2.asbin: a binary trace holds one device (0), not device 1"; ok $? "replay --device 1 of a binary trace: the message says why"
run "$A" sweep -t "$TMP/dev2.asbin" -p passthrough --device 1
contains "$errout" "dev2.asbin: a binary trace holds one device (0), not device 1"; ok $? "sweep --device 1 of a binary trace is refused"
run sh -c "\"\$1\" replay --device 1 - < \"\$2\"" sh "$A" "$TMP/dev2.asbin"
contains "$errout" "<stdin>: a binary trace holds one device (0), not device 1"; ok $? "a binary trace from standard input: --device 1 is refused"
run "$A" replay --no-timing -p passthrough "$TMP/dev2.asbin"
is "$st $(col "$out" allocs) $(col "$out" peak_requested_bytes)" "0 2 100" "the binary form of device 1's history replays as device 0"
# containers shared through the memo (as the snapshot writer shares frames), but never a cycle
printf '\200\004]q\001h\001a.' > "$TMP/self.pickle"
expect_bad "$TMP/self.pickle" "self.pickle: byte offset 7: pickle changes a list already placed in a container, or puts it in itself" "pickle list appended to itself"
printf '\200\004]q\001]h\001a0h\001K\001a.' > "$TMP/cyc.pickle"
expect_bad "$TMP/cyc.pickle" "cyc.pickle: byte offset 14: pickle changes a list already placed in a container" "pickle list changed after it was placed in another"
# a real snapshot moved to cuda:1 (an empty list for device 0): validate reads device 1 and stays exact
py=${PYTHON:-/usr/bin/python3}; [ -x "$py" ] || py=$(command -v python3)
if [ -n "$py" ]; then
	"$py" -c 'import pickle,gzip,sys
d = pickle.loads(gzip.decompress(open(sys.argv[1], "rb").read()))
d["device_traces"] = [[], d["device_traces"][0]]
d["segments"] = [dict(s, device=1) for s in d["segments"]]
sys.stdout.buffer.write(gzip.compress(pickle.dumps(d, protocol=4)))' "$T/seed_example__default.pickle.gz" > "$TMP/moved.pickle.gz"
	run "$A" validate "$TMP/moved.pickle.gz"
	is "$st" 0 "a snapshot moved to cuda:1: validate reads device 1"
	contains "$out" ": exact ("; ok $? "a snapshot moved to cuda:1: exact, as the original ($out)"
	ok "$([ "$st" = 0 ] && ! contains "$out" "exact (0 device"; echo $?)" "a snapshot moved to cuda:1: validate compares real device calls, not none"
	run "$A" validate --device 0 "$TMP/moved.pickle.gz"
	is "$st" 65 "a snapshot moved to cuda:1: validate --device 0 exits 65 (no history there)"
	# stack frames shared between trace entries and blocks (memoized dicts, fetched again)
	"$py" -c 'import pickle,gzip,sys
d = pickle.loads(gzip.decompress(open(sys.argv[1], "rb").read()))
fr = [{"filename": "train.py", "line": i, "name": "f%d" % i} for i in range(5)]
for j, e in enumerate(d["device_traces"][0]):
    e["frames"] = [fr[j % 5], fr[(j + 1) % 5]]
for s in d["segments"]:
    for b in s["blocks"]:
        b["frames"] = [fr[0]]
sys.stdout.buffer.write(gzip.compress(pickle.dumps(d, protocol=4)))' "$T/seed_example__default.pickle.gz" > "$TMP/frames.pickle.gz"
	is "$("$A" replay --no-timing "$TMP/frames.pickle.gz" | tail -1 | cut -d, -f2-)" "$("$A" replay --no-timing "$T/seed_example__default.pickle.gz" | tail -1 | cut -d, -f2-)" "a snapshot whose entries share frame dicts replays as the one without frames"
	run "$A" validate "$TMP/frames.pickle.gz"
	contains "$out" ": exact ("; ok $? "a snapshot with shared frames validates exact"
	# the reader's fast path (pkfast.c) and its tables: 6,000 allocations and frees at 2,000 addresses
	# (the live blocks by address: collisions, deletions by backward shift; info's sizes by slot), and
	# action strings pickled inline, one entry after another alike in their first 8 bytes
	cat > "$TMP/gen.py" <<'PY'
import pickle, random, sys
def fresh(s):  # a new str object: pickled inline, not fetched from the memo
    return s[:1] + s[1:]
if sys.argv[1] == "table":
    random.seed(34)
    tr, live, t, cur, peak, na, nf = [], {}, 0, 0, 0, 0, 0
    for step in range(6000):
        t += 1
        if live and (len(live) > 400 or random.random() < 0.45):
            a = random.choice(sorted(live))
            cur -= live.pop(a); nf += 1
            tr.append({"action": "free_completed", "addr": a, "size": 0, "stream": 0, "time_us": t})
        else:
            a = 0x7f0000000000 + random.randrange(2000) * 4096
            while a in live:
                a = 0x7f0000000000 + random.randrange(2000) * 4096
            s = random.randrange(1, 4097); live[a] = s; cur += s; na += 1; peak = max(peak, cur)
            tr.append({"action": "alloc", "addr": a, "size": s, "stream": 0, "time_us": t})
    sys.stderr.write("alloc_events: %d free_events: %d live_at_end: %d peak_live_requested_bytes: %d\n" % (na, nf, len(live), peak))
else:  # (the last entries are left to the opcode loop: within 24 bytes of the end)
    seq = [("segment_alloc", 1 << 21, 2 << 20), ("segment_unmap", 4 << 21, 2 << 20), ("segment_map", 4 << 21, 2 << 20),
           ("alloc", 1 << 21, 512), ("free_requested", 1 << 21, 512), ("free_completed", 1 << 21, 512),
           ("alloc", 1 << 21, 512), ("free_completed", 1 << 21, 512), ("segment_free", 1 << 21, 2 << 20),
           ("segment_unmap", 4 << 21, 2 << 20), ("segment_alloc", 1 << 21, 2 << 20), ("segment_unmap", 4 << 21, 2 << 20),
           ("segment_alloc", 8 << 21, 2 << 20)] + [("alloc", 1 << 21, 512), ("free_completed", 1 << 21, 512)] * 4
    tr = [{"action": fresh(a), "addr": ad, "size": sz, "stream": 0, "time_us": i} for i, (a, ad, sz) in enumerate(seq)]
sys.stdout.buffer.write(pickle.dumps({"segments": [], "device_traces": [tr]}, protocol=4))
PY
	"$py" "$TMP/gen.py" table > "$TMP/table.pickle" 2> "$TMP/table.want"
	run "$A" info "$TMP/table.pickle"
	is "$st $(printf '%s\n' "$out" | grep -E '^(alloc_events|free_events|live_at_end|peak_live_requested_bytes|history_truncated):' | sed 's/ (.*//' | tr '\n' ' ')" \
		"0 $(cat "$TMP/table.want") " "pickle: 6,000 allocations and frees at 2,000 addresses: counts, live blocks and peak as Python's"
	"$py" "$TMP/gen.py" strings > "$TMP/strings.pickle"
	run "$A" info "$TMP/strings.pickle"
	is "$st $(printf '%s\n' "$out" | grep -E '^(alloc|free|segment_alloc|segment_free|segment_map|segment_unmap)_events:' | tr '\n' ' ')" \
		"0 alloc_events: 6 free_events: 6 segment_alloc_events: 3 segment_free_events: 1 segment_map_events: 1 segment_unmap_events: 3 " \
		"pickle: inline action strings alike in 8 bytes (segment_unmap, segment_alloc) are told apart"
else
	for i in 1 2 3 4 5 6 7 8; do ok 0 "# SKIP no python3"; done
fi

# --- the same snapshot from a file, standard input (a file or a pipe) and a FIFO: identical results ---
mkfifo "$TMP/fifo"
for t in "$srcdir/traces/captured/emptycache__default.pickle.gz" "$T/gpt2_train_varlen__p110_default.pickle.gz"; do
	b=$(basename "$t" .pickle.gz)
	want=$("$A" replay --no-timing "$t" | tail -1 | cut -d, -f2-)
	is "$("$A" replay --no-timing - < "$t" | tail -1 | cut -d, -f2-)" "$want" "$b: standard input redirected from the file replays identically"
	is "$(cat "$t" | "$A" replay --no-timing - | tail -1 | cut -d, -f2-)" "$want" "$b: standard input from a pipe replays identically"
	( cat "$t" > "$TMP/fifo" & )
	is "$(timeout 60 "$A" replay --no-timing "$TMP/fifo" 2>&1 | tail -1 | cut -d, -f2-)" "$want" "$b: a FIFO replays identically (no second open)"
	want=$("$A" replay --no-timing -c recorded "$t" | tail -1 | cut -d, -f2-)
	is "$(cat "$t" | "$A" replay --no-timing -c recorded - | tail -1 | cut -d, -f2-)" "$want" "$b: -c recorded from a pipe"
done
t="$srcdir/traces/captured/emptycache__default.pickle.gz"
is "$(cat "$t" | "$A" validate - | sed 's/^[^:]*://')" "$("$A" validate "$t" | sed 's/^[^:]*://')" "validate from a pipe: the same verdict as from the file"
"$A" replay --no-timing --segments "$TMP/seg1.csv" -o "$TMP/segrow1.csv" "$t"
cat "$t" | "$A" replay --no-timing --segments "$TMP/seg2.csv" -o "$TMP/segrow2.csv" -
ok "$(cmp -s "$TMP/seg1.csv" "$TMP/seg2.csv"; echo $?)" "replay --segments from a pipe (two passes over the spooled input) writes the same map"
cat "$t" | "$A" convert - -o "$TMP/piped.trace"
is "$(grep '^#allocator_settings' "$TMP/piped.trace")" "#allocator_settings: " "convert from a pipe carries the recorded settings (read at the end of the snapshot)"

# --- real snapshots from the H200 (traces/fixtures, scripts/record-reader-fixtures.py) ---
# recorded with _record_memory_history()'s defaults: stack frames on every entry, shared through the memo
f="$srcdir/traces/fixtures/default-history-frames.pickle.gz"
run "$A" replay -c recorded --no-timing "$f"
is "$st $(col "$out" peak_reserved_bytes) $(col "$out" peak_allocated_bytes) $(col "$out" num_alloc_retries)" "0 836763648 733145088 0" \
	"a real snapshot with stack frames: peak reserved and allocated bytes equal PyTorch's memory_stats()"
run "$A" validate "$f"
is "$st $out" "0 $f: exact (54 device calls, 54 end-state segments)" "a real snapshot with stack frames validates exact"
# dumped without _record_memory_history(): end state only
run "$A" replay --no-timing "$srcdir/traces/fixtures/no-history.pickle.gz"
is "$st" 65 "a real snapshot without history: exit 65"
contains "$errout" "no-history.pickle.gz: byte offset 929: the snapshot has no allocation history ('device_traces' holds 1 empty device list): record it with torch.cuda.memory._record_memory_history() before the workload runs"; ok $? "a real snapshot without history: the message says how to record one"

# --- gzip handled by the reader itself (zlib inflate over pread): members, trailing bytes, corruption ---
gzip -dc "$T/seed_example__default.pickle.gz" > "$TMP/seed.pickle"
half=$(( $(wc -c < "$TMP/seed.pickle") / 2 ))
{ head -c $half "$TMP/seed.pickle" | gzip -1; tail -c +$((half + 1)) "$TMP/seed.pickle" | gzip -9; } > "$TMP/members.pickle.gz"
want=$("$A" replay --no-timing "$TMP/seed.pickle" | tail -1 | cut -d, -f2-)
is "$("$A" replay --no-timing "$TMP/members.pickle.gz" | tail -1 | cut -d, -f2-)" "$want" "gzip: two concatenated members read as one stream"
{ gzip -c "$TMP/seed.pickle"; printf 'trailing'; } > "$TMP/trail.pickle.gz"
is "$("$A" replay --no-timing "$TMP/trail.pickle.gz" | tail -1 | cut -d, -f2-)" "$want" "gzip: bytes after the last member that are not gzip are ignored, as gzip -d does"
gzip -c "$TMP/seed.pickle" > "$TMP/crc.pickle.gz"
sz=$(wc -c < "$TMP/crc.pickle.gz")
{ head -c $((sz - 8)) "$TMP/crc.pickle.gz"; printf '\001\002\003\004'; tail -c 4 "$TMP/crc.pickle.gz"; } > "$TMP/crc2.pickle.gz"
expect_bad "$TMP/crc2.pickle.gz" "crc2.pickle.gz: corrupt compressed data near byte" "gzip with a wrong CRC"

# --- RMM logs ---
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,08:35:25:516025,allocate,0x7f0000000000,8000000,0x0\n1,08:35:25:516100,allocate,0x7f0001000000,100,0x0\n1,08:35:25:516230,free,0x7f0000000000,8000000,0x0\n1,08:35:25:516300,allocate failure,0x0,999,0x0\n1,08:35:25:516400,deallocate,0x7f0001000000,100,0x0\n' > "$TMP/rmm.csv"
run "$A" replay -p passthrough --no-timing "$TMP/rmm.csv"
is "$st $(col "$out" allocs) $(col "$out" frees) $(col "$out" peak_requested_bytes)" "0 3 2 8000100" "rmm: allocate, allocate failure, free and deallocate"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10,5,0x0\n1,0,explode,0x10,5,0x0\n' > "$TMP/rmmbad.csv"; expect_bad "$TMP/rmmbad.csv" "rmmbad.csv:3: unknown action 'explode'" "rmm unknown action"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0,free,0x10,5,0x0\n' > "$TMP/rmmfree.csv"; expect_bad "$TMP/rmmfree.csv" "rmmfree.csv:2: free of a pointer that is not allocated" "rmm free of unknown pointer"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10,5q,0x0\n' > "$TMP/rmmnum.csv"; expect_bad "$TMP/rmmnum.csv" "rmmnum.csv:2: invalid size '5q'" "rmm bad number"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10\n' > "$TMP/rmmshort.csv"; expect_bad "$TMP/rmmshort.csv" "rmmshort.csv:2: expected 6 fields" "rmm short line"
printf 'Thread,Time,Action,Pointer,Size,Stream\nmain,0,allocate,0x10,5,0x0\n' > "$TMP/rmmthr.csv"; expect_bad "$TMP/rmmthr.csv" "rmmthr.csv:2: invalid thread 'main'" "rmm thread not a number"
# the Thread column is kept: convert writes it as th= and reads it back
printf 'Thread,Time,Action,Pointer,Size,Stream\n7,0,allocate,0x10,5,0x0\n9,1,allocate,0x20,6,0x0\n7,2,free,0x10,5,0x0\n' > "$TMP/rmmthreads.csv"
run "$A" convert "$TMP/rmmthreads.csv" -o "$TMP/thr.trace"
is "$(grep -v '^#' "$TMP/thr.trace" | tr '\n' '|')" "a 1 5 0 t=0 th=7 addr=0x10|a 2 6 0 t=1 th=9 addr=0x20|f 1 t=2 th=7 s=0x0|" "rmm: the Thread column becomes th= in the native format, a free's Stream s="
# the time as RMM's logger writes it since 0.16 (spdlog "%t,%H:%M:%S.%f"), and as 0.15 did ("%H:%M:%S:%f")
printf 'Thread,Time,Action,Pointer,Size,Stream\n140231,08:35:25.516025,allocate,0x7f5e4c000000,1000,0x2\n140231,08:35:25:516100,free,0x7f5e4c000000,1000,0x2\n' > "$TMP/rmmdot.csv"
run "$A" convert "$TMP/rmmdot.csv" -o "$TMP/dot.trace"
is "$st $(grep -v '^#' "$TMP/dot.trace" | tr '\n' '|')" "0 a 1 1000 2 t=30925516025 th=140231 addr=0x7f5e4c000000|f 1 t=30925516100 th=140231 s=0x2|" "rmm: HH:MM:SS.micro (RMM's logger since 0.16) and HH:MM:SS:micro times"
run "$A" convert "$TMP/thr.trace" -o "$TMP/thr2.trace"
is "$(cat "$TMP/thr2.trace")" "$(cat "$TMP/thr.trace")" "native: th= reads back unchanged"
printf '#allocsim-trace 1\ne th=3\n' > "$TMP/thbad.trace"; expect_bad "$TMP/thbad.trace" "thbad.trace:2: invalid field 'th=3'" "native: th= only on a, r and f records"

# --- missing input ---
run "$A" info "$TMP/does-not-exist"
is "$st" 66 "missing input exits 66"
contains "$errout" "cannot open '$TMP/does-not-exist'"; ok $? "missing input message names the file"

# --- convert round trip: the native form replays to the same numbers, from a file and from stdin ---
run "$A" convert "$snap" -o "$TMP/rt.trace.gz"
is "$st" 0 "convert writes a gzip'd native trace"
a=$("$A" replay -c "" --no-timing "$snap" | tail -1 | cut -d, -f2-)
b=$("$A" replay -c "" --no-timing "$TMP/rt.trace.gz" | tail -1 | cut -d, -f2-)
is "$b" "$a" "a converted snapshot replays to the identical summary row"
b=$(gzip -dc "$TMP/rt.trace.gz" | "$A" replay -c "" --no-timing - | tail -1 | cut -d, -f2-)
is "$b" "$a" "replay reads a native trace from standard input"
gzip -dc "$TMP/rt.trace.gz" | head -6 > "$TMP/head.txt"
# --- pinned host logs (op,id,size,ptr: scripts/capture-beyond.py's pinned scenario) ---
printf 'op,id,size,ptr\na,1,10,4096\na,2,5000,0x20000\nf,1,0,0\nd,1,0,0\nf,2,0,0\ne,0,0,0\n' > "$TMP/h.host.csv"
run "$A" convert "$TMP/h.host.csv" -o "$TMP/h.trace"
is "$st $(grep -v '^#' "$TMP/h.trace" | tr '\n' '|')" "0 a 1 10 0 addr=0x1000|a 2 5000 0 addr=0x20000|r 1|f 1|r 2|e|" \
	"host log: a becomes an alloc at its ptr, f a free request, d the completed free, e empty_cache"
run "$A" replay -p pytorch-pinned --no-timing "$TMP/h.host.csv"
is "$st $(col "$out" peak_reserved_bytes) $(col "$out" final_reserved_bytes) $(col "$out" num_device_alloc)" "0 8208 8192 2" \
	"host log: pytorch-pinned holds 16 + 8192 pinned bytes; empty_cache frees the 16 B block, the 8 KiB one waits for its event"
# PyTorch saw an event complete before the capture's own poll did: a request at the ptr of a block whose
# d has not come yet reused it, so its free (and every one before it) completes there; the late d goes
printf 'op,id,size,ptr\na,1,100,4096\nf,1,0,0\na,2,4000,8192\nf,2,0,0\na,3,100,4096\nd,2,0,0\nd,1,0,0\n' > "$TMP/early1.csv"
run "$A" convert "$TMP/early1.csv" -o "$TMP/early1.trace"
is "$st $(grep -v '^#' "$TMP/early1.trace" | tr '\n' '|')" "0 a 1 100 0 addr=0x1000|r 1|a 2 4000 0 addr=0x2000|r 2|f 1|a 3 100 0 addr=0x1000|f 2|" \
	"host log: a request at a pending block's ptr completes that free first; its later d line is dropped"
printf 'op,id,size,ptr\na,1,100,4096\na,2,4000,8192\nf,1,0,0\nf,2,0,0\na,3,4000,8192\nd,1,0,0\nd,2,0,0\n' > "$TMP/early2.csv"
run "$A" convert "$TMP/early2.csv" -o "$TMP/early2.trace"
is "$st $(grep -v '^#' "$TMP/early2.trace" | tr '\n' '|')" "0 a 1 100 0 addr=0x1000|a 2 4000 0 addr=0x2000|r 1|r 2|f 1|f 2|a 3 4000 0 addr=0x2000|" \
	"host log: and every free before it (events complete in order on the copy stream)"
printf 'op,id,size,ptr\na,1,100,4096\nf,1,0,0\na,2,100,4096\na,1,100,65536\n' > "$TMP/hre.csv"; expect_bad "$TMP/hre.csv" "hre.csv:5: id 1 allocated again before the d line of its earlier allocation" "host log id reused before its late d"
printf 'op,id,size,ptr\na,1,10,4096\nx,1,0,0\n' > "$TMP/hop.csv";         expect_bad "$TMP/hop.csv" "hop.csv:3: unknown op (expected a, f, d or e) 'x'" "host log unknown op"
printf 'op,id,size,ptr\na,1,10,4096\nd,1,0,0\n' > "$TMP/hd.csv";          expect_bad "$TMP/hd.csv" "hd.csv:3: event of id 1 completed (op d) before the program freed it (op f)" "host log d before f"
printf 'op,id,size,ptr\nf,3,0,0\n' > "$TMP/hf.csv";                        expect_bad "$TMP/hf.csv" "hf.csv:2: free of unknown id 3" "host log free of unknown id"
printf 'op,id,size,ptr\na,1,10,4096\nf,1,0,0\nf,1,0,0\n' > "$TMP/hff.csv"; expect_bad "$TMP/hff.csv" "hff.csv:4: free of id 1 requested twice" "host log freed twice"
printf 'op,id,size,ptr\na,1,1z,4096\n' > "$TMP/hn.csv";                    expect_bad "$TMP/hn.csv" "hn.csv:2: invalid size '1z'" "host log bad number"
printf 'op,id,size,ptr\na,1,10\n' > "$TMP/hs.csv";                         expect_bad "$TMP/hs.csv" "hs.csv:2: expected 4 fields (op,id,size,ptr)" "host log short line"
printf 'op,id,size,ptr\na,1,10,4096,7\n' > "$TMP/hl.csv";                  expect_bad "$TMP/hl.csv" "hl.csv:2: too many fields" "host log long line"
printf 'op,id,size,ptr\ne,0,5,0\n' > "$TMP/he.csv";                        expect_bad "$TMP/he.csv" "he.csv:2: size and ptr must be 0 but for an allocation (op a)" "host log size on an empty_cache"
printf 'op,id,size,ptr\na,1,0,4096\n' > "$TMP/hz.csv";                     expect_bad "$TMP/hz.csv" "hz.csv:2: allocation 1 has size 0" "host log size 0"
printf 'op,id,size,ptr\na,1,4096,4096\na,2,16,8000\n' > "$TMP/ho.csv";     expect_bad "$TMP/ho.csv" "ho.csv:3:" "host log overlapping live blocks"
printf 'op,id,size,ptr,x\n' > "$TMP/hh.csv";                                expect_bad "$TMP/hh.csv" "hh.csv:1: bad pinned host log header" "host log bad header"

contains "$(cat "$TMP/head.txt")" "#allocsim-trace 1"; ok $? "converted trace starts with the versioned header"
contains "$(cat "$TMP/head.txt")" "#allocator_settings: "; ok $? "converted trace carries the recorded allocator settings"
run "$A" convert "$TMP/unk.trace" -o "$TMP/never.trace"
ok $(( (st == 65 ? 0 : 1) + $(ls "$TMP"/never.trace* 2>/dev/null | wc -l) )) "convert of bad input writes nothing"
finish
