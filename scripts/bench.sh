#!/bin/sh
# bench.sh - speed and memory as ratios against baselines measured in the same run (issue 15's
# targets, each printed beside its measurement). Never a timed test: `make check` does not run it.
# Times are CPU seconds (user + system, children included; best of BENCH_RUNS), which a busy shared
# machine disturbs less than wall time; the 1000-configuration sweep also prints its wall time.
# usage: scripts/bench.sh [ALLOCSIM [TRACES_DIR]]     (make bench)
# Environment: PYTHON (default python3; the pickle.load baseline is skipped without it),
#   BENCH_RUNS (best of N times, default 3), BENCH_BIG (events of the large generated trace,
#   default 10000000; its RSS is compared with a tenth of it), BENCH_JOBS (sweep threads, default nproc),
#   BENCH_ONLY=issue34 (issue 34's lines alone), BENCH_ONLY=jobs (the -j lines alone), BENCH_JN (their
#   -j, default 2; skipped on nproc <= BENCH_JN), CC (builds scripts/pkwalk.c, the decoder's baseline).
set -e
A=${1:-./allocsim}; D=${2:-traces}
PY=${PYTHON:-python3}
RUNS=${BENCH_RUNS:-3}
BIG=${BENCH_BIG:-10000000}
JOBS=${BENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
calc() { awk "BEGIN{printf \"%.6f\", ($1)}"; }
# best of $RUNS CPU times (user + system, children included) of a command, in seconds
best() {
	b=; i=0
	while [ $i -lt "$RUNS" ]; do
		t=$(/usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.6f", $1 + $2}')
		if [ -z "$b" ] || [ "$(calc "$t < $b")" = 1.000000 ]; then b=$t; fi
		i=$((i + 1))
	done
	echo "$b"
}
# best of $RUNS wall times of a command, in seconds (its output discarded)
best_wall() {
	b=; i=0
	while [ $i -lt "$RUNS" ]; do
		t0=$(now)
		"$@" >/dev/null 2>&1
		t=$(calc "$(now) - $t0")
		if [ -z "$b" ] || [ "$(calc "$t < $b")" = 1.000000 ]; then b=$t; fi
		i=$((i + 1))
	done
	echo "$b"
}
# verdict MEASURED OP TARGET: "met" or "NOT MET"
verdict() { if [ "$(calc "$1 $2 $3")" = 1.000000 ]; then echo met; else echo "NOT MET"; fi; }
# best_each REPS "FILES" CMD...: best CPU time of running CMD FILE for every FILE (a process
# each), REPS times over (for runs shorter than the 10 ms resolution), divided by REPS; with FILES
# empty, CMD alone
best_each() {
	reps=$1; list=$2; shift 2
	t=$(best sh -c 'r=$1; l=$2; shift 2; while [ $r -gt 0 ]; do if [ -z "$l" ]; then "$@" >/dev/null 2>&1 || exit 1; else for f in $l; do "$@" "$f" >/dev/null 2>&1 || exit 1; done; fi; r=$((r - 1)); done' sh "$reps" "$list" "$@")
	calc "$t / $reps"
}
# best_rep REPS CMD...: CMD's best CPU time over REPS repetitions, divided by REPS (time(1) counts in
# 10 ms steps: runs shorter than a second are timed this way)
best_rep() { _r=$1; shift; best_each "$_r" "" "$@"; }
line() { printf '%-58s %14s   %-22s %s\n' "$1" "$2" "$3" "$4"; }

# ---- perf: the bundled snapshots (10: every workload, several settings) --------------------
SNAPS="bert_infer_varlen__default bert_infer_varlen__ms128 bert_infer_varlen__p110_gc06 gpt2_train_varlen__default
gpt2_train_varlen__exp gpt2_train_varlen__ms40 gpt2_train_varlen__p110_ms128 resnet50_train__default
resnet50_train__ms128 seed_example__default"
snap_paths() { for s in $SNAPS; do printf '%s ' "$D/pytorch-h200/$s.pickle.gz"; done; }

# events replayed of a trace (the summary's events column)
events_of() { "$A" replay -p passthrough -c "" --no-timing "$1" | awk -F, 'NR==2{print $5}'; }

# perf_pickle_baseline: CPython's pickle.load of each snapshot (gzip.open included), best of
# $RUNS in one interpreter, summed; sets P (seconds) or leaves it empty without Python.
perf_pickle_baseline() {
	P=
	command -v "$PY" >/dev/null 2>&1 || { echo "  ($PY not found: no pickle.load baseline)"; return 0; }
	P=$("$PY" - $(snap_paths) <<EOF
import gzip, pickle, sys, time
total = 0.0
for f in sys.argv[1:]:
    b = None
    for _ in range($RUNS):
        t = time.process_time()
        with gzip.open(f, "rb") as fh:
            pickle.load(fh)
        t = time.process_time() - t
        b = t if b is None or t < b else b
    total += b
print("%.6f" % total)
EOF
) || P=
}

# perf_snapshot_replay: replay -c recorded of each snapshot, whole process; sets S and NEV.
perf_snapshot_replay() {
	NEV=0
	for f in $(snap_paths); do NEV=$((NEV + $(events_of "$f"))); done
	S=$(best_each 3 "$(snap_paths)" "$A" replay -c recorded --no-timing)
	# the same with the heap on 4 KiB pages (src/util/heap.c), for the A/B line below
	S4K=$(export ALLOCSIM_SMALL_PAGES=1; best_each 3 "$(snap_paths)" "$A" replay -c recorded --no-timing)
}

# perf_binary: the snapshots as binary traces, replayed per policy (whole processes, settings
# -c "", no latency model: as sweep runs them). Per policy, in ns/event:
#   replay     = the whole process (best_each over the 10 files);
#   start-up   = the same process on an empty binary trace (exec, dynamic linking, options, the
#                policy's creation, the summary row): a fixed cost per process, ~0.6 ms of it the
#                kernel's exec on this machine (what CPython's own start-up is to pickle.load);
#   simulation = one replay of the events, from sweeps over the same files with 1 and 21 identical
#                runs per trace (CPU(21) - CPU(1) = 20 simulations; --no-share: each run replayed,
#                not taken from the first as identical);
#   decode     = replay - start-up - simulation: reading the file in chunks and validating every
#                record (replay's read, doc/trace-format.md), and what a fresh process pays on its
#                first run that a warm simulation does not (first touch of its memory, cold caches).
#   sweep, 1 p. = the in-process time of sweep's read, measured in one process: the sweep with 1 run
#                per trace (each file mapped, validated and replayed once) less one start-up. Not
#                the difference of 10 start-ups and 10 whole processes, so less noisy; but the
#                file is mapped there, not read in chunks as replay reads it.
# The ratio to pickle.load (which excludes the interpreter's start-up) is in-process: decode +
# simulation; the whole-process ratio is printed beside it.
POLICIES="pytorch bestfit passthrough cuda-async cupy bfc"
perf_binary() {
	k=0
	for f in $(snap_paths); do k=$((k + 1)); "$A" convert "$f" -o "$tmp/s$k.asbin"; done
	bins=$(echo "$tmp"/s*.asbin)
	printf '#allocsim-trace 1\n' > "$tmp/empty.trace"
	"$A" convert "$tmp/empty.trace" -o "$tmp/empty.asbin"
	empties=$(for f in $bins; do printf '%s ' "$tmp/empty.asbin"; done)
	caps=$(awk 'BEGIN{for (i = 0; i < 21; i++) printf "%s1TiB", i ? "," : ""}')
	printf '  %-12s %12s %12s %12s %12s %12s   %s\n' policy "decode" "simulation" "start-up" "replay" "sweep, 1 p." "(ns/event; start-up: per process, spread over its events)"
	for p in $POLICIES; do
		tot=$(best_each 30 "$bins" "$A" replay -p "$p" -c "" --latency-model none --no-timing)
		up=$(best_each 30 "$empties" "$A" replay -p "$p" -c "" --latency-model none --no-timing)
		s1=$(best_rep 10 "$A" sweep -j 1 --no-share -p "$p" -t $bins --param capacity=1TiB)
		s21=$(best_rep 2 "$A" sweep -j 1 --no-share -p "$p" -t $bins --param capacity=$caps)
		sim=$(calc "($s21 - $s1) / 20")
		dec=$(calc "$tot - $up - $sim")
		one=$(calc "$s1 - $up / $k")
		printf '  %-12s %12.1f %12.1f %12.1f %12.1f %12.1f\n' "$p" "$(calc "$dec / $NEV * 1e9")" "$(calc "$sim / $NEV * 1e9")" \
			"$(calc "$up / $NEV * 1e9")" "$(calc "$tot / $NEV * 1e9")" "$(calc "$one / $NEV * 1e9")"
		eval "BIN_$(echo $p | tr - _)=$tot; BINP_$(echo $p | tr - _)=$(calc "$tot - $up"); BIN1_$(echo $p | tr - _)=$one"
	done
}

# perf_binary_big: the generated $BIG-event trace as a binary file, pytorch (start-up is negligible
# there: whole process). Its simulation: sweeps with 4 and 1 identical runs, (CPU(4) - CPU(1)) / 3
# (with 2 and 1, one noisy run made session 12's run 2 print a negative decode). Against pickle.load's
# ns/event of the bundled snapshots (a snapshot of this size would take CPython minutes and GBs).
perf_binary_big() {
	"$A" convert "$tmp/big.trace" -o "$tmp/big.asbin"
	BIGTOT=$(best "$A" replay -p pytorch -c "" --latency-model none --no-timing "$tmp/big.asbin")
	s1=$(best "$A" sweep -j 1 --no-share -p pytorch -t "$tmp/big.asbin" --param capacity=1TiB)
	s4=$(best "$A" sweep -j 1 --no-share -p pytorch -t "$tmp/big.asbin" --param capacity=1TiB,1TiB,1TiB,1TiB)
	BIGSIM=$(calc "($s4 - $s1) / 3")
	BIGN=$(events_of "$tmp/big.asbin")
	rm -f "$tmp/big.asbin"
}

# perf_sweeps: 100 configurations over the 10 snapshots against a single replay of those 10
# snapshots, as issue 15 states it: the sweep with the threads the machine offers ($JOBS), the
# replay as a user runs it (`allocsim replay SNAPSHOT`, default settings: the sweep's first
# configuration; one process per snapshot), both in wall seconds (best of $RUNS). Beside it, CPU
# seconds: the same sweep with -j 1 against one configuration as a sweep (which decodes each trace
# once as well) and against the 10 replay processes. And 1000 configurations with $JOBS threads.
perf_sweeps() {
	vals100="none,20..1000:+10"   # none and 99 values: 100 configurations
	one=$(best_rep 5 "$A" sweep -j 1 -t $(snap_paths))
	hundred=$(best "$A" sweep -j 1 -t $(snap_paths) --param max_split_size_mb=$vals100)
	hundred_ns=$(best "$A" sweep -j 1 --no-share -t $(snap_paths) --param max_split_size_mb=$vals100)
	rep=$(best_each 3 "$(snap_paths)" "$A" replay --no-timing)
	rep_wall=$(best_wall sh -c 'A=$1; shift; for f; do "$A" replay --no-timing "$f" >/dev/null 2>&1 || exit 1; done' sh "$A" $(snap_paths))
	hundred_wall=$(best_wall "$A" sweep -j "$JOBS" -t $(snap_paths) --param max_split_size_mb=$vals100)
	t0=$(now)
	thousandc=$(/usr/bin/time -f '%U %S' "$A" sweep -j "$JOBS" -t $(snap_paths) --param max_split_size_mb=$vals100 \
		--param roundup_power2_divisions=none,1,2,4,8,16,32,64,128,256 -o "$tmp/s1000.csv" 2>&1 | tail -1 | awk '{printf "%.6f", $1 + $2}')
	thousand=$(calc "$(now) - $t0")
	rows=$(($(wc -l < "$tmp/s1000.csv") - 1))
}

# perf_rss: peak RSS of a replay of a generated native trace of $BIG events against one of a
# tenth of it, per policy (the replay streams: memory follows the live allocations).
gen_trace() { # EVENTS: at most 4096 allocations live, sizes from a real mix, 3 streams
	awk -v N="$1" 'BEGIN{srand(7); print "#allocsim-trace 1"; print "#source: bench-generated"; n=0; live=0;
	  for (i=0;i<N;i++){ if (live>0 && (live>=4096 || rand()<0.5)) { k=int(rand()*live); print "f", ids[k]; ids[k]=ids[live-1]; live--; }
	    else { n++; r=rand(); s = r<0.6 ? int(1+rand()*1048576) : (r<0.95 ? int(1048577+rand()*20971520) : int(20971521+rand()*209715200));
	      print "a", n, s, int(rand()*3); ids[live++]=n } } }'
}
# peak RSS in KB and CPU seconds of one run: "KB SECONDS"
rss_cpu() { /usr/bin/time -f '%M %U %S' "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%d %.6f", $1, $2 + $3}'; }
perf_rss() {
	for p in $POLICIES; do
		set -- $(rss_cpu "$A" replay -p "$p" -c "" --no-timing "$tmp/small.trace"); r1=$1
		set -- $(rss_cpu "$A" replay -p "$p" -c "" --no-timing "$tmp/big.trace"); r10=$1; t=$2
		ratio=$(calc "$r10 / $r1")
		line "peak RSS, $BIG vs $((BIG / 10)) events, $p" "$(printf '%.2fx' "$ratio")" "<= 1.5x" \
			"$(verdict "$ratio" "<=" 1.5) ($r10 KB vs $r1 KB; $(printf '%.0f' "$(calc "$BIG / $t")") events/s from text)"
	done
}

# ---- issue 34's speed targets, each a ratio against a baseline measured in this run -------------
# simulation: pytorch's against bfc's on the same 10 snapshots as binary traces (sweeps of 1 and 21
#   identical runs, --no-share, as perf_binary: CPU(21) - CPU(1) = 20 simulations); target 40 ns/event.
# decoder: `allocsim info` of an uncompressed snapshot of ten copies of a real history (what the
#   decoder block below builds) against scripts/pkwalk.c, a plain walk over the same file's opcodes
#   (built here with $CC); both whole processes, CPU time, best of $RUNS. Target: 100 ns/event where
#   the walk took 36 (issue 34), so <= 2.78x the walk.
# start-up: a replay of an empty binary trace (exec, dynamic linking, the heap, options, the policy,
#   the summary row) against an empty C program's process, 100 of each; target < 1.5 ms.
# -j: advise and compare's wall time with -j $JOBS against -j 1 on the same trace (best of $RUNS);
#   target >= 0.8 x $JOBS. Only meaningful on free cores: the load average is printed beside it.
# make_x10 OUT: ten copies of bert_infer_varlen__ms40's history, addresses and times moved apart, as a
# gzip'd pickle (the decoder block below uses it too); nothing without Python.
make_x10() {
	command -v "$PY" >/dev/null 2>&1 || return 0
	"$PY" - "$D/pytorch-h200/bert_infer_varlen__ms40.pickle.gz" "$1" <<'PY' || rm -f "$1"
import copy, gzip, pickle, sys
d = pickle.loads(gzip.decompress(open(sys.argv[1], "rb").read()))
out = []
ts = [e["time_us"] for e in d["device_traces"][0] if "time_us" in e]
span = (max(ts) - min(ts) + 1) if ts else 0
for i in range(10):
    for e in d["device_traces"][0]:
        e2 = copy.copy(e)
        e2["compile_context"] = "".join(["N", "/", "A"])
        if "addr" in e2:
            e2["addr"] += i << 40
        if "time_us" in e2:
            e2["time_us"] += i * span
        out.append(e2)
d["device_traces"] = [out]
d["segments"] = []
gzip.open(sys.argv[2], "wb", compresslevel=6).write(pickle.dumps(d, protocol=4))
PY
}
# ---- snapshots streamed (issue 34) -----------------------------------------------------------
# Peak RSS of replay (-c "") and validate of a generated snapshot of 2.5M events against one of 250k
# (scripts/gen-snapshot.py: 100 and 10 copies of bert_infer_varlen__default, 25,004 events each,
# the settings after the trace as PyTorch writes them), in one run; with the pickle laid out without
# memo, and with the writer's memo (a slot per trace entry and per 'N/A' string: the pickle reader
# packs the pages it has passed, 1 bit a slot instead of 8 bytes).
perf_stream_rss() {
	command -v "$PY" >/dev/null 2>&1 || { echo "  ($PY not found: no generated snapshots)"; return 0; }
	gen="$(dirname "$0")/gen-snapshot.py"; src="$D/pytorch-h200/bert_infer_varlen__default.pickle.gz"
	for memo in "" --memo; do
		"$PY" "$gen" $memo "$src" 10 "$tmp/snap-s.pickle" && "$PY" "$gen" $memo "$src" 100 "$tmp/snap-b.pickle" || return 0
		ev=$("$A" replay -c "" --no-timing "$tmp/snap-b.pickle" | awk -F, 'NR==2{print $5}')
		for cmd in replay validate; do
			if [ $cmd = replay ]; then set -- replay -c "" --no-timing; else set -- validate; fi
			s1=$(/usr/bin/time -f %M "$A" "$@" "$tmp/snap-s.pickle" 2>&1 >/dev/null | tail -1)
			s10=$(/usr/bin/time -f %M "$A" "$@" "$tmp/snap-b.pickle" 2>&1 >/dev/null | tail -1)
			r=$(calc "$s10 / $s1")
			line "peak RSS, snapshot $ev vs $((ev / 10)) events, $cmd${memo:+ (the writer layout, memoized)}" "$(printf '%.2fx' "$r")" \
				"<= 1.2x" "$(verdict "$r" "<=" 1.2) ($s10 KB vs $s1 KB)"
		done
	done
	rm -f "$tmp/snap-s.pickle" "$tmp/snap-b.pickle"
}
issue34() {
	echo
	echo "== issue 34 targets (ratios measured in this run) =="
	line "what" "measured" "target" "verdict"
	k=0
	for f in $(snap_paths); do k=$((k + 1)); "$A" convert "$f" -o "$tmp/t34_$k.asbin"; done
	b34=$(echo "$tmp"/t34_*.asbin)
	n34=0
	for f in $b34; do n34=$((n34 + $(events_of "$f"))); done
	caps=$(awk 'BEGIN{for (i = 0; i < 21; i++) printf "%s1TiB", i ? "," : ""}')
	for p in pytorch bfc; do
		s1=$(best_rep 10 "$A" sweep -j 1 --no-share -p "$p" -t $b34 --param capacity=1TiB)
		s21=$(best_rep 2 "$A" sweep -j 1 --no-share -p "$p" -t $b34 --param capacity=$caps)
		eval "SIM34_$p=$(calc "($s21 - $s1) / 20 / $n34 * 1e9")"
	done
	line "pytorch simulation vs bfc's, 10 snapshots ($n34 events)" "$(printf '%.2fx' "$(calc "$SIM34_pytorch / $SIM34_bfc")")" "<= 40 ns/event" \
		"$(verdict "$SIM34_pytorch" "<=" 40) (pytorch $(printf '%.1f' "$SIM34_pytorch") ns/event, bfc $(printf '%.1f' "$SIM34_bfc"))"
	cc=${CC:-cc}
	[ -f "$tmp/x10.pickle.gz" ] || make_x10 "$tmp/x10.pickle.gz"
	if [ -f "$tmp/x10.pickle.gz" ] && $cc -O2 -std=c11 -o "$tmp/pkwalk" "$(dirname "$0")/pkwalk.c" 2>/dev/null; then
		gzip -dc "$tmp/x10.pickle.gz" > "$tmp/x10.pickle"
		nx=$("$A" info "$tmp/x10.pickle" | awk '$1 == "events:" {print $2}')
		wk=$(best "$tmp/pkwalk" "$tmp/x10.pickle")
		dc=$(best "$A" info "$tmp/x10.pickle")
		r=$(calc "$dc / $wk")
		line "decode + validation vs a plain opcode walk ($nx events)" "$(printf '%.2fx' "$r")" "<= 2.78x (100 vs 36 ns)" \
			"$(verdict "$r" "<=" 2.78) (allocsim info $(printf '%.0f' "$(calc "$dc / $nx * 1e9")") ns/event, walk $(printf '%.0f' "$(calc "$wk / $nx * 1e9")") ns/event, uncompressed)"
		rm -f "$tmp/x10.pickle"
	else
		echo "  (no $tmp/x10.pickle.gz or no C compiler $cc: no decoder line)"
	fi
	printf '#allocsim-trace 1\n' > "$tmp/e34.trace"
	"$A" convert "$tmp/e34.trace" -o "$tmp/e34.asbin"
	if printf 'int main(void){return 0;}\n' > "$tmp/nothing.c" && $cc -O2 -o "$tmp/nothing" "$tmp/nothing.c" 2>/dev/null; then
		up=$(best_rep 100 "$A" replay -p pytorch -c "" --latency-model none --no-timing "$tmp/e34.asbin")
		nothing=$(best_rep 100 "$tmp/nothing")
		line "start-up (replay of an empty trace) vs an empty C program" "$(printf '%.2fx' "$(calc "$up / $nothing")")" "< 1.5 ms" \
			"$(verdict "$up" "<" 0.0015) ($(printf '%.2f' "$(calc "$up * 1e3")") ms vs $(printf '%.2f' "$(calc "$nothing * 1e3")") ms CPU per process)"
	fi
	jobs_lines
	perf_stream_rss
}
# -j: advise, compare, fit and sweep with -j $JN (default 2) against -j 1, wall time (best of $RUNS),
# target >= 0.8 x $JN; only where the machine has a core beyond them (nproc > $JN), and even then other
# processes' load shows (the load average is printed). The baseline of what the machine itself gives:
# $JN independent one-thread processes (fit param -j 1, the same work as the fit line) at once against
# one alone; where hyperthreads or a shared memory system hold that ceiling under 0.8 x $JN, no -j can
# meet the target, and each line says how much of the ceiling it reached. doc/performance.md has the
# 16-core table.
jobs_lines() {
	JN=${BENCH_JN:-2}
	np=$(nproc 2>/dev/null || echo 1)
	if [ "$np" -le "$JN" ]; then
		echo "  ($np cores: the -j $JN lines need $((JN + 1)) or more, skipped)"
		return 0
	fi
	# the work -j spreads: a generated training trace (1,046,844 allocations, binary: its read is a
	# map, not a serial decode) for advise, fit and sweep; the 10 snapshots for compare
	[ -f "$tmp/jobs.asbin" ] || "$A" gen train --steps 1600 -o "$tmp/jobs.asbin" || return 0
	g=$tmp/jobs.asbin
	tg=$(snap_paths)
	want=$(calc "0.8 * $JN" | sed 's/0*$//; s/\.$//')
	fitp="param max_split_size_mb --values none,20..4096:+256 --capacity 20GiB" # the fit line's work, 17 values
	# the ceiling: JN copies of one one-thread fit at once, against one alone
	set -- fit $fitp -j 1 "$g"
	c1=$(best_wall "$A" "$@")
	cn=$(best_wall sh -c 'n=$1; shift; i=0; while [ $i -lt $n ]; do "$@" >/dev/null 2>&1 & i=$((i + 1)); done; wait' sh "$JN" "$A" "$@")
	ceil=$(calc "$JN * $c1 / $cn")
	line "$JN one-thread fits at once/one alone (the machine's ceiling)" "$(printf '%.2fx' "$ceil")" ">= ${want}x" \
		"$(verdict "$ceil" ">=" "$(calc "0.8 * $JN")") ($(printf '%.3f' "$c1") s vs $(printf '%.3f' "$cn") s for $JN times the work)"
	for w in advise compare fit sweep; do
		case $w in
		advise) what="gen train --steps 1600 (2,094,844 events)"; set -- advise "$g" ;;
		compare) what="every policy, the 10 snapshots"; set -- compare $tg ;;
		fit) what="param max_split_size_mb x 17 at 20GiB, the same trace"; set -- fit $fitp "$g" ;;
		sweep) what="32 settings --no-share, the same trace"; set -- sweep --no-share -t "$g" -p pytorch --param max_split_size_mb=none,20..2048:x2 --param roundup_power2_divisions=none,2,4,8 ;;
		esac
		cmd=$1; shift
		la=$(awk '{print $1}' /proc/loadavg 2>/dev/null || echo ?)
		w1=$(best_wall "$A" "$cmd" -j 1 "$@")
		wn=$(best_wall "$A" "$cmd" -j "$JN" "$@")
		r=$(calc "$w1 / $wn")
		line "$cmd -j $JN/-j 1 (wall), $what" "$(printf '%.2fx' "$r")" ">= ${want}x" \
			"$(verdict "$r" ">=" "$(calc "0.8 * $JN")"), $(printf '%.0f' "$(calc "100 * $r / $ceil")")% of the ceiling ($(printf '%.3f' "$w1") s vs $(printf '%.3f' "$wn") s; load average $la)"
	done
}

