#!/usr/bin/env bash
# Installs what cairn's build, tests and examples need from Debian 12's archive. Idempotent:
# packages already present are not touched, and the package lists are only refreshed when
# something is missing.
set -euo pipefail

# Boost: Describe and Mp11 (headers) and JSON (library); doctest for the tests; libtorch and
# Gloo for tensors and CPU collectives; xxHash for checksums; yaml-cpp for YAML configs; clang and its runtime for the
# libFuzzer target; python3-torch for the independent reference of transformers' Llama family
# that cairn-llama's logits are checked against, and whose torchrun launches the example trainer in
# the launcher tests; slurm-wlm and munge for the one-node SLURM cluster the scheduler test starts;
# libcurl and OpenSSL's libcrypto for s3:// paths (HTTP, Signature V4, Content-MD5); nodejs and npm (below)
# for the S3-compatible server the S3 tests start (s3rver, from the npm registry), and awscli, the
# client independent of cairn that reads what it wrote.
packages=(
  g++ cmake ninja-build git
  libboost1.81-dev libboost-json1.81-dev
  doctest-dev
  libtorch-dev libgloo-dev
  libxxhash-dev
  libyaml-cpp-dev
  clang libclang-rt-14-dev
  python3-torch
  slurm-wlm munge
  curl libcurl4-openssl-dev libssl-dev
  awscli
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js and npm for the S3 tests' server: Debian's, unless the machine has them already (a
# nodejs of another origin carries its own npm, which Debian's npm package conflicts with).
if ! command -v npm >/dev/null; then
  echo "installing: nodejs npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# The S3-compatible server of the S3 tests, pinned; tests/io/s3_server.sh finds it here.
s3rver_dir=/usr/local/lib/cairn-test
if [ ! -x "$s3rver_dir/node_modules/.bin/s3rver" ]; then
  echo "installing: s3rver 3.7.1 (npm) into $s3rver_dir"
  mkdir -p "$s3rver_dir"
  (cd "$s3rver_dir" && npm install --no-audit --no-fund --loglevel=error s3rver@3.7.1 >/dev/null)
fi
