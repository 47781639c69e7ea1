#!/bin/bash
# Runs loom's fi_info and fi_strerror next to the reference tools (Debian's
# libfabric-bin) on the same libfabric.so.1 and the same arguments, and fails
# if stdout, stderr or the exit code differ in any byte.
#
# usage: tools_cli.sh LOOM_TOOLS_DIR [LIBDIR]
#   LOOM_TOOLS_DIR  directory holding loom's built fi_info and fi_strerror
#   LIBDIR          optional: run both tools on LIBDIR/libfabric.so.1 (e.g.
#                   loom's) instead of the system reference library
# Exits 77 (skip) when the reference tools or library are not installed.
set -euo pipefail

SYS_LIB=/usr/lib/x86_64-linux-gnu/libfabric.so.1
# REF_TOOLS: a directory of reference tools to use instead (libfabric 2.6's,
# built for the 2.x API as loom's tools now are).
REF_INFO=${REF_TOOLS:-/usr/bin}/fi_info
REF_STRERROR=${REF_TOOLS:-/usr/bin}/fi_strerror

die() {
	echo "FAIL: $*" >&2
	exit 1
}

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	die "usage: $0 LOOM_TOOLS_DIR [LIBDIR]"
fi
tools_dir=$1
loom_info=$tools_dir/fi_info
loom_strerror=$tools_dir/fi_strerror
[ -x "$loom_info" ] || die "no executable $loom_info"
[ -x "$loom_strerror" ] || die "no executable $loom_strerror"

for f in "$REF_INFO" "$REF_STRERROR" "$SYS_LIB"; do
	if [ ! -e "$f" ]; then
		echo "SKIP: $f is missing (apt-get install libfabric-bin)"
		exit 77
	fi
done

if [ $# -eq 2 ]; then
	lib_dir=$(cd "$2" && pwd)
	want_lib=$(realpath "$lib_dir/libfabric.so.1") ||
		die "no libfabric.so.1 in $2"
else
	lib_dir=
	want_lib=$(realpath "$SYS_LIB")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Only what a case sets may reach the library: provider selection, logging
# and parameter values all change what the tools print.
while read -r var; do
	unset "$var"
done < <(compgen -e | grep -E '^FI_' || true)
# A sanitizer runtime preloaded by the test harness (ASan builds of loom
# loaded into Debian's tools) is kept; nothing else preloaded is.
sanitizer_preload=
case "${LD_PRELOAD:-}" in *libasan*) sanitizer_preload=$LD_PRELOAD ;; esac
unset LD_PRELOAD LD_LIBRARY_PATH LD_DEBUG LD_DEBUG_OUTPUT
export LC_ALL=C

# A build-tree binary may carry a RUNPATH to loom's own library; the library
# directory given through LD_LIBRARY_PATH takes precedence over it, which is
# how the reference library is forced for such a binary. A DT_RPATH cannot be
# overridden this way, and the library check below then reports it.
lib_env_for() {
	local bin=$1
	if [ -n "$lib_dir" ]; then
		echo "$lib_dir"
	elif readelf -d "$bin" 2>/dev/null | grep -q '(RUNPATH)'; then
		dirname "$SYS_LIB"
	fi
}

# run OUT_PREFIX BINARY ARGV0 ARGS...: runs BINARY as ARGV0 (so messages that
# quote argv[0] compare equal), records stdout, stderr and the exit code, and
# checks through the dynamic loader's trace which libfabric it initialised.
run() {
	local out=$1 bin=$2 argv0=$3
	shift 3
	local libenv rc=0 loaded
	libenv=$(lib_env_for "$bin")
	rm -f "$tmp"/ld.*
	(
		if [ -n "$libenv" ]; then
			export LD_LIBRARY_PATH="$libenv"
		fi
		if [ -n "$sanitizer_preload" ]; then
			export LD_PRELOAD="$sanitizer_preload"
		fi
		export LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/ld"
		exec -a "$argv0" "$bin" "$@"
	) >"$out.stdout" 2>"$out.stderr" || rc=$?
	echo "$rc" >"$out.rc"

	loaded=$(sed -n 's/.*calling init: \(.*libfabric\.so[.0-9]*\)$/\1/p' "$tmp"/ld.* |
		sort -u)
	[ -n "$loaded" ] || die "$bin $*: no libfabric.so.1 was loaded"
	[ "$(echo "$loaded" | wc -l)" -eq 1 ] ||
		die "$bin $*: several libfabric copies loaded: $loaded"
	[ "$(realpath "$loaded")" = "$want_lib" ] ||
		die "$bin $*: loaded $loaded, expected $want_lib"
}

passed=0
failed=0

# check NAME LOOM_BIN REF_BIN ARGV0 ARGS...
check() {
	local name=$1 mine=$2 ref=$3 argv0=$4
	shift 4
	local what bad=
	run "$tmp/mine" "$mine" "$argv0" "$@"
	run "$tmp/ref" "$ref" "$argv0" "$@"
	for what in rc stdout stderr; do
		if ! cmp -s "$tmp/mine.$what" "$tmp/ref.$what"; then
			bad="$bad $what"
			echo "--- $name: $what differs (< loom, > reference):"
			diff -a "$tmp/mine.$what" "$tmp/ref.$what" | cat -v | head -n 20 || true
		fi
	done
	if [ -n "$bad" ]; then
		echo "not ok - $name: $argv0 $* (differs in$bad)"
		failed=$((failed + 1))
	else
		echo "ok - $name: $argv0 $* (exit $(cat "$tmp/ref.rc"))"
		passed=$((passed + 1))
	fi
}

info() {
	check "fi_info" "$loom_info" "$REF_INFO" fi_info "$@"
}

strerr() {
	check "fi_strerror" "$loom_strerror" "$REF_STRERROR" fi_strerror "$@"
}

# Keep every provider on loopback so the listing is small and stable.
export FI_TCP_IFACE=lo FI_UDP_IFACE=lo

info --version
info -l
info -l -v
info -p tcp
info -v -p tcp
info -p tcp -t FI_EP_MSG -c 'FI_MSG|FI_RMA'
info -p tcp -t fi_ep_rdm -m FI_CONTEXT -v
info -p tcp -a FI_SOCKADDR_IN -s 127.0.0.1 -P 4000
info -p tcp -i FI_EP_MSG
info -e
info -g tcp
info -p nosuchprovider
info -p tcp -c FI_BOGUS
info -t FI_EP_BOGUS
info -Z
info --bogus
info -h

strerr 0
strerr 1
strerr 259
strerr 261
strerr -265
if [ -n "${REF_TOOLS:-}" ]; then # the codes 2.x added
	strerr 270
	strerr -271
fi
strerr 99999
strerr 0x10
strerr abc
strerr 2147483648
strerr -h
strerr

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
