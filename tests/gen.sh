#!/bin/sh
# gen.sh - allocsim gen: the same seed gives the same bytes, seeds differ, the models' shapes are
# what their options say, bad options and parameter files fail with their status and message and
# write nothing, and a fit/gen round trip on a small real trace reproduces its peaks (doc/generator.md).
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
info() { "$A" info "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1==k {split($2, v, " "); print v[1]}'; }
peak() { "$A" replay --no-timing -c "$2" -o - "$1" 2>/dev/null | awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="peak_reserved_bytes") k=i} NR==2{print $k}'; }

for m in "train" "train --arch cnn --layers 2" "serve --requests 50" "serve --requests 50 --kv paged" "iid --count 3000"; do
	run "$A" gen $m --seed 5 -o "$TMP/a.trace"; s1=$st
	run "$A" gen $m --seed 5 -o "$TMP/b.trace"
	cmp -s "$TMP/a.trace" "$TMP/b.trace"; ok $(( $? + s1 + st )) "gen $m: seed 5 twice gives the same bytes"
	run "$A" gen $m --seed 6 -o "$TMP/c.trace"
	! cmp -s "$TMP/a.trace" "$TMP/c.trace" && [ "$st" = 0 ]; ok $? "gen $m: seeds 5 and 6 differ"
	run "$A" info "$TMP/a.trace"; is "$st" 0 "gen $m: the trace reads back (allocsim info)"
done

# exact shapes: iid draws --count allocations; a lifetime of 0 frees each before the next
"$A" gen iid --count 777 --size const:4096 --lifetime const:0 -o "$TMP/i.trace"
is "$(info "$TMP/i.trace" alloc_events) $(info "$TMP/i.trace" free_events) $(info "$TMP/i.trace" peak_live_requested_bytes)" \
	"777 777 4096" "iid: 777 allocations of 4096 bytes, each freed at once: peak 4096"
# the fragmenter prefix: 64 MiB in 2 MiB pieces, every 2nd kept: 32 more allocations, 16 live with the workload
"$A" gen iid --count 777 --size const:4096 --lifetime const:0 --fragment 64MiB -o "$TMP/f.trace"
is "$(info "$TMP/f.trace" alloc_events) $(info "$TMP/f.trace" peak_live_requested_bytes)" "809 67108864" \
	"--fragment 64MiB: 32 pieces of 2 MiB before the workload"
is "$(awk '$1=="f"' "$TMP/f.trace" | head -16 | awk '{print $2}' | tr '\n' ' ')" "1 3 5 7 9 11 13 15 17 19 21 23 25 27 29 31 " \
	"--fragment: every other piece freed before the workload"
is "$(tail -16 "$TMP/f.trace" | awk '{print $1 $2}' | tr '\n' ' ')" "f2 f4 f6 f8 f10 f12 f14 f16 f18 f20 f22 f24 f26 f28 f30 f32 " \
	"--fragment: the 16 kept pieces freed after it"
# train: the parameters of GPT-2 small (124,439,808 with the 1024 positions) in fp32, never freed
"$A" gen train --steps 1 --optimizer none -o "$TMP/t.trace"
is "$(awk '$1=="a" && ++k<=148 {s+=$3} END {print s}' "$TMP/t.trace")" "$((124439808 * 4))" "train: GPT-2 small's parameters, 4 bytes each"
# ranks: ZeRO-1 over 8 ranks keeps Adam's two states as flat shards of 1/8 of the parameters' bytes
# (497,759,232 / 8), and updates the shard through one temporary of that size; --tp 4 splits QKV
"$A" gen train --steps 1 --ranks 8 --zero 1 -o "$TMP/z.trace"
is "$(awk '$1=="a" && $3==62219904' "$TMP/z.trace" | wc -l | tr -d ' ')" "3" "train --ranks 8 --zero 1: two state shards of 62219904 bytes and one update temporary"
"$A" gen train --steps 1 --tp 4 -o "$TMP/tp.trace"
is "$(awk '$1=="a" && ++k==5 {print $3}' "$TMP/tp.trace")" "$((576 * 768 * 4))" "train --tp 4: the QKV weight is 576 x 768 (a quarter of 2304 rows)"
run "$A" gen train --zero 2 -o "$TMP/x.trace"; is "$st" 64 "train --zero without --ranks: exit 64"
# .asbin gets the binary format with the same events
"$A" gen serve --requests 30 -o "$TMP/s.trace" && "$A" gen serve --requests 30 -o "$TMP/s.asbin"
is "$(peak "$TMP/s.asbin" "")" "$(peak "$TMP/s.trace" "")" "serve: the .asbin and the native trace replay alike"
is "$(head -c 7 "$TMP/s.asbin" | tail -c 6)" "ASIMEV" "serve: .asbin is the binary format"

