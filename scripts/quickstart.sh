#!/usr/bin/env bash
# cairn's main job, end to end: installs dependencies, builds the examples, and runs the
# config example with a file and command-line overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${CAIRN_JOBS:-2}" --target cairn-config-example

echo "== documentation of the config"
build/bin/cairn-config-example --help
echo "== a file with overrides, resolved and validated"
build/bin/cairn-config-example --config examples/config_example.json model.layers=4 optimizer=sgd
echo "== a bad config: every error at once"
if build/bin/cairn-config-example --config examples/config_example.json model.layers=0 learning_rate=-1 \
    checkpoint_intervall=5; then
  echo "the bad config was accepted" >&2
  exit 1
fi
