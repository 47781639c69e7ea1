#!/usr/bin/env bash
# netns.sh - the tcp (or udp) provider between two hosts: network namespaces A and B
# joined by a veth pair (10.77.0.1/24 in A, 10.77.0.2/24 in B; 10.78.0 for udp), server in A,
# client in B, each restricted to its veth by FI_TCP_IFACE.
#
# Usage: netns.sh <netfault executable> <dir containing loom's libfabric.so.1>
# Environment: BIN_DIR (where fi_pingpong is, default /usr/bin); NETNS_PROV
# (tcp, the default, or udp: the same checks on udp's RDM endpoints, its
# peers' silence bounded by FI_UDP_PEER_TIMEOUT=3000 where tcp's
# connections are by FI_TCP_CONN_TIMEOUT=3000).
#
# What it proves (every process is checked through LD_DEBUG=libs to have
# loaded <dir>/libfabric.so.1 and no other libfabric):
#  1. Debian's fi_pingpong (-p "$prov" -e rdm -c) passes across the two hosts:
#     every size up to 6 MiB for messages, 1 MiB for tagged ones.
#  2. kill -9 of the server while tests/net/netfault.c streams to it
#     (64 KiB and 1 MiB sends, 8 in flight, every byte checked): the client
#     gets FI_EIO error completions whose fi_cq_strerror text names the
#     server, for every send it had outstanding, and exits within 20 s;
#     the other way round (client killed), the server's operations with
#     the client (a 1 MiB send the client never receives, so surely in
#     flight, and receives mid-transfer) end with FI_EIO and it stops after
#     3 s idle.
#  3. The server's veth taken down mid-transfer (FI_TCP_CONN_TIMEOUT=3000,
#     so no FIN or RST, only TCP timeouts): the client's sends end with
#     FI_EIO within 15 s; the server, still alive with its peer
#     unreachable, gets FI_EIO for its operations with the client and
#     stops after 4 s idle, within 20 s of the cut.  Then the same with
#     the veth pair deleted, both ends vanishing.
#  4. Cleanup: no process left in either namespace, both namespaces gone.
#
# Traffic stays inside the two namespaces made here (the only addresses
# used are the veths'); their names carry this shell's pid and a trap
# kills what runs in them and deletes them on every exit.  Without the
# right to make namespaces (root, CAP_NET_ADMIN) the test fails: CI runs it
# as root.
set -uo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 <netfault executable> <dir containing loom's libfabric.so.1>" >&2
	exit 2
fi
nf=$(realpath "$1")
loom_dir=$(realpath "$2")
pp=${BIN_DIR:-/usr/bin}/fi_pingpong
prov=${NETNS_PROV:-tcp}
case $prov in
tcp) iface_var=FI_TCP_IFACE conn_env=(FI_TCP_CONN_TIMEOUT=3000) ;;
udp) iface_var=FI_UDP_IFACE conn_env=(FI_UDP_PEER_TIMEOUT=3000) ;;
*)
	echo "NETNS_PROV must be tcp or udp" >&2
	exit 2
	;;
esac
export NETFAULT_PROV=$prov
. "$(dirname "$0")/../lib/hosts.sh"
run_limit=60 # no process runs longer, whatever happens
tmp=$(mktemp -d "${TMPDIR:-/tmp}/${NETNS_PROV:-tcp}_netns.XXXXXX")
namespaces=()
failed=0
t_start=$EPOCHREALTIME

fail() {
	echo "FAIL: $*" >&2
	failed=1
}

