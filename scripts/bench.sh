#!/bin/sh
# bench.sh - replay speed, as ratios against a baseline measured in the same run.
# usage: scripts/bench.sh ALLOCSIM TRACES_DIR
# Baseline: 'allocsim info' on the same trace (reading and decoding only, no policy), so the
# ratio shows what the engine and policy add on top of parsing. Also a large generated trace.
set -e
A=${1:-./allocsim}; D=${2:-traces}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
calc() { awk "BEGIN{printf \"%.6f\", $1}"; }
best() { # best of 3 wall times of a command
	b=; for i in 1 2 3; do t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); t=$(calc "$t1 - $t0"); if [ -z "$b" ] || [ "$(calc "$t < $b")" = 1.000000 ]; then b=$t; fi; done; echo "$b"; }
# a large generated trace: 2 million events, sizes from a real trace's mix, 3 streams
awk 'BEGIN{srand(7); print "#allocsim-trace 1"; print "#source: bench-generated"; n=0; live=0;
  for (i=0;i<1000000;i++){ if (live>0 && rand()<0.5) { k=int(rand()*live); print "f", ids[k]; ids[k]=ids[live-1]; live--; }
    else { n++; r=rand(); s = r<0.6 ? int(1+rand()*1048576) : (r<0.95 ? int(1048577+rand()*20971520) : int(20971521+rand()*209715200));
      print "a", n, s, int(rand()*3); ids[live++]=n } } }' > "$tmp/big.trace"
printf '%-42s %-12s %10s %12s %14s\n' trace policy events seconds "events/s"
for t in "$D"/pytorch-h200/gpt2_train_varlen__default.pickle.gz "$D"/pytorch-h200/bert_infer_varlen__ms40.pickle.gz "$tmp/big.trace"; do
	ev=$("$A" replay -p passthrough --no-timing "$t" | awk -F, 'NR==2{print $5}')
	base=$(best "$A" info "$t")
	printf '%-42s %-12s %10s %12.4f %14.0f\n' "$(basename "$t")" "(parse only)" "$ev" "$base" "$(calc "$ev / $base")"
	for p in passthrough bestfit pytorch; do
		s=$(best "$A" replay -p "$p" -c "" "$t")
		printf '%-42s %-12s %10s %12.4f %14.0f   %.2fx parse time\n' "" "$p" "$ev" "$s" "$(calc "$ev / $s")" "$(calc "$s / $base")"
	done
done
