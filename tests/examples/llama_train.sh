#!/bin/sh
# cairn-llama trains, resumes bitwise and exports what transformers loads:
# - its loss falls on the generated corpus (a 2-layer, 64-wide model);
# - with dropout, 20 iterations straight equal 10, a shutdown, then 10 resumed: the losses, and
#   the rank files of iteration 20 (weights, Adam's moments, the generator and corpus items);
#   the same on a TP=2 x DP=2 grid at ZeRO-1 (8 straight, 4 + 4); a checkpoint without items
#   (an earlier cairn's) still resumes, with a warning, and then dropout draws other masks;
#   items some ranks cannot use (another grid, one rank's missing, another corpus) are warned of;
# - gradients that are not finite stop the run before they are applied, its last save committed;
# - its exports (llama with grouped-query attention, untied, trained under TP=2, two numbered
#   files; llama tied, trained under DP=2, BF16; qwen2 with q/k/v biases, F32 and BF16) are laid
#   out as transformers reads them, and the independent reference's logits of each match
#   cairn-llama's of the export, and, for F32, of the distributed checkpoint of the same iteration.
#
#     llama_train.sh CAIRN_LLAMA CAIRN_TOOL PYTHON WORK_DIR
set -eu
llama=$1 tool=$2 python=$3 work=$4
here=$(dirname "$0")
reference=$here/../reference/llama_reference.py
rank_files=$here/rank_files.py
rm -rf "$work" && mkdir -p "$work"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# The losses a run printed, one "iteration N: loss L" a line, without the launcher's prefix.
losses() { sed -n 's/^\(\[rank 0\] \)\{0,1\}iteration \([0-9]*\)\/[0-9]*: loss \([0-9.]*\).*/\2 \3/p' "$1"; }

echo "== the loss falls"
"$llama" run.experiment_dir="$work/fall" training.train_iters=40 training.logs.interval=40 >"$work/fall.log" 2>&1 ||
  fail "training: $(cat "$work/fall.log")"
first=$(losses "$work/fall.log" | sed -n 1p | cut -d' ' -f2)
last=$(losses "$work/fall.log" | sed -n '$p' | cut -d' ' -f2)
echo "loss $first at iteration 1, $last at 40"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < a - 2.0) }' || fail "the loss did not fall: $first -> $last"

resume_check() { # NAME ITERATIONS LAUNCH... : straight vs half, shutdown, resumed
  name=$1 iterations=$2
  shift 2
  half=$((iterations / 2))
  args="training.train_iters=$iterations training.logs.interval=1 training.checkpoint.interval=$half
        model.attention_dropout=0.2"
  # shellcheck disable=SC2086
  "$@" run.experiment_dir="$work/$name.straight" $args >"$work/$name.straight.log" 2>&1 ||
    fail "$name straight: $(cat "$work/$name.straight.log")"
  # shellcheck disable=SC2086
  "$@" run.experiment_dir="$work/$name.resumed" $args training.shutdown.interval=$half >"$work/$name.first.log" 2>&1 ||
    fail "$name first half: $(cat "$work/$name.first.log")"
  # shellcheck disable=SC2086
  "$@" run.experiment_dir="$work/$name.resumed" $args >"$work/$name.second.log" 2>&1 ||
    fail "$name second half: $(cat "$work/$name.second.log")"
  grep -q "resumed from .*checkpoints/$half at iteration $half" "$work/$name.second.log" || fail "$name did not resume"
  losses "$work/$name.straight.log" | sed -n "$((half + 1)),\$p" >"$work/$name.straight.losses"
  losses "$work/$name.second.log" >"$work/$name.second.losses"
  cmp -s "$work/$name.straight.losses" "$work/$name.second.losses" ||
    fail "$name: the resumed losses differ: $(paste "$work/$name.straight.losses" "$work/$name.second.losses")"
  printf '%s, losses %s..%s equal; ' "$name" "$((half + 1))" "$iterations"
  "$python" "$rank_files" same "$work/$name.straight/checkpoints/$iterations" "$work/$name.resumed/checkpoints/$iterations" ||
    fail "$name: the rank files of iteration $iterations differ"
}

