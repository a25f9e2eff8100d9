#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU and a Python torch installation (CUDA build):
# builds the tests, the examples and the benchmarks against the libtorch inside that torch
# package, then runs
#   - the raw NCCL communicator test and the manager test (whose CUDA case runs only here),
#   - cairn-train on cuda with comm=auto (NCCL when built with it: train, shutdown, resume,
#     export) and cairn verify on its export; a 2-rank run with comm=gloo and CUDA tensors,
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
targets=(checkpoint_manager checkpoint_formats cairn-train cairn-tool cairn-bench-manager cairn-bench-checkpoint)
if grep -q "CAIRN_WITH_NCCL:BOOL=ON" build-gpu/CMakeCache.txt; then targets+=(comm_nccl_gpu); fi
cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}"

echo "== GPU tests"
if [ -x build-gpu/tests/comm_nccl_gpu ]; then build-gpu/tests/comm_nccl_gpu; fi
build-gpu/tests/checkpoint_manager
build-gpu/tests/checkpoint_formats

echo "== cairn-train on cuda"
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
train=(build-gpu/bin/cairn-train --config examples/train.json "run.experiment_dir=$run/train" device=cuda)
"${train[@]}"
"${train[@]}"
build-gpu/bin/cairn verify "$run/train/export/200"
echo "== 2 ranks, Gloo, CUDA tensors (NCCL puts one rank on each GPU; Gloo shares one)"
build-gpu/bin/cairn launch -n 2 -- build-gpu/bin/cairn-train --config examples/train.json \
  "run.experiment_dir=$run/gloo" device=cuda comm=gloo training.train_iters=60 training.shutdown.interval=null
build-gpu/bin/cairn verify "$run/gloo/checkpoints/60"

echo "== checkpoint manager on GPU state ($gib GiB)"
build-gpu/bin/cairn-bench-manager "$gib" "$run" 3 cuda
