# Shared by the compile-time benchmarks (sourced): `seconds ARGS…` compiles once with "$cxx",
# "${flags[@]}" and ARGS into "$out/x.o", and prints the wall time in seconds.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$cxx" "${flags[@]}" "$@" -o "$out/x.o"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}

# `build_flags BUILD SOURCE` sets "$cxx" and "${flags[@]}" to the compiler and flags the build
# BUILD uses for SOURCE (from its compile_commands.json), less the output, the source, the
# optimisation level, the warnings and CAIRN_SEPARATE_COMPILATION. Returns 1 when BUILD has no
# command for SOURCE.
build_flags() {
  local command skip=0 w
  command=$(grep -o "\"command\": \"[^\"]*$2\"" "$1/compile_commands.json" 2>/dev/null | head -1 |
    sed -e 's/^"command": "//' -e 's/"$//' -e 's/\\"/"/g')
  [[ -n $command ]] || return 1
  local -a words
  read -r -a words <<<"$command"
  flags=()
  for w in "${words[@]:1}"; do
    if ((skip)); then skip=0; continue; fi
    case $w in
      -o) skip=1 ;;
            -c | -O? | -W* | */"$2" | -DCAIRN_SEPARATE_COMPILATION) ;; # the mode: each benchmark says which
      *) flags+=("$w") ;;
    esac
  done
  cxx=${words[0]}
  [[ $cxx == ccache ]] && { cxx=${flags[0]}; flags=("${flags[@]:1}"); }
  return 0
}
