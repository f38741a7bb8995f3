#!/bin/sh
# gen-long.sh (make check-long) - the generator's validation table and gen under randomized options.
#  1. scripts/gen-validate.py fits and regenerates every bundled workload (seeds 1-3) and must print
#     doc/generator-validation.csv byte for byte (the table in doc/generator.md); each row's targets
#     (peak reserved within 10 % under default, max_split_size_mb:128, expandable_segments:True;
#     Kendall tau >= 0.8 for the settings and the policies) are asserted, the rows that miss them
#     marked TODO with the numbers (doc/generator.md says why).
#  2. 300 runs of gen with options drawn at random, good and bad: every run exits 0, 64, 65 or 66;
#     a run that fails writes nothing and says why; a run that succeeds writes a trace that reads.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
: "${PYTHON:=python3}"
W="$T/gpt2_train_varlen__default.pickle.gz $T/bert_infer_varlen__default.pickle.gz $T/resnet50_train__default.pickle.gz $T/seed_example__default.pickle.gz"
# shellcheck disable=SC2086
run "$PYTHON" "$srcdir/scripts/gen-validate.py" "$A" "$TMP/v" $W --seeds 1,2,3
is "$st" 0 "gen-validate.py: exit 0"
printf '%s\n' "$out" > "$TMP/v.csv"
cmp -s "$TMP/v.csv" "$srcdir/doc/generator-validation.csv"; ok $? "the validation table is doc/generator-validation.csv byte for byte"
[ "$st" = 0 ] && printf '%s\n' "$out" | tail -n +2 | while IFS=, read -r name seed rd gd ed rm gm em re ge ee ts tp met; do
	if [ "$met" = 1 ]; then echo "ok - $name seed $seed: targets met (errors $ed% $em% $ee%, tau $ts $tp)"
	else echo "not ok - $name seed $seed: errors $ed% $em% $ee%, tau settings $ts, policies $tp # TODO target not met (doc/generator.md)"; fi
done > "$TMP/rows"
while IFS= read -r l; do n=$((n + 1)); echo "${l%% - *} $n - ${l#* - }"; done < "$TMP/rows"

# 2. randomized options
awk 'BEGIN { srand(35)
	nm = split("train serve iid phase", models, " ")
	no = split("seed=0,1,18446744073709551615,-1,x|max-events=1,1000,50000000,50000001|fragment=0,1MiB,64MiB,1GiB,1TiB|fragment-piece=1,512,2MiB,0|fragment-keep=0,1,3,1000001|" \
	  "layers=1,3,0,2000|hidden=64,768,7,0|heads=1,4,12,0|batch=1,4,100000|seq=uniform:1,64,lognormal:32,1,const:0,pareto:1,0.5,weibull:10,2,table:16:1,32:3,nope|max-seq=1,64,99999999|arch=cnn,transformer,rnn|optimizer=adam,sgd,none,lion|steps=1,3,0|streams=1,2,3|image=8,32,7|channels=1,8,99999|workspace=0,1MiB,1TiB|ranks=1,8,0|zero=0,1,2,3|tp=1,2,4,5|" \
	  "requests=1,20,0,2000000|arrival-shape=0.01,0.5,5,0|arrival-mean=0,1,100,-1|prompt=lognormal:64,1,const:1,exp:0|output=lognormal:16,2,uniform:1,8,uniform:8,1|max-new=1,64,0|max-len=2,128,100|kv=contiguous,grow,paged,ring|kv-bytes-per-token=1,4KiB,512KiB,2GiB|kv-groups=1,4,0|page-tokens=1,16,0|grow-chunk=1,16|max-batch=1,8|kv-budget=0,1MiB,64MiB|act-bytes-per-token=0,1KiB|vocab=1,32000|" \
	  "count=1,500,0|size=lognormal:1MiB,3,pareto:4096,1.1,weibull:1MiB,0.5,gamma:2,1KiB,exp:1,table:512:1,2MiB:0.5,table:,lognormal:-1,1|lifetime=exp:10,const:0,pareto:1,0.8,table:1:1|max-size=1,1GiB|quantum=1,512,2MiB,0|" \
	  "bins=1,64,0|fitted-steps=1,2|scale=const:1,table:0.5:1,2:1|size-scale=0.5,2,0|scale-draw=random,shuffle,sequence,sorted|jitter=0,0.5,2|row=0 4096 0.5 3 0,0 1MiB 1 1 1,70000 1 1 1 0,0 0 0 0 0|first=0 512 0 1 0|last=1 8192 2 1 0|persist=4096 0 0 2,1 1 1 2000000|bogus=1", opts, "|")
	for (r = 0; r < 300; r++) {
		line = models[int(rand() * nm) + 1]
		k = int(rand() * 5)
		for (j = 0; j < k; j++) { split(opts[int(rand() * no) + 1], kv, "="); nv = split(kv[2], vals, ",")
			v = vals[int(rand() * nv) + 1]; line = line "\t--" kv[1] "\t" v }
		print line
	} }' > "$TMP/runs"
bad=0 good=0 i=0
while IFS= read -r line; do
	i=$((i + 1)); rm -f "$TMP/r.trace"
	oldifs=$IFS; IFS='	'; set -f
	# shellcheck disable=SC2086
	"$A" gen $line --max-events 200000 -o "$TMP/r.trace" > /dev/null 2> "$TMP/r.err"; s=$?
	IFS=$oldifs; set +f
	case $s in
	0) if "$A" info "$TMP/r.trace" > /dev/null 2>&1; then good=$((good + 1)); else echo "# run $i ($line): the trace does not read"; bad=$((bad + 1)); fi;;
	64|65|66) if [ -e "$TMP/r.trace" ] || ! grep -q '^allocsim: error: ' "$TMP/r.err"; then echo "# run $i ($line): exit $s with output or without a message"; bad=$((bad + 1)); fi;;
	*) echo "# run $i ($line): exit $s"; sed 's/^/#   /' "$TMP/r.err" | head -5; bad=$((bad + 1));;
	esac
done < "$TMP/runs"
is "$bad" 0 "300 randomized gen runs: each exits 0, 64, 65 or 66 as documented, failures write nothing"
[ "$good" -gt 30 ] && [ "$good" -lt 300 ]; ok $? "the randomized runs both succeed ($good) and fail"
echo "1..$n"
[ "$failed" = 0 ]
