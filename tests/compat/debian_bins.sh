#!/usr/bin/env bash
# Binary compatibility: Debian's own libfabric tools (package libfabric-bin),
# built against the reference, run unchanged on loom's libfabric.so.1.
#
# Usage: debian_bins.sh <dir containing loom's libfabric.so.1>
#
# What it proves, for each tool run with LD_LIBRARY_PATH=<dir>:
#  * the dynamic loader really bound the tool to <dir>/libfabric.so.1 and not
#    to the system's /usr/lib/x86_64-linux-gnu/libfabric.so.1: LD_DEBUG=libs
#    (written to a private file through LD_DEBUG_OUTPUT) must show
#    "calling init: <dir>/libfabric.so.1" and no libfabric from elsewhere;
#  * fi_info --version exits 0 and prints "<argv0>: ...", "libfabric: ..." and
#    "libfabric api: 1.17" (the API version loom reports through fi_version);
#  * fi_info -l exits 0 and prints a well-formed provider list ("name:" then
#    "    version: X.Y" lines) with at least MIN_PROVIDERS providers;
#  * fi_strerror CODE prints exactly what it prints on the reference library,
#    for 259 (FI_EAVAIL, FI_ERRNO_OFFSET + 3) and the other codes in
#    STRERROR_CODES; the reference run is itself checked to have loaded the
#    system library.
#
# Environment: MIN_PROVIDERS (default 1; 0 accepts an empty list while loom
# has no provider), EXPECT_API (default 1.17), STRERROR_CODES (see below),
# REF_LIB (default /usr/lib/x86_64-linux-gnu/libfabric.so.1), TOOL_TIMEOUT
# (seconds, default 60), BIN_DIR (default /usr/bin).
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 <dir containing loom's libfabric.so.1>" >&2
	exit 2
fi
loom_dir=$1
bin_dir=${BIN_DIR:-/usr/bin}
ref_lib=${REF_LIB:-/usr/lib/x86_64-linux-gnu/libfabric.so.1}
min_providers=${MIN_PROVIDERS:-1}
expect_api=${EXPECT_API:-1.17}
tool_timeout=${TOOL_TIMEOUT:-60}
strerror_codes=${STRERROR_CODES:-259 0 1 22 110 256 257 258 260 261 262 263 \
264 265 266 267 268 269}

for t in fi_info fi_strerror; do
	if [ ! -x "$bin_dir/$t" ]; then
		echo "FAIL: $bin_dir/$t not found (install package libfabric-bin)" >&2
		exit 1
	fi
done
if [ ! -d "$loom_dir" ]; then
	echo "FAIL: $loom_dir is not a directory" >&2
	exit 1
fi
loom_dir=$(realpath "$loom_dir")
ref_real=$(realpath "$ref_lib")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/debian_bins.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail=0
failmsg() {
	echo "FAIL: $*" >&2
	fail=1
}

if [ ! -e "$loom_dir/libfabric.so.1" ]; then
	failmsg "$loom_dir has no libfabric.so.1; the loader would fall back" \
		"to the system library (the checks below must catch that)"
elif [ "$(realpath "$loom_dir/libfabric.so.1")" = "$ref_real" ]; then
	echo "note: $loom_dir/libfabric.so.1 is the reference library itself" \
		"(self-test)"
fi

# run TAG LIBDIR CMD... : runs CMD with LD_LIBRARY_PATH=LIBDIR (or with it
# unset when LIBDIR is empty), keeping stdout, stderr, exit code and the
# loader's trace in $tmp/TAG.*
run() {
	local tag=$1 libdir=$2
	shift 2
	mkdir -p "$tmp/$tag.ld"
	local rc=0
	if [ -n "$libdir" ]; then
		env LD_LIBRARY_PATH="$libdir" LD_DEBUG=libs \
			LD_DEBUG_OUTPUT="$tmp/$tag.ld/trace" \
			timeout "$tool_timeout" "$@" \
			>"$tmp/$tag.out" 2>"$tmp/$tag.err" || rc=$?
	else
		env -u LD_LIBRARY_PATH LD_DEBUG=libs \
			LD_DEBUG_OUTPUT="$tmp/$tag.ld/trace" \
			timeout "$tool_timeout" "$@" \
			>"$tmp/$tag.out" 2>"$tmp/$tag.err" || rc=$?
	fi
	echo "$rc" >"$tmp/$tag.rc"
}

# The libfabric files the loader initialised during run TAG, one a line.
loaded_fabric() {
	cat "$tmp/$1.ld"/trace* 2>/dev/null |
		sed -n 's/.*calling init: \(.*libfabric\.so[^ ]*\).*/\1/p' |
		sort -u
}