# BENCH_ONLY=jobs: the -j lines alone
if [ "${BENCH_ONLY:-}" = jobs ]; then
	echo "allocsim bench (-j lines only): $(uname -m), $(nproc 2>/dev/null || echo ?) cores, best of $RUNS wall times"
	line "what" "measured" "target" "verdict"
	jobs_lines
	exit 0
fi
# BENCH_ONLY=issue34: issue 34's lines alone
if [ "${BENCH_ONLY:-}" = issue34 ]; then
	echo "allocsim bench (issue 34 only): $(uname -m), $(nproc 2>/dev/null || echo ?) cores, best of $RUNS CPU times"
	issue34
	exit 0
fi
echo "allocsim bench: $(uname -m), $(nproc 2>/dev/null || echo ?) cores, best of $RUNS CPU times"
echo
echo "== issue 15 targets (ratios measured in this run) =="
line "what" "measured" "target" "verdict"
perf_pickle_baseline
perf_snapshot_replay
echo "  10 bundled snapshots, $NEV events replayed"
if [ -n "$P" ]; then
	r=$(calc "$P / $S")
	line "snapshot replay -c recorded vs pickle.load (whole process)" "$(printf '%.2fx' "$r")" ">= 2x (goal 4x)" \
		"$(verdict "$r" ">=" 2) (pickle.load $(printf '%.0f' "$(calc "$P / $NEV * 1e9")") ns/event, replay $(printf '%.0f' "$(calc "$S / $NEV * 1e9")") ns/event)"
	line "  the same with the heap on 4 KiB pages (ALLOCSIM_SMALL_PAGES=1)" "$(printf '%.2fx' "$(calc "$P / $S4K")")" "" \
		"(replay $(printf '%.0f' "$(calc "$S4K / $NEV * 1e9")") ns/event: huge pages save $(printf '%.0f' "$(calc "100 * (1 - $S / $S4K)")")%)"
