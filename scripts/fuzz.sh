#!/bin/sh
# fuzz.sh - run each libFuzzer target for SECONDS (default 600), JOBS at a time, from the seed
# corpora in fuzz/seeds; findings (crash-*, leak-*, timeout-*) land in fuzz/findings/TARGET/.
# usage: scripts/fuzz.sh [SECONDS] [JOBS]   (after 'make fuzz')
secs=${1:-600}; jobs=${2:-2}
cd "$(dirname "$0")/.." || exit 1
run() {
	t=$1; mkdir -p fuzz/corpus-$t fuzz/findings/$t
	# pickle: 1 MiB, so the structure-aware generator's gzip'd pickles (long runs, deep nesting,
	# memo amplification; fuzz/fuzz_pickle.c) fit
	case $t in pickle) maxlen=1048576;; *) maxlen=${FUZZ_MAX_LEN:-65536};; esac
	fuzz/bin/fuzz_$t -max_total_time=$secs -max_len=$maxlen -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix=fuzz/findings/$t/ -print_final_stats=1 fuzz/corpus-$t fuzz/seeds/$t > fuzz/findings/$t.log 2>&1
	echo "$t: exit $?; $(grep -E 'stat::number_of_executed_units|cov:' fuzz/findings/$t.log | tail -2 | tr '\n' ' ')"
}
set -- ${FUZZ_TARGETS:-pickle native rmm host config size model binfmt}
while [ $# -gt 0 ]; do
	n=0; pids=
	while [ $# -gt 0 ] && [ $n -lt "$jobs" ]; do run "$1" & pids="$pids $!"; shift; n=$((n + 1)); done
	wait $pids
done
