#!/bin/sh
# parallel-long.sh - doc/sweeps.md's GNU parallel recipe, run as written there (make check-long;
# .ci/run installs parallel): shards run by parallel, merged by allocsim merge, equal to the
# one-process sweep byte for byte; and the plan's balance on a larger grid.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
if ! command -v parallel >/dev/null 2>&1; then
	for i in 1 2 3 4; do echo "ok $i # SKIP GNU parallel is not installed (apt-get install parallel)"; done
	echo "1..4"; exit 0
fi
# every workload of the bundled snapshots, several settings
set -- "$T"/*__default.pickle.gz "$T"/*__ms128.pickle.gz
grid="--param max_split_size_mb=none,20..1024:x2 --param expandable_segments=False,True"
"$A" sweep -t "$@" $grid -j 2 -o "$TMP/one.csv"
cd "$TMP" || exit 1
# (the recipe of doc/sweeps.md, with $A for allocsim)
parallel -j 2 "$A" sweep -t "$*" $grid --shard {}/8 -o shard-{}.csv ::: $(seq 8) 2>"$TMP/par.err"
is "$?:$(ls shard-*.csv.shard | wc -l | tr -d ' ')" 0:8 "GNU parallel ran 8 shards, each with its provenance"
run "$A" merge shard-*.csv -o sweep.csv
is "$st" 0 "allocsim merge takes the 8 shards"
ok "$(cmp -s sweep.csv one.csv; echo $?)" "the merged file equals the one-process sweep byte for byte"
slow=$(printf '%s' "$errout" | sed -n 's/.*slowest shard \([0-9.]*\)x the mean.*/\1/p')
ok "$(awk -v s="$slow" 'BEGIN{exit !(s != "" && s <= 1.15)}'; echo $?)" \
	"$(($(wc -l < one.csv) - 1)) runs on 8 shards: the slowest shard's estimated cost ${slow}x the mean (<= 1.15)"
for f in shard-*.csv.shard; do echo "# $f: $(sed -n 's/^runs //p' "$f") runs, cost $(sed -n 's/^cost //p' "$f")"; done
finish