fi
perf_binary
if [ -n "$P" ]; then
	pns=$(calc "$P / $NEV * 1e9")
	for p in $POLICIES; do
		eval "b=\$BIN_$(echo $p | tr - _); bp=\$BINP_$(echo $p | tr - _)"
		r=$(calc "$P / $bp"); rw=$(calc "$P / $b")
		tg=">= 15x (goal 40x)"; [ "$p" = pytorch ] || tg="(target is for pytorch)"
		line "binary replay ($p) vs pickle.load, in-process" "$(printf '%.2fx' "$r")" "$tg" \
			"$([ "$p" = pytorch ] && verdict "$r" ">=" 15) ($(printf '%.1f' "$(calc "$bp / $NEV * 1e9")") ns/event; whole process $(printf '%.2fx' "$rw"))"
	done
	r=$(calc "$P / $BIN1_pytorch")
	line "  sweep's read (mapped; pytorch), in one process for the 10" "$(printf '%.2fx' "$r")" "" \
		"($(printf '%.1f' "$(calc "$BIN1_pytorch / $NEV * 1e9")") ns/event: sweep -j 1, one run a trace, less one start-up; the file mapped, as sweep and fit read it)"
fi
gen_trace $((BIG / 10)) > "$tmp/small.trace"
gen_trace "$BIG" > "$tmp/big.trace"
perf_binary_big
if [ -n "$P" ]; then
	r=$(calc "$pns / ($BIGTOT / $BIGN * 1e9)")
	line "binary replay (pytorch), $BIGN generated events, whole process" "$(printf '%.2fx' "$r")" ">= 15x (goal 40x)" \
		"$(verdict "$r" ">=" 15) ($(printf '%.1f' "$(calc "($BIGTOT - $BIGSIM) / $BIGN * 1e9")") ns/event decode + $(printf '%.1f' "$(calc "$BIGSIM / $BIGN * 1e9")") simulation vs pickle.load's $(printf '%.0f' "$pns") ns/event)"