cleanup() {
	hosts_down
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted" >&2; exit 1' INT TERM HUP

for tool in "$nf" "$pp"; do
	if [ ! -x "$tool" ]; then
		echo "FAIL: $tool not found (fi_pingpong: install libfabric-bin)" >&2
		exit 1
	fi
done
if [ ! -e "$loom_dir/libfabric.so.1" ]; then
	echo "FAIL: no libfabric.so.1 in $loom_dir" >&2
	exit 1
fi

elapsed() { # seconds since $1 (an $EPOCHREALTIME), one decimal
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# ---- the two hosts ----------------------------------------------------------

subnet=10.77.0
[ "$prov" = udp ] && subnet=10.78.0
hosts_up "loom$prov" "$subnet" ltA$$ ltB$$ || exit 1 # names under 16 bytes
A=$HOST_A B=$HOST_B va=$HOST_IF_A vb=$HOST_IF_B ipa=$HOST_IP_A ipb=$HOST_IP_B
namespaces=("$A" "$B")

# The veth pair, addressed and up (carrier on both ends, so the first
# packets are not lost); made again for a check that must not inherit
# the state the last one left (neighbour entries that failed while the
# link was down).
make_link() {
	local ns addrs want
	hosts_link || { failed=1; return 1; }
	# Each host has no other IPv4 address than loopback and its own.
	for ns in "$A" "$B"; do
		addrs=$(ip -n "$ns" -4 -o addr show | awk '{ print $4 }' | sort | tr '\n' ' ')
		want="$ipb/24 127.0.0.1/8 "
		[ "$ns" = "$A" ] && want="$ipa/24 127.0.0.1/8 "
		if [ "$addrs" != "$want" ]; then
			fail "$ns has IPv4 addresses '$addrs', want '$want'"
			return 1
		fi
	done
}
make_link || exit 1
echo "ok: hosts $A ($ipa on $va) and $B ($ipb on $vb)"

# ---- running things in them ----------------------------------------------------

# launch NS TAG VAR=VALUE... -- COMMAND...: in the background in NS, output
# in $tmp/TAG.out, the loader's report in $tmp/TAG.ld.*; sets $launched.
launched=
launch() {
	local ns=$1 tag=$2
	local envs=()
	shift 2
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	# In a subshell that exits with the status: the kill of a process is
	# expected, and bash would print a notice for its own child.
	(
		ip netns exec "$ns" env "${envs[@]}" LD_LIBRARY_PATH="$loom_dir" \
			LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$tag.ld" \
			timeout -k 5 "$run_limit" "$@" >"$tmp/$tag.out" 2>&1
		status=$?
		exit $status
	) 2>/dev/null &
	launched=$!
}

# The loader bound TAG's process(es) to loom's library and no other.
check_loom() {
	local tag=$1
	if ! grep -qs "calling init: $loom_dir/libfabric.so.1" "$tmp/$tag.ld".*; then
		fail "$tag did not load $loom_dir/libfabric.so.1"
	fi
	if grep -hs "calling init: .*libfabric.so" "$tmp/$tag.ld".* | grep -qv "$loom_dir/"; then
		fail "$tag also loaded another libfabric"
	fi
}

# The pid a netfault process printed (its own, not its launcher's).
nf_pid() {
	sed -n 's/^[a-z]*: pid \([0-9]*\),.*/\1/p' "$tmp/$1.out" | head -1
}

# wait_line TAG REGEX SECONDS LAUNCHER: until TAG's output has a line
# matching REGEX; 1 if the launcher ended or time ran out first.
wait_line() {
	local tag=$1 re=$2 secs=$3 pid=$4 t0=$EPOCHREALTIME
	while ! grep -qE "$re" "$tmp/$tag.out" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			grep -qE "$re" "$tmp/$tag.out" 2>/dev/null && return 0
			fail "$tag ended before printing /$re/:"
			sed 's/^/    /' "$tmp/$tag.out" >&2
			return 1
		fi
		if awk -v e="$(elapsed "$t0")" -v s="$secs" 'BEGIN { exit !(e >= s) }'; then
			fail "$tag did not print /$re/ within $secs s:"
			sed 's/^/    /' "$tmp/$tag.out" >&2
			return 1
		fi
		sleep 0.05
	done
}

# A hung process (TAG's: a server runs in A, a client in B): where it is
# stuck, for the report.
backtrace() {
	local tag=$1 ns=$B pid
	[ "${tag%-srv}" != "$tag" ] && ns=$A
	command -v gdb >/dev/null || return
	for pid in $(ip netns pids "$ns" 2>/dev/null); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = timeout ] && continue
		echo "    $tag: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) (pid $pid) is here:" >&2
		timeout 30 gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null |
			grep '^#' | sed 's/^/      /' >&2
	done
}

# wait_exit TAG LAUNCHER SECONDS: sets $rc to its exit status, or fails
# (after a backtrace, the process killed) when it runs longer.
rc=
wait_exit() {
	local tag=$1 pid=$2 secs=$3 t0=$EPOCHREALTIME
	while kill -0 "$pid" 2>/dev/null; do
		if awk -v e="$(elapsed "$t0")" -v s="$secs" 'BEGIN { exit !(e >= s) }'; then
			fail "$tag still running after $secs s (hung):"
			sed 's/^/    /' "$tmp/$tag.out" >&2
			backtrace "$tag"
			hosts_kill
			wait "$pid" 2>/dev/null
			rc=hung
			return 1
		fi
		sleep 0.05
	done
	wait "$pid"
	rc=$?
}

# Nothing left running in the namespaces between checks.
check_no_procs() {
	local ns left
	for ns in "${namespaces[@]}"; do
		left=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
		if [ -n "$left" ]; then
			fail "$1: processes still running in $ns: $left"
			hosts_kill
		fi
	done
}

# ---- 1. fi_pingpong across the hosts -------------------------------------------

pingpong() { # TAG PORT LAST_SIZE ARGS...
	local tag=$1 port=$2 last=$3 srv cli i t0=$EPOCHREALTIME
	shift 3
	launch "$A" "$tag-srv" "$iface_var=$va" -- "$pp" -p "$prov" -e rdm -B "$port" "$@"
	srv=$launched
	# The server's control socket listens before it serves.
	for ((i = 0; i < 200; i++)); do
		ip netns exec "$A" ss -Hltn "sport = :$port" | grep -q . && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	launch "$B" "$tag-cli" "$iface_var=$vb" -- "$pp" -p "$prov" -e rdm -P "$port" "$@" "$ipa"
	cli=$launched
	wait_exit "$tag-cli" "$cli" 40 || return
	local crc=$rc
	wait_exit "$tag-srv" "$srv" 10 || return
	if [ "$crc" != 0 ] || [ "$rc" != 0 ]; then
		fail "$tag: client exit $crc, server exit $rc"
		tail -5 "$tmp/$tag-srv.out" "$tmp/$tag-cli.out" | sed 's/^/    /' >&2
		return
	fi
	if ! grep -q "^$last " "$tmp/$tag-cli.out"; then
		fail "$tag: the client did not reach size $last"
		return
	fi
	check_loom "$tag-srv"
	check_loom "$tag-cli"
	echo "ok: $tag: fi_pingpong $* across the hosts," \
		"$(grep -c '^[0-9]' "$tmp/$tag-cli.out") sizes up to $last ($(elapsed "$t0") s)"
}
pingpong pingpong-msg 7101 6m -c -S all
pingpong pingpong-tagged 7102 1m -m tagged -c -S 1048576 -I 50
check_no_procs pingpong

# ---- 2. and 3. a stream, then a fault ---------------------------------------------

# stream TAG PORT IDLE_S: a netfault server in A and a client in B,
# streaming; sets $srv, $cli (launchers) and $spid, $cpid (the programs).
srv='' cli='' spid='' cpid=''
stream_start() {
	local tag=$1 port=$2 idle=$3
	srv='' cli='' spid='' cpid=''
	launch "$A" "$tag-srv" "$iface_var=$va" "${conn_env[@]}" -- \
		"$nf" server "$ipa:$port" -p -i "$idle" -t 50
	srv=$launched
	wait_line "$tag-srv" "^server: listening on fi_sockaddr_in://$ipa:$port\$" 10 "$srv" ||
		return 1
	launch "$B" "$tag-cli" "$iface_var=$vb" "${conn_env[@]}" -- \
		"$nf" client "fi_sockaddr_in://$ipa:$port" -w 8 -s 200 -E 12 -t 50
	cli=$launched
	wait_line "$tag-cli" "^client: streaming" 20 "$cli" || return 1
	wait_line "$tag-srv" "^server: sent the client a message it will not receive" 5 \
		"$srv" || return 1
	spid=$(nf_pid "$tag-srv")
	cpid=$(nf_pid "$tag-cli")
	if [ -z "$spid" ] || [ -z "$cpid" ]; then
		fail "$tag: no pid in the netfault output"
		return 1
	fi
}

stream() {
	stream_start "$@" && return 0
	hosts_kill # a failed start leaves nothing running
	wait $srv $cli 2>/dev/null
	return 1
}

# The side that survived its peer: exit 3 (error completions of the
# peer-failure class for what it had in flight, nothing else went wrong,
# it did not hang in fi_close), and every error entry FI_EIO with a
# fi_cq_strerror text that names the peer.
check_survivor() { # TAG SIDE PEER_ADDRESS
	local tag=$1 side=$2 peer=$3 out=$tmp/$1.out n bad
	if [ "$rc" != 3 ]; then
		case $rc in
		0) fail "$tag: the $side saw no error completion (exit 0)" ;;
		4) fail "$tag: the $side stalled: $(grep -E 'stalled|limit' "$out")" ;;
		*) fail "$tag: the $side exited $rc" ;;
		esac
		sed 's/^/    /' "$out" >&2
		return 1
	fi
	n=$(grep -c "^$side: error completion: " "$out")
	bad=$(grep "^$side: error completion: " "$out" |
		grep -vc "err 5 (Input/output error), prov_errno [0-9-]*: .*$peer")
	if [ "$n" = 0 ] || [ "$bad" != 0 ]; then
		fail "$tag: $n error completions, $bad of them not FI_EIO naming $peer:"
		sed 's/^/    /' "$out" >&2
		return 1
	fi
	if ! grep -q "^$side: closed\$" "$out"; then
		fail "$tag: the $side did not close its objects"
		return 1
	fi
	if [ "$side" = server ] && ! grep -q "^server: the message to the client failed" "$out"; then
		fail "$tag: the server's message to the client did not fail"
		sed 's/^/    /' "$out" >&2
		return 1
	fi
}

