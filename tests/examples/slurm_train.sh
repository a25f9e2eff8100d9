#!/bin/sh
# The example trainer under a real SLURM cluster of one node (Debian's slurm-wlm: munged,
# slurmctld and slurmd, started here on loopback with a configuration of their own and stopped at
# the end): `srun -n 2` trains and resumes; `scancel --signal=TERM` of a batch job leaves a
# preemption checkpoint; a job put back with `scontrol requeue` resumes from its own preemption
# checkpoint, and a plain `scancel` of it leaves another. Exit status 0 when every step did what
# it should; 77 (skipped) with a message where the daemons cannot start here.
#
#     slurm_train.sh TRAIN WORK_DIR
set -u
train=$1
dir=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
common="training.checkpoint.interval=4 model.hidden=16 data.batch_size=8 seed=3"
fail() {
  echo "slurm_train.sh: $1"
  [ -f "$dir/slurmctld.log" ] && tail -20 "$dir/slurmctld.log" "$dir/slurmd.log"
  exit 1
}
skip() {
  echo "slurm_train.sh: skipped: $1"
  exit 77
}
for daemon in munged slurmctld slurmd srun sbatch scancel scontrol squeue; do
  command -v $daemon >/dev/null || skip "$daemon is not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
done
[ "$(id -u)" -eq 0 ] || skip "the daemons run as root here"

# munge: a key and a socket of this test's own.
dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 2>/dev/null
chmod 600 "$dir/munge/key"
chmod 700 "$dir/munge"
socket="$dir/munge/socket"
munged --key-file="$dir/munge/key" --socket="$socket" --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" \
  --seed-file="$dir/munge/seed" --force >/dev/null 2>&1 || skip "munged does not start: $(tail -1 "$dir/munge/log")"
