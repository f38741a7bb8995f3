#!/bin/sh
# shard.sh - sweep --shard: the plan balanced by estimated cost, --shard auto from the Slurm, PBS,
# SGE and LSF job-array variables (and its errors), the provenance file, and allocsim merge: the
# one-process bytes from complete shards, a refusal (naming the file) for anything else.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
r50="$T/resnet50_train__default.pickle.gz"; bert="$T/bert_infer_varlen__default.pickle.gz"
gpt="$T/gpt2_train_varlen__default.pickle.gz"
G="-t $r50 $bert $gpt --param max_split_size_mb=none,40,128,256 --param roundup_power2_divisions=none,4"
# (no job-array variable from the environment this test runs in)
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_STEP \
	PBS_ARRAY_INDEX PBS_ARRAYID SGE_TASK_ID SGE_TASK_FIRST SGE_TASK_LAST SGE_TASK_STEPSIZE LSB_JOBINDEX LSB_JOBINDEX_END \
	LSB_JOBINDEX_STEP

"$A" sweep $G -o "$TMP/one.csv"
for k in 1 2 3 4; do "$A" sweep $G --shard $k/4 -o "$TMP/s$k.csv"; done
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/s3.csv" "$TMP/s4.csv" -o "$TMP/m.csv"
is "$st" 0 "merge of 4 complete shards succeeds"
ok "$(cmp -s "$TMP/m.csv" "$TMP/one.csv"; echo $?)" "merged shards are byte-identical to the one-process sweep"
# the plan: contiguous parts of the grid, each shard's estimated cost within 1.15x of the mean
is "$(for k in 1 2 3 4; do tail -n +2 "$TMP/s$k.csv" | cut -d, -f1 | tr '\n' ' '; echo '|'; done | tr -d '\n')" \
	"0 1 2 3 4 5 6 7 8 |9 10 11 12 13 |14 15 16 17 18 |19 20 21 22 23 |" \
	"shards are contiguous runs of the grid, the cheap resnet50 runs packed more to a shard"
slow=$(printf '%s' "$errout" | sed -n 's/.*slowest shard \([0-9.]*\)x the mean.*/\1/p')
ok "$(awk -v s="$slow" 'BEGIN{exit !(s != "" && s >= 1 && s <= 1.15)}'; echo $?)" "slowest shard's cost ${slow}x the mean (<= 1.15)"
is "$(sed -n 's/^runs //p' "$TMP/s2.csv.shard")" "5 5" "the provenance counts the shard's runs and those done"
is "$(grep -c '^args .*--param max_split_size_mb=none,40,128,256' "$TMP/s2.csv.shard")" 1 "the provenance holds the arguments"
is "$(grep -c -e '--shard' -e '-o ' "$TMP/s2.csv.shard")" 0 "... without --shard and -o, which differ between shards"
# few unequal runs (3 traces, 2 shards; estimated 12,712, 25,212 and 24,892 events): contiguous
# parts would give 37,924 and 24,892 (1.21x the mean), so the greedy placement is taken: bert
# alone, resnet50 and gpt2 together (37,604)
"$A" sweep -t "$r50" "$bert" "$gpt" --shard 1/2 -o "$TMP/f1.csv"
"$A" sweep -t "$r50" "$bert" "$gpt" --shard 2/2 -o "$TMP/f2.csv"
is "$(tail -n +2 "$TMP/f1.csv" | cut -d, -f1 | tr '\n' ' ')|$(tail -n +2 "$TMP/f2.csv" | cut -d, -f1 | tr "\n" " ")" "1 |0 2 " \
	"3 unequal runs on 2 shards: the costliest alone, the other two together (not contiguous)"
run "$A" merge "$TMP/f2.csv" "$TMP/f1.csv"
"$A" sweep -t "$r50" "$bert" "$gpt" -o "$TMP/f.csv"
ok "$(cmp -s "$TMP/out" "$TMP/f.csv"; echo $?)" "... merged (to standard output) in grid order, as one process writes it"
# the CSV itself stays plain (CSV readers and --resume): the header first, rows only
is "$(head -1 "$TMP/s2.csv")" "$(head -1 "$TMP/one.csv")" "a shard's CSV starts with the sweep's header (provenance is beside it)"
"$A" sweep $G --shard 2/4 --resume -o "$TMP/s2.csv"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/s3.csv" "$TMP/s4.csv" -o "$TMP/m2.csv"
ok "$(cmp -s "$TMP/m2.csv" "$TMP/one.csv"; echo $?)" "a shard rerun with --resume still merges"

