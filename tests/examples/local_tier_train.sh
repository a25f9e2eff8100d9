#!/bin/sh
# The example trainer with the local tier, on two "nodes" (two launchers on loopback, two ranks
# each), each node given its own local directory: local checkpoints every 2 iterations, persistent
# ones every 10. An uninterrupted job gives the reference losses. Then the same job is frozen at
# iteration 17 (rank 2 stops itself), node 1's launcher and ranks are killed with SIGKILL, node
# 1's local directory is deleted (a replaced node), and the job starts again: it must resume from
# the newest local checkpoint node 0 holds (newer than the persistent 10), node 1's parts sent
# back from node 0, and print the reference losses after it, bitwise. Exit status 0 when every
# step did what it should. ARGS: the trainer's own settings (a model, a grid: cairn-llama with
# dropout on TP=2 x DP=2, say).
#
#     local_tier_train.sh TOOL TRAIN WORK_DIR [ARGS...]
set -u
tool=$1
train=$2
dir=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
common="training.train_iters=24 training.checkpoint.interval=10 training.checkpoint.local.interval=2
  training.checkpoint.local.keep=3 training.logs.interval=1 $*"
fail() {
  echo "local_tier_train.sh: $1"
  exit 1
}
# shellcheck source=../comm/free_port.sh
. "$here/../comm/free_port.sh"
# The losses a run printed, one "N L" a line.
losses() { sed -n 's/^\(\[rank 0\] \)\{0,1\}iteration \([0-9]*\)\/[0-9]*: loss \([0-9.]*\).*/\2 \3/p' "$1"; }

# launch NODE NAME [LOG]: node NODE's launcher of job NAME in the background ($! its pid), its log
# $dir/LOG-NODE.log (LOG: NAME unless given), its local directory $dir/NAME-local/nodeNODE.
launch() {
  # shellcheck disable=SC2086 # the overrides are words
  "$tool" launch -n 2 --nnodes 2 --node-rank "$1" --master-addr 127.0.0.1 --master-port "$port" -- "$train" \
    run.experiment_dir="$dir/$2" training.checkpoint.local.directory="$dir/$2-local/node$1" $common \
    >"$dir/${3:-$2}-$1.log" 2>&1 &
}
# job NAME: both nodes of job NAME to their end; fails unless both succeed.
job() {
  port=$(free_port) || exit 1
  launch 1 "$1"
  other=$!
  launch 0 "$1"
  first=$!
  wait $first || { cat "$dir/$1-0.log" "$dir/$1-1.log"; fail "$1: node 0 failed"; }
  wait $other || { cat "$dir/$1-0.log" "$dir/$1-1.log"; fail "$1: node 1 failed"; }
}

job straight
losses "$dir/straight-0.log" >"$dir/straight.losses"
[ "$(wc -l <"$dir/straight.losses")" -eq 24 ] || fail "the uninterrupted job printed no 24 losses"
# shellcheck disable=SC2144 # one experiment: one folder
[ -f "$dir"/straight-local/node1/cairn-*/checkpoints/22/rank_0.safetensors ] || fail "node 1 keeps no copy of rank 0's part"

# The job frozen at 17 on rank 2, node 1 killed whole.
port=$(free_port) || exit 1
CAIRN_TEST_SIGNAL=STOP@17:2 launch 1 crashed
node1=$!
launch 0 crashed
node0=$!
stop_all() { # on a failure: every process of the job, by its pid
  for pid in $(cat "/proc/$node1/task/$node1/children" "/proc/$node0/task/$node0/children" 2>/dev/null) \
    $node1 $node0; do kill -9 "$pid" 2>/dev/null; done
}
trap stop_all EXIT
# shellcheck source=wait_for.sh
. "$here/wait_for.sh"
still_running() { kill -0 "$node1" 2>/dev/null; }
give_up() {
  stop_all
  cat "$dir/crashed-0.log" "$dir/crashed-1.log"
  fail "$1"
}
frozen() { # rank 2, node 1's first: stopped (state T)
  for pid in $(cat "/proc/$node1/task/$node1/children" 2>/dev/null); do
    grep -q '^[0-9]* ([^)]*) T' "/proc/$pid/stat" 2>/dev/null && return 0
  done
  return 1
}
wait_for "rank 2 did not stop at iteration 17" frozen
# shellcheck disable=SC2046 # the pids are words
kill -9 $(cat "/proc/$node1/task/$node1/children") "$node1"
wait $node1
# Node 0's ranks find their peers gone and fail; its launcher ends.
still_running() { kill -0 "$node0" 2>/dev/null; }
wait $node0 && fail "node 0 succeeded without node 1"
trap - EXIT
newest=0
for save in "$dir"/crashed-local/node0/cairn-*/checkpoints/*; do
  name=${save##*/}
  case $name in *[!0-9]* | '') continue ;; esac
  [ "$name" -gt "$newest" ] && newest=$name
done
[ "$newest" -gt 10 ] || fail "node 0 holds no local checkpoint newer than the persistent 10"
# shellcheck disable=SC2144
[ -f "$dir"/crashed-local/node0/cairn-*/checkpoints/"$newest"/complete.json ] || fail "local checkpoint $newest is not complete"
rm -rf "$dir/crashed-local/node1" # a replaced node

# Started again: resumed from node 0's newest local checkpoint, node 1's parts from node 0.
port=$(free_port) || exit 1
launch 1 crashed restarted
other=$!
launch 0 crashed restarted
first=$!
wait $first || { cat "$dir/restarted-0.log" "$dir/restarted-1.log"; fail "the restarted job failed on node 0"; }
wait $other || { cat "$dir/restarted-1.log"; fail "the restarted job failed on node 1"; }
grep -q "resumed from .*node0/cairn-[0-9a-f]*/checkpoints/$newest at iteration $newest" "$dir/restarted-0.log" ||
  { cat "$dir/restarted-0.log"; fail "not resumed from local checkpoint $newest"; }
grep -q "rank 2 from rank 0 on node 0" "$dir/restarted-0.log" ||
  { cat "$dir/restarted-0.log"; fail "rank 2's part did not come from node 0"; }
# shellcheck disable=SC2144
[ -f "$dir"/crashed-local/node1/cairn-*/checkpoints/22/complete.json ] || fail "the replaced node saves no local checkpoint again"
sed -n "$((newest + 1)),\$p" "$dir/straight.losses" >"$dir/expected.losses"
losses "$dir/restarted-0.log" >"$dir/restarted.losses"
[ -s "$dir/restarted.losses" ] || fail "the restarted job printed no losses"
cmp -s "$dir/expected.losses" "$dir/restarted.losses" ||
  fail "the resumed losses differ: $(paste "$dir/expected.losses" "$dir/restarted.losses")"
echo "local_tier_train.sh: resumed from local checkpoint $newest after node 1 was replaced; losses $((newest + 1))..24 equal"
