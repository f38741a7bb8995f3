#!/bin/sh
# perf.sh - decode once (every command reads its input once) and the binary event format.
# The round trip of every bundled trace through the binary format is in tests/perf-long.sh
# (make check-long).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
snap="$T/gpt2_train_varlen__default.pickle.gz"
snap2="$T/bert_infer_varlen__default.pickle.gz"
# rows without the trace name (the first column; the run index and parameters for sweep)
rows() { cut -d, -f2-; }

# --- decode once: standard input can be read only once, so these fail when a command re-reads ---
a=$("$A" replay -c recorded --no-timing "$snap" | tail -1 | rows)
b=$("$A" replay -c recorded --no-timing - < "$snap" | tail -1 | rows)
is "$b" "$a" "replay -c recorded reads a snapshot once (from standard input, the same row as from the file)"
a=$("$A" replay -c "" --no-timing --segments "$TMP/seg-file.csv" "$snap2" | tail -1 | rows)
b=$("$A" replay -c "" --no-timing --segments "$TMP/seg-stdin.csv" - < "$snap2" | tail -1 | rows)
is "$b" "$a" "replay --segments replays its second pass from memory (standard input works)"
cmp -s "$TMP/seg-file.csv" "$TMP/seg-stdin.csv"; ok $? "the segment map from standard input equals the file's"
"$A" sweep -t "$snap" --param max_split_size_mb=none,20,64 | cut -d, -f1,2,4- > "$TMP/sw-file.csv"
"$A" sweep -t - --param max_split_size_mb=none,20,64 < "$snap" | cut -d, -f1,2,4- > "$TMP/sw-stdin.csv"
is "$(wc -l < "$TMP/sw-stdin.csv")" 4 "sweep from standard input: a header and 3 rows"
cmp -s "$TMP/sw-file.csv" "$TMP/sw-stdin.csv"; ok $? "sweep decodes its trace once: 3 runs from standard input equal the file's"
a=$("$A" fit capacity "$snap" | tail -1)
b=$("$A" fit capacity - < "$snap" | tail -1)
is "$b" "$a" "fit capacity decodes its trace once (standard input: the same capacity)"
contains "$a" "" && [ "$a" -gt 0 ] 2>/dev/null; ok $? "fit capacity prints a capacity in bytes ($a)"
gzip -dc "$snap" | "$A" convert - -o "$TMP/stdin.trace"
grep -q '^#allocator_settings: ' "$TMP/stdin.trace"; ok $? "convert from standard input carries the snapshot's settings (read once)"
"$A" convert "$snap" -o "$TMP/file.trace"
cmp -s "$TMP/stdin.trace" "$TMP/file.trace"; ok $? "convert from standard input equals convert from the file"

# --- the heap on huge pages (src/util/heap.c) changes no result ---
"$A" replay -c recorded --no-timing --stats "$TMP/huge-stats.csv" "$snap" > "$TMP/huge.csv"
ALLOCSIM_SMALL_PAGES=1 "$A" replay -c recorded --no-timing --stats "$TMP/small-stats.csv" "$snap" > "$TMP/small.csv"
grep -q '^num_alloc_retries,' "$TMP/huge-stats.csv" && cmp -s "$TMP/huge-stats.csv" "$TMP/small-stats.csv"; ok $? "replay --stats: the same memory_stats() with the heap on huge pages and on 4 KiB pages"
a=$(tail -1 "$TMP/huge.csv" | rows); b=$(tail -1 "$TMP/small.csv" | rows)
[ -n "$a" ] && [ "$a" = "$b" ]; ok $? "and the same summary row"
# ... and is there: where the kernel offers transparent huge pages, a replay of the snapshot makes
# a fraction of the page faults it makes on 4 KiB pages (65 against 689 more than `true` makes, on
# the development VM). A build without the CUDA runtime, which allocates nothing before main, once
# left the heap on small pages (792 against 678). Skipped where the faults cannot be counted, where
# the kernel's huge pages are off, and under valgrind or the sanitizers (their malloc is not glibc's).
# faults CMD...: the minor page faults of CMD, less those of `true` started the same way (a Python
# whose spawn forks counts the child's copy-on-write faults too)
faults() { "${PYTHON:-python3}" -c 'import os, resource, sys
def run(argv):
    f0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    fd = os.open(os.devnull, os.O_WRONLY)
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
    os.close(fd)
    if os.waitpid(pid, 0)[1]:
        sys.exit(1)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - f0
base = run(["true"])
print(max(run(sys.argv[1:]) - base, 0))' "$@" 2>/dev/null; }
# maxrss CMD...: CMD's peak resident memory in KB (GNU time: its fork is small, where a Python's
# spawn would count the interpreter's own pages as the child's)
maxrss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
why=
case "$thp" in *"[always]"*|*"[madvise]"*) ;; *) why="transparent huge pages off ($thp)";; esac
[ -n "$ALLOCSIM_SAN" ] && why="a sanitizer build"
case "$A" in *valgrind*) why="under valgrind";; esac
[ -z "$why" ] && ! faults true >/dev/null && why="no Python to count page faults"
[ -z "$why" ] && ! [ -x /usr/bin/time ] && why="no GNU time (/usr/bin/time) to measure peak memory"
if [ -n "$why" ]; then
	n=$((n + 1)); echo "ok $n - the heap on huge pages makes fewer page faults # SKIP $why"
