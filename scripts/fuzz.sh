#!/usr/bin/env bash
# Fuzzes what cairn reads from untrusted files with libFuzzer (clang, with AddressSanitizer and
# UndefinedBehaviorSanitizer) from the committed seed corpora: the safetensors header parser,
# the JSON a checkpoint directory holds (metadata.json, the completion marker), and YAML config
# files (when yaml-cpp is installed). The time is a budget of processor seconds shared equally
# between the targets, which are built and run side by side on the machine's cores
# (CAIRN_JOBS, default all): each gets the same fuzzing whatever the number of cores, and the
# wall time shrinks with them. Fails if the fuzzer finds a crash, a sanitizer report or an
# unexpected exception.
#
#     scripts/fuzz.sh [processor seconds, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
cores=${CAIRN_JOBS:-$(nproc)}
out=build/fuzz
mkdir -p "$out"

targets=(safetensors_header checkpoint_metadata)
declare -A corpus=([safetensors_header]=corpus [checkpoint_metadata]=metadata_corpus [config_yaml]=yaml_corpus)
declare -A extra=([config_yaml]="-DCAIRN_WITH_YAML=1 -lyaml-cpp")
[[ -f /usr/include/yaml-cpp/yaml.h ]] && targets+=(config_yaml)
n=${#targets[@]}
# All targets fuzz at once, for as long as gives each its share of the processor time: n on
# min(n, cores) cores.
busy=$((n < cores ? n : cores))
wall=$(((seconds + busy - 1) / busy))

# Runs `command… <target>` for every target, at most `at_once` at a time, each writing
# $out/<target>.<phase>.log, and shows their ends; fails naming those that failed.
each() { # phase at_once command…
  local phase=$1 at_once=$2 failed=() pids=() names=() i
  shift 2
  for t in "${targets[@]}"; do
    while (($(jobs -rp | wc -l) >= at_once)); do wait -n || true; done
    "$@" "$t" >"$out/$t.$phase.log" 2>&1 &
    pids+=($!) names+=("$t")
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done
  for t in "${targets[@]}"; do
    echo "--- $phase $t"
    tail -n 12 "$out/$t.$phase.log"
  done
  if ((${#failed[@]})); then
    echo "fuzzing failed in $phase: ${failed[*]}" >&2
    return 1
  fi
}
build() {
  # shellcheck disable=SC2086 # extra arguments are words
  clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude \
    "tests/fuzz/$1.cpp" ${extra[$1]:-} -lboost_json -o "$out/$1"
}
run() {
  mkdir -p "$out/$1-corpus"
  cp "tests/fuzz/${corpus[$1]}"/* "$out/$1-corpus/"
  "$out/$1" -max_total_time="$wall" -print_final_stats=1 -artifact_prefix="$out/$1-" "$out/$1-corpus"
}
each build "$cores" build
each run "$n" run
echo "fuzzing: no crash in ${seconds} processor seconds (${n} targets side by side for ${wall}s on ${busy} cores)"