fi
perf_sweeps
r=$(calc "$hundred_wall / $rep_wall")
line "sweep 100 configs x 10 snapshots (-j $JOBS) vs 1 replay of the 10 (wall)" "$(printf '%.2fx' "$r")" "<= 10x" \
	"$(verdict "$r" "<=" 10) ($(printf '%.3f' "$hundred_wall") s vs $(printf '%.3f' "$rep_wall") s wall)"
r=$(calc "$hundred / $rep")
line "  the same in CPU time (sweep -j 1)" "$(printf '%.2fx' "$r")" "<= 10x" \
	"$(verdict "$r" "<=" 10) ($(printf '%.2f' "$hundred") s vs $(printf '%.3f' "$rep") s CPU)"
r=$(calc "$hundred_ns / $rep")
line "  the same, every configuration replayed (--no-share)" "$(printf '%.2fx' "$r")" "" \
	"($(printf '%.2f' "$hundred_ns") s CPU: sharing proven-identical runs saves $(printf '%.0f' "$(calc "100 * (1 - $hundred / $hundred_ns)")")%)"
r=$(calc "$hundred / $one")
line "  sweep 100 configs vs 1 config, both sweeps -j 1 (CPU)" "$(printf '%.2fx' "$r")" "" \
	"(the baseline decodes each trace once too; $(printf '%.2f' "$hundred") s vs $(printf '%.3f' "$one") s CPU)"