else
	fh=$(faults "$A" replay -c recorded --no-timing "$snap")
	fs=$(ALLOCSIM_SMALL_PAGES=1 faults "$A" replay -c recorded --no-timing "$snap")
	[ -n "$fh" ] && [ -n "$fs" ] && [ "$fh" -gt 0 ] && [ $((fh * 3)) -lt "$fs" ]
	ok $? "the heap on huge pages: a replay makes under a third of the page faults it makes on 4 KiB pages ($fh vs $fs)"
	# start-up faults no huge page: the heap's first 128 KiB of blocks stay on 4 KiB pages, so a
	# replay of an empty trace (stdio's buffer, the options, the policy) holds no more memory than on
	# 4 KiB pages (before: 2 MiB more, 0.3 ms of its 1 ms start-up zeroing that page)
	printf '#allocsim-trace 1\n' > "$TMP/empty34.trace"
	"$A" convert "$TMP/empty34.trace" -o "$TMP/empty34.asbin"
	rh=$(maxrss "$A" replay -p pytorch -c "" --no-timing "$TMP/empty34.asbin")
	rs=$(ALLOCSIM_SMALL_PAGES=1 maxrss "$A" replay -p pytorch -c "" --no-timing "$TMP/empty34.asbin")
	# the replay must have run (a summary row), or a stand-in that exits at once would pass
	"$A" replay -p pytorch -c "" --no-timing "$TMP/empty34.asbin" 2>/dev/null | grep -q '^trace,policy,' &&
	[ -n "$rh" ] && [ -n "$rs" ] && [ "$rh" -gt 0 ] && [ "$rh" -lt $((rs + 1024)) ]
	ok $? "an empty replay's peak RSS on the huge-page heap is within 1 MiB of 4 KiB pages' ($rh vs $rs KB): start-up touches no huge page"
fi

# --- sweep output does not depend on -j ---
"$A" sweep -t "$snap" "$snap2" -p pytorch -p bestfit --param capacity=1GiB,2GiB,4GiB -j 1 > "$TMP/j1.csv"
"$A" sweep -t "$snap" "$snap2" -p pytorch -p bestfit --param capacity=1GiB,2GiB,4GiB -j 5 > "$TMP/j5.csv"
is "$(wc -l < "$TMP/j1.csv")" 13 "sweep of 2 traces x 2 policies x 3 capacities: 12 rows"
cmp -s "$TMP/j1.csv" "$TMP/j5.csv"; ok $? "sweep rows are byte-identical with -j 1 and -j 5 (threads share the decoded traces)"

