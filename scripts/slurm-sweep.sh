#!/bin/bash
# slurm-sweep.sh - one allocsim sweep as a Slurm job array (one shard per task) and a merge job that
# runs when every task has succeeded (doc/sweeps.md, "Beyond one machine").
#
# usage: scripts/slurm-sweep.sh [-n SHARDS] [-w] [-d DIR] -o OUT.csv [-s 'SBATCH OPTIONS'] -- SWEEP ARGUMENTS...
#   -n SHARDS   tasks in the array (default 4); each runs 'allocsim sweep --shard auto'
#   -o OUT.csv  the merged CSV, written by 'allocsim merge' once all the shards are done
#   -d DIR      where the shards, their provenance files and the logs go (default OUT.csv.shards)
#   -s OPTS     more sbatch options for both jobs (e.g. '-p long --time=02:00:00'; word-split)
#   -w          wait for the merge job to end; the exit status is the merge's
# Environment: ALLOCSIM (the allocsim to run on the nodes, default: the one on PATH, made absolute),
#   SLURM_SWEEP_CPUS (CPUs per task, default 1; the sweep gets -j of it).
# The job ids are printed (array, then merge). A failed task is rerun with
#   sbatch --array=K ... (or scontrol requeue JOBID_K): its shard resumes (--resume) and the merge
#   job, left pending (DependencyNeverSatisfied), is resubmitted with the command printed here.
# All shards must see the same traces at the same paths (a shared file system): merge refuses
# shards of different builds, arguments or traces.
set -eu
n=4 out= dir= opts= wait=
while getopts n:o:d:s:wh c; do
	case $c in
	n) n=$OPTARG ;;
	o) out=$OPTARG ;;
	d) dir=$OPTARG ;;
	s) opts=$OPTARG ;;
	w) wait=1 ;;
	h) sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "usage: $0 [-n SHARDS] [-w] [-d DIR] -o OUT.csv [-s 'SBATCH OPTIONS'] -- SWEEP ARGUMENTS..." >&2; exit 64 ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$out" ] || { echo "$0: -o OUT.csv is required" >&2; exit 64; }
[ $# -gt 0 ] || { echo "$0: no sweep arguments (after --)" >&2; exit 64; }
case $n in '' | *[!0-9]* | 0) echo "$0: -n needs a number of shards >= 1, got '$n'" >&2; exit 64 ;; esac
A=${ALLOCSIM:-$(command -v allocsim || true)}
[ -n "$A" ] && [ -x "$A" ] || { echo "$0: no allocsim to run (set ALLOCSIM)" >&2; exit 64; }
A=$(cd "$(dirname "$A")" && pwd)/$(basename "$A")
cpus=${SLURM_SWEEP_CPUS:-1}
dir=${dir:-$out.shards}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case $out in /*) ;; *) out=$(pwd)/$out ;; esac

# The array task: --shard auto reads SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT; --resume keeps
# the rows of an earlier, interrupted attempt of the same task.
args=$(printf ' %q' "$@")
cat > "$dir/shard.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=allocsim-sweep
#SBATCH --array=0-$((n - 1))
#SBATCH --cpus-per-task=$cpus
#SBATCH --output=$dir/slurm-%A_%a.out
exec $(printf '%q' "$A") sweep --shard auto -j "\${SLURM_CPUS_PER_TASK:-1}" --resume \\
    -o "$dir/shard-\${SLURM_ARRAY_TASK_ID}.csv"$args
EOF
shards=
for k in $(seq 0 $((n - 1))); do shards="$shards $(printf '%q' "$dir/shard-$k.csv")"; done
cat > "$dir/merge.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=allocsim-merge
#SBATCH --output=$dir/merge.out
exec $(printf '%q' "$A") merge$shards -o $(printf '%q' "$out")
EOF
# shellcheck disable=SC2086 # (opts: several sbatch options)
array=$(sbatch --parsable $opts "$dir/shard.sbatch")
array=${array%%;*}
echo "$array"
kill=no; [ -z "$wait" ] || kill=yes # (waiting: a failed task cancels the merge instead of leaving it pending)
# shellcheck disable=SC2086
merge=$(sbatch --parsable $opts --dependency=afterok:"$array" --kill-on-invalid-dep="$kill" ${wait:+--wait} "$dir/merge.sbatch") || {
	echo "$0: the merge job $merge failed: see $dir/merge.out" >&2; exit 1; }
merge=${merge%%;*}
echo "$merge"
if [ -n "$wait" ]; then # (sbatch --wait exits 0 for a merge cancelled because a shard failed)
	state=$(scontrol -o show job "$merge" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p')
	[ "$state" = COMPLETED ] || { echo "$0: the merge job $merge ended ${state:-unknown}: a shard failed? See $dir/slurm-${array}_*.out" >&2; exit 1; }
fi
[ -n "$wait" ] || echo "$0: when the array ends, $out is written by the merge job (or: sbatch --dependency=afterok:$array $dir/merge.sbatch)" >&2