r=$(calc "$rep / $one")
line "  (10 replay processes vs 1 config as a sweep, CPU)" "$(printf '%.2fx' "$r")" "" "(process start-up: the sweep runs them in one process)"
line "sweep 1000 configs x 10 snapshots, -j $JOBS (wall)" "$(printf '%.1f s' "$thousand")" "< 60 s" \
	"$(verdict "$thousand" "<" 60) ($rows rows, $(printf '%.1f' "$thousandc") s CPU, $(printf '%.0f' "$(calc "$rows / $thousandc")") replays per CPU second)"
perf_rss

# ---- the offline optimum (issue 17): "the heuristic alone handles a 1M-event trace in seconds" ----
# -p optimal on the generated trace of 1M events (up to 4096 allocations live, 720 million pairs live
# together: the heuristic's hard case), as a binary file, against passthrough on the same file.
gen_trace 1000000 > "$tmp/opt.trace"
"$A" convert "$tmp/opt.trace" -o "$tmp/opt.asbin"
to=$(best "$A" replay -p optimal -c "" --latency-model none --no-timing "$tmp/opt.asbin")
tp=$(best "$A" replay -p passthrough -c "" --latency-model none --no-timing "$tmp/opt.asbin")
line "optimal vs passthrough, 1M generated events (binary)" "$(printf '%.1fx' "$(calc "$to / $tp")")" "< 20 s CPU" \
	"$(verdict "$to" "<" 20) ($(printf '%.1f' "$to") s vs $(printf '%.2f' "$tp") s CPU)"


