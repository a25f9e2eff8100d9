# Shared by the compile-time benchmarks (sourced): `seconds ARGS…` compiles once with "$cxx",
# "${flags[@]}" and ARGS into "$out/x.o", and prints the wall time in seconds.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$cxx" "${flags[@]}" "$@" -o "$out/x.o"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}
