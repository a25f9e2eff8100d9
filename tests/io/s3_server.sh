#!/bin/sh
# Runs COMMAND... against a real S3-compatible server on loopback, started here and stopped after:
# s3rver (from the npm registry, installed by scripts/install-deps.sh) behind tests/io/s3_proxy.py,
# which checks every request's Signature V4 and Content-MD5 and injects the faults a test asks for.
# COMMAND gets AWS_ENDPOINT_URL (the proxy), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
# CAIRN_TEST_S3_BUCKET, CAIRN_TEST_S3_DIRECT (s3rver's own address, no proxy) and
# CAIRN_TEST_S3_PROXY (the proxy's address, for its /__proxy/ control paths).
#
# usage: s3_server.sh COMMAND...   Exits with COMMAND's status; 77 (skipped) where there is no s3rver.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
s3rver=${CAIRN_S3RVER:-/usr/local/lib/cairn-test/node_modules/.bin/s3rver}
if [ ! -x "$s3rver" ] || ! command -v node >/dev/null; then
  echo "skipped: no s3rver at $s3rver (scripts/install-deps.sh installs it; CAIRN_S3RVER names another)"
  exit 77
fi

work=$(mktemp -d)
server_pid=
proxy_pid=
cleanup() {
  [ -z "$proxy_pid" ] || kill "$proxy_pid" 2>/dev/null || true
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  [ -z "$proxy_pid" ] || wait "$proxy_pid" 2>/dev/null || true
  [ -z "$server_pid" ] || wait "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# started PID LOG WHAT SED: the first value SED takes from LOG once the process PID writes it;
# exits naming WHAT and showing LOG when PID ends or 30 s pass first.
started() {
  tries=0
  until value=$(sed -n "$4" "$2") && [ -n "$value" ]; do
    tries=$((tries + 1))
    if [ $tries -gt 300 ] || ! kill -0 "$1" 2>/dev/null; then
      echo "$3 did not start:" >&2
      cat "$2" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "$value"
}

bucket=cairn-test
mkdir "$work/data"
"$s3rver" -d "$work/data" -a 127.0.0.1 -p 0 --configure-bucket "$bucket" >"$work/server.log" 2>&1 &
server_pid=$!
port=$(started "$server_pid" "$work/server.log" s3rver 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p')

python3 "$here/s3_proxy.py" 0 "$port" S3RVER S3RVER >"$work/proxy.log" 2>&1 &
proxy_pid=$!
proxy_port=$(started "$proxy_pid" "$work/proxy.log" "the test proxy" 's/^ready \([0-9]*\)$/\1/p')

export AWS_ENDPOINT_URL="http://127.0.0.1:$proxy_port"
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export CAIRN_TEST_S3_BUCKET=$bucket
export CAIRN_TEST_S3_DIRECT="http://127.0.0.1:$port"
export CAIRN_TEST_S3_PROXY="$AWS_ENDPOINT_URL"
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION
status=0
"$@" || status=$?
if [ $status -ne 0 ]; then
  echo "--- proxy log"
  tail -n 40 "$work/proxy.log"
  echo "--- s3rver log"
  tail -n 40 "$work/server.log"
fi
exit $status