check_killed() { # TAG
	if [ "$rc" != 137 ]; then
		fail "$1: the killed side exited $rc, not by SIGKILL (it was not running?)"
		sed 's/^/    /' "$tmp/$1.out" >&2
	fi
}

# 2a. The server dies mid-transfer.
if stream kill-server 7201 5; then
	t0=$EPOCHREALTIME
	kill -9 "$spid"
	if wait_exit kill-server-cli "$cli" 20; then
		t=$(elapsed "$t0")
		if check_survivor kill-server-cli client "fi_sockaddr_in://$ipa:7201"; then
			echo "ok: kill -9 server: the client's outstanding sends failed with FI_EIO" \
				"and it exited ${t} s after the kill:"
			grep -m1 "^client: error completion" "$tmp/kill-server-cli.out" | sed 's/^/    /'
			grep "^client: .* sends posted" "$tmp/kill-server-cli.out" | sed 's/^/    /'
		fi
	fi
	wait_exit kill-server-srv "$srv" 5 && check_killed kill-server-srv
	check_loom kill-server-srv
	check_loom kill-server-cli
fi
check_no_procs kill-server

# 2b. The client dies mid-transfer.
if stream kill-client 7202 3; then
	caddr=$(sed -n 's/^client: sending from //p' "$tmp/kill-client-cli.out")
	t0=$EPOCHREALTIME
	kill -9 "$cpid"
	if wait_exit kill-client-srv "$srv" 20; then
		t=$(elapsed "$t0")
		if check_survivor kill-client-srv server "$caddr"; then
			echo "ok: kill -9 client: the server's send to it (and receives in flight)" \
				"failed with FI_EIO, it stopped after 3 s idle, ${t} s after the kill:"
			grep -m1 "^server: error completion" "$tmp/kill-client-srv.out" | sed 's/^/    /'
			grep "^server: .* checked" "$tmp/kill-client-srv.out" | sed 's/^/    /'
		fi
	fi
	wait_exit kill-client-cli "$cli" 5 && check_killed kill-client-cli
	check_loom kill-client-srv
	check_loom kill-client-cli