host=$(hostname -s)
# The daemons' ports: 20 in a row that nothing listens on now, below the kernel's range of
# ephemeral ports (32768 and up: a concurrent test's server on port 0, or any outgoing connection,
# may hold one there, and slurmctld then dies with "Address already in use"), above the trainers'
# rendezvous ports (20000 + the job id).
base=$(
  python3 - "$$" <<'PY'
import socket, sys
start = int(sys.argv[1])
for i in range(500):
    base = 20100 + ((start + 7919 * i) % 500) * 20  # 20100 to 30080
    held, free = [], True
    for port in range(base, base + 20):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.append(s)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            free = False
            break
    for s in held:
        s.close()
    if free:
        print(base)
        sys.exit(0)
sys.exit("no 20 free ports in a row in [20100, 30100)")
PY
) || {
  kill "$(cat "$dir/munge/pid")" 2>/dev/null
  skip "no ports for the daemons"
}
cpus=$(nproc)
cat >"$dir/slurm.conf" <<EOF
ClusterName=cairn-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SrunPortRange=$((base + 2))-$((base + 19))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=30
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF="$dir/slurm.conf"
stop() {
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
  done
}
# A step that hangs is shown before ctest's timeout (400 s) ends the test without a word: at
# 300 s, what each job printed and what the cluster says of them, then every job of this test's
# own cluster cancelled, so that the step waiting on one fails and names it.
(
  sleep 300 >/dev/null 2>&1
  echo "slurm_train.sh: still running after 300 s; the jobs, their logs and the daemons' last lines:"
  squeue -a -o "%i %j %T %M %R" 2>&1
  for log in "$dir"/*.log; do
    echo "== $log"
    tail -n 30 "$log"
  done
  : >"$dir/watchdog"
  scancel --user="$(id -un)" 2>&1
) &
watchdog=$!
trap 'kill $watchdog 2>/dev/null; stop' EXIT
slurmctld -i >/dev/null 2>&1 || skip "slurmctld does not start: $(tail -1 "$dir/slurmctld.log" 2>/dev/null)"
slurmd >/dev/null 2>&1 || skip "slurmd does not start: $(tail -1 "$dir/slurmd.log" 2>/dev/null)"
# Up to 30 s for the node, each question bounded (sinfo retries an unreachable controller for
# minutes), and at once if the controller ended (a port taken since it was chosen).
started=$(date +%s)
until timeout 5 sinfo -h -o %T 2>/dev/null | grep -q idle; do
  if [ -f "$dir/slurmctld.pid" ] && ! kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    skip "slurmctld ended: $(tail -1 "$dir/slurmctld.log" 2>/dev/null)"
  fi
  [ $(($(date +%s) - started)) -lt 30 ] || skip "the node does not come up: $(timeout 5 sinfo -h 2>&1 | tail -1)"
  sleep 0.1
done

# srun: two tasks train, then resume to a later iteration.
# shellcheck disable=SC2086 # the overrides are words
srun -n 2 -t 2 "$train" run.experiment_dir="$dir/srun" training.train_iters=8 $common >"$dir/srun.log" 2>&1 ||
  { cat "$dir/srun.log"; fail "srun -n 2 failed"; }
[ -f "$dir/srun/checkpoints/8/rank_1.safetensors" ] || { cat "$dir/srun.log"; fail "no checkpoint 8 of 2 ranks"; }
# shellcheck disable=SC2086
srun -n 2 -t 2 "$train" run.experiment_dir="$dir/srun" training.train_iters=12 $common >"$dir/srun2.log" 2>&1 ||
  { cat "$dir/srun2.log"; fail "the resumed srun job failed"; }
grep -q "resumed from .*checkpoints/8 at iteration 8" "$dir/srun2.log" || { cat "$dir/srun2.log"; fail "not resumed"; }

# A batch job of 2 tasks that trains until it is stopped.
submit() { # submit NAME OVERRIDES [SBATCH OPTIONS]: the job id
  name=$1
  overrides=$2
  shift 2
  cat >"$dir/$name.sh" <<EOF
#!/bin/sh
srun "$train" run.experiment_dir="$dir/$name" training.train_iters=1000000 training.logs.interval=1 $common $overrides
EOF
  sbatch --parsable -n 2 -t 10 -o "$dir/$name.log" --open-mode=append "$@" "$dir/$name.sh"
}
# shellcheck source=wait_for.sh
. "$here/wait_for.sh"
still_running() { [ ! -f "$dir/watchdog" ]; } # the job's state is what the tests wait for
give_up() {
  scancel "$job"
  cat "$dir/$name.log"
  fail "$1"
}
ended() { [ -z "$(squeue -h -j "$job" -o %T 2>/dev/null)" ]; }
stopped_at() { sed -n 's/.*stopped by a signal after iteration \([0-9]*\).*/\1/p' "$dir/$1.log" | tail -1; }

# A batch script that starts the trainer itself, without srun: one process alone, told so.
printf '#!/bin/sh\n"%s" run.experiment_dir="%s" training.train_iters=4 %s\n' "$train" "$dir/alone" "$common" \
  >"$dir/alone.sh"
job=$(sbatch --parsable -n 2 -t 5 -o "$dir/alone.log" "$dir/alone.sh") || fail "sbatch failed"
name=alone
wait_for "the batch script's trainer did not end" ended
grep -q "runs as one process" "$dir/alone.log" || { cat "$dir/alone.log"; fail "no warning that it runs alone"; }
[ "$(grep -c "runs as one process" "$dir/alone.log")" -eq 1 ] || { cat "$dir/alone.log"; fail "warned more than once"; }
grep -q "done: 4 iterations" "$dir/alone.log" || { cat "$dir/alone.log"; fail "the batch script's trainer failed"; }
[ -f "$dir/alone/checkpoints/4/rank_0.safetensors" ] && [ ! -f "$dir/alone/checkpoints/4/rank_1.safetensors" ] ||
  fail "the batch script's checkpoint is not of one rank"

# scancel --signal=TERM: the step's tasks are signalled, save, and stop.
job=$(submit term "") || fail "sbatch failed"
wait_for "the batch job saved no checkpoint 4" test -f "$dir/term/checkpoints/4/complete.json"
scancel --signal=TERM "$job"
wait_for "the job did not end after scancel --signal=TERM" ended
stopped=$(stopped_at term)
[ -n "$stopped" ] || { cat "$dir/term.log"; fail "scancel --signal=TERM left no preemption checkpoint"; }
[ -f "$dir/term/checkpoints/$stopped/complete.json" ] || fail "the preemption checkpoint $stopped is not complete"

# scontrol requeue: the job is stopped, put back, and resumes from its own preemption checkpoint;
# a plain scancel of it then leaves another. Its checkpoints are far apart (every 1000
# iterations): every save it makes here is one a signal asked for. (A step cancelled for a
# requeue may lose its last lines of output: the saves themselves are what is checked.)
newest() { # the newest complete checkpoint of the job NAME, or 0
  newest_found=0
  for save in "$dir/$1"/checkpoints/*/complete.json; do
    [ -f "$save" ] || continue
    n=$(basename "$(dirname "$save")")
    [ "$n" -gt "$newest_found" ] && newest_found=$n
  done
  echo "$newest_found"
}
saved() { [ "$(newest requeue)" -gt "$1" ]; }
job=$(submit requeue training.checkpoint.interval=1000 --requeue) || fail "sbatch failed"
name=requeue
wait_for "the batch job does not train" grep -qs "iteration 20/" "$dir/requeue.log"
scontrol requeue "$job" || fail "scontrol requeue failed"
wait_for "the requeued job left no preemption checkpoint" saved 0
first=$(newest requeue)
# A requeued job waits before it is eligible again (its begin time): now.
pending() { [ "$(squeue -h -j "$job" -o %T 2>/dev/null)" = PENDING ]; }
wait_for "the job was not requeued" pending
scontrol update JobId="$job" StartTime=now || fail "scontrol update StartTime=now failed"
wait_for "the requeued job did not resume from its preemption checkpoint $first" \
  grep -qs "resumed from .*checkpoints/$first at iteration $first" "$dir/requeue.log"
wait_for "the requeued job does not train" grep -qs "iteration $((first + 2))/" "$dir/requeue.log"
scancel "$job"
wait_for "the job did not end after scancel" ended
second=$(newest requeue)
[ "$second" -gt "$first" ] || { cat "$dir/requeue.log"; fail "a plain scancel left no preemption checkpoint"; }
echo "slurm_train.sh: srun trained and resumed; scancel --signal=TERM stopped at $stopped;" \
  "requeued from $first, scancel stopped at $second"
