#!/usr/bin/env bash
# Compile time of a translation unit that includes cairn/config.hpp and describes 20 structs,
# against one that includes only <boost/json.hpp>, with the same compiler and flags.
#
#     bench/compile_time.sh [extra compiler flags, default -O2]
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CXX:-c++}
flags=(-std=c++20 "${@:--O2}" -Iinclude)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '#include <boost/json.hpp>\nint main() { return boost::json::value(1).is_int64() ? 0 : 1; }\n' >"$out/baseline.cpp"

seconds() { # best of three
  local best=
  for _ in 1 2 3; do
    local start end t
    start=$(date +%s.%N)
    "$cxx" "${flags[@]}" -c "$1" -o "$out/x.o"
    end=$(date +%s.%N)
    t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
    if [ -z "$best" ] || awk -v t="$t" -v b="$best" 'BEGIN { exit !(t < b) }'; then best=$t; fi
  done
  echo "$best"
}

base=$(seconds "$out/baseline.cpp")
cairn=$(seconds bench/compile_20_structs.cpp)
printf 'compile time (%s %s), best of 3\n' "$cxx" "${flags[*]}"
printf '  <boost/json.hpp> alone (baseline)              %6.2f s\n' "$base"
printf '  cairn/config.hpp + 20 described structs        %6.2f s  (%.2fx the baseline)\n' "$cairn" \
  "$(awk -v a="$cairn" -v b="$base" 'BEGIN { print a / b }')"
