#!/usr/bin/env bash
# Runs every test of cairn: installs dependencies, builds Release (a user's first build) with
# warnings as errors, runs the unit, compile-fail, header and consumer tests, builds again with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the unit tests there, then fuzzes the safetensors header
# parser for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

jobs=${CAIRN_JOBS:-2}
# The libtorch layers always; the raw NCCL backend where the CUDA toolkit carries NCCL.
options=(-DCAIRN_WITH_TORCH=ON)
nccl=(-DCAIRN_WITH_NCCL=OFF)
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
if [ -f "$cuda/include/nccl.h" ]; then nccl=(-DCAIRN_WITH_NCCL=ON -DCUDAToolkit_ROOT="$cuda"); fi

echo "== build (Release, warnings as errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAIRN_WARNINGS_AS_ERRORS=ON "${options[@]}" "${nccl[@]}"
cmake --build build -j"$jobs"
echo "== tests"
ctest --test-dir build -j"$jobs" --output-on-failure

echo "== build (AddressSanitizer + UndefinedBehaviorSanitizer)"
# The unit tests only: without the NCCL test (it needs a GPU, and the sanitizer run executes the
# unit tests only) and the compile-fail tests (they compile, they do not run).
# Line tables only (-g1): what the sanitizers' reports need; full debug info costs 15% more to compile.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCAIRN_SANITIZE=ON \
  -DCAIRN_WARNINGS_AS_ERRORS=ON "${options[@]}" \
  -DCAIRN_WITH_NCCL=OFF -DCAIRN_BUILD_EXAMPLES=OFF -DCAIRN_BUILD_BENCH=OFF -DCAIRN_INSTALL=OFF \
  -DCAIRN_HEADER_CHECK=OFF -DCAIRN_COMPILE_FAIL_TESTS=OFF
cmake --build build-sanitize -j"$jobs"
echo "== tests under sanitizers"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-sanitize -j"$jobs" --output-on-failure -L unit

echo "== fuzzing the safetensors header parser"
./scripts/fuzz.sh "${CAIRN_FUZZ_SECONDS:-60}"