# --- a sweep replays once the configurations the policy proves identical (AS_Q_SAME_RUN) ---
# BERT's largest segment is between 330 and 360 MiB: max_split_size_mb values above it share the
# run of 'none', those at or below it replay; a capacity of 3 GiB makes the runs flush and retry.
grid="--param max_split_size_mb=none,20,200,330,340,350,360,1000 --param garbage_collection_threshold=none,0.5 --param capacity=none,3GiB"
"$A" sweep -t "$snap" "$snap2" $grid -j 1 --no-share > "$TMP/share-no.csv"
"$A" sweep -t "$snap" "$snap2" $grid -j 1 > "$TMP/share-1.csv"
"$A" sweep -t "$snap" "$snap2" $grid -j 3 > "$TMP/share-3.csv"
is "$(wc -l < "$TMP/share-no.csv")" 65 "sweep of 2 traces x 8 limits x 2 thresholds x 2 capacities: 64 rows"
cmp -s "$TMP/share-no.csv" "$TMP/share-1.csv"; ok $? "rows of shared runs are the rows their own replays write (-j 1)"
cmp -s "$TMP/share-no.csv" "$TMP/share-3.csv"; ok $? "rows of shared runs are the rows their own replays write (-j 3)"
nshared=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "num_alloc_retries") c = i; next }
	$2 >= 340 && $2 != "none" && $3 == "none" && $5 ~ /bert/ && $c > 0' "$TMP/share-no.csv" | wc -l) # (a config without a comma)
is "$nshared" 4 "the shared limits (340 MiB and up) meet the fallback's oversize release and flush at 3 GiB (retries in 4 rows)"

# --- the binary event format (doc/trace-format.md) ---
"$A" sweep -t "$snap" "$snap2" -p pytorch --param expandable_segments=True --param max_split_size_mb=none,64 | cut -d, -f1-3,5- > "$TMP/rt-src.csv"
"$A" convert "$snap2" -o "$TMP/s2.asbin"
"$A" convert "$snap" -o "$TMP/s1.asbin"
"$A" sweep -t "$TMP/s1.asbin" "$TMP/s2.asbin" -p pytorch --param expandable_segments=True --param max_split_size_mb=none,64 | cut -d, -f1-3,5- > "$TMP/rt-bin.csv"
cmp -s "$TMP/rt-src.csv" "$TMP/rt-bin.csv"; ok $? "binary round trip with expandable segments and max_split_size_mb: the same rows"
a=$("$A" replay -c recorded --no-timing "$snap" | tail -1 | rows)
"$A" convert "$snap" -o "$TMP/g.asbin"
b=$("$A" replay -c recorded --no-timing "$TMP/g.asbin" | tail -1 | rows)
is "$b" "$a" "replay -c recorded of the binary form (read in chunks) equals the snapshot's row"
b=$("$A" replay -c recorded --no-timing - < "$TMP/g.asbin" | tail -1 | rows)
is "$b" "$a" "the binary form streamed from standard input gives the same row"
is "$("$A" info "$TMP/g.asbin" | sed -n 2p)" "format: binary (converted from pytorch)" "info names the binary format and the one it came from"
# (a binary trace holds the one device it was converted from: no per-device history lines, and not
# the snapshot's fields: no pytorch_version)
a=$("$A" info "$snap" | tail -n +3 | grep -Ev '^(devices|device_[0-9]+_history_entries|replayed_device|pytorch_version):'); b=$("$A" info "$TMP/g.asbin" | tail -n +3)
is "$b" "$a" "info of the binary form prints the snapshot's counts, settings and histogram"
"$A" convert "$TMP/g.asbin" -o "$TMP/g2.asbin"
cmp -s "$TMP/g.asbin" "$TMP/g2.asbin"; ok $? "converting a binary trace to binary gives the same bytes"
is "$(head -c 8 "$TMP/g.asbin" | od -An -c | tr -s ' ')" " 211 A S I M E V \\n" "the file starts with the magic \\x89ASIMEV\\n"

run "$A" validate "$TMP/g.asbin"; is "$st" 64 "validate refuses a binary trace (it keeps no end-state segments)"
contains "$errout" "g.asbin: a binary trace keeps no end-state segments; validate the snapshot it was made from"; ok $? "and says why"