echo "== bitwise resume with dropout"
resume_check one 20 "$llama"
resume_check grid 8 "$tool" launch -n 4 -- "$llama" parallel.tensor=2 parallel.data=2 parallel.zero_stage=1

echo "== a checkpoint without items (an earlier cairn's) resumes, the generator from the seed"
mkdir -p "$work/old/checkpoints"
cp -r "$work/one.straight/checkpoints/10" "$work/old/checkpoints/10"
"$python" "$rank_files" strip-items "$work/old/checkpoints/10"
"$llama" run.experiment_dir="$work/old" training.train_iters=20 training.logs.interval=1 training.checkpoint.interval=10 \
  model.attention_dropout=0.2 >"$work/old.log" 2>&1 || fail "resume without items: $(cat "$work/old.log")"
grep -q "resumed from .*checkpoints/10 at iteration 10" "$work/old.log" || fail "no resume without items"
grep -q "holds no generator state" "$work/old.log" || fail "no warning without the generator's state"
if "$python" "$rank_files" same "$work/one.straight/checkpoints/20" "$work/old/checkpoints/20" >/dev/null; then
  fail "a resume with a fresh generator gave the same weights: the comparison sees no dropout"
fi
echo "warned, and dropout drew other masks"

echo "== items the ranks cannot all use: every generator from the seed, with a warning"
resume_from() { # NAME SOURCE_CHECKPOINT LAUNCH... : resumes a copy of SOURCE to iteration 8
  name=$1 source=$2
  shift 2
  mkdir -p "$work/$name/checkpoints"
  cp -r "$source" "$work/$name/checkpoints/"
  "$@" run.experiment_dir="$work/$name" training.train_iters=8 training.checkpoint.interval=4 \
    model.attention_dropout=0.2 >"$work/$name.log" 2>&1 || fail "$name: $(cat "$work/$name.log")"
  grep -q "resumed from .*checkpoints/4 at iteration 4" "$work/$name.log" || fail "$name did not resume"
}
# The same 4 ranks as data-parallel ranks 0 to 3: the generators of TP=2 x DP=2 were per
# data-parallel rank, two ranks' each.
resume_from regrid "$work/grid.resumed/checkpoints/4" "$tool" launch -n 4 -- "$llama" parallel.data=4
grep -q "was saved on another grid" "$work/regrid.log" || fail "regrid: no warning"
# One rank's items gone: all start from the seed, as a fresh TP=2 x DP=2 run's generators would.
mkdir -p "$work/partial.source"
cp -r "$work/grid.resumed/checkpoints/4" "$work/partial.source/"
"$python" "$rank_files" strip-items "$work/partial.source/4" 2
resume_from partial "$work/partial.source/4" "$tool" launch -n 4 -- "$llama" parallel.tensor=2 parallel.data=2 \
  parallel.zero_stage=1
grep -q "holds items that 1 of 4 ranks cannot use" "$work/partial.log" || fail "partial: no warning"
# Another seed: another corpus, read from the iteration's position, with a warning.
resume_from reseeded "$work/grid.resumed/checkpoints/4" "$tool" launch -n 4 -- "$llama" parallel.tensor=2 \
  parallel.data=2 parallel.zero_stage=1 seed=7
grep -q "was saved reading another corpus" "$work/reseeded.log" || fail "reseeded: no warning"
echo "another grid, one rank's items missing, another corpus: each warned"

echo "== a step whose gradients are not finite is not applied: the run stops, its last checkpoint committed"
if "$tool" launch -n 2 -- "$llama" run.experiment_dir="$work/nan" training.train_iters=6 training.checkpoint.interval=1 \
  optimizer.learning_rate=1e37 parallel.tensor=2 >"$work/nan.log" 2>&1; then
  fail "training went on through gradients that are not finite"
