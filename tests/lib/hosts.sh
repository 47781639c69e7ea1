# hosts.sh - two "hosts" on one machine, for the test scripts that source
# it: network namespaces A and B joined by a veth pair, NET.1/24 in A and
# NET.2/24 in B, loopback up in each.  Nothing else of the machine's
# network is used.  Needs root (CAP_NET_ADMIN); CI runs as root.
#
#   hosts_up PREFIX NET IF_A IF_B   make them: namespaces PREFIX{A,B}<pid>
#                                   (so runs in parallel do not collide),
#                                   sets HOST_A HOST_B HOST_IF_A HOST_IF_B
#                                   HOST_IP_A HOST_IP_B; 1 (and a FAIL line)
#                                   if it cannot
#   hosts_link                      (re)make the veth pair, addressed, and
#                                   wait for carrier on both ends
#   hosts_kill                      kill -9 every process in them
#   hosts_down                      that, then delete them (safe to repeat;
#                                   callers run it from their EXIT trap)
#
# The two ends of the pair may have the same name (each lives in its own
# namespace), so one FI_TCP_IFACE serves processes on both hosts.

HOST_A= HOST_B= HOST_IF_A= HOST_IF_B= HOST_IP_A= HOST_IP_B=
hosts_namespaces=()

hosts_up() {
	local out ns
	HOST_A=$1A$$ HOST_B=$1B$$
	HOST_IP_A=$2.1 HOST_IP_B=$2.2
	HOST_IF_A=$3 HOST_IF_B=$4
	for ns in "$HOST_A" "$HOST_B"; do
		if ! out=$(ip netns add "$ns" 2>&1); then
			echo "FAIL: cannot create a network namespace (ip netns add $ns: $out);" \
				"this test needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)" >&2
			return 1
		fi
		hosts_namespaces+=("$ns")
		ip -n "$ns" link set lo up || return 1
	done
	hosts_link
}

hosts_link() {
	local i tmp=lmv$$ # made under a temporary name: the two may share one
	ip -n "$HOST_A" link del "$HOST_IF_A" 2>/dev/null # and its peer
	if ! { ip -n "$HOST_A" link add "$tmp" type veth peer name "$HOST_IF_B" netns "$HOST_B" &&
		ip -n "$HOST_A" link set "$tmp" name "$HOST_IF_A" &&
		ip -n "$HOST_A" addr add "$HOST_IP_A/24" dev "$HOST_IF_A" &&
		ip -n "$HOST_B" addr add "$HOST_IP_B/24" dev "$HOST_IF_B" &&
		ip -n "$HOST_A" link set "$HOST_IF_A" up &&
		ip -n "$HOST_B" link set "$HOST_IF_B" up; }; then
		echo "FAIL: making the veth pair $HOST_IF_A/$HOST_IF_B failed" >&2
		return 1
	fi
	for ((i = 0; ; i++)); do
		ip -n "$HOST_A" link show "$HOST_IF_A" | grep -q LOWER_UP &&
			ip -n "$HOST_B" link show "$HOST_IF_B" | grep -q LOWER_UP && return 0
		if ((i == 100)); then
			echo "FAIL: veth $HOST_IF_A/$HOST_IF_B did not come up" >&2
			return 1
		fi
		sleep 0.05
	done
}

hosts_kill() {
	local ns pid
	for ns in "${hosts_namespaces[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -9 "$pid" 2>/dev/null
		done
	done
}

hosts_down() {
	local ns
	hosts_kill
	for ns in "${hosts_namespaces[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	hosts_namespaces=()
}