# corrupt and truncated binary files: exit 65, the file and byte offset named, nothing replayed
printf '#allocsim-trace 1\n#allocator_settings: max_split_size_mb:64\na 7 1000 0\np start\na 9 3000 1\nr 7\nf 9\nf 7\n' > "$TMP/s.trace"
"$A" convert "$TMP/s.trace" -o "$TMP/s.asbin"
u64() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
nset=$(u64 "$TMP/s.asbin" 40); nlab=$(u64 "$TMP/s.asbin" 32)
is "$nset $nlab $(u64 "$TMP/s.asbin" 16) $(u64 "$TMP/s.asbin" 24)" "21 6 6 2" "header: settings and label bytes, 6 records, 2 slots"
rec0=$(( 256 + (nset + nlab + 7) / 8 * 8 ))
size=$(wc -c < "$TMP/s.asbin")
is "$size" $(( rec0 + 56 * 6 )) "file size = header + strings (padded to 8) + 56 bytes per record"
a=$("$A" replay -c recorded --no-timing "$TMP/s.trace" | tail -1 | rows)
b=$("$A" replay -c recorded --no-timing "$TMP/s.asbin" | tail -1 | rows)
is "$b" "$a" "a small native trace with a phase and a cross-stream free replays the same from its binary form"
printf '#allocsim-trace 1\na 1 1000 0 th=77\nf 1\n' > "$TMP/th.trace"
"$A" convert "$TMP/th.trace" -o "$TMP/th.asbin"; "$A" convert "$TMP/th.asbin" -o "$TMP/th2.trace"
is "$(grep '^a ' "$TMP/th2.trace")" "a 1 1000 0 th=77" "the requesting thread travels through the binary format"
patch() { cp "$TMP/s.asbin" "$TMP/bad.asbin"; printf "$2" | dd of="$TMP/bad.asbin" bs=1 seek="$1" conv=notrunc 2>/dev/null; }
bad_bin() { # FILE MESSAGE WHAT
	run "$A" replay -c "" --no-timing "$1"; is "$st" 65 "$3: exit 65"
	contains "$errout" "$2"; ok $? "$3: '$2'"; ok "$([ "$st" = 65 ] && [ -z "$out" ]; echo $?)" "$3: exit 65, nothing written"
	run "$A" info - < "$1"; is "$st" 65 "$3 (streamed): exit 65"
	# replay reads a binary file in chunks, sweep maps it: the same checks, the same message
	run "$A" sweep -p passthrough -t "$1"; is "$st" 65 "$3 (mapped: sweep): exit 65"
	contains "$errout" "$2"; ok $? "$3 (mapped: sweep): the same message"
}
head -c $((size - 20)) "$TMP/s.asbin" > "$TMP/trunc.asbin"
bad_bin "$TMP/trunc.asbin" "trunc.asbin: byte offset $((size - 20)): truncated binary trace: the header describes $size bytes, the file has $((size - 20))" "truncated binary trace"
head -c 100 "$TMP/s.asbin" > "$TMP/short.asbin"
bad_bin "$TMP/short.asbin" "short.asbin: byte offset 100: truncated binary trace: 100 bytes, shorter than its 256-byte header" "binary trace shorter than its header"
patch 8 '\003'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset 8: unsupported binary trace version 3 (this allocsim reads versions 1 to 2)" "unknown version"
patch $((rec0 + 5 * 56)) '\310'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset $((rec0 + 280)): record 5: unknown event type" "record with an unknown type"
patch $((rec0 + 5 * 56)) '\001'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset $((rec0 + 280)): record 5: free of a slot requested twice" "a free requested twice"
patch $((rec0 + 56 + 24)) '\377'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset $((rec0 + 56)): record 1: phase label offset is not the start of a label" "phase label outside the labels"
patch $rec0 '\002'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset $rec0: record 0: free of a slot that is not live" "free of a slot never allocated"
patch $((rec0 + 4)) '\377\377\377\177'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset $rec0: record 0: slot beyond the header's slot count" "slot out of range"
patch $((rec0 + 8)) '\000\000\000\000\000\000\000\000'
bad_bin "$TMP/bad.asbin" "bad.asbin: byte offset $rec0: record 0: allocation size out of range" "allocation of 0 bytes"
cp "$TMP/s.asbin" "$TMP/long.asbin"; printf 'xxxxxxxx' >> "$TMP/long.asbin"
run "$A" replay -c "" --no-timing "$TMP/long.asbin"; is "$st" 65 "data after the last record: exit 65"
contains "$errout" "overlong binary trace"; ok $? "data after the last record is named"
run "$A" convert "$TMP/bad.asbin" -o "$TMP/never.asbin"
ok $(( (st == 65 ? 0 : 1) + $(ls "$TMP"/never.asbin* 2>/dev/null | wc -l) )) "convert of a bad binary trace writes nothing"

