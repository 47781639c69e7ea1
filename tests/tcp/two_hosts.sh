#!/usr/bin/env bash
# two_hosts.sh - tcp's RDM endpoints across two "hosts" on one machine:
# network namespaces A and B joined by a veth pair (10.78.0.1/24 in A,
# 10.78.0.2/24 in B), in which tests/tcp/same_host.c two_hosts runs five
# processes: two in A sharing a /dev/shm of their own, two in B sharing
# another, and one more in A with a /dev/shm of its own.  Peers that share
# a /dev/shm reach each other through shared memory, every other pair over
# TCP (another host, or a region that cannot be opened): same_host.c
# checks the messages and each process's word on which link carried what.
#
# Usage: two_hosts.sh <tcp_same_host executable>
#
# Needs root (network and mount namespaces): CI runs it as root.  The
# namespaces (tests/lib/hosts.sh) carry this shell's pid; a trap deletes
# them on every exit.
set -uo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 <tcp_same_host executable>" >&2
	exit 2
fi
prog=$(realpath "$1")
. "$(dirname "$0")/../lib/hosts.sh"
trap hosts_down EXIT
trap 'echo "FAIL: interrupted" >&2; exit 1' INT TERM HUP
hosts_up loomhost 10.78.0 lhA$$ lhB$$ || exit 1 # names under 16 bytes

LOOM_NS_A=$HOST_A LOOM_NS_B=$HOST_B LOOM_IF_A=$HOST_IF_A LOOM_IF_B=$HOST_IF_B \
	LOOM_IP_A=$HOST_IP_A LOOM_IP_B=$HOST_IP_B \
	timeout 150 "$prog" two_hosts
rc=$?
[ $rc -eq 0 ] || echo "FAIL: $prog two_hosts exited with $rc" >&2
exit $rc