# serve without paging fragments: KV caches re-allocated as they grow leave holes expandable
# segments close (the sweep in doc/generator.md)
"$A" gen serve --requests 200 --seed 7 -o "$TMP/g.trace"
d=$(peak "$TMP/g.trace" ""); e=$(peak "$TMP/g.trace" expandable_segments:True)
[ -n "$d" ] && [ -n "$e" ] && [ "$d" -gt $((2 * e)) ]; ok $? "serve --kv grow: default reserves more than twice what expandable segments do ($d vs $e)"

# option errors: status 64 and a message naming the option; nothing written
rm -f "$TMP/x.trace"
run "$A" gen train --layerz 3 -o "$TMP/x.trace"
is "$st" 64 "unknown option: exit 64"; contains "$errout" "did you mean 'layers'" ; ok $? "unknown option: did you mean 'layers'"
run "$A" gen iid --size lognormal:1MiB -o "$TMP/x.trace"
is "$st" 64 "a distribution short of a parameter: exit 64"; contains "$errout" "lognormal wants 2 numbers"; ok $? "... says lognormal wants 2 numbers"
run "$A" gen iid --size pareto:0,1 -o "$TMP/x.trace"; is "$st" 64 "pareto with XM 0: exit 64"
run "$A" gen iid --size table:1:0 -o "$TMP/x.trace"; is "$st" 64 "a table with no positive weight: exit 64"
run "$A" gen serve --max-new 4096 --max-len 4096 -o "$TMP/x.trace"
is "$st:$errout" "64:allocsim: error: gen: --max-new 4096 leaves no room for a prompt in --max-len 4096${nl}Try 'allocsim gen serve --help'." "serve: --max-new >= --max-len refused"
run "$A" gen train --heads 7 -o "$TMP/x.trace"; is "$st" 64 "train: hidden not a multiple of heads: exit 64"
run "$A" gen train --steps 0 -o "$TMP/x.trace"; is "$st" 64 "train --steps 0: exit 64"
run "$A" gen trian -o "$TMP/x.trace"; contains "$errout" "did you mean 'train'"; ok $? "a misspelt model: did you mean 'train'"
run "$A" gen iid; is "$st" 64 "missing -o: exit 64"
run "$A" gen iid --count 1000000 --max-events 1000 -o "$TMP/x.trace"
is "$st" 64 "over --max-events: exit 64"; contains "$errout" "more than --max-events 1000"; ok $? "... and says so"
[ ! -e "$TMP/x.trace" ] && [ -s "$TMP/i.trace" ]; ok $? "no output written by any refused run (and a good run writes one)"
# parameter files: FILE:LINE, status 65; a missing one 66
printf 'model iid\ncount 10\nsize weibull:1MiB\n' > "$TMP/p1"
run "$A" gen --params "$TMP/p1" -o "$TMP/x.trace"
is "$st" 65 "a bad line in --params: exit 65"; contains "$errout" "$TMP/p1:3: --size: weibull wants 2 numbers"; ok $? "... names FILE:3"
printf 'model serve\n' > "$TMP/p2"
run "$A" gen iid --params "$TMP/p2" -o "$TMP/x.trace"; is "$st" 65 "a parameter file of another model: exit 65"
run "$A" gen iid --params "$TMP/nope" -o "$TMP/x.trace"; is "$st" 66 "a missing parameter file: exit 66"
printf 'model iid\ncount 10\n' > "$TMP/p3"
run "$A" gen --params "$TMP/p3" --count 20 -o "$TMP/y.trace"
is "$st $(info "$TMP/y.trace" alloc_events)" "0 20" "the command line after --params overrides it"

