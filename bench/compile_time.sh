#!/usr/bin/env bash
# Compile time of cairn's translation units against the third-party headers they build on, with
# the same compiler and flags, header-only (the default) and with CAIRN_SEPARATE_COMPILATION
# (cairn's ordinary functions compiled once per program, in the translation unit that includes
# <cairn/src.hpp>, timed too). Best of three, interleaved.
#
# - configs: cairn/config.hpp and 20 described structs, against <boost/json.hpp> alone (whose
#   baseline relies on Boost.JSON's own compiled library).
# - checkpoints (when BUILD has a compile command for bench/compile_checkpoint.cpp, whose libtorch flags it
#   reuses): <cairn/checkpoint.hpp> and a program that saves, verifies and loads, against a
#   translation unit of <ATen/core/Tensor.h>.
#
#     bench/compile_time.sh [extra compiler flags, default -O2]      (BUILD=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
opt=("${@:--O2}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '#include <boost/json.hpp>\nint main() { return boost::json::value(1).is_int64() ? 0 : 1; }\n' >"$out/baseline.cpp"
printf '#include <ATen/core/Tensor.h>\nint main() { return at::Tensor().defined() ? 1 : 0; }\n' >"$out/tensor.cpp"
printf '#include <cairn/src.hpp>\n' >"$out/src.cpp"

source bench/compile_common.sh
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
row() { # name, seconds, baseline seconds (optional)
  if [[ -n ${3:-} ]]; then
    printf '  %-58s %6.2f s  (%sx the baseline)\n' "$1" "$2" "$(ratio "$2" "$3")"
  else
    printf '  %-58s %6.2f s\n' "$1" "$2"
  fi
}

config_flags=(-std=c++20 "${opt[@]}" -Iinclude)
checkpoint_flags=()
if build_flags "$build" bench/compile_checkpoint.cpp; then
  checkpoint_cxx=$cxx
  checkpoint_flags=("${flags[@]}" "${opt[@]}")
fi

base= header= separate= src=
tensor= checkpoint= checkpoint_separate= all_src=
for _ in 1 2 3; do
  cxx=${CXX:-c++} flags=("${config_flags[@]}")
  base=$(min "$base" "$(seconds -c "$out/baseline.cpp")")
  header=$(min "$header" "$(seconds -c bench/compile_20_structs.cpp)")
  separate=$(min "$separate" "$(seconds -DCAIRN_SEPARATE_COMPILATION -c bench/compile_20_structs.cpp)")
  src=$(min "$src" "$(seconds -DCAIRN_SEPARATE_COMPILATION -c "$out/src.cpp")")
  if ((${#checkpoint_flags[@]})); then
    cxx=$checkpoint_cxx flags=("${checkpoint_flags[@]}")
    tensor=$(min "$tensor" "$(seconds -c "$out/tensor.cpp")")
    checkpoint=$(min "$checkpoint" "$(seconds -c bench/compile_checkpoint.cpp)")
    checkpoint_separate=$(min "$checkpoint_separate" \
      "$(seconds -DCAIRN_SEPARATE_COMPILATION -c bench/compile_checkpoint.cpp)")
    all_src=$(min "$all_src" "$(seconds -DCAIRN_SEPARATE_COMPILATION -c "$out/src.cpp")")
  fi
done
printf 'compile time (%s %s), best of 3\n' "${CXX:-c++}" "${opt[*]}"
row '<boost/json.hpp> alone (baseline)' "$base"
row 'cairn/config.hpp + 20 structs, header-only' "$header" "$base"
row 'the same, CAIRN_SEPARATE_COMPILATION' "$separate" "$base"
row '<cairn/src.hpp> without libtorch (cairn::core_compiled)' "$src"
if ((${#checkpoint_flags[@]})); then
  row '<ATen/core/Tensor.h> alone (baseline)' "$tensor"
  row 'cairn/checkpoint.hpp: save, verify, load; header-only' "$checkpoint" "$tensor"
  row 'the same, CAIRN_SEPARATE_COMPILATION' "$checkpoint_separate" "$tensor"
  row '<cairn/src.hpp> (every layer), compiled once per program' "$all_src"
else
  echo "  (no checkpoint rows: $build has no compile command for bench/compile_checkpoint.cpp)"
fi
