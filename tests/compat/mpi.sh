#!/usr/bin/env bash
# Open MPI (Debian's openmpi-bin, built with libfabric) on loom's tcp (or udp)
# provider over loopback: two-sided messages through the cm PML and the
# ofi MTL (2 and 4 ranks), matching (wildcards, probes, matched probes,
# a synchronous send, a cancelled receive; 4 ranks, through shared memory
# as loom's tcp and udp reach same-host peers, and over the network
# alone with FI_TCP_ENABLE_SHM=0 or FI_UDP_ENABLE_SHM=0), everyone sending to
# everyone with random sizes (8 ranks), and one-sided Put/Accumulate/Get
# through the rdma OSC on the ofi BTL (2 and 3 ranks; and from 4 threads a
# rank, through a scalable endpoint).  Each MPI process checks in its
# own /proc/self/maps that it runs on loom's library (mpi/loaded.h).
#
# With two_hosts: the same programs on 2+2 ranks across two "hosts"
# (tests/lib/hosts.sh: network namespaces joined by a veth pair; host B
# has a /dev/shm and a host name of its own).  mpirun runs on host A and starts host B's
# daemon through a launch agent that enters B, as ssh would on a cluster.
# Ranks on one host reach each other through shared memory, the other
# host's over TCP, and loom's log must say so for every pair.  Needs root.
#
# With MPI_PROV=udp: the same programs on loom's udp provider (its RDM
# endpoints), on one host and on two.  The runs without a route check
# take the provider's parameter from the environment.
#
# Usage: mpi.sh <dir containing loom's libfabric.so.1> [two_hosts]
# Environment: MPI_TIMEOUT (seconds per run, default 120), MPI_PROV (tcp or
# udp, default tcp).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != two_hosts ]; }; then
	echo "usage: $0 <dir containing loom's libfabric.so.1> [two_hosts]" >&2
	exit 2
fi
loom_dir=$(realpath "$1")
mode=${2:-one_host}
src=$(dirname "$(realpath "$0")")/mpi
tmo=${MPI_TIMEOUT:-120}
prov=${MPI_PROV:-tcp}
case $prov in
tcp | udp) ;;
*)
	echo "MPI_PROV must be tcp or udp" >&2
	exit 2
	;;
esac
shm_var=FI_${prov^^}_ENABLE_SHM
for p in mpicc mpirun; do
	if ! command -v $p >/dev/null; then
		echo "SKIP: $p not found (install openmpi-bin libopenmpi-dev)" >&2
		exit 77
	fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loom-mpi.XXXXXX")
