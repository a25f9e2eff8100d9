#!/usr/bin/env bash
# Fuzzes what cairn reads from untrusted files with libFuzzer (clang, with AddressSanitizer and
# UndefinedBehaviorSanitizer) for a bounded time shared between the targets, starting from the
# committed seed corpora: the safetensors header parser, the JSON a checkpoint directory holds
# (metadata.json, the completion marker), and YAML config files (when yaml-cpp is installed).
# Fails if the fuzzer finds a crash, a sanitizer report or an unexpected exception.
#
#     scripts/fuzz.sh [seconds, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
yaml=0
[[ -f /usr/include/yaml-cpp/yaml.h ]] && yaml=1
share=$(((seconds + 2 + yaml) / (2 + yaml)))
out=build/fuzz
fuzz() { # target corpus [extra compiler arguments]
  mkdir -p "$out/$1-corpus"
  cp "tests/fuzz/$2"/* "$out/$1-corpus/"
  clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude \
    "tests/fuzz/$1.cpp" "${@:3}" -lboost_json -o "$out/$1"
  "$out/$1" -max_total_time="$share" -print_final_stats=1 -artifact_prefix="$out/$1-" "$out/$1-corpus" 2>&1 | tail -n 12
}
mkdir -p "$out"
fuzz safetensors_header corpus
fuzz checkpoint_metadata metadata_corpus
if ((yaml)); then
  fuzz config_yaml yaml_corpus -DCAIRN_WITH_YAML=1 -lyaml-cpp
fi
echo "fuzzing: no crash in ${seconds}s"
