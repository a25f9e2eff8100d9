#!/usr/bin/env bash
# Fuzzes the safetensors header parser with libFuzzer (clang, with AddressSanitizer and
# UndefinedBehaviorSanitizer) for a bounded time, starting from the committed seed corpus.
# Fails if the fuzzer finds a crash, a sanitizer report or an unexpected exception.
#
#     scripts/fuzz.sh [seconds, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=build/fuzz
mkdir -p "$out/corpus"
cp tests/fuzz/corpus/* "$out/corpus/"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude \
  tests/fuzz/safetensors_header.cpp -lboost_json -o "$out/safetensors_header"
"$out/safetensors_header" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" \
  2>&1 | tail -n 12
echo "fuzzing: no crash in ${seconds}s"
