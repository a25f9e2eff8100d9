#!/bin/sh
# The example trainer with an s3:// experiment directory, against the S3-compatible server that
# tests/io/s3_server.sh starts (run through it): a 2-rank job trains with checkpoints and an
# export, resumes from the store with the losses of an uninterrupted local run, is stopped by
# SIGTERM with a preemption checkpoint; the AWS command-line tool, independent of cairn, lists and
# downloads what it wrote, and the downloaded saves verify; cairn convert from the store and back
# is bitwise; a save torn by a kill -9 is never resumed from. Exit status 0 when every step did what it should.
#
#     s3_server.sh s3_train.sh TOOL TRAIN WORK_DIR
set -u
tool=$1
train=$2
dir=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
store="s3://$CAIRN_TEST_S3_BUCKET/run-$$"
common="training.export.interval=8 training.export.format=external \
training.export.model_type=cairn_mlp model.hidden=16 data.batch_size=8 seed=3 training.logs.interval=1"
fail() {
  echo "s3_train.sh: $1"
  exit 1
}
aws() {
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null /usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL" "$@"
}
# The losses a log gives, one "iteration N/M: loss X" a line, without the times.
losses() { sed -n 's/^\(\[rank 0\] \)\{0,1\}\(iteration [0-9]*\/[0-9]*: loss [0-9.e+-]*\).*/\2/p' "$1"; }
# Fewer retries than a real job's: a store that stays down fails the test in seconds.
export CAIRN_S3_RETRY_SECONDS=10

# The reference: the same job on a local directory, uninterrupted.
# shellcheck disable=SC2086 # the overrides are words
"$tool" launch -n 2 -- "$train" run.experiment_dir="$dir/local" training.train_iters=12 training.checkpoint.interval=4 $common \
  >"$dir/local.log" 2>&1 || { cat "$dir/local.log"; fail "the local reference job failed"; }

# shellcheck disable=SC2086
"$tool" launch -n 2 -- "$train" run.experiment_dir="$store" training.train_iters=8 training.checkpoint.interval=4 $common \
  >"$dir/first.log" 2>&1 || { cat "$dir/first.log"; fail "the job on s3:// failed"; }
grep -q "done: 8 iterations" "$dir/first.log" || { cat "$dir/first.log"; fail "the job on s3:// did not finish"; }
# On a store a save is written in a generation of its own: checkpoints/8/gen-<since>-<writer>-<n>/.
aws s3 ls --recursive "$store/checkpoints/8/" >"$dir/ls8" 2>&1 || { cat "$dir/ls8"; fail "awscli cannot list checkpoint 8"; }
for name in complete.json metadata.json rank_0.safetensors rank_1.safetensors; do
  grep -q "/checkpoints/8/gen-[0-9]*-[0-9a-f]*-[0-9]*/$name\$" "$dir/ls8" ||
    { cat "$dir/ls8"; fail "awscli does not list $name in checkpoint 8"; }
done
aws s3 ls --recursive "$store/export/8/" | grep -q "/model.safetensors$" || fail "no export 8 in the store"

# Leftovers of a POSIX experiment copied to the store (a save set aside by a replacement) are
# skipped, said, and never stop a resume.
echo '{"iteration": 3, "files": {}}' >"$dir/stray.json"
aws s3 cp "$dir/stray.json" "$store/checkpoints/.replaced-3/complete.json" >/dev/null 2>&1 || fail "awscli cannot upload"
# A save of 12 dated an hour ahead (written where the clock runs ahead): said, and outranked by
# the run's own save of 12, which removes it.
ahead="gen-$(($(date +%s) * 1000 + 3600000))-ffffffff-1"
echo '{"iteration": 12, "files": {}}' >"$dir/ahead.json"
aws s3 cp "$dir/ahead.json" "$store/checkpoints/12/$ahead/complete.json" >/dev/null 2>&1 || fail "awscli cannot upload"

