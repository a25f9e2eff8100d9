#!/bin/sh
# The rendezvous refuses a job its ranks do not agree on, at once and naming what differs, and
# names the ranks that never come: two launchers of one 2-node job given different -n; the same
# with different grids; one launcher whose peer node never starts (a short collective_timeout).
# Never a libtorch backtrace. Exit status 0 when each is refused as it should be.
#
#     rendezvous.sh TOOL TRAIN WORK_DIR
set -u
tool=$1
train=$2
dir=$3
rm -rf "$dir"
mkdir -p "$dir"
fail() {
  echo "rendezvous.sh: $1"
  exit 1
}
# shellcheck source=free_port.sh
. "$(dirname "$0")/free_port.sh"
port=$(free_port) || exit 1
common="training.train_iters=2 model.hidden=16 data.batch_size=8 training.checkpoint.interval=null"

# two_launchers NAME N0 N1 [OVERRIDES0] [OVERRIDES1]: node 0 with N0 ranks, node 1 with N1; both must fail.
two_launchers() {
  port=$((port + 1))
  # shellcheck disable=SC2086 # the overrides are words
  "$tool" launch -n "$3" --nnodes 2 --node-rank 1 --master-port $port -- "$train" run.experiment_dir="$dir/$1" \
    $common ${5:-} >"$dir/$1-node1.log" 2>&1 &
  other=$!
  started=$(date +%s)
  # shellcheck disable=SC2086
  "$tool" launch -n "$2" --nnodes 2 --node-rank 0 --master-port $port -- "$train" run.experiment_dir="$dir/$1" \
    $common ${4:-} >"$dir/$1-node0.log" 2>&1 && fail "$1: node 0 succeeded"
  wait $other && fail "$1: node 1 succeeded"
  elapsed=$(($(date +%s) - started))
  [ $elapsed -lt 60 ] || fail "$1: refused after $elapsed s, not at once"
  cat "$dir/$1-node0.log" "$dir/$1-node1.log" >"$dir/$1.log"
  ! grep -q "Exception raised from\|frame #" "$dir/$1.log" || { cat "$dir/$1.log"; fail "$1: a libtorch backtrace"; }
}

two_launchers sizes 2 3
grep -q "disagree on the world size: rank 0 has 4, rank [3-5] has 6" "$dir/sizes.log" ||
  { cat "$dir/sizes.log"; fail "-n 2 and -n 3: the difference is not named"; }
grep -q "disagree on the world size" "$dir/sizes-node0.log" ||
  { cat "$dir/sizes-node0.log"; fail "node 0's ranks were not told why"; }

two_launchers grids 2 2 parallel.tensor=2 parallel.tensor=1
grep -q "disagree on the grid: rank 0 has .*, rank [1-3] has " "$dir/grids.log" ||
  { cat "$dir/grids.log"; fail "different grids: the difference is not named"; }

# Two launchers given the same node rank: each rank's second copy is refused, naming it (the
# first copies may make a whole job with node 0, or fail when their launcher stops them). One
# experiment directory for every copy: a job made of the two launchers' first copies must not
# fail on its directory check, and stop the second copies, before they are refused.
port=$((port + 1))
for copy in a b; do
  # shellcheck disable=SC2086
  "$tool" launch -n 2 --nnodes 2 --node-rank 1 --master-port $port -- "$train" run.experiment_dir="$dir/twice" \
    $common run.collective_timeout=20 >"$dir/twice-$copy.log" 2>&1 &
  eval "twice_$copy=\$!"
done
# shellcheck disable=SC2086
"$tool" launch -n 2 --nnodes 2 --node-rank 0 --master-port $port -- "$train" run.experiment_dir="$dir/twice" \
  $common run.collective_timeout=20 >"$dir/twice-0.log" 2>&1
# shellcheck disable=SC2154 # set by the eval above
wait "$twice_a"
a=$?
# shellcheck disable=SC2154
wait "$twice_b"
b=$?
[ $a -ne 0 ] || [ $b -ne 0 ] || fail "both launchers of node 1 succeeded"
cat "$dir"/twice-*.log >"$dir/twice.log"
grep -q "rank [23] was started twice" "$dir/twice.log" || { cat "$dir/twice.log"; fail "a rank started twice is not named"; }

# A peer node that never starts: rank 0 names ranks 2 and 3 when its timeout ends.
# shellcheck disable=SC2086
"$tool" launch -n 2 --nnodes 2 --node-rank 0 --master-port $((port + 1)) -- "$train" run.experiment_dir="$dir/alone" \
  $common run.collective_timeout=3 >"$dir/alone.log" 2>&1 && fail "a job missing a node succeeded"
grep -q "ranks 2, 3 (2 of 4) did not come to the rendezvous" "$dir/alone.log" ||
  { cat "$dir/alone.log"; fail "the missing ranks are not named"; }
! grep -q "Exception raised from\|frame #" "$dir/alone.log" || { cat "$dir/alone.log"; fail "a libtorch backtrace"; }
echo "rendezvous.sh: different -n and grids refused at once, naming the difference; ranks started twice and missing ranks named"
