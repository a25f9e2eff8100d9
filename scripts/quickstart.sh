#!/usr/bin/env bash
# cairn's main job, end to end: installs dependencies, builds the example trainer and the cairn
# tool, then trains on 2 ranks (Gloo) with checkpoints, is interrupted by a scheduled shutdown,
# resumes from the newest complete checkpoint, finishes with a Hugging Face style export, and
# inspects and verifies that export.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

options=(-DCAIRN_WITH_TORCH=ON)
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
if [ -f "$cuda/include/nccl.h" ]; then options+=(-DCAIRN_WITH_NCCL=ON -DCUDAToolkit_ROOT="$cuda"); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${options[@]}" >/dev/null
cmake --build build -j"${CAIRN_JOBS:-2}" --target cairn-train cairn-tool

run=runs/quickstart
rm -rf "$run"
train=(build/bin/cairn launch -n 2 -- build/bin/cairn-train --config examples/train.json "run.experiment_dir=$run")

echo "== train on 2 ranks: a checkpoint every 50 iterations, a shutdown (an interruption) at 100"
"${train[@]}"
echo "== the same command again: resumes from checkpoint 100, trains to 200, exports"
"${train[@]}"
echo "== what the run left"
ls "$run/checkpoints" "$run/export"
echo "== the export, as the cairn tool sees it"
build/bin/cairn inspect "$run/export/200"
build/bin/cairn verify "$run/export/200"
