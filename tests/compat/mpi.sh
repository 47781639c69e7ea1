#!/usr/bin/env bash
# Open MPI (Debian's openmpi-bin, built with libfabric) on loom's tcp
# provider over loopback: two-sided messages through the cm PML and the
# ofi MTL (2 and 4 ranks), matching (wildcards, probes, matched probes,
# a synchronous send, a cancelled receive; 4 ranks, through shared memory
# as loom's tcp reaches same-host peers, and over TCP alone with
# FI_TCP_ENABLE_SHM=0), everyone sending to
# everyone with random sizes (8 ranks), and one-sided Put/Accumulate/Get
# through the rdma OSC on the ofi BTL (2 and 3 ranks; and from 4 threads a
# rank, through a scalable endpoint).  Each MPI process checks in its
# own /proc/self/maps that it runs on loom's library (mpi/loaded.h).
#
# Usage: mpi.sh <dir containing loom's libfabric.so.1>
# Environment: MPI_TIMEOUT (seconds per run, default 120).
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 <dir containing loom's libfabric.so.1>" >&2
	exit 2
fi
loom_dir=$(realpath "$1")
src=$(dirname "$(realpath "$0")")/mpi
tmo=${MPI_TIMEOUT:-120}
for p in mpicc mpirun; do
	if ! command -v $p >/dev/null; then
		echo "SKIP: $p not found (install openmpi-bin libopenmpi-dev)" >&2
		exit 77
	fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loom-mpi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for prog in ring match exchange rma rma_threads; do
	# The sanitizer runtime preloaded for an ASan build of loom is not
	# wanted while compiling.
	LD_PRELOAD= mpicc -O2 -Wall -pthread -o "$tmp/$prog" "$src/$prog.c"
done

# Root is allowed here (CI runs as root); all of Open MPI's own traffic
# stays on loopback too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
export FI_TCP_IFACE=lo LOOM_EXPECT_DIR=$loom_dir
common=(--oversubscribe -x LD_LIBRARY_PATH="$loom_dir" -x LOOM_EXPECT_DIR -x FI_TCP_IFACE)
[ -n "${LD_PRELOAD:-}" ] && common+=(-x LD_PRELOAD -x ASAN_OPTIONS)
# No shared-memory BTL: nothing but loom carries data, and no segments are
# left in /dev/shm.
mtl=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp)
two_sided=("${mtl[@]}" --mca btl self)
one_sided=("${mtl[@]}" --mca btl ofi,self --mca btl_ofi_provider_include tcp
	--mca osc rdma)

fail=0
# run NAME EXPECT NP ARGS...: the job exits 0 and rank 0 prints EXPECT.
run() {
	local name=$1 expect=$2 np=$3 rc=0
	shift 3
	timeout "$tmo" mpirun -np "$np" "${common[@]}" "$@" >"$tmp/out" 2>&1 || rc=$?
	if [ $rc -eq 0 ] && grep -q "^$expect\$" "$tmp/out"; then
		echo "ok: $name ($expect)"
	else
		echo "FAIL: $name (exit $rc)"
		sed 's/^/  | /' "$tmp/out" | tail -40
		fail=1
	fi
}

run "two-sided, 2 ranks" "ring: 2 ranks, 0 errors" 2 "${two_sided[@]}" "$tmp/ring"
run "two-sided, 4 ranks" "ring: 4 ranks, 0 errors" 4 "${two_sided[@]}" "$tmp/ring"
# The ranks share this host: loom's tcp reaches them through shared memory
# (FI_TCP_ENABLE_SHM, on by default), and its log says so; with the
# parameter off, the same program runs over TCP alone.
FI_LOG_LEVEL=info run "matching, 4 ranks" "match: 4 ranks, 0 errors" 4 "${two_sided[@]}" \
	-x FI_LOG_LEVEL "$tmp/match"
if ! grep -q ': shared memory$' "$tmp/out" || grep -q 'ep_ctrl:route_told.*: network' "$tmp/out"; then
	echo "FAIL: the ranks on this host did not all reach each other through shared memory"
	grep 'route_told' "$tmp/out" | head -5
	fail=1
fi
FI_LOG_LEVEL=info FI_TCP_ENABLE_SHM=0 run "matching, 4 ranks, FI_TCP_ENABLE_SHM=0" \
	"match: 4 ranks, 0 errors" 4 "${two_sided[@]}" -x FI_LOG_LEVEL -x FI_TCP_ENABLE_SHM "$tmp/match"
if grep -q ': shared memory$' "$tmp/out"; then
	echo "FAIL: shared memory carried messages with FI_TCP_ENABLE_SHM=0"
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
