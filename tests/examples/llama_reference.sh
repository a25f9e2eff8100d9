#!/bin/sh
# cairn-llama's logits against an independent reference of transformers' Llama and Qwen2
# (tests/reference/llama_reference.py, PyTorch alone): checkpoints the reference writes in
# transformers' layout (two files, shuffled tensor order, BF16 and F32 tensors; llama with
# grouped-query attention and its own head, qwen2 with q/k/v biases and a tied head), imported
# by cairn-llama from config.json, must give the reference's logits within 1e-4 of the largest:
# on one rank, on a tensor-parallel group of 2 (each rank reading its blocks of the projections
# and its rows of a vocabulary of 61, split 31 and 30) and on 2 data-parallel ranks. Imports
# read what a rank needs (at most 1.1 times its shard, from F32 and F16 files), and
# conversions for a layout (TP=2 x DP=2, ZeRO-1) and back give the source's tensors exactly.
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
# For a layout (cairn-llama convert under 4 ranks, TP=2 x DP=2 at ZeRO-1): one rank file each,
# the reference's logits under that layout, and back to transformers' layout exactly.
for type in llama qwen2; do
  "$tool" launch -n 4 -- "$llama" convert "input.path=$work/$type" input.format=external \
    "output.path=$work/$type.grid" output.format=distributed parallel.tensor=2 parallel.data=2 parallel.zero_stage=1 \
    >/dev/null
  [ "$(ls "$work/$type.grid"/rank_*.safetensors | wc -l)" = 4 ] || { echo "$type.grid: not 4 rank files" >&2; exit 1; }
  "$llama" convert "input.path=$work/$type.grid" input.format=distributed "output.path=$work/$type.grid.back" \
    output.format=external "output.model_type=$type" >/dev/null
  printf '%s, back from TP=2 x DP=2: ' "$type"
  "$python" "$reference" same "$work/$type" "$work/$type.grid.back"
  tokens=$(if [ "$type" = llama ]; then echo 1,5,9,2,60,0; else echo 3,1,4,1,5,9,2,6; fi)
  "$tool" launch -n 4 -- "$llama" logits --tokens "$tokens" "pretrained.path=$work/$type.grid" \
    pretrained.format=distributed pretrained.load_config=model parallel.tensor=2 parallel.data=2 |
    sed -n 's/^\[rank 0\] //p' >"$work/$type.grid.json"
  printf '%s, the TP=2 x DP=2 checkpoint: ' "$type"
  "$python" "$reference" compare "$work/$type.reference.json" "$work/$type.grid.json"
done
# Imports read what a rank needs: under TP=2, each rank reads at most 1.1 times its weights'
# bytes (in the files' type) of tensors, plus headers, from all-F32 and all-F16 directories.
for dtypes in f32 f16; do
  "$python" "$reference" write "$work/llama.$dtypes" llama 7 "$dtypes"
  "$python" "$reference" logits "$work/llama.$dtypes" 1,5,9,2,60,0 >"$work/llama.$dtypes.reference.json"
  "$tool" launch -n 2 -- "$llama" logits --tokens 1,5,9,2,60,0 "pretrained.path=$work/llama.$dtypes" \
    pretrained.format=external pretrained.load_config=model parallel.tensor=2 2>"$work/llama.$dtypes.err" |
    sed -n 's/^\[rank 0\] //p' >"$work/llama.$dtypes.json"
  printf '%s files, 2 ranks: ' "$dtypes"
  "$python" "$reference" compare "$work/llama.$dtypes.reference.json" "$work/llama.$dtypes.json"
  width=$(if [ "$dtypes" = f32 ]; then echo 4; else echo 2; fi)
  sed -n 's/.*rank \([0-9]\): read \([0-9]*\) bytes of tensors and \([0-9]*\) of headers.* its \([0-9]*\) bytes.*/\1 \2 \3 \4/p' \
    "$work/llama.$dtypes.err" >"$work/llama.$dtypes.reads"
  [ "$(wc -l <"$work/llama.$dtypes.reads")" = 2 ] || { echo "no account of the reads: $(cat "$work/llama.$dtypes.err")" >&2; exit 1; }
  awk -v width="$width" '{
    shard = $4 / 4 * width
    printf "rank %d read %d bytes of tensors for a shard of %d (%.3f), and %d of headers\n", $1, $2, shard, $2 / shard, $3
    if ($2 > 1.1 * shard) bad = 1
  } END { exit bad }' "$work/llama.$dtypes.reads" || { echo "a rank read more than 1.1 times its shard" >&2; exit 1; }
done
# Llama checkpoints of transformers before 4.31 hold each layer's rotary_emb.inv_freq: skipped.
cp -r "$work/llama" "$work/llama.inv_freq"
"$python" "$reference" add-inv-freq "$work/llama.inv_freq"
"$llama" logits --tokens 1,5,9,2,60,0 "pretrained.path=$work/llama.inv_freq" pretrained.format=external \
  pretrained.load_config=model >"$work/llama.inv_freq.json"
printf 'llama with inv_freq tensors: '
"$python" "$reference" compare "$work/llama.reference.json" "$work/llama.inv_freq.json"
# The comparison is not vacuous: other tokens give other logits, and it says so.
"$llama" logits --tokens 1,5,9,2,60,1 "pretrained.path=$work/llama" pretrained.format=external \
  pretrained.load_config=model >"$work/other.cairn.json"
if "$python" "$reference" compare "$work/llama.reference.json" "$work/other.cairn.json" >/dev/null; then
  echo "compare accepted the logits of other tokens" >&2
  exit 1
fi
