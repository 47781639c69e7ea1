#!/usr/bin/env bash
# deps.sh build|test|bench - install what building (or testing, or
# measuring) loom needs on a Debian 12 machine.  Needs root for apt-get; does nothing for packages
# already installed.
set -euo pipefail

# valgrind: its memcheck.h, for the annotations of cross-memory writes.
build_pkgs=(gcc meson ninja-build pkg-config valgrind)
# The tests also compile with clang (with libFuzzer's runtime), generate
# the ABI probe with python3, compare against the reference libfabric
# (headers, library, tools), make hosts of network namespaces (ip), run
# Open MPI on loom, run fi_pingpong under valgrind (installed for the
# build), build libfabric's fabtests (autotools, make), and drop datagrams
# with the kernel's packet filter (nftables).
test_pkgs=(clang libclang-rt-14-dev python3 libfabric-dev libfabric-bin binutils
	iproute2 openmpi-bin libopenmpi-dev autoconf automake libtool make nftables)

# The benchmarks also run UCX's ucx_perftest beside loom (its shared-memory
# transport, the mark for shm's small messages) and plot with gnuplot.
bench_pkgs=(ucx-utils gnuplot-nox)

want=("${build_pkgs[@]}")
case ${1:-build} in
test) want+=("${test_pkgs[@]}") ;;
bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
esac

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages: ${missing[*]} (run as root, or install them)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
