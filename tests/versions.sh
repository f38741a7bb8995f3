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
is "$(od -An -tx1 -N2 "$TMP/p4.pickle" | tr -d ' ')|$(od -An -tx1 -N2 "$TMP/p2.pickle" | tr -d ' ')" "8004|8002" \
	"protocols: the bundled snapshot is protocol 4, the fixture protocol 2"
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
	ok $(( (st == 0 ? 0 : 1) + ($(wc -c < "$TMP/ref.csv") > 100 ? 0 : 1) )) "protocols: protocol $pr replays (exit $st)"
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

finish