cleanup() {
	if [ "$mode" = two_hosts ]; then
		hosts_down
		umount "$tmp/mnt_b" "$tmp/uts_b" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

for prog in ring match exchange rma rma_threads; do
	# The sanitizer runtime preloaded for an ASan build of loom is not
	# wanted while compiling.
	LD_PRELOAD= mpicc -O2 -Wall -pthread -o "$tmp/$prog" "$src/$prog.c"
done

# Root is allowed here (CI runs as root); all of Open MPI's own traffic
# stays on loopback too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
export FI_TCP_IFACE=lo FI_UDP_IFACE=lo LOOM_EXPECT_DIR=$loom_dir
common=(--oversubscribe -x LD_LIBRARY_PATH="$loom_dir" -x LOOM_EXPECT_DIR -x FI_TCP_IFACE
	-x FI_UDP_IFACE)
[ -n "${LD_PRELOAD:-}" ] && common+=(-x LD_PRELOAD -x ASAN_OPTIONS)
# No shared-memory BTL: nothing but loom carries data, and no segments are
# left in /dev/shm.
mtl=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov")
two_sided=("${mtl[@]}" --mca btl self)
one_sided=("${mtl[@]}" --mca btl ofi,self --mca btl_ofi_provider_include "$prov"
	--mca osc rdma)

fail=0
launch=() # what mpirun runs under: nothing, or host A
# run NAME EXPECT NP ARGS...: the job exits 0 and rank 0 prints EXPECT.
run() {
	local name=$1 expect=$2 np=$3 rc=0
	shift 3
	timeout "$tmo" "${launch[@]}" mpirun -np "$np" "${common[@]}" "$@" >"$tmp/out" 2>&1 || rc=$?
	if [ $rc -eq 0 ] && grep -q "^$expect\$" "$tmp/out"; then
		echo "ok: $name ($expect)"
	else
		echo "FAIL: $name (exit $rc)"
		sed 's/^/  | /' "$tmp/out" | tail -40
		fail=1
	fi
}

if [ "$mode" = two_hosts ]; then
	. "$(dirname "$(realpath "$0")")/../lib/hosts.sh"
	# One interface name on both hosts, so one FI_TCP_IFACE serves all.
	hosts_up loommpi 10.79.0 lmveth lmveth || exit 1
	# Host B's own /dev/shm and host name (Open MPI tells nodes apart by
	# name: with one name, it takes both hosts for one node), in mount
	# and UTS namespaces kept by bind mounts.
	touch "$tmp/mnt_b" "$tmp/uts_b"
	if ! unshare --mount="$tmp/mnt_b" --propagation private \
		mount -t tmpfs -o mode=1777 tmpfs /dev/shm ||
		! unshare --uts="$tmp/uts_b" hostname "loomhostb$$"; then
		echo "FAIL: cannot make host B's /dev/shm and name" >&2
		exit 1
	fi
	cat >"$tmp/agent" <<-EOF
		#!/bin/sh
		# Open MPI's launch agent: "agent HOST COMMAND..." runs COMMAND on host B.
		shift
		exec nsenter --net=/var/run/netns/$HOST_B --mount=$tmp/mnt_b --uts=$tmp/uts_b sh -c "\$*"
	EOF
	chmod +x "$tmp/agent"
	printf '%s slots=2\n%s slots=2\n' "$HOST_IP_A" "$HOST_IP_B" >"$tmp/hosts"
	launch=(nsenter --net=/var/run/netns/"$HOST_A")
	export FI_TCP_IFACE=lmveth FI_UDP_IFACE=lmveth
	unset OMPI_MCA_oob_tcp_if_include OMPI_MCA_btl_tcp_if_include
	common+=(--hostfile "$tmp/hosts" --mca plm_rsh_agent "$tmp/agent"
		--mca oob_tcp_if_include 10.79.0.0/24)
	# Every pair of the four: the same host's through shared memory (two
	# pairs, both ways), the other host's over the network (four pairs).
	export "$shm_var=1"
	FI_LOG_LEVEL=info run "all to all, 2+2 ranks on two hosts" "exchange: 4 ranks, 0 errors" 4 \
		"${two_sided[@]}" -x FI_LOG_LEVEL -x "$shm_var" "$tmp/exchange"
	local_n=$(grep -c 'route_told.*: shared memory$' "$tmp/out" || true)
	net_n=$(grep -c 'route_told.*: network (another host, user or network namespace)$' \
		"$tmp/out" || true)
	if [ "$local_n" != 4 ] || [ "$net_n" != 8 ]; then
		echo "FAIL: routes: $local_n through shared memory (want 4), $net_n to another host (want 8)"
		grep 'route_told' "$tmp/out" | sed 's/^/  | /'
		fail=1
	else
		echo "ok: routes: 4 through shared memory, 8 to the other host"
	fi
	run "matching, 2+2 ranks on two hosts" "match: 4 ranks, 0 errors" 4 "${two_sided[@]}" "$tmp/match"
	run "one-sided, 2+2 ranks on two hosts" "rma: 4 ranks, 0 errors" 4 "${one_sided[@]}" "$tmp/rma"
	exit $fail
fi

run "two-sided, 2 ranks" "ring: 2 ranks, 0 errors" 2 "${two_sided[@]}" "$tmp/ring"
run "two-sided, 4 ranks" "ring: 4 ranks, 0 errors" 4 "${two_sided[@]}" "$tmp/ring"
# The ranks share this host: loom reaches them through shared memory
# ($shm_var, on by default), and its log says so; with the parameter
# off, the same program runs over the network alone.  (Subshells: the
# settings hold for one run.)
(
	export FI_LOG_LEVEL=info "$shm_var=1"
	run "matching, 4 ranks, $shm_var=1" "match: 4 ranks, 0 errors" 4 "${two_sided[@]}" \
		-x FI_LOG_LEVEL -x "$shm_var" "$tmp/match"
	exit $fail
) || fail=1
if ! grep -q ': shared memory$' "$tmp/out" ||
	grep -q 'ep_ctrl:route_told.*: network' "$tmp/out"; then
	echo "FAIL: the ranks on this host did not all reach each other through shared memory"
	grep 'route_told' "$tmp/out" | head -5
	fail=1
fi
(
	export FI_LOG_LEVEL=info "$shm_var=0"
	run "matching, 4 ranks, $shm_var=0" "match: 4 ranks, 0 errors" 4 "${two_sided[@]}" \
		-x FI_LOG_LEVEL -x "$shm_var" "$tmp/match"
	exit $fail
) || fail=1
if grep -q ': shared memory$' "$tmp/out"; then
	echo "FAIL: shared memory carried messages with $shm_var=0"
	fail=1
fi
run "all to all, 8 ranks" "exchange: 8 ranks, 0 errors" 8 "${two_sided[@]}" "$tmp/exchange"
run "one-sided, 2 ranks" "rma: 2 ranks, 0 errors" 2 "${one_sided[@]}" "$tmp/rma"
run "one-sided, 3 ranks" "rma: 3 ranks, 0 errors" 3 "${one_sided[@]}" "$tmp/rma"
# Four threads a rank, a BTL context each: the ofi BTL opens a scalable
# endpoint with four transmit and four receive contexts (loom logs it at
# info level, and the log must say so).
FI_LOG_LEVEL=info run "one-sided, 4 threads a rank, scalable endpoint" \
	"rma_threads: 2 ranks, 0 errors" 2 "${one_sided[@]}" -x FI_LOG_LEVEL \
	--mca btl_ofi_num_contexts_per_module 4 "$tmp/rma_threads"
if ! grep -q 'scalable endpoint: 4 transmit, 4 receive contexts' "$tmp/out"; then
	echo "FAIL: the ofi BTL opened no scalable endpoint with 4 contexts"
	grep -i 'scalable\|btl' "$tmp/out" | head -5
	fail=1
fi
exit $fail