# fit/gen round trip on a small real trace: the generated trace's peaks within 10 % of the real one's
S="$T/seed_example__default.pickle.gz"
run "$A" gen --fit "$S" -o "$TMP/seed.params"; is "$st" 0 "gen --fit seed_example: exit 0"
grep -q '^model phase' "$TMP/seed.params"; ok $? "gen --fit writes a phase model"
run "$A" gen --params "$TMP/seed.params" -o "$TMP/seed.trace"; is "$st" 0 "gen from the fitted parameters: exit 0"
for c in "" max_split_size_mb:128 expandable_segments:True; do
	r=$(peak "$S" "$c"); g=$(peak "$TMP/seed.trace" "$c")
	[ -n "$r" ] && [ -n "$g" ] && awk -v r="$r" -v g="$g" 'BEGIN { d = (g - r) / r; exit !(d <= 0.1 && d >= -0.1) }'
	ok $? "seed_example ${c:-default}: generated peak reserved $g within 10% of the real $r"
done
# at other scales: twice the steps, twice the sizes
"$A" gen --params "$TMP/seed.params" --size-scale 2 -o "$TMP/seed2.trace"
is "$(info "$TMP/seed2.trace" peak_live_requested_bytes)" "$(( $(info "$TMP/seed.trace" peak_live_requested_bytes) * 2 ))" \
	"--size-scale 2: the peak live bytes doubled"
st1=$(grep -c '^model' "$TMP/seed.params"); k=$(awk '$1=="steps" {print $2}' "$TMP/seed.params")
"$A" gen --params "$TMP/seed.params" --steps $((2 * k)) -o "$TMP/seed3.trace"
a1=$(info "$TMP/seed.trace" alloc_events); a2=$(info "$TMP/seed3.trace" alloc_events)
[ "$st1" = 1 ] && [ -n "$a1" ] && [ -n "$a2" ] && [ "$a2" -gt $((a1 * 19 / 10)) ] && [ "$a2" -lt $((a1 * 21 / 10)) ]
ok $? "--steps $((2 * k)) (twice the fitted $k): about twice the allocations ($a1 -> $a2)"
# bert (varying lengths, a period of 205 allocations): slots; its peaks within 10 % too
S="$T/bert_infer_varlen__default.pickle.gz"
"$A" gen --fit "$S" -o "$TMP/bert.params" && "$A" gen --params "$TMP/bert.params" -o "$TMP/bert.trace"
grep -q '^# slots: the steps cut a period (205 allocations) apart' "$TMP/bert.params"; ok $? "bert: the fit finds the period of 205 allocations and fits slots"
for c in "" max_split_size_mb:128 expandable_segments:True; do
	r=$(peak "$S" "$c"); g=$(peak "$TMP/bert.trace" "$c")
	[ -n "$r" ] && [ -n "$g" ] && awk -v r="$r" -v g="$g" 'BEGIN { d = (g - r) / r; exit !(d <= 0.1 && d >= -0.1) }'
	ok $? "bert ${c:-default}: generated peak reserved $g within 10% of the real $r"
done
# --model iid: the sizes' and lifetimes' empirical tables; as many allocations as the trace
"$A" gen --fit "$T/seed_example__default.pickle.gz" --model iid -o "$TMP/iid.params" && "$A" gen --params "$TMP/iid.params" -o "$TMP/iid.trace"
is "$(info "$TMP/iid.trace" alloc_events)" "5189" "gen --fit --model iid: the trace's 5189 allocations"
is "$(awk '$1=="size" {n = split(substr($2, 7), e, ","); for (i = 1; i <= n; i++) { split(e[i], p, ":"); s += p[2] } print s}' "$TMP/iid.params")" "5189" \
	"... its size table counts every one"
run "$A" gen --fit "$T/seed_example__default.pickle.gz" --model slots; is "$st" 64 "gen --fit --model slots: exit 64"
run "$A" gen --fit "$TMP/nope.trace"; is "$st" 66 "gen --fit of a missing trace: exit 66"
echo "1..$n"
[ "$failed" = 0 ]
