#!/usr/bin/env bash
# What cairn adds to the compile time of a trainer: the example trainer's translation unit, and
# the README's whole trainer (a user's TU: config, module state, manager), each against a TU of
# the same non-cairn includes (libtorch, Boost), with the flags the build uses for the example
# (read from BUILD/compile_commands.json), at -O2. Header-only, then with
# CAIRN_SEPARATE_COMPILATION (cairn's ordinary config functions compiled once elsewhere).
#
#     bench/compile_trainer.sh [BUILD, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The example's compile command, less its output, its source, its optimisation and warnings.
command=$(grep -o '"command": "[^"]*examples/train.cpp"' "$build/compile_commands.json" | head -1 |
  sed -e 's/^"command": "//' -e 's/"$//' -e 's/\\"/"/g')
[[ -n $command ]] || { echo "no compile command for examples/train.cpp in $build" >&2; exit 1; }
read -r -a words <<<"$command"
flags=()
skip=0
for w in "${words[@]:1}"; do
  if ((skip)); then skip=0; continue; fi
  case $w in
    -o) skip=1 ;;
    -c | -O? | -W* | */examples/train.cpp) ;;
    *) flags+=("$w") ;;
  esac
done
cxx=${words[0]}
flags+=(-O2)

# The README's trainer: its block with `int main`.
awk '/^```cpp/ { block = ""; inside = 1; next } /^```/ { if (inside && block ~ /int main\(/) print block; inside = 0; next }
     inside { block = block $0 "\n" }' README.md >"$out/readme_trainer.cpp"
# The same includes without cairn.
grep -h '^#include <' examples/train.cpp | grep -v '<cairn/' >"$out/example_baseline.cpp"
echo 'int main() { return 0; }' >>"$out/example_baseline.cpp"
grep -h '^#include <' "$out/readme_trainer.cpp" | grep -v '<cairn/' >"$out/readme_baseline.cpp"
echo '#include <boost/json.hpp>' >>"$out/readme_baseline.cpp"
echo 'int main() { return 0; }' >>"$out/readme_baseline.cpp"

source bench/compile_common.sh
row() { # name, baseline seconds, cairn seconds
  awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "  %-46s %6.1f s  %6.1f s  %+6.1f s  %.2fx\n", n, a, b, b - a, b / a }'
}
example_base=$(seconds -c "$out/example_baseline.cpp")
example=$(seconds -c examples/train.cpp)
example_separate=$(seconds -DCAIRN_SEPARATE_COMPILATION -c examples/train.cpp)
readme_base=$(seconds -c "$out/readme_baseline.cpp")
readme=$(seconds -c "$out/readme_trainer.cpp")
readme_separate=$(seconds -DCAIRN_SEPARATE_COMPILATION -c "$out/readme_trainer.cpp")
printf 'compile time (%s, -O2), one compile each\n' "$cxx"
printf '  %-46s %8s  %8s  %8s  %s\n' "translation unit" "without" "with" "cairn" "ratio"
row "examples/train.cpp" "$example_base" "$example"
row "examples/train.cpp, CAIRN_SEPARATE_COMPILATION" "$example_base" "$example_separate"
row "README trainer" "$readme_base" "$readme"
row "README trainer, CAIRN_SEPARATE_COMPILATION" "$readme_base" "$readme_separate"
