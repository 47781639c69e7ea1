#!/usr/bin/env bash
# Debian's own fi_pingpong (package libfabric-bin) between two processes on
# one of loom's providers, with its data checks (-c) over every size
# (-S all), for message and tagged (-m tagged) transfers; for shm once more
# with cross-memory attach disabled (FI_SHM_DISABLE_CMA=1, the bounce-buffer
# fallback).  LD_DEBUG=libs proves both processes ran loom's library.  On
# tcp's and udp's RDM endpoints the client, which builds the server's
# address from host and port, must say in its log (FI_LOG_LEVEL=info) that
# it reaches the server through shared memory, or never with
# FI_TCP_ENABLE_SHM=0 (FI_UDP_ENABLE_SHM=0).
#
# Usage: debian_pingpong.sh <dir containing loom's libfabric.so.1>
#        [<provider> [<endpoint type>]]   (default: shm rdm)
# Environment: PP_TIMEOUT (seconds per run, default 120), PP_PORT (default
# 47592 + pid % 1000), BIN_DIR (default /usr/bin), PP_VALGRIND=1 (both
# sides under valgrind's memcheck, 5 iterations per size: any invalid
# access, uninitialised value that matters, or definite leak fails the run).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: $0 <dir containing loom's libfabric.so.1> [<prov> [<ep>]]" >&2
	exit 2
fi
loom_dir=$(realpath "$1")
prov=${2:-shm}
ep=${3:-rdm}
export FI_TCP_IFACE=lo FI_UDP_IFACE=lo
bin=${BIN_DIR:-/usr/bin}/fi_pingpong
tmo=${PP_TIMEOUT:-120}
# Below the kernel's ephemeral range (32768-60999), where loom's own tcp
# endpoints and connections take their ports.
port=${PP_PORT:-$((10000 + $$ % 20000))}
if [ ! -x "$bin" ]; then
	echo "SKIP: $bin not found (install libfabric-bin)" >&2
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/debian_pingpong.XXXXXX")
srv_pid=
cleanup() {
	if [ -n "$srv_pid" ]; then
		kill "$srv_pid" 2>/dev/null || true
		wait "$srv_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

wrap=() iters=() pause=0.5
if [ "${PP_VALGRIND:-0}" = 1 ]; then
	if ! command -v valgrind >/dev/null; then
		echo "FAIL: PP_VALGRIND=1 but valgrind is not installed" >&2
		exit 1
	fi
	wrap=(valgrind -q --error-exitcode=99 --leak-check=full
		--errors-for-leak-kinds=definite --show-leak-kinds=definite)
	iters=(-I 5) pause=2 # valgrind's start takes a while
fi

fail=0
# run TAG EXTRA_ENV ARGS...: server and client, both reaped, both checked.
run() {
	local tag=$1 extra=$2
	shift 2
	port=$((port + 1)) # a fresh one: the last run's may linger in TIME_WAIT
	mkdir -p "$tmp/$tag"
	env $extra LD_LIBRARY_PATH="$loom_dir" LD_DEBUG=libs \
		LD_DEBUG_OUTPUT="$tmp/$tag/srv.ld" \
		timeout "$tmo" "${wrap[@]}" "$bin" -p "$prov" -e "$ep" -B "$port" "$@" \
		>"$tmp/$tag/srv.out" 2>&1 &
	srv_pid=$!
	sleep "$pause"
	local crc=0 src=0
	env $extra LD_LIBRARY_PATH="$loom_dir" LD_DEBUG=libs \
		LD_DEBUG_OUTPUT="$tmp/$tag/cli.ld" \
		timeout "$tmo" "${wrap[@]}" "$bin" -p "$prov" -e "$ep" -P "$port" "$@" 127.0.0.1 \
		>"$tmp/$tag/cli.out" 2>&1 || crc=$?
	wait "$srv_pid" || src=$?
	srv_pid=
	if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
		echo "FAIL: $tag: client exit $crc, server exit $src" >&2
		tail -n 5 "$tmp/$tag/srv.out" "$tmp/$tag/cli.out" >&2
		fail=1
		return
	fi
	for side in srv cli; do
		if ! grep -qs "calling init: $loom_dir/libfabric.so.1" "$tmp/$tag/$side.ld".*; then
			echo "FAIL: $tag: $side did not load $loom_dir/libfabric.so.1" >&2
			fail=1
		fi
		if grep -hs "calling init: .*libfabric.so" "$tmp/$tag/$side.ld".* |
			grep -qv "$loom_dir/"; then
			echo "FAIL: $tag: $side also loaded another libfabric" >&2
			fail=1
		fi
	done
	if ! grep -q "^$largest " "$tmp/$tag/cli.out"; then
		echo "FAIL: $tag: client did not reach the largest size" >&2
		fail=1
	fi
	if [ -n "$route_env" ]; then
		if [ "${!shm_var:-1}" = 0 ]; then
			if grep -q 'route_told.*: shared memory$' "$tmp/$tag/cli.out"; then
				echo "FAIL: $tag: shared memory with $shm_var=0" >&2
				fail=1
			fi
		elif ! grep -q 'route_told.*: shared memory$' "$tmp/$tag/cli.out" ||
			grep -q 'route_told.*: network' "$tmp/$tag/cli.out"; then
			echo "FAIL: $tag: the client did not reach the server through shared memory" >&2
			grep 'route_told' "$tmp/$tag/cli.out" >&2
			fail=1
		fi
	fi
	echo "ok: $tag ($(grep -c '^[0-9]' "$tmp/$tag/cli.out") sizes)"
}

route_env=
shm_var=FI_${prov^^}_ENABLE_SHM
case $prov-$ep in tcp-rdm | udp-rdm) route_env=FI_LOG_LEVEL=info ;; esac
# The largest size fi_pingpong's -S all runs: 6m, or for datagrams the
# largest of its sizes that fits one (loopback's: 64k does not).
largest=6m
[ "$ep" = dgram ] && largest=48k
run "$prov-$ep-msg" "$route_env" -c -S all "${iters[@]}"
# DGRAM endpoints have no tagged messages (as libfabric's udp has none).
if [ "$ep" != dgram ]; then
	run "$prov-$ep-tagged" "$route_env" -m tagged -c -S all "${iters[@]}"
fi
if [ "$prov" = shm ]; then
	run "$prov-$ep-msg_nocma" "FI_SHM_DISABLE_CMA=1" -c -S all "${iters[@]}"
fi
exit $fail