# merge refuses, writes nothing, names the problem
cp "$TMP/one.csv" "$TMP/keep.csv"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/s4.csv" -o "$TMP/keep.csv"
is "$st:$errout" "65:allocsim: error: shard 3/4 is missing (1 of 4 shards not given)" "a missing shard is refused"
ok "$(cmp -s "$TMP/keep.csv" "$TMP/one.csv"; echo $?)" "... and the output is left as it was"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/s2.csv" "$TMP/s3.csv" "$TMP/s4.csv" -o "$TMP/x.csv"
is "$st:$errout" "65:allocsim: error: shard 2/4 is given twice ('$TMP/s2.csv' and '$TMP/s2.csv')" "a shard given twice is refused"
ok "$([ "$st" = 65 ] && [ ! -e "$TMP/x.csv" ]; echo $?)" "... and nothing is written"
"$A" sweep -t "$r50" "$bert" "$gpt" --param max_split_size_mb=none,40,128,512 --param roundup_power2_divisions=none,4 \
	--shard 3/4 -o "$TMP/o3.csv"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/o3.csv" "$TMP/s4.csv"
is "$st" 65 "a shard of other arguments is refused"
contains "$errout" "'$TMP/s1.csv' and '$TMP/o3.csv' come from different arguments"; ok $? "... naming both files"
"$A" sweep $G --shard 3/5 -o "$TMP/n3.csv"
run "$A" merge "$TMP/s1.csv" "$TMP/n3.csv"
contains "$errout" "'$TMP/s1.csv' is shard 1/4 but '$TMP/n3.csv' is 3/5"; ok $? "a shard of another shard count is refused ($st)"
cp "$TMP/s3.csv" "$TMP/c3.csv"; cp "$TMP/s3.csv.shard" "$TMP/c3.csv.shard"
sed -i '$d' "$TMP/c3.csv"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/c3.csv" "$TMP/s4.csv"
is "$st" 65 "a shard whose CSV lost a row is refused"
contains "$errout" "'$TMP/c3.csv' changed after its shard run wrote it"; ok $? "... saying the file changed"
cp "$TMP/s3.csv" "$TMP/c3.csv"; sed 's/^build .*/build allocsim 0.0 exe-crc32=00000000/' "$TMP/s3.csv.shard" > "$TMP/c3.csv.shard"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/c3.csv" "$TMP/s4.csv"
contains "$errout" "come from different builds"; ok $? "a shard of another build is refused ($st)"
rm "$TMP/c3.csv.shard"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/c3.csv" "$TMP/s4.csv"
is "$st" 66 "a shard without its provenance file is refused (exit 66)"
contains "$errout" "'$TMP/c3.csv' has no provenance file"; ok $? "... naming it"
cp "$TMP/s3.csv" "$TMP/c3.csv"; sed 's/^runs 5 5/runs 5 4/' "$TMP/s3.csv.shard" > "$TMP/c3.csv.shard"
run "$A" merge "$TMP/s1.csv" "$TMP/s2.csv" "$TMP/c3.csv" "$TMP/s4.csv"
contains "$errout" "shard 3/4 is incomplete (4 of 5 runs)"; ok $? "an incomplete shard is refused ($st)"
run "$A" merge "$TMP/s1.csv" -o "$TMP/s1.csv"
is "$st" 64 "merge onto one of its inputs is a usage error"
run "$A" merge; is "$st" 64 "merge without a shard is a usage error"

# --shard auto: the job-array variables of each scheduler
auto() { "$A" sweep $G --shard "$1" -o "$TMP/auto.csv" 2>"$TMP/auto.err"; st=$?; slurp errout "$TMP/auto.err"; }
auto_is() { # EXPECTED-SHARD NAME: the shard that --shard auto ran, and its rows equal --shard K/N's
	is "$st:$(sed -n 's/^shard //p' "$TMP/auto.csv.shard" 2>/dev/null)" "0:$1" "$2"
	ok "$(cmp -s "$TMP/auto.csv" "$TMP/s${1%/4}.csv"; echo $?)" "... its rows are shard $1's"
	rm -f "$TMP/auto.csv" "$TMP/auto.csv.shard"; }
SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=4 auto auto; auto_is 3/4 "Slurm: task 2 of 4 (0-based) is shard 3/4"
SLURM_ARRAY_TASK_ID=12 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_MAX=13 auto auto
auto_is 3/4 "Slurm without COUNT: task 12 of 10-13 is shard 3/4"
SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=4 auto auto
auto_is 3/4 "Slurm with a step: task 4 of 0-6:2 is shard 3/4"
SGE_TASK_ID=3 SGE_TASK_FIRST=1 SGE_TASK_LAST=4 SGE_TASK_STEPSIZE=1 auto auto; auto_is 3/4 "SGE: task 3 of 1-4 (1-based) is shard 3/4"
SGE_TASK_ID=5 SGE_TASK_FIRST=1 SGE_TASK_LAST=7 SGE_TASK_STEPSIZE=2 auto auto; auto_is 3/4 "SGE with a step: task 5 of 1-7:2 is shard 3/4"
LSB_JOBINDEX=3 LSB_JOBINDEX_END=4 auto auto; auto_is 3/4 "LSF: index 3 of 1-4 is shard 3/4"
PBS_ARRAY_INDEX=3 auto auto/4; auto_is 3/4 "PBS Pro: PBS_ARRAY_INDEX 3 with --shard auto/4 is shard 3/4"
PBS_ARRAYID=1 auto auto/4; auto_is 1/4 "Torque: PBS_ARRAYID 1 with --shard auto/4 is shard 1/4"
SGE_TASK_ID=undefined auto auto
is "$st:$errout" "64:allocsim: error: sweep: --shard auto: no job-array variable is set (SLURM_ARRAY_TASK_ID, PBS_ARRAY_INDEX or PBS_ARRAYID, SGE_TASK_ID, LSB_JOBINDEX); outside a job array give --shard K/N
Try 'allocsim sweep --help'." "--shard auto outside a job array is a usage error naming the variables (SGE's 'undefined' is unset)"
PBS_ARRAY_INDEX=2 auto auto
contains "$errout" "PBS exports no array size; give it as --shard auto/N"; ok $? "PBS without N is refused ($st)"
SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=4 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=9 auto auto
contains "$errout" "SLURM_ARRAY_TASK_COUNT=4 but MIN..MAX (0..9, step 1) holds 10 tasks"; ok $? "Slurm: COUNT against MIN..MAX is checked ($st)"
SLURM_ARRAY_TASK_ID=7 SLURM_ARRAY_TASK_COUNT=4 auto auto
contains "$errout" "SLURM_ARRAY_TASK_ID=7 is not one of the 4 tasks from 0"; ok $? "Slurm: an id beyond the count is refused ($st)"
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=4 SGE_TASK_ID=1 SGE_TASK_FIRST=1 SGE_TASK_LAST=4 auto auto
contains "$errout" "the job-array variables of Slurm and SGE are both set"; ok $? "two schedulers' variables at once are refused ($st)"
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=4 auto auto/8
contains "$errout" "--shard auto/8: the Slurm array has 4 tasks"; ok $? "auto/N against the scheduler's count is checked ($st)"
SLURM_ARRAY_TASK_ID=x1 SLURM_ARRAY_TASK_COUNT=4 auto auto
contains "$errout" "SLURM_ARRAY_TASK_ID='x1' is not a job-array index"; ok $? "a variable that is not a number is refused ($st)"
SGE_TASK_ID=9 SGE_TASK_FIRST=1 SGE_TASK_LAST=4 auto auto
contains "$errout" "SGE_TASK_ID=9 is not in SGE_TASK_FIRST..SGE_TASK_LAST (1..4, step 1)"; ok $? "SGE: an id out of range is refused ($st)"
LSB_JOBINDEX=2 auto auto
contains "$errout" "LSB_JOBINDEX=2 with LSB_JOBINDEX_END=unset"; ok $? "LSF without LSB_JOBINDEX_END is refused ($st)"
finish