# Resumed from the store: the losses after it are an uninterrupted run's, bitwise.
# shellcheck disable=SC2086
"$tool" launch -n 2 -- "$train" run.experiment_dir="$store" training.train_iters=12 training.checkpoint.interval=4 $common \
  >"$dir/second.log" 2>&1 || { cat "$dir/second.log"; fail "the resumed job on s3:// failed"; }
grep -q "resumed from $store/checkpoints/8 at iteration 8" "$dir/second.log" ||
  { cat "$dir/second.log"; fail "not resumed from the store's checkpoint 8"; }
grep -q "left $store/checkpoints/.replaced-3 alone" "$dir/second.log" ||
  { cat "$dir/second.log"; fail "the stray .replaced-3 was not reported"; }
grep -q "after $store/checkpoints/12/$ahead, dated .* ahead of this host's clock" "$dir/second.log" ||
  { cat "$dir/second.log"; fail "the save dated ahead was not reported"; }
! aws s3 ls --recursive "$store/checkpoints/12/" | grep -q "$ahead" || fail "the save dated ahead is still there"
losses "$dir/local.log" | sed -n '9,12p' >"$dir/expected"
losses "$dir/second.log" >"$dir/got"
[ -s "$dir/got" ] && cmp -s "$dir/expected" "$dir/got" ||
  { diff "$dir/expected" "$dir/got"; fail "the resumed losses differ from the uninterrupted run's"; }

# The experiment on the store, listed: its saves and exports, complete.
"$tool" inspect "$store" >"$dir/experiment.log" 2>&1 || { cat "$dir/experiment.log"; fail "cairn inspect of the experiment failed"; }
grep -q "^  12 *checkpoint  complete: yes finite: yes 3 files" "$dir/experiment.log" &&
  grep -q "^  8 *export  *complete: yes" "$dir/experiment.log" || { cat "$dir/experiment.log"; fail "the experiment's listing"; }

# What cairn wrote, downloaded by awscli, verifies and loads as a local save.
aws s3 cp --recursive "$store/checkpoints/12" "$dir/down/checkpoints/12" >/dev/null 2>&1 ||
  fail "awscli cannot download checkpoint 12"
"$tool" verify "$dir/down/checkpoints/12" >"$dir/verify.log" 2>&1 || { cat "$dir/verify.log"; fail "the download does not verify"; }
"$tool" verify "$store/checkpoints/12" >"$dir/verify-s3.log" 2>&1 ||
  { cat "$dir/verify-s3.log"; fail "cairn verify of the store's checkpoint fails"; }
# A save copied elsewhere, on the store or on disk, is complete there too: verify, inspect and
# convert read it.
aws s3 cp --recursive "$store/checkpoints/12" "$store/backup-12" >/dev/null 2>&1 || fail "awscli cannot copy checkpoint 12"
cp -r "$dir/down/checkpoints/12" "$dir/backup-12"
for copy in "$store/backup-12" "$dir/backup-12"; do
  "$tool" verify "$copy" >"$dir/copy.log" 2>&1 || { cat "$dir/copy.log"; fail "the copy $copy does not verify"; }
  "$tool" inspect "$copy" >"$dir/copy.log" 2>&1 || { cat "$dir/copy.log"; fail "the copy $copy cannot be inspected"; }
  grep -q "^complete: yes" "$dir/copy.log" || { cat "$dir/copy.log"; fail "the copy $copy is not said complete"; }
done
"$tool" convert input.path="$store/backup-12" input.format=distributed output.path="$dir/sd-backup" \
  output.format=state_dict >"$dir/copy.log" 2>&1 || { cat "$dir/copy.log"; fail "the copy on the store does not convert"; }
aws s3 cp --recursive "$store/export/8" "$dir/dl/export/8" >/dev/null 2>&1 || fail "awscli cannot download export 8"
"$tool" verify "$dir/dl/export/8" >"$dir/verify-export.log" 2>&1 ||
  { cat "$dir/verify-export.log"; fail "the downloaded export does not verify"; }
# shellcheck disable=SC2086
"$tool" launch -n 2 -- "$train" run.experiment_dir="$dir/down" training.train_iters=13 training.checkpoint.interval=4 $common \
  >"$dir/local-resume.log" 2>&1 || { cat "$dir/local-resume.log"; fail "the downloaded checkpoint does not resume"; }
