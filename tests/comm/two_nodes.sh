#!/bin/sh
# Two "nodes" on one machine: two launchers on loopback with node ranks 0 and 1, each starting
# two ranks of WORKER; the four ranks meet at node 0's rendezvous and run WORKER's collectives
# across both launchers. Exit status 0 when both launchers succeed.
#
#     two_nodes.sh TOOL WORKER [ARGS...]
set -u
tool=$1
shift
# shellcheck source=free_port.sh
. "$(dirname "$0")/free_port.sh"
port=$(free_port) || exit 1
"$tool" launch -n 2 --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" -- "$@" &
other=$!
"$tool" launch -n 2 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" -- "$@"
first=$?
wait "$other"
second=$?
echo "two_nodes.sh: node 0 exited with $first, node 1 with $second"
[ "$first" -eq 0 ] && [ "$second" -eq 0 ]
