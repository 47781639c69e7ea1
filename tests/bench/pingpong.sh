#!/usr/bin/env bash
# fi_pingpong as a test: server and client on 127.0.0.1 for each provider and
# endpoint type, with data checks; the output format of libfabric's tool; the
# library really loaded; the wire exchange against Debian's own fi_pingpong
# when it is installed; and a missing peer that ends in an error, not a hang.
#
# Usage: pingpong.sh <dir of fi_pingpong> <dir of the libfabric.so.1 to run on>
#
# Environment: PP_COMBOS (default "shm:rdm tcp:rdm tcp:msg udp:rdm udp:dgram"),
# PP_MISSING_OK=1 (a provider the library lacks is a skip), PP_REF_TOOL
# (default /usr/bin/fi_pingpong; empty to skip the cross-tool runs).
set -euo pipefail
. "$(dirname "$0")/../lib/refshm.sh"

if [ $# -ne 2 ]; then
	echo "usage: $0 <tools dir> <libfabric dir>" >&2
	exit 2
fi
pp=$1/fi_pingpong
lib_dir=$(realpath "$2")
combos=${PP_COMBOS:-shm:rdm tcp:rdm tcp:msg udp:rdm udp:dgram}
missing_ok=${PP_MISSING_OK:-0}
ref_tool=${PP_REF_TOOL-/usr/bin/fi_pingpong}
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
export FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo}

want=$(realpath "$lib_dir/libfabric.so.1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pingpong.XXXXXX")
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# A control port of our own, so tests running side by side do not meet.
port=$((10000 + $$ % 20000)) # below the ephemeral ports
passed=0 failed=0 skipped=0
pass() {
	passed=$((passed + 1))
	echo "ok   $*"
}
fail() {
	failed=$((failed + 1))
	echo "FAIL $*"
}

header='bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec'

# pair NAME SERVER_BIN CLIENT_BIN ARGS...: one ping-pong; results in
# $tmp/NAME.{s,c}.{out,err,rc}. Our own binary runs on lib_dir, traced by the
# loader so the test can tell which libfabric it initialised.
pair() {
	local name=$1 sbin=$2 cbin=$3 rc
	shift 3
	port=$((port + 1))
	clean_ref_shm
	mkdir -p "$tmp/$name.ld"
	env LD_LIBRARY_PATH="$lib_dir" LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$name.ld/s" \
		timeout -k 5 60 "$sbin" -B "$port" "$@" >"$tmp/$name.s.out" 2>"$tmp/$name.s.err" &
	server_pid=$!
	# libfabric's own client does not retry a refused connection: wait
	# until the server listens.
	for _ in $(seq 50); do
		grep -qi ":$(printf '%04X' "$port") 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 \
			2>/dev/null && break
		sleep 0.1
	done
	rc=0
	env LD_LIBRARY_PATH="$lib_dir" LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$name.ld/c" \
		timeout -k 5 60 "$cbin" -P "$port" "$@" 127.0.0.1 \
		>"$tmp/$name.c.out" 2>"$tmp/$name.c.err" || rc=$?
	echo "$rc" >"$tmp/$name.c.rc"
	rc=0
	wait "$server_pid" || rc=$?
	server_pid=
	echo "$rc" >"$tmp/$name.s.rc"
}

# loaded NAME SIDE: the libfabric files the loader initialised.
loaded() {
	cat "$tmp/$1.ld/$2".* 2>/dev/null |
		sed -n 's/.*calling init: \(.*libfabric\.so[^ ]*\).*/\1/p' | sort -u
}

check_pair() {
	local name=$1 rows=$2 iters=$3 side f
	for side in s c; do
		if [ "$(cat "$tmp/$name.$side.rc")" != 0 ]; then
			fail "$name: $side exit $(cat "$tmp/$name.$side.rc"):" \
				"$(tail -2 "$tmp/$name.$side.err" | tr '\n' ' ')"
			return
		fi
		if [ "$(head -1 "$tmp/$name.$side.out")" != "$header" ]; then
			fail "$name: $side header differs: $(head -1 "$tmp/$name.$side.out")"
			return
		fi
		if [ "$(grep -cE "^[0-9.]+[kmg]? +$iters +=$iters +[0-9.]+[kmg]? +[0-9]+\.[0-9]{2}s +[0-9.]+ +[0-9.]+ +[0-9.]+$" \
			"$tmp/$name.$side.out")" != "$rows" ]; then
			fail "$name: $side: expected $rows result rows:"
			cat "$tmp/$name.$side.out"
			return
		fi
	done
	pass "$name ($rows sizes, data checked)"
}

