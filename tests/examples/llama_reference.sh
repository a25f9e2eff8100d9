#!/bin/sh
# cairn-llama's logits against an independent reference of transformers' Llama and Qwen2
# (tests/reference/llama_reference.py, PyTorch alone): checkpoints the reference writes in
# transformers' layout (two files, shuffled tensor order, BF16 and F32 tensors; llama with
# grouped-query attention and its own head, qwen2 with q/k/v biases and a tied head), imported
# by cairn-llama from config.json, must give the reference's logits within 1e-4 of the largest.
#
#     llama_reference.sh CAIRN_LLAMA PYTHON WORK_DIR
set -eu
llama=$1 python=$2 work=$3
reference=$(dirname "$0")/../reference/llama_reference.py
rm -rf "$work" && mkdir -p "$work"
check() { # TYPE SEED TOKENS
  "$python" "$reference" write "$work/$1" "$1" "$2"
  "$python" "$reference" logits "$work/$1" "$3" >"$work/$1.reference.json"
  "$llama" logits --tokens "$3" "pretrained.path=$work/$1" pretrained.format=external pretrained.load_config=model \
    >"$work/$1.cairn.json"
  printf '%s: ' "$1"
  "$python" "$reference" compare "$work/$1.reference.json" "$work/$1.cairn.json"
}
check llama 3 1,5,9,2,60,0
check qwen2 5 3,1,4,1,5,9,2,6
# The comparison is not vacuous: other tokens give other logits, and it says so.
"$llama" logits --tokens 1,5,9,2,60,1 "pretrained.path=$work/llama" pretrained.format=external \
  pretrained.load_config=model >"$work/other.cairn.json"
if "$python" "$reference" compare "$work/llama.reference.json" "$work/other.cairn.json" >/dev/null; then
  echo "compare accepted the logits of other tokens" >&2
  exit 1
fi
