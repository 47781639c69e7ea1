#!/usr/bin/env bash
# dgram_mc.sh - udp/dgram.c's multicast case in a network namespace of its
# own, whose loopback interface carries multicast (lo has no multicast
# flag and no route to 224.0.0.0/4 by default): the group's traffic stays
# inside, and parallel runs cannot hear each other.
#
# Usage: dgram_mc.sh UDP_DGRAM [ipv6]   (needs root for unshare; else skipped)
# IPv6 multicast does not loop back on lo: the ipv6 run's namespace has a
# veth pair instead, its endpoints on one end (FI_UDP_IFACE=v0, fd00::1).
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 UDP_DGRAM [ipv6]" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "skip: a network namespace needs root"
	exit 77
fi
command -v unshare >/dev/null || { echo "skip: no unshare"; exit 77; }
command -v ip >/dev/null || { echo "skip: no ip (iproute2)"; exit 77; }

bin=$(realpath "$1")
if [ "${2:-}" = ipv6 ]; then
	# $0 is the inner shell's: the binary, given as its argument.
	# shellcheck disable=SC2016
	exec unshare --net bash -c 'set -e
		ip link set lo up
		ip link add v0 type veth peer name v1
		ip addr add fd00::1/64 dev v0 nodad
		ip link set v0 up
		ip link set v1 up
		for _ in $(seq 50); do
			ip -6 route show table local | grep -q "ff00::/8 dev v0" && break
			sleep 0.1
		done
		FI_UDP_IFACE=v0 exec "$0" multicast ipv6' "$bin"
fi
# shellcheck disable=SC2016
exec unshare --net bash -c 'ip link set lo up && ip link set lo multicast on &&
	ip route add 224.0.0.0/4 dev lo && exec "$0" multicast' "$bin"
