#!/bin/sh
# cairn-llama's logits against an independent reference of transformers' Llama and Qwen2
# (tests/reference/llama_reference.py, PyTorch alone): checkpoints the reference writes in
# transformers' layout (two files, shuffled tensor order, BF16 and F32 tensors; llama with
# grouped-query attention and its own head, qwen2 with q/k/v biases and a tied head), imported
# by cairn-llama from config.json, must give the reference's logits within 1e-4 of the largest:
# on one rank, on a tensor-parallel group of 2 (each rank reading its blocks of the projections
# and its rows of a vocabulary of 61, split 31 and 30) and on 2 data-parallel ranks.
#
#     llama_reference.sh CAIRN_LLAMA CAIRN_TOOL PYTHON WORK_DIR
set -eu
llama=$1 tool=$2 python=$3 work=$4
reference=$(dirname "$0")/../reference/llama_reference.py
rm -rf "$work" && mkdir -p "$work"
check() { # TYPE SEED TOKENS
  "$python" "$reference" write "$work/$1" "$1" "$2"
  "$python" "$reference" logits "$work/$1" "$3" >"$work/$1.reference.json"
  "$llama" logits --tokens "$3" "pretrained.path=$work/$1" pretrained.format=external pretrained.load_config=model \
    >"$work/$1.cairn.json"
  printf '%s: ' "$1"
  "$python" "$reference" compare "$work/$1.reference.json" "$work/$1.cairn.json"
  for parallel in parallel.tensor=2 parallel.data=2; do # rank 0's line, without the launcher's prefix
    "$tool" launch -n 2 -- "$llama" logits --tokens "$3" "pretrained.path=$work/$1" pretrained.format=external \
      pretrained.load_config=model "$parallel" | sed -n 's/^\[rank 0\] //p' >"$work/$1.$parallel.json"
    printf '%s, 2 ranks, %s: ' "$1" "$parallel"
    "$python" "$reference" compare "$work/$1.reference.json" "$work/$1.$parallel.json"
  done
}
check llama 3 1,5,9,2,60,0
check qwen2 5 3,1,4,1,5,9,2,6
# Through cairn's distributed format and back (cairn-llama convert): the logits of the
# distributed checkpoint are the reference's, and the directory written back holds the
# source's tensors exactly (BF16 ones as float32).
for type in llama qwen2; do
  "$llama" convert "input.path=$work/$type" input.format=external "output.path=$work/$type.distributed" \
    output.format=distributed >/dev/null
  "$llama" convert "input.path=$work/$type.distributed" input.format=distributed "output.path=$work/$type.back" \
    output.format=external "output.model_type=$type" >/dev/null
  tokens=$(if [ "$type" = llama ]; then echo 1,5,9,2,60,0; else echo 3,1,4,1,5,9,2,6; fi)
  "$llama" logits --tokens "$tokens" "pretrained.path=$work/$type.distributed" pretrained.format=distributed \
    pretrained.load_config=model >"$work/$type.distributed.json"
  printf '%s, distributed: ' "$type"
  "$python" "$reference" compare "$work/$type.reference.json" "$work/$type.distributed.json"
  printf '%s, back from distributed: ' "$type"
  "$python" "$reference" same "$work/$type" "$work/$type.back"
done
# The comparison is not vacuous: other tokens give other logits, and it says so.
"$llama" logits --tokens 1,5,9,2,60,1 "pretrained.path=$work/llama" pretrained.format=external \
  pretrained.load_config=model >"$work/other.cairn.json"
if "$python" "$reference" compare "$work/llama.reference.json" "$work/other.cairn.json" >/dev/null; then
  echo "compare accepted the logits of other tokens" >&2
  exit 1
fi