# replay reads a binary file in chunks of 512 records: a bad record past the first chunk is named
# as the mapping names it, and a replay that stops early (--stop-at-oom) still checks the rest
awk 'BEGIN{print "#allocsim-trace 1"; for (i = 1; i <= 600; i++) print "a", i, 1048576, 0; for (i = 1; i <= 600; i++) print "f", i}' > "$TMP/big.trace"
"$A" convert "$TMP/big.trace" -o "$TMP/big.asbin"
rb=$(( 256 + 700 * 56 ))
cp "$TMP/big.asbin" "$TMP/bad700.asbin"; printf '\377' | dd of="$TMP/bad700.asbin" bs=1 seek=$rb conv=notrunc 2>/dev/null
bad_bin "$TMP/bad700.asbin" "bad700.asbin: byte offset $rb: record 700: unknown event type" "a bad record in the second chunk"
run "$A" replay -c "" --no-timing --capacity 100MiB --stop-at-oom "$TMP/big.asbin"
is "$st:$(printf '%s\n' "$out" | tail -1 | cut -d, -f5,16)" "0:101,1" "--stop-at-oom on the good file: the replay ends at the first OOM (101 events)"
run "$A" replay -c "" --no-timing --capacity 100MiB --stop-at-oom "$TMP/bad700.asbin"
is "$st" 65 "--stop-at-oom before a bad record: the rest of the file is checked all the same (exit 65)"
contains "$errout" "record 700: unknown event type"; ok $? "and the bad record is named"
run "$A" replay -c "" --no-timing -p optimal "$TMP/bad700.asbin"
is "$st" 65 "an offline policy (mapped for its first pass): exit 65"
contains "$errout" "bad700.asbin: byte offset $rb: record 700: unknown event type"; ok $? "with the same message"

# replay --cache: TRACE.asbin beside the trace, used while the trace is unchanged
cp "$snap" "$TMP/c.pickle.gz"
a=$("$A" replay -c "" --no-timing "$snap" | tail -1 | rows)
b=$("$A" replay --cache -c "" --no-timing "$TMP/c.pickle.gz" | tail -1 | rows)
is "$b" "$a" "replay --cache gives the trace's row"
[ -s "$TMP/c.pickle.gz.asbin" ]; ok $? "replay --cache writes TRACE.asbin"
b=$("$A" replay --cache -c "" --no-timing "$TMP/c.pickle.gz" | tail -1 | rows)
is "$b" "$a" "replay --cache from the kept cache gives the same row"
cp "$snap2" "$TMP/c.pickle.gz"
a=$("$A" replay -c "" --no-timing "$snap2" | tail -1 | rows)
b=$("$A" replay --cache -c "" --no-timing "$TMP/c.pickle.gz" | tail -1 | rows)
is "$b" "$a" "a trace replaced under the same name is decoded again (the cache is not stale)"
echo "not ours" > "$TMP/d.pickle.gz.asbin"; cp "$snap" "$TMP/d.pickle.gz"
run "$A" replay --cache -c "" "$TMP/d.pickle.gz"; is "$st" 64 "--cache does not overwrite a file that is not a binary trace"
is "$st: $(cat "$TMP/d.pickle.gz.asbin")" "64: not ours" "that file is left as it was"
finish