# ---- snapshot decoder against CPython (reader, issue 15) -------------------------------------
# CPython's pickle.loads(gzip.decompress(...)) of the same file, in-process, against allocsim's whole
# process: 'info' (decode only) and 'replay -c recorded' (decode, the pass for the recorded settings,
# simulation). CPU time (user + system), best of 3, so that other load on the machine does not count.
# Target: replay -c recorded at least 2x faster than CPython's load alone. CPython's load is timed two
# ways, both the load alone (the interpreter's start-up excluded): warm, best of 3 in this interpreter
# after the large copy below was built and dropped (its memory already faulted in: few page faults);
# and fresh, the one load of a new interpreter (best of 3 interpreters), which faults its objects in
# as allocsim's process must (a 4 KiB fault costs about 10 us on the development VM). The page faults
# of each are printed beside it.
py=$(command -v python3 || true)
if [ -n "$py" ]; then
	[ -f "$tmp/x10.pickle.gz" ] || make_x10 "$tmp/x10.pickle.gz"
	"$py" - "$A" "$D/pytorch-h200/bert_infer_varlen__ms40.pickle.gz" "$D/pytorch-h200/gpt2_train_varlen__default.pickle.gz" "$tmp/x10.pickle.gz" <<'PY'
import gzip, os, pickle, resource, subprocess, sys, time
A, traces = sys.argv[1], sys.argv[2:]
# traces[-1]: the larger snapshot make_x10 wrote (ten copies of bert_infer_varlen__ms40)

