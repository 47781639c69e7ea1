#!/usr/bin/env bash
# loss.sh - real loss under udp's RDM endpoints: tests/ep/stress.c (four
# processes all-to-all, tagged messages of random sizes, every one checked
# for content and CQ data and counted: each delivered exactly once) in a
# network namespace of its own whose loopback interface loses a share of
# the UDP datagrams, dropped by the kernel's own packet filter (nftables:
# numgen random).  Each rate runs as its own namespace; the nftables
# counter must show that datagrams were dropped.
#
# With --two-hosts: the four processes on two "hosts" instead
# (tests/lib/hosts.sh: two namespaces joined by a veth pair; the odd
# ranks enter the second, LOOM_TEST_NETNS_ODD), each host's filter
# dropping that share of what it sends, so half the pairs cross the veth.
#
# Usage: loss.sh [--two-hosts] EP_STRESS [MESSAGES [MAX_SIZE]] -- RATE...   (percent)
#   e.g. loss.sh build/tests/ep_stress 1000000 65536 -- 1 10 30
# Needs root (unshare, ip netns, nft), nftables installed by scripts/deps.sh.
set -euo pipefail

two_hosts=0
if [ "${1:-}" = --two-hosts ]; then
	two_hosts=1
	shift
fi
stress=$(realpath "$1")
shift
args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	args+=("$1")
	shift
done
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [--two-hosts] EP_STRESS [MESSAGES [MAX_SIZE]] -- RATE..." >&2; exit 2; }
command -v nft >/dev/null || { echo "FAIL: nft not installed (scripts/deps.sh test)" >&2; exit 1; }

# filter NS RATE: NS's output drops RATE % of UDP datagrams (a fresh table).
filter() {
	ip netns exec "$1" nft delete table inet loss 2>/dev/null || true
	ip netns exec "$1" nft add table inet loss &&
		ip netns exec "$1" nft "add chain inet loss out { type filter hook output priority 0 ; }" &&
		ip netns exec "$1" nft "add rule inet loss out meta l4proto udp numgen random mod 100 < $2 counter drop"
}
dropped_in() {
	ip netns exec "$1" nft list chain inet loss out | sed -n "s/.*counter packets \([0-9]*\).*/\1/p"
}

if [ "$two_hosts" = 1 ]; then
	. "$(dirname "$(realpath "$0")")/../lib/hosts.sh"
	trap hosts_down EXIT
	hosts_up lmloss 10.81.0 lmlveth lmlveth || exit 1
	fail=0
	for rate in "$@"; do
		filter "$HOST_A" "$rate" && filter "$HOST_B" "$rate" || exit 1
		if ! ip netns exec "$HOST_A" env LOOM_TEST_PROV=udp FI_UDP_IFACE=lmlveth \
			LOOM_TEST_NETNS_ODD="/var/run/netns/$HOST_B" "$stress" "${args[@]}" >&2; then
			echo "FAIL: $rate % loss, two hosts: ep_stress failed" >&2
			fail=1
			continue
		fi
		a=$(dropped_in "$HOST_A") b=$(dropped_in "$HOST_B")
		if [ "${a:-0}" -gt 0 ] && [ "${b:-0}" -gt 0 ] || [ "$rate" = 0 ]; then
			echo "ok: $rate % loss, two hosts: every message delivered once, intact; $a + $b datagrams dropped"
		else
			echo "FAIL: $rate % loss, two hosts: the filters dropped $a and $b" >&2
			fail=1
		fi
	done
	exit $fail
fi

fail=0
for rate in "$@"; do
	out=$(unshare --net bash -c '
		set -e
		ip link set lo up
		nft add table inet loss
		nft "add chain inet loss out { type filter hook output priority 0 ; }"
		nft "add rule inet loss out meta l4proto udp numgen random mod 100 < $1 counter drop"
		LOOM_TEST_PROV=udp FI_UDP_IFACE=lo "$2" "${@:3}" >&2
		nft list chain inet loss out | sed -n "s/.*counter packets \([0-9]*\).*/\1/p"
	' loss "$rate" "$stress" "${args[@]}") || { echo "FAIL: $rate % loss: ep_stress failed" >&2; fail=1; continue; }
	dropped=${out##*$'\n'}
	if [ "${dropped:-0}" -gt 0 ] || [ "$rate" = 0 ]; then
		echo "ok: $rate % loss: every message delivered once, intact; $dropped datagrams dropped"
	else
		echo "FAIL: $rate % loss: the filter dropped nothing" >&2
		fail=1
	fi
done
exit $fail