# check_loaded TAG EXPECTED_DIR: the run loaded exactly one libfabric, the
# file libfabric.so.1 in EXPECTED_DIR (directory compared by real path, so a
# symlinked file still counts as the one in that directory).
check_loaded() {
	local tag=$1 want_dir=$2 files n f
	files=$(loaded_fabric "$tag")
	n=$(printf '%s' "$files" | grep -c . || true)
	if [ "$n" -eq 0 ]; then
		failmsg "[$tag] no libfabric was initialised (LD_DEBUG trace):"
		cat "$tmp/$tag.ld"/trace* 2>/dev/null | grep -i fabric >&2 || true
		return
	fi
	while read -r f; do
		if [ "$(basename "$f")" != "libfabric.so.1" ] ||
			[ "$(realpath "$(dirname "$f")")" != "$want_dir" ]; then
			failmsg "[$tag] loaded $f, expected $want_dir/libfabric.so.1"
		fi
	done <<<"$files"
	if [ "$n" -gt 1 ]; then
		failmsg "[$tag] more than one libfabric was loaded:"
		printf '%s\n' "$files" >&2
	fi
	if [ "$fail" = 0 ]; then
		echo "[$tag] loaded $files"
	fi
}

check_rc0() {
	local tag=$1 rc
	rc=$(cat "$tmp/$tag.rc")
	if [ "$rc" != 0 ]; then
		failmsg "[$tag] exit code $rc; stdout and stderr:"
		cat "$tmp/$tag.out" "$tmp/$tag.err" >&2
	fi
}

# --- fi_info --version -------------------------------------------------------
run version "$loom_dir" "$bin_dir/fi_info" --version
check_loaded version "$loom_dir"
check_rc0 version
# fi_info names itself by argv[0], so "/usr/bin/fi_info: 1.17.0"
for re in '^([^ ]*/)?fi_info: [0-9]' '^libfabric: [0-9]' \
	"^libfabric api: ${expect_api//./\\.}\$"; do
	if ! grep -qE "$re" "$tmp/version.out"; then
		failmsg "[version] no line matching '$re' in:"
		cat "$tmp/version.out" >&2
	fi
done

# --- fi_info -l ---------------------------------------------------------------
run list "$loom_dir" "$bin_dir/fi_info" -l
check_loaded list "$loom_dir"
check_rc0 list
nprov=$(grep -c '^[^[:space:]].*:$' "$tmp/list.out" || true)
if [ "$nprov" -lt "$min_providers" ]; then
	failmsg "[list] $nprov providers listed, at least $min_providers expected:"
	cat "$tmp/list.out" >&2
fi
if grep -vqE '^([^[:space:]]+:|    version: [0-9]+\.[0-9]+)$' "$tmp/list.out"; then
	failmsg "[list] lines not in fi_info -l's format:"
	grep -vE '^([^[:space:]]+:|    version: [0-9]+\.[0-9]+)$' \
		"$tmp/list.out" >&2
fi
echo "[list] $nprov providers: $(grep -o '^[^[:space:]]*:$' "$tmp/list.out" |
	tr -d ':' | tr '\n' ' ')"

# --- fi_strerror, compared with the reference -------------------------------
for code in $strerror_codes; do
	run "strerror$code" "$loom_dir" "$bin_dir/fi_strerror" "$code"
	check_loaded "strerror$code" "$loom_dir"
	run "refstrerror$code" "" "$bin_dir/fi_strerror" "$code"
	check_loaded "refstrerror$code" "$(dirname "$ref_real")"
	if ! diff -u --label "reference: fi_strerror $code" \
		--label "loom: fi_strerror $code" \
		<(cat "$tmp/refstrerror$code.out"; echo "exit $(cat "$tmp/refstrerror$code.rc")") \
		<(cat "$tmp/strerror$code.out"; echo "exit $(cat "$tmp/strerror$code.rc")") \
		>"$tmp/strerror$code.diff"; then
		failmsg "fi_strerror $code differs from the reference:"
		cat "$tmp/strerror$code.diff" >&2
	fi
done
echo "[strerror] 259 -> $(cat "$tmp/strerror259.out" 2>/dev/null || true)"

if [ "$fail" != 0 ]; then
	echo "debian_bins: FAILED" >&2
	exit 1
fi
echo "debian_bins: OK (fi_info --version, fi_info -l, fi_strerror" \
	"$(echo "$strerror_codes" | wc -w) codes ran on $loom_dir/libfabric.so.1)"
