#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU and a Python torch installation (CUDA build):
# builds the tests, the examples and the benchmarks against the libtorch inside that torch
# package, then runs
#   - the raw NCCL communicator test, the store rendezvous NCCL's bootstrap uses, and the
#     manager test (whose CUDA case runs only here),
#   - cairn-train on cuda with comm=auto (NCCL when built with it: train, shutdown, resume,
#     export) and cairn verify on its export; SIGTERM to a running cuda job (exit 75, resumed);
#     2 ranks with comm=nccl when two GPUs are visible, and with comm=gloo and CUDA tensors,
#   - the checkpoint manager benchmark on GPU state: async stall and resume against the
#     device-to-host and host-to-device copies of the same state.
#
#     scripts/gpu.sh [GiB of state for the benchmark, default 4]
set -euo pipefail
cd "$(dirname "$0")/.."

gib=${1:-4}
python=${PYTHON:-python3}
prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

options=(-DCAIRN_WITH_TORCH=ON "-DCMAKE_PREFIX_PATH=$prefix" -DCAIRN_HEADER_CHECK=OFF -DCAIRN_INSTALL=OFF)
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
if [ -f "$cuda/include/nccl.h" ]; then options+=(-DCAIRN_WITH_NCCL=ON "-DCUDAToolkit_ROOT=$cuda"); fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${options[@]}"
targets=(checkpoint_manager checkpoint_formats cairn-train cairn-tool cairn-bench-manager cairn-bench-checkpoint
  comm_store_worker)
if grep -q "CAIRN_WITH_NCCL:BOOL=ON" build-gpu/CMakeCache.txt; then targets+=(comm_nccl_gpu); fi
cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}"

# Every step runs, whatever the one before did; the summary at the end says what passed, what
# failed and what was skipped, and why.
summary=()
failed=0
step() { # name command...
  local name=$1
  shift
  echo "== $name"
  if "$@"; then summary+=("passed   $name"); else
    summary+=("FAILED   $name (status $?)")
    failed=1
  fi
}
skip() { summary+=("skipped  $1: $2"); }
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || echo 0)

if [ -x build-gpu/tests/comm_nccl_gpu ]; then
  step "raw NCCL communicator" build-gpu/tests/comm_nccl_gpu
else
  skip "raw NCCL communicator" "cairn was built without NCCL (no nccl.h in the CUDA toolkit)"
fi
step "rendezvous through the store (3 processes)" build-gpu/bin/cairn launch -n 3 -- build-gpu/tests/comm_store_worker share
step "checkpoint manager tests (CUDA state)" build-gpu/tests/checkpoint_manager
step "checkpoint format tests" build-gpu/tests/checkpoint_formats

train() { # experiment directory, overrides...
  build-gpu/bin/cairn-train --config examples/train.json "run.experiment_dir=$run/$1" device=cuda "${@:2}"
}
step "cairn-train device=cuda comm=auto: train to the shutdown at 100" train train
step "cairn-train: resume from 100, export at 200" train train
step "cairn verify of the export" build-gpu/bin/cairn verify "$run/train/export/200"

sigterm() { # a running job stopped by SIGTERM exits 75 after its checkpoint; resumed, it finishes
  local log=$run/sigterm.log
  build-gpu/bin/cairn-train --config examples/train.json "run.experiment_dir=$run/sigterm" device=cuda \
    training.train_iters=100000 training.shutdown.interval=null training.checkpoint.interval=100000 \
    training.logs.interval=1 >"$log" 2>&1 &
  local pid=$! waited=0
  until grep -q "iteration 20/" "$log" || ((waited > 600)); do sleep 0.1; waited=$((waited + 1)); done
  kill -TERM "$pid"
  local status=0
  wait "$pid" || status=$?
  [ "$status" = 75 ] || { echo "exit status $status, not 75"; tail "$log"; return 1; }
  local at
  at=$(ls "$run/sigterm/checkpoints" | sort -n | tail -1)
  train sigterm training.train_iters=$((at + 5)) training.shutdown.interval=null training.checkpoint.interval=100000 &&
    build-gpu/bin/cairn verify "$run/sigterm/checkpoints/$((at + 5))"
}
step "SIGTERM to a cuda run: checkpoint, exit 75, resume" sigterm

if ((gpus >= 2)); then
  step "2 ranks, NCCL" build-gpu/bin/cairn launch -n 2 -- build-gpu/bin/cairn-train --config examples/train.json \
    "run.experiment_dir=$run/nccl2" device=cuda comm=nccl training.train_iters=60 training.shutdown.interval=null
else
  skip "2 ranks, NCCL" "one GPU visible (NCCL puts one rank on each GPU)"
fi
step "2 ranks, Gloo, CUDA tensors on one GPU" build-gpu/bin/cairn launch -n 2 -- build-gpu/bin/cairn-train \
  --config examples/train.json "run.experiment_dir=$run/gloo" device=cuda comm=gloo training.train_iters=60 \
  training.shutdown.interval=null
step "cairn verify of the 2-rank checkpoint" build-gpu/bin/cairn verify "$run/gloo/checkpoints/60"

step "checkpoint manager benchmark on GPU state ($gib GiB)" build-gpu/bin/cairn-bench-manager "$gib" "$run" 3 cuda

echo
echo "== summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo "no GPU"))"
printf '  %s\n' "${summary[@]}"
exit "$failed"
