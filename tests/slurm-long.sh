#!/bin/bash
# slurm-long.sh - a sweep as a real Slurm job array (make check-long): munged, slurmctld and slurmd
# of Debian's slurm-wlm started here on localhost (one node, as the current user, ports and state
# under a temporary directory), scripts/slurm-sweep.sh submits an array of 4 shards and the
# dependent merge job, and the merged file must equal the one-process sweep byte for byte. Where
# slurm-wlm is missing or slurmd cannot start (a container without what it needs), every assertion
# is reported as SKIP with the reason, never as a pass.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
PLAN=4
skip_all() { echo "# $1"; for _ in $(seq $PLAN); do echo "ok $((n = n + 1)) # SKIP $1"; done; exit 0; }
for p in munged slurmctld slurmd sbatch sinfo scontrol; do
	command -v "$p" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
	command -v "$p" >/dev/null 2>&1 || skip_all "slurm-wlm/munge not installed ($p not found: apt-get install slurm-wlm munge)"
done

D="$TMP/slurm"; mkdir -p "$D/state" "$D/spool" "$D/munge"; chmod 700 "$D/munge"
me=$(id -un); host=$(hostname -s 2>/dev/null || hostname)
port=$((20000 + $$ % 20000))
stop() {
	for f in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munge/munged.pid"; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	sleep 1; rm -rf "$TMP"
}
trap stop EXIT
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 2>/dev/null; chmod 400 "$D/munge/munge.key"
munged --force --socket="$D/munge/sock" --key-file="$D/munge/munge.key" --pid-file="$D/munge/munged.pid" \
	--log-file="$D/munge/munged.log" --seed-file="$D/munge/seed" >"$D/munged.out" 2>&1 ||
	skip_all "munged does not start here: $(tail -1 "$D/munged.out")"
cat > "$D/slurm.conf" <<EOF
ClusterName=allocsimtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$me
SlurmdUser=$me
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/sock
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc)
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$D/slurm.conf"
slurmctld -i -f "$SLURM_CONF" >"$D/slurmctld.out" 2>&1 || skip_all "slurmctld does not start here: $(tail -1 "$D/slurmctld.out")"
slurmd -f "$SLURM_CONF" >"$D/slurmd.out" 2>&1 || skip_all "slurmd does not start here: $(tail -1 "$D/slurmd.out" "$D/slurmd.log" 2>/dev/null | tail -1)"
up=
for _ in $(seq 60); do
	s=$(sinfo -h -N -o %t 2>/dev/null)
	case $s in idle*|mix*|alloc*) up=1; break;; esac
	sleep 0.5
done
[ -n "$up" ] || skip_all "slurmd did not come up (node state '${s:-none}'; $(tail -1 "$D/slurmd.log" 2>/dev/null))"
echo "# slurm: $(sinfo --version) on $host, node $(sinfo -h -N -o '%N %t %c')"

r50="$T/resnet50_train__default.pickle.gz"; bert="$T/bert_infer_varlen__default.pickle.gz"
gpt="$T/gpt2_train_varlen__default.pickle.gz"
set -- -t "$r50" "$bert" "$gpt" --param max_split_size_mb=none,40,128,256 --param roundup_power2_divisions=none,4
"$A" sweep "$@" -o "$TMP/one.csv"
run "${srcdir:-.}/scripts/slurm-sweep.sh" -n 4 -w -o "$TMP/merged.csv" -d "$TMP/shards" -- "$@"
is "$st:$(cat "$TMP/shards/merge.out" 2>/dev/null)" "0:allocsim: merged 4 shards, 24 runs; estimated cost of the slowest shard 1.010x the mean" \
	"scripts/slurm-sweep.sh: the array of 4 shards and the merge job succeed"
[ -z "$errout" ] || printf '%s\n' "$errout" | sed 's/^/# stderr: /'

# the run, for doc/sweeps.md: the job ids, what each task's shard holds, the merge's report
for j in $out; do # (every task of the array, and the merge job, as scontrol shows them when done)
	scontrol -o show job "$j" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobId|ArrayTaskId|JobName|JobState|ExitCode|NodeList)=' |
		tr '\n' ' ' | sed 's/JobId=/\n# JobId=/g' | grep .
done
for f in "$TMP"/shards/shard-*.csv.shard; do [ -f "$f" ] && echo "# $(basename "$f"): $(sed -n 's/^shard //p' "$f"), runs $(sed -n 's/^runs //p' "$f"), cost $(sed -n 's/^cost //p' "$f")"; done
[ -f "$TMP/shards/merge.out" ] && sed 's/^/# merge.out: /' "$TMP/shards/merge.out"
true
is "$(ls "$TMP"/shards/shard-*.csv.shard 2>/dev/null | wc -l | tr -d ' ')" 4 "4 array tasks wrote 4 shards with provenance"
is "$(sed -n 's/^shard //p' "$TMP"/shards/shard-*.csv.shard 2>/dev/null | sort | tr '\n' ' ')" "1/4 2/4 3/4 4/4 " \
	"--shard auto read SLURM_ARRAY_TASK_ID/COUNT: shards 1..4 of 4"
ok "$(cmp -s "$TMP/merged.csv" "$TMP/one.csv"; echo $?)" "the merged Slurm array equals the one-process sweep byte for byte"
# a shard that fails (a trace that is not there): the merge job is cancelled, nothing is merged
run "${srcdir:-.}/scripts/slurm-sweep.sh" -n 2 -w -o "$TMP/bad.csv" -d "$TMP/bad" -- -t "$r50" "$TMP/missing.pickle.gz"
logged=$(cat "$TMP"/bad/slurm-*_0.out 2>/dev/null | grep -c "allocsim: error: .*missing.pickle.gz")
is "$st:$([ -e "$TMP/bad.csv" ] && echo written):$logged" "1::1" \
	"a failed array task (allocsim's error in its log): the script exits 1 and no merged file is written"
ok "$(contains "$errout" "ended CANCELLED: a shard failed?" && [ "$logged" = 1 ]; echo $?)" "... saying the merge was cancelled"
if [ "$failed" != 0 ]; then
	for f in "$TMP"/shards/*.out "$D/slurmctld.log" "$D/slurmd.log"; do [ -f "$f" ] && sed "s|^|# $(basename "$f"): |" "$f" | tail -15; done
fi
finish
