#!/usr/bin/env bash
# Fuzzes what cairn reads from untrusted checkpoint files with libFuzzer (clang, with
# AddressSanitizer and UndefinedBehaviorSanitizer) for a bounded time, half each, starting from
# the committed seed corpora: the safetensors header parser, and the JSON a checkpoint directory
# holds (metadata.json, the completion marker). Fails if the fuzzer finds a crash, a sanitizer
# report or an unexpected exception.
#
#     scripts/fuzz.sh [seconds, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
half=$(((seconds + 1) / 2))
out=build/fuzz
fuzz() { # target corpus
  mkdir -p "$out/$1-corpus"
  cp "tests/fuzz/$2"/* "$out/$1-corpus/"
  clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude \
    "tests/fuzz/$1.cpp" -lboost_json -o "$out/$1"
  "$out/$1" -max_total_time="$half" -print_final_stats=1 -artifact_prefix="$out/$1-" "$out/$1-corpus" 2>&1 | tail -n 12
}
mkdir -p "$out"
fuzz safetensors_header corpus
fuzz checkpoint_metadata metadata_corpus
echo "fuzzing: no crash in ${seconds}s"