grep -q "resumed from $dir/down/checkpoints/12 at iteration 12" "$dir/local-resume.log" ||
  { cat "$dir/local-resume.log"; fail "not resumed from the downloaded checkpoint"; }

# convert from the store to a local directory and back: bitwise what the conversions of
# awscli's download give (the files' tensors and headers, but each conversion's fresh identity).
convert() {
  "$tool" convert "$@" >"$dir/convert.log" 2>&1 || { cat "$dir/convert.log"; fail "cairn convert $*: failed"; }
}
refused() { # KEY ARGS...: convert refuses, naming KEY
  key=$1
  shift
  "$tool" convert "$@" >"$dir/convert.log" 2>&1 && fail "cairn convert $* was not refused"
  grep -q "$key" "$dir/convert.log" || { cat "$dir/convert.log"; fail "cairn convert $*: the refusal does not name $key"; }
}
(cd "$dir" && convert input.path="$store/checkpoints/12" input.format=distributed output.path="$dir/sd-s3" \
  output.format=state_dict)
[ ! -e "$dir/s3:" ] || fail "convert of an s3:// path made a local s3: tree"
convert input.path="$dir/down/checkpoints/12" input.format=distributed output.path="$dir/sd-down" output.format=state_dict
python3 "$here/rank_files.py" same "$dir/sd-s3" "$dir/sd-down" >"$dir/same.log" ||
  { cat "$dir/same.log"; fail "convert from s3:// differs from a conversion of the download"; }
convert input.path="$dir/sd-s3" input.format=state_dict output.path="$store/converted" output.format=distributed
convert input.path="$dir/sd-s3" input.format=state_dict output.path="$dir/back-local" output.format=distributed
aws s3 cp --recursive "$store/converted" "$dir/back-s3" >/dev/null 2>&1 || fail "awscli cannot download the conversion"
python3 "$here/rank_files.py" same "$dir/back-s3" "$dir/back-local" >"$dir/same.log" ||
  { cat "$dir/same.log"; fail "convert to s3:// differs from the same conversion to a local directory"; }
"$tool" verify "$store/converted" >"$dir/verify-converted.log" 2>&1 ||
  { cat "$dir/verify-converted.log"; fail "the conversion in the store does not verify"; }
# An earlier conversion is replaced only when asked; a save of the experiment, or a prefix in
# the input, never is.
refused output.path input.path="$dir/sd-s3" input.format=state_dict output.path="$store/converted" \
  output.format=state_dict
convert input.path="$dir/sd-s3" input.format=state_dict output.path="$store/converted" output.format=state_dict \
  replace=true
aws s3 ls "$store/converted/" >"$dir/ls-converted" 2>&1
grep -q "rank_0.safetensors\|metadata.json" "$dir/ls-converted" &&
  { cat "$dir/ls-converted"; fail "replace=true left the earlier conversion's files"; }
"$tool" verify "$store/converted" >/dev/null 2>&1 || fail "the replacing conversion does not verify"
refused output.path input.path="$dir/sd-s3" input.format=state_dict output.path="$store/checkpoints/12" \
  output.format=distributed replace=true
refused output.path input.path="$store/checkpoints/12" input.format=distributed \
  output.path="$store/checkpoints/12/inner" output.format=state_dict
"$tool" verify "$store/checkpoints/12" >/dev/null 2>&1 || fail "a refused conversion touched checkpoint 12"
refused output.path input.path="$dir/sd-s3" input.format=state_dict output.path="$store/checkpoints/12/x/y" \
  output.format=state_dict
# replace=true replaces what a conversion writes alone: never a Hugging Face directory, nor an
# object of the output's own name; the remains of a failed conversion (no index) it does.
hf_config=$(find "$dir/dl/export/8" -name config.json | head -n 1)
aws s3 cp "$hf_config" "$store/hf/config.json" >/dev/null 2>&1 || fail "awscli cannot upload"
refused output.path input.path="$dir/sd-s3" input.format=state_dict output.path="$store/hf" output.format=state_dict \
  replace=true
