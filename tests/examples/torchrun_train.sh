#!/bin/sh
# The example trainer under torchrun, the launcher of PyTorch (Debian's python3-torch, through
# torchrun.py): with its agent serving the rendezvous store (its default, static rendezvous) a
# 2-rank job trains to its end; with --standalone (rank 0 serves the store) too; a worker killed
# with SIGKILL is restarted by torchrun (--max_restarts) and the job resumes from its newest
# checkpoint; SIGTERM to torchrun's agent then leaves a preemption checkpoint. Exit status 0 when
# every step did what it should.
#
#     torchrun_train.sh TRAIN PYTHON WORK_DIR
set -u
train=$1
python=$2
dir=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
common="training.checkpoint.interval=4 model.hidden=16 data.batch_size=8 seed=3"
fail() {
  echo "torchrun_train.sh: $1"
  exit 1
}
torchrun() {
  OMP_NUM_THREADS=1 "$python" "$here/torchrun.py" --nproc_per_node 2 --monitor_interval 1 "$@"
}
# shellcheck source=../comm/free_port.sh
. "$(dirname "$0")/../comm/free_port.sh"
port=$(free_port) || exit 1

# torchrun's default: its agent serves the store at MASTER_PORT, and tells the workers so.
# shellcheck disable=SC2086 # the overrides are words
torchrun --master_port $port --no_python "$train" run.experiment_dir="$dir/static" training.train_iters=8 $common \
  >"$dir/static.log" 2>&1 || { cat "$dir/static.log"; fail "the job under torchrun's agent store failed"; }
grep -q "done: 8 iterations" "$dir/static.log" || { cat "$dir/static.log"; fail "the job did not finish"; }
[ -f "$dir/static/checkpoints/8/rank_1.safetensors" ] || fail "no checkpoint 8 of 2 ranks under torchrun"

# --standalone: a rendezvous of torchrun's own on a free port; rank 0 serves the workers' store.
# shellcheck disable=SC2086
torchrun --standalone --no_python "$train" run.experiment_dir="$dir/standalone" training.train_iters=4 $common \
  >"$dir/standalone.log" 2>&1 || { cat "$dir/standalone.log"; fail "the --standalone job failed"; }
[ -f "$dir/standalone/checkpoints/4/complete.json" ] || fail "no checkpoint 4 after the --standalone job"

# A worker killed mid-run: torchrun restarts the job, which resumes; then SIGTERM to the agent.
job="$dir/restarted"
# shellcheck disable=SC2086
# (Not through the function above: $! must be the agent itself, not a subshell around it.)
OMP_NUM_THREADS=1 "$python" "$here/torchrun.py" --nproc_per_node 2 --monitor_interval 1 --master_port $((port + 1)) \
  --max_restarts 1 --no_python "$train" run.experiment_dir="$job" training.train_iters=1000000 \
  training.logs.interval=1 $common >"$dir/restarted.log" 2>&1 &
agent=$!
stop_job() { # on a failure: the agent and its workers, by their pids
  for pid in $(cat "/proc/$agent/task/$agent/children" 2>/dev/null) $agent; do kill -9 "$pid" 2>/dev/null; done
}
trap stop_job EXIT
# shellcheck source=wait_for.sh
. "$here/wait_for.sh"
still_running() { kill -0 $agent 2>/dev/null; }
give_up() {
  stop_job
  tail -50 "$dir/restarted.log"
  fail "torchrun: $1"
}
wait_for "no checkpoint 4 under torchrun" test -f "$job/checkpoints/4/complete.json"
workers=$(cat "/proc/$agent/task/$agent/children")
[ -n "$workers" ] || { stop_job; fail "torchrun's agent has no workers"; }
# shellcheck disable=SC2086 # the pids are words
set -- $workers
eval "last=\${$#}"
kill -9 "$last" # the last started: rank 1
wait_for "torchrun did not restart the job from its checkpoint" \
  grep -q "resumed from .*checkpoints/[0-9]* at iteration" "$dir/restarted.log"
resumed=$(sed -n 's/.*resumed from .*checkpoints\/\([0-9]*\) at iteration.*/\1/p' "$dir/restarted.log" | tail -1)
[ "$resumed" -ge 4 ] || fail "resumed from iteration $resumed, not from a checkpoint the first attempt saved"
wait_for "the restarted job does not train" grep -q "iteration $((resumed + 2))/" "$dir/restarted.log"
kill -TERM $agent
wait $agent
trap - EXIT
grep -q "stopped by a signal after iteration" "$dir/restarted.log" ||
  { cat "$dir/restarted.log"; fail "SIGTERM to torchrun's agent left no preemption checkpoint"; }
stopped=$(sed -n 's/.*stopped by a signal after iteration \([0-9]*\).*/\1/p' "$dir/restarted.log" | tail -1)
[ -f "$job/checkpoints/$stopped/complete.json" ] || fail "the preemption checkpoint $stopped is not complete"
[ "$stopped" -gt "$resumed" ] || fail "the preemption checkpoint $stopped is not past the resume at $resumed"
echo "torchrun_train.sh: trained under torchrun's store and --standalone; restarted from checkpoint $resumed;" \
  "preempted at $stopped"