fi
check_no_procs kill-client

# 3. The path between them goes away mid-transfer: CMD... cuts it.
cut_link() { # TAG PORT WHAT CMD...
	local tag=$1 port=$2 what=$3 t0 tc
	shift 3
	stream "$tag" "$port" 4 || return
	caddr=$(sed -n 's/^client: sending from //p' "$tmp/$tag-cli.out")
	t0=$EPOCHREALTIME
	if ! "$@"; then
		fail "$tag: '$*' failed"
		return
	fi
	if wait_exit "$tag-cli" "$cli" 15; then
		tc=$(elapsed "$t0")
		if check_survivor "$tag-cli" client "fi_sockaddr_in://$ipa:$port"; then
			echo "ok: $what: the client's sends failed with FI_EIO, it exited" \
				"${tc} s after the cut:"
			grep -m1 "^client: error completion" "$tmp/$tag-cli.out" | sed 's/^/    /'
			grep "^client: .* sends posted" "$tmp/$tag-cli.out" | sed 's/^/    /'
		fi
	fi
	if wait_exit "$tag-srv" "$srv" "$(awk -v t="$(elapsed "$t0")" 'BEGIN { print 20 - t }')"; then
		if check_survivor "$tag-srv" server "$caddr"; then
			echo "ok: $what: the server's send to the client (and receives in flight)" \
				"failed with FI_EIO, it stopped after 4 s idle, $(elapsed "$t0") s after the cut:"
			grep -m1 "^server: error completion" "$tmp/$tag-srv.out" | sed 's/^/    /'
			grep "^server: .* checked" "$tmp/$tag-srv.out" | sed 's/^/    /'
		fi
	fi
	check_loom "$tag-srv"
	check_loom "$tag-cli"
}
cut_link link-down 7301 "the server's veth down" ip -n "$A" link set "$va" down
check_no_procs link-down
if make_link; then
	cut_link veth-deleted 7302 "the veth pair deleted" ip -n "$B" link del "$vb"
fi
check_no_procs veth-deleted

# ---- 4. cleanup -------------------------------------------------------------------

check_no_procs end
left=$(jobs -rp | tr '\n' ' ')
if [ -n "$left" ]; then
	fail "launchers still running: $left"
fi
for ns in "${namespaces[@]}"; do
	if ! ip netns del "$ns"; then
		fail "could not delete namespace $ns"
	fi
done
left=$(ip netns list | grep -Ew "$A|$B")
if [ -n "$left" ]; then
	fail "namespaces left behind: $left"
else
	namespaces=()
	echo "ok: cleanup: no process left in the namespaces, $A and $B deleted"
fi

echo "$prov/netns: $(elapsed "$t_start") s"
exit $failed