aws s3 ls "$store/hf/config.json" >/dev/null 2>&1 || fail "a refused replace=true removed config.json"
aws s3 cp "$hf_config" "$store/an-object" >/dev/null 2>&1 || fail "awscli cannot upload"
refused output.path input.path="$dir/sd-s3" input.format=state_dict output.path="$store/an-object" \
  output.format=state_dict replace=true
aws s3 ls "$store/an-object" >/dev/null 2>&1 || fail "a refused conversion removed the object of its output's name"
first=$(cd "$dir/sd-s3" && ls -- *.safetensors | head -n 1)
aws s3 cp "$dir/sd-s3/$first" "$store/remains/$first" >/dev/null 2>&1 || fail "awscli cannot upload"
refused output.path input.path="$dir/sd-s3" input.format=state_dict output.path="$store/remains" \
  output.format=state_dict
convert input.path="$dir/sd-s3" input.format=state_dict output.path="$store/remains" output.format=state_dict \
  replace=true
"$tool" verify "$store/remains" >/dev/null 2>&1 || fail "the conversion over a failed one's remains does not verify"

# shellcheck source=wait_for.sh
. "$here/wait_for.sh"
still_running() { kill -0 $launcher 2>/dev/null; }
give_up() {
  kill -9 $launcher 2>/dev/null
  cat "$log"
  fail "$1"
}

# SIGTERM: a preemption checkpoint in the store past the resume.
# shellcheck disable=SC2086
"$tool" launch -n 2 -- "$train" run.experiment_dir="$store" training.train_iters=1000000 $common \
  training.checkpoint.interval=1000 >"$dir/term.log" 2>&1 &
launcher=$!
log="$dir/term.log"
wait_for "the job does not train" grep -q "iteration 15/" "$log"
kill -TERM $launcher
wait $launcher
stopped=$(sed -n 's/^.*stopped by a signal after iteration \([0-9]*\)$/\1/p' "$dir/term.log")
[ -n "$stopped" ] || { cat "$dir/term.log"; fail "no preemption checkpoint after SIGTERM"; }
aws s3 ls --recursive "$store/checkpoints/$stopped/" 2>/dev/null | grep -q "/complete.json$" ||
  fail "the preemption checkpoint $stopped is not complete in the store"

# kill -9 in the middle of a save: the torn save is never resumed from.
# shellcheck disable=SC2086
"$tool" launch -n 2 -- "$train" run.experiment_dir="$store" training.train_iters=1000000 $common \
  training.checkpoint.interval=1 >"$dir/killed.log" 2>&1 &
launcher=$!
log="$dir/killed.log"
wait_for "the job does not train" grep -q "iteration $((stopped + 3))/" "$log"
ranks=$(cat "/proc/$launcher/task/$launcher/children" 2>/dev/null)
for pid in $ranks $launcher; do kill -9 "$pid" 2>/dev/null; done
wait $launcher 2>/dev/null
# Gone for good (reaped), as a scheduler restarts a job only once its processes are.
gone() { for pid in $ranks; do ! kill -0 "$pid" 2>/dev/null || return 1; done; }
still_running() { true; }
wait_for "the killed ranks did not end" gone
# shellcheck disable=SC2086
"$tool" launch -n 2 -- "$train" run.experiment_dir="$store" training.train_iters=1 training.checkpoint.interval=4 $common \
  >"$dir/after-kill.log" 2>&1
resumed=$(sed -n 's/^.*resumed from .*checkpoints\/\([0-9]*\) at iteration.*/\1/p' "$dir/after-kill.log")
[ -n "$resumed" ] || { cat "$dir/after-kill.log"; fail "no resume after the kill"; }
"$tool" verify "$store/checkpoints/$resumed" >/dev/null 2>&1 || fail "resumed from checkpoint $resumed, which does not verify"
echo "s3_train.sh: trained, resumed bitwise, stopped by SIGTERM and killed on s3://; awscli read what cairn wrote"
