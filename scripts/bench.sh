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

# ---- snapshot decoder against CPython (reader, issue 15) -------------------------------------
# CPython's pickle.loads(gzip.decompress(...)) of the same file, in-process, against allocsim's whole
# process: 'info' (decode only) and 'replay -c recorded' (decode, the pass for the recorded settings,
# simulation). CPU time (user + system), best of 3, so that other load on the machine does not count.
# Target: replay -c recorded at least 2x faster than CPython's load alone.
py=$(command -v python3 || true)
if [ -n "$py" ]; then
	"$py" - "$A" "$D/pytorch-h200/bert_infer_varlen__ms40.pickle.gz" "$D/pytorch-h200/gpt2_train_varlen__default.pickle.gz" "$tmp/x10.pickle.gz" <<'PY'
import copy, gzip, os, pickle, resource, subprocess, sys, time
A, traces = sys.argv[1], sys.argv[2:]
# a larger snapshot: ten copies of a real history, addresses moved apart, laid out as the writer does
d = pickle.loads(gzip.decompress(open(traces[0], "rb").read()))
out = []
for i in range(10):
    for e in d["device_traces"][0]:
        e2 = copy.copy(e)
        e2["compile_context"] = "".join(["N", "/", "A"])
        if "addr" in e2:
            e2["addr"] += i << 40
        out.append(e2)
d["device_traces"] = [out]
d["segments"] = []
gzip.open(traces[-1], "wb", compresslevel=6).write(pickle.dumps(d, protocol=4))
del d, out

def child_cpu(cmd):
    best = None
    for _ in range(3):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        best = t if best is None or t < best else best
    return best

print("\n%-38s %9s %13s %13s %13s %18s" % ("snapshot (CPU time)", "entries", "CPython ns/e", "decode ns/e", "replay ns/e", "CPython/replay"))
for t in traces:
    raw = open(t, "rb").read()
    cpy = None
    for _ in range(3):
        t0 = time.process_time()
        s = pickle.loads(gzip.decompress(raw))
        c = time.process_time() - t0
        cpy = c if cpy is None or c < cpy else cpy
    n = sum(len(x) for x in s["device_traces"])
    del s
    dec = child_cpu([A, "info", t])
    rep = child_cpu([A, "replay", "-c", "recorded", "--no-timing", t])
    print("%-38s %9d %13.0f %13.0f %13.0f %12.2fx (>= 2)" % (os.path.basename(t), n, cpy / n * 1e9, dec / n * 1e9,
          rep / n * 1e9, cpy / rep))
PY
fi
# ---- end of the snapshot decoder block --------------------------------------------------------
