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
# namespaces carry this shell's pid; a trap deletes them on every exit.
set -uo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 <tcp_same_host executable>" >&2
	exit 2
fi
prog=$(realpath "$1")
A=loomhostA$$
B=loomhostB$$
va=lhA$$ # interface names stay under 16 bytes
vb=lhB$$
ipa=10.78.0.1
ipb=10.78.0.2
namespaces=()

cleanup() {
	local ns pid
	for ns in "${namespaces[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -9 "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted" >&2; exit 1' INT TERM HUP

for ns in "$A" "$B"; do
	if ! out=$(ip netns add "$ns" 2>&1); then
		echo "FAIL: cannot create a network namespace (ip netns add $ns: $out);" \
			"this test needs root" >&2
		exit 1
	fi
	namespaces+=("$ns")
	ip -n "$ns" link set lo up || exit 1
done
if ! { ip -n "$A" link add "$va" type veth peer name "$vb" netns "$B" &&
	ip -n "$A" addr add "$ipa/24" dev "$va" &&
	ip -n "$B" addr add "$ipb/24" dev "$vb" &&
	ip -n "$A" link set "$va" up && ip -n "$B" link set "$vb" up; }; then
	echo "FAIL: making the veth pair $va/$vb failed" >&2
	exit 1
fi
for ((i = 0; ; i++)); do
	ip -n "$A" link show "$va" | grep -q LOWER_UP &&
		ip -n "$B" link show "$vb" | grep -q LOWER_UP && break
	if ((i == 100)); then
		echo "FAIL: veth $va/$vb did not come up" >&2
		exit 1
	fi
	sleep 0.05
done

LOOM_NS_A=$A LOOM_NS_B=$B LOOM_IF_A=$va LOOM_IF_B=$vb LOOM_IP_A=$ipa LOOM_IP_B=$ipb \
	timeout 150 "$prog" two_hosts
rc=$?
[ $rc -eq 0 ] || echo "FAIL: $prog two_hosts exited with $rc" >&2
exit $rc
