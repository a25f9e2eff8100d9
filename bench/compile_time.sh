#!/usr/bin/env bash
# Compile time of a translation unit that includes cairn/config.hpp and describes 20 structs,
# against one that includes only <boost/json.hpp>, with the same compiler and flags: cairn
# header-only (the default), and with CAIRN_SEPARATE_COMPILATION, where cairn's ordinary
# functions are compiled once, in the translation unit that includes <cairn/config/src.hpp>
# (as the baseline relies on Boost.JSON's own compiled library). Best of three, interleaved.
#
#     bench/compile_time.sh [extra compiler flags, default -O2]
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CXX:-c++}
flags=(-std=c++20 "${@:--O2}" -Iinclude)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '#include <boost/json.hpp>\nint main() { return boost::json::value(1).is_int64() ? 0 : 1; }\n' >"$out/baseline.cpp"
printf '#include <cairn/config/src.hpp>\n' >"$out/src.cpp"

source bench/compile_common.sh
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }

base= header= separate= src=
for _ in 1 2 3; do
  base=$(min "$base" "$(seconds -c "$out/baseline.cpp")")
  header=$(min "$header" "$(seconds -c bench/compile_20_structs.cpp)")
  separate=$(min "$separate" "$(seconds -DCAIRN_SEPARATE_COMPILATION -c bench/compile_20_structs.cpp)")
  src=$(min "$src" "$(seconds -DCAIRN_SEPARATE_COMPILATION -c "$out/src.cpp")")
done
ratio() { awk -v a="$1" -v b="$base" 'BEGIN { printf "%.2f", a / b }'; }
printf 'compile time (%s %s), best of 3\n' "$cxx" "${flags[*]}"
printf '  <boost/json.hpp> alone (baseline)                        %6.2f s\n' "$base"
printf '  cairn/config.hpp + 20 structs, header-only               %6.2f s  (%sx the baseline)\n' "$header" \
  "$(ratio "$header")"
printf '  the same, CAIRN_SEPARATE_COMPILATION                     %6.2f s  (%sx the baseline)\n' "$separate" \
  "$(ratio "$separate")"
printf '  <cairn/config/src.hpp>, compiled once per program         %6.2f s\n' "$src"