fi
grep -q "iteration 2: the gradients are not finite" "$work/nan.log" || fail "nan: no error: $(cat "$work/nan.log")"
[ -d "$work/nan/checkpoints/1" ] && [ ! -e "$work/nan/checkpoints/2" ] || fail "nan: checkpoints $(ls -a "$work/nan/checkpoints")"
"$tool" verify "$work/nan/checkpoints/1" >/dev/null || fail "nan: checkpoint 1 is not whole"
echo "stopped at iteration 2, checkpoint 1 committed"

echo "== exports against the reference"
export_check() { # NAME TYPE TOKENS LAUNCH... : trains 4 iterations, checkpoints and exports at 4
  name=$1 type=$2 tokens=$3
  shift 3
  "$@" run.experiment_dir="$work/$name" training.train_iters=4 training.checkpoint.interval=4 \
    training.export.interval=4 training.export.format=external training.export.model_type="$type" \
    data.batch_size=2 >"$work/$name.log" 2>&1 || fail "$name: $(cat "$work/$name.log")"
  out=$work/$name/export/4
  "$python" "$reference" layout "$out" || fail "$name: the export is not laid out as transformers reads it"
  "$python" "$reference" logits "$out" "$tokens" >"$work/$name.reference.json"
  "$llama" logits --tokens "$tokens" pretrained.path="$out" pretrained.format=external pretrained.load_config=model \
    >"$work/$name.export.json" 2>"$work/$name.export.err" || fail "$name logits: $(cat "$work/$name.export.err")"
  printf '%s, the export: ' "$name"
  "$python" "$reference" compare "$work/$name.reference.json" "$work/$name.export.json" || fail "$name: logits differ"
  if grep -q '"torch_dtype": "float32"' "$out/config.json"; then
    "$llama" logits --tokens "$tokens" pretrained.path="$work/$name/checkpoints/4" pretrained.format=distributed \
      pretrained.load_config=model >"$work/$name.checkpoint.json" 2>"$work/$name.checkpoint.err" ||
      fail "$name checkpoint logits: $(cat "$work/$name.checkpoint.err")"
    printf '%s, the checkpoint of the same iteration: ' "$name"
    "$python" "$reference" compare "$work/$name.reference.json" "$work/$name.checkpoint.json" ||
      fail "$name: the checkpoint's logits differ"
  fi
}
tokens=116,104,101,32,114,101,100,32,102,111,120
export_check llama-gqa llama "$tokens" "$tool" launch -n 2 -- "$llama" parallel.tensor=2 model.hidden_size=256 \
  model.intermediate_size=704 model.num_attention_heads=8 model.num_key_value_heads=4 \
  training.export.parameters_per_file=1048576
ls "$work/llama-gqa/export/4/model-00002-of-00002.safetensors" >/dev/null || fail "llama-gqa: not in numbered files"
export_check llama-tied llama "$tokens" "$tool" launch -n 2 -- "$llama" parallel.data=2 model.tie_word_embeddings=true \
  training.export.data_type=bfloat16
export_check qwen2-f32 qwen2 "$tokens" "$llama" model.qkv_bias=true
export_check qwen2-bf16 qwen2 "$tokens" "$llama" model.qkv_bias=true training.export.data_type=bfloat16
grep -q '"torch_dtype": "bfloat16"' "$work/qwen2-bf16/export/4/config.json" || fail "qwen2-bf16: torch_dtype"
# The comparison is not vacuous: another iteration's weights give other logits.
"$llama" logits --tokens "$tokens" pretrained.path="$work/one.straight/checkpoints/20" pretrained.format=distributed \
  pretrained.load_config=model >"$work/other.json" 2>/dev/null
if "$python" "$reference" compare "$work/qwen2-f32.reference.json" "$work/other.json" >/dev/null 2>&1; then
  fail "compare accepted the logits of another model"
fi
echo "all passed"