# size_rows PROV EP: how many of fi_pingpong's default sizes (64 B .. 1 MiB)
# run: a datagram endpoint stops at the library's max_msg_size (libfabric's
# udp: 1472 bytes, 3 sizes; loom's on loopback: 65472, 4).
size_rows() {
	local max n=0 s
	if [ "$2" != dgram ]; then
		echo 6
		return
	fi
	max=$(LD_LIBRARY_PATH="$lib_dir" "$(dirname "$pp")/fi_info" -p "$1" -t FI_EP_DGRAM -v 2>/dev/null |
		sed -n 's/^ *max_msg_size: *//p' | head -1)
	for s in 64 256 1024 4096 65536 1048576; do
		[ "${max:-0}" -ge "$s" ] && n=$((n + 1))
	done
	echo "$n"
}

for combo in $combos; do
	prov=${combo%%:*} ep=${combo##*:}
	name="$prov-$ep"
	pair "$name" "$pp" "$pp" -p "$prov" -e "$ep" -I 20 -c
	if grep -q 'fi_getinfo' "$tmp/$name.s.err" "$tmp/$name.c.err"; then
		if [ "$missing_ok" = 1 ]; then
			skipped=$((skipped + 1))
			echo "skip $name (provider missing)"
		else
			fail "$name: provider missing: $(head -1 "$tmp/$name.c.err")"
		fi
		continue
	fi
	rows=$(size_rows "$prov" "$ep")
	check_pair "$name" "$rows" 20
	for side in s c; do
		got=$(loaded "$name" "$side")
		if [ -z "$got" ] || [ "$(realpath "$got")" != "$want" ]; then
			fail "$name: $side loaded '${got//$'\n'/ }', expected $want"
		fi
	done
done

# -m tagged and -S all on the first combination that offers them.
for combo in $combos; do
	prov=${combo%%:*} ep=${combo##*:}
	[ "$ep" = rdm ] || continue
	pair "tagged-$prov" "$pp" "$pp" -p "$prov" -e rdm -m tagged -I 5 -S all -c
	grep -q 'fi_getinfo' "$tmp/tagged-$prov.c.err" && continue
	rows=$(grep -c '=5 ' "$tmp/tagged-$prov.c.out" || true)
	if [ "$rows" -ge 40 ]; then
		check_pair "tagged-$prov" "$rows" 5
	else
		fail "tagged-$prov: -S all ran $rows sizes"
	fi
	break
done

# The wire exchange matches libfabric's own tool, in both roles; the
# reference tool runs on the same library as ours.
if [ -n "$ref_tool" ] && [ -x "$ref_tool" ]; then
	for combo in $combos; do
		prov=${combo%%:*} ep=${combo##*:}
		rows=$(size_rows "$prov" "$ep")
		for role in server client; do
			name="ref-$role-$prov-$ep"
			if [ $role = server ]; then
				pair "$name" "$ref_tool" "$pp" -p "$prov" -e "$ep" -I 10 -c
			else
				pair "$name" "$pp" "$ref_tool" -p "$prov" -e "$ep" -I 10 -c
			fi
			if grep -q 'fi_getinfo' "$tmp/$name.s.err" "$tmp/$name.c.err" &&
				[ "$missing_ok" = 1 ]; then
				skipped=$((skipped + 1))
				echo "skip $name (provider missing)"
				continue
			fi
			check_pair "$name" "$rows" 10
		done
	done
else
	skipped=$((skipped + 1))
	echo "skip cross-tool runs (no $ref_tool)"
fi

# No server: the client gives up after its retries instead of waiting forever.
port=$((port + 1))
start=$(date +%s)
rc=0
LD_LIBRARY_PATH=$lib_dir timeout -k 5 60 "$pp" -P "$port" -p tcp -e rdm 127.0.0.1 \
	>"$tmp/nopeer.out" 2>"$tmp/nopeer.err" || rc=$?
took=$(($(date +%s) - start))
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$took" -le 20 ]; then
	pass "missing server: exit $rc after ${took}s ($(head -1 "$tmp/nopeer.err"))"
else
	fail "missing server: exit $rc after ${took}s"
fi

# -h: usage on stderr, exit 1, as libfabric's tool.
rc=0
LD_LIBRARY_PATH=$lib_dir "$pp" -h >"$tmp/help.out" 2>"$tmp/help.err" || rc=$?
if [ "$rc" = 1 ] && [ ! -s "$tmp/help.out" ] && grep -q '^ -S <size>' "$tmp/help.err"; then
	pass "-h"
else
	fail "-h: exit $rc"
fi

echo "pingpong: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
