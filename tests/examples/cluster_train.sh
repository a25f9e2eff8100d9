#!/bin/sh
# The example trainer as a cluster runs it: a 4-rank job on two "nodes" (two launchers on
# loopback, node ranks 0 and 1, two ranks each) trains to its end with checkpoints, then resumes
# to a later iteration; the same job started by SLURM's variables alone (no torchrun ones, four
# processes as srun starts them) trains too. Exit status 0 when every step did what it should.
#
#     cluster_train.sh TOOL TRAIN WORK_DIR
set -u
tool=$1
train=$2
dir=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
common="training.checkpoint.interval=4 model.hidden=16 data.batch_size=8 seed=3"
fail() {
  echo "cluster_train.sh: $1"
  exit 1
}

# shellcheck disable=SC2086 # the overrides are words
sh "$here/../comm/two_nodes.sh" "$tool" "$train" run.experiment_dir="$dir/nodes" training.train_iters=8 $common \
  >"$dir/first.log" 2>&1 || { cat "$dir/first.log"; fail "the two-node job failed"; }
[ -f "$dir/nodes/checkpoints/8/complete.json" ] || fail "no checkpoint 8 after the two-node job"
[ -f "$dir/nodes/checkpoints/8/rank_3.safetensors" ] || fail "checkpoint 8 is not of 4 ranks"
# shellcheck disable=SC2086
sh "$here/../comm/two_nodes.sh" "$tool" "$train" run.experiment_dir="$dir/nodes" training.train_iters=12 $common \
  >"$dir/second.log" 2>&1 || { cat "$dir/second.log"; fail "the resumed two-node job failed"; }
grep -q "resumed from .*checkpoints/8 at iteration 8" "$dir/second.log" || { cat "$dir/second.log"; fail "not resumed"; }
[ -f "$dir/nodes/checkpoints/12/complete.json" ] || fail "no checkpoint 12 after the resumed job"

# SLURM alone: 4 tasks, 2 a node on two nodes (both this host), the master the first host of the
# node list.
# shellcheck source=../comm/free_port.sh
. "$(dirname "$0")/../comm/free_port.sh"
port=$(free_port) || exit 1
pids=""
for rank in 0 1 2 3; do
  # shellcheck disable=SC2086
  env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u GROUP_RANK -u MASTER_ADDR \
    SLURM_PROCID=$rank SLURM_NTASKS=4 SLURM_LOCALID=$((rank % 2)) SLURM_NODEID=$((rank / 2)) \
    SLURM_TASKS_PER_NODE="2(x2)" SLURM_JOB_NODELIST="localhost,localhost" SLURM_STEP_ID=0 SLURM_JOB_ID=1 \
    MASTER_PORT=$port "$train" run.experiment_dir="$dir/slurm" training.train_iters=8 $common \
    >"$dir/slurm-$rank.log" 2>&1 &
  pids="$pids $!"
done
status=0
for pid in $pids; do # rank 0 first: when it fails, the others would wait for its store
  wait "$pid" || { status=1; kill $pids 2>/dev/null; }
done
[ $status -eq 0 ] || { cat "$dir"/slurm-*.log; fail "the SLURM job failed"; }
grep -q "done: 8 iterations" "$dir/slurm-0.log" || { cat "$dir/slurm-0.log"; fail "the SLURM job did not finish"; }
[ -f "$dir/slurm/checkpoints/8/complete.json" ] || fail "no checkpoint 8 after the SLURM job"
[ -f "$dir/slurm/checkpoints/8/rank_3.safetensors" ] || fail "the SLURM job's checkpoint is not of 4 ranks"
echo "cluster_train.sh: two nodes trained and resumed; SLURM's variables alone trained"
