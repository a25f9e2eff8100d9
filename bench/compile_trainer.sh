#!/usr/bin/env bash
# What cairn adds to the compile time of a trainer: the example trainer's translation unit, and
# the README's whole trainer (a user's TU: config, module state, the run), each against a TU of
# the same non-cairn includes (libtorch, Boost), with the flags the build uses for the example
# (read from BUILD/compile_commands.json), at -O2. Header-only (cairn::cairn), then linking
# cairn::compiled (CAIRN_SEPARATE_COMPILATION: cairn's ordinary functions compiled once, in the
# library's src/src.cpp, timed too).
#
#     bench/compile_trainer.sh [BUILD, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

source bench/compile_common.sh
build_flags "$build" examples/train.cpp || { echo "no compile command for examples/train.cpp in $build" >&2; exit 1; }
flags+=(-O2)

# The README's trainer: its block with `int main`.
awk '/^```cpp/ { block = ""; inside = 1; next } /^```/ { if (inside && block ~ /int main\(/) print block; inside = 0; next }
     inside { block = block $0 "\n" }' README.md >"$out/readme_trainer.cpp"
# The same includes without cairn.
grep -h '^#include <' examples/train.cpp examples/mlp.hpp | grep -v '<cairn/' | sort -u >"$out/example_baseline.cpp"
echo 'int main() { return 0; }' >>"$out/example_baseline.cpp"
grep -h '^#include <' "$out/readme_trainer.cpp" | grep -v '<cairn/' >"$out/readme_baseline.cpp"
echo '#include <boost/json.hpp>' >>"$out/readme_baseline.cpp"
echo 'int main() { return 0; }' >>"$out/readme_baseline.cpp"

row() { # name, baseline seconds, cairn seconds
  awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "  %-46s %6.1f s  %6.1f s  %+6.1f s  %.2fx\n", n, a, b, b - a, b / a }'
}
example_base=$(seconds -c "$out/example_baseline.cpp")
example=$(seconds -Iexamples -c examples/train.cpp)
example_separate=$(seconds -Iexamples -DCAIRN_SEPARATE_COMPILATION -c examples/train.cpp)
readme_base=$(seconds -c "$out/readme_baseline.cpp")
readme=$(seconds -c "$out/readme_trainer.cpp")
readme_separate=$(seconds -DCAIRN_SEPARATE_COMPILATION -c "$out/readme_trainer.cpp")
src=$(seconds -DCAIRN_SEPARATE_COMPILATION -c src/src.cpp)
printf 'compile time (%s, -O2), one compile each\n' "$cxx"
printf '  %-46s %8s  %8s  %8s  %s\n' "translation unit" "without" "with" "cairn" "ratio"
row "examples/train.cpp" "$example_base" "$example"
row "examples/train.cpp, cairn::compiled" "$example_base" "$example_separate"
row "README trainer" "$readme_base" "$readme"
row "README trainer, cairn::compiled" "$readme_base" "$readme_separate"
printf '  %-46s %6.1f s, once per build\n' "cairn::compiled's src/src.cpp" "$src"
