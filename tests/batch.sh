#!/bin/sh
# batch.sh - what a platform engineer running allocsim over many files relies on: --keep-going,
# durable rows after SIGKILL and --resume from the journal, quiet batches, closed pipes, refused
# output names and headers, info's machine-readable output, progress that ends with the work.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
snap="$T/bert_infer_varlen__default.pickle.gz"
mid="$T/resnet50_train__default.pickle.gz"

# ---- an RMM log whose header misnames a column is refused, naming file, line and column ----
printf 'Thread,Time,Action,Pointer,Size,StreamID\n1,1,allocate,0x1000000,1024,0x5\n1,2,free,0x1000000,1024,0x7\n' > "$TMP/hdr.csv"
run "$A" info "$TMP/hdr.csv"
is "$st: ${errout%%(*}" "65: allocsim: error: $TMP/hdr.csv:1: bad RMM log header: column 6 is 'StreamID', expected 'Stream' " \
	"an RMM log whose last header column is misnamed: exit 65, naming file, line and column"
printf 'Thread,Time,Action,Pointer,Size,Stream,Extra\n1,1,allocate,0x1000000,1024,0x5\n' > "$TMP/hdr7.csv"
run "$A" info "$TMP/hdr7.csv"
contains "$st: $errout" "65: allocsim: error: $TMP/hdr7.csv:1: bad RMM log header: column 7 ('Extra')"; ok $? "a seventh header column is refused"
printf 'Thread,Time,Action,Pointer,Size,Stream\r\n1,1,allocate,0x1000000,1024,0x5\r\n1,2,free,0x1000000,1024,0x7\r\n' > "$TMP/crlf.csv"
run "$A" info "$TMP/crlf.csv"
is "$st $(printf '%s\n' "$out" | grep '^alloc_events:')" "0 alloc_events: 1" "the right header with CRLF line ends is read"

finish
