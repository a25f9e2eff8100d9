#!/bin/sh
# Compiler launcher of the header checks: the compiler parses and checks each translation unit
# (-fsyntax-only: every diagnostic of the front end, no code generated, since a header alone
# instantiates nothing), then the object file it would have written is created empty.
out=
prev=
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then out=$arg; fi
  prev=$arg
done
"$@" -fsyntax-only || exit $?
if [ -n "$out" ]; then : >"$out"; fi