def best3(measure):
    """the best of 3 (seconds, page faults) measurements, by time"""
    return min((measure() for _ in range(3)), key=lambda m: m[0])

def child_run(cmd):
    """CPU time and minor page faults of one run of cmd"""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), r1.ru_minflt - r0.ru_minflt

# one load in a fresh interpreter: "SECONDS FAULTS" of the load alone
FRESH = """import gzip, pickle, resource, sys, time
raw = open(sys.argv[1], "rb").read()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0 = time.process_time()
s = pickle.loads(gzip.decompress(raw))  # kept: its release is not the load's time
print(time.process_time() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""
def fresh_load(t):
    o = subprocess.run([sys.executable, "-c", FRESH, t], capture_output=True, text=True, check=True).stdout.split()
    return float(o[0]), int(o[1])

def warm_load(raw):
    """CPU time and minor page faults of one load in this interpreter"""
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.process_time()
    s = pickle.loads(gzip.decompress(raw))  # released after the clock stops
    m = time.process_time() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    del s
    return m

print("\n%-38s %8s %16s %16s %11s %16s %18s %18s" % ("snapshot (CPU time; page faults)", "entries", "CPython warm",
      "CPython fresh", "decode", "replay", "warm/replay", "fresh/replay"))
print("%-38s %8s %16s %16s %11s %16s" % ("", "", "ns/e (faults)", "ns/e (faults)", "ns/e", "ns/e (faults)"))
for t in traces:
    raw = open(t, "rb").read()
    n = sum(len(x) for x in pickle.loads(gzip.decompress(raw))["device_traces"])
    cpy = best3(lambda: warm_load(raw))
    fr = best3(lambda: fresh_load(t))
    dec = best3(lambda: child_run([A, "info", t]))
    rep = best3(lambda: child_run([A, "replay", "-c", "recorded", "--no-timing", t]))
    print("%-38s %8d %9.0f (%5d) %9.0f (%5d) %11.0f %9.0f (%5d) %9.2fx (>= 2) %9.2fx (>= 2)" % (os.path.basename(t), n,
          cpy[0] / n * 1e9, cpy[1], fr[0] / n * 1e9, fr[1], dec[0] / n * 1e9, rep[0] / n * 1e9, rep[1],
          cpy[0] / rep[0], fr[0] / rep[0]))
PY
fi
# ---- end of the snapshot decoder block --------------------------------------------------------
issue34
