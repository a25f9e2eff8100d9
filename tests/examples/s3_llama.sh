#!/bin/sh
# cairn-llama imports a Hugging Face directory that the independent reference of transformers'
# Llama wrote and Debian's awscli uploaded to the S3-compatible server tests/io/s3_server.sh
# starts (run through it): on a tensor-parallel group of 2, each rank reading its blocks of the
# projections from the store, the logits are the reference's.
#
#     s3_server.sh sh s3_llama.sh CAIRN_LLAMA CAIRN_TOOL PYTHON WORK_DIR
set -eu
llama=$1 tool=$2 python=$3 work=$4
reference=$(dirname "$0")/../reference/llama_reference.py
rm -rf "$work" && mkdir -p "$work"
store="s3://$CAIRN_TEST_S3_BUCKET/hf-$$/llama"
export CAIRN_S3_RETRY_SECONDS=10
tokens=1,5,9,2,60,0
"$python" "$reference" write "$work/llama" llama 3
"$python" "$reference" logits "$work/llama" "$tokens" >"$work/reference.json"
AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null /usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL" \
  s3 cp --recursive --only-show-errors "$work/llama" "$store"
"$tool" launch -n 2 -- "$llama" logits --tokens "$tokens" "pretrained.path=$store" pretrained.format=external \
  pretrained.load_config=model parallel.tensor=2 >"$work/s3.out" 2>"$work/s3.err" || { cat "$work/s3.err"; exit 1; }
sed -n 's/^\[rank 0\] //p' "$work/s3.out" >"$work/s3.json"
printf 'llama from %s, tensor=2: ' "$store"
"$python" "$reference" compare "$work/reference.json" "$work/s3.json"
