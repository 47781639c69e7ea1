#!/bin/sh
# tostr_diff.sh - runs tostr_diff once on loom's libfabric.so.1 and once on the
# reference one and fails unless both print the same, non-empty text.
#
# usage: tostr_diff.sh LOOM_LIB_DIR TOSTR_DIFF_BINARY [REFERENCE_LIB_DIR]
# REFERENCE_LIB_DIR defaults to where the system's libfabric.so.1 lives.
# Exit 0: identical; 1: they differ or a run went wrong; 77: no reference
# library on this machine (meson and automake read 77 as "skipped").

set -u

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: $0 LOOM_LIB_DIR TOSTR_DIFF_BINARY [REFERENCE_LIB_DIR]" >&2
	exit 1
fi

loom_dir=$(cd "$1" 2>/dev/null && pwd -P) || {
	echo "tostr_diff: no directory $1" >&2
	exit 1
}
bin=$2
if [ ! -f "$loom_dir/libfabric.so.1" ]; then
	echo "tostr_diff: $loom_dir/libfabric.so.1 does not exist" >&2
	exit 1
fi
if [ ! -x "$bin" ]; then
	echo "tostr_diff: $bin is not an executable" >&2
	exit 1
fi

if [ $# -eq 3 ]; then
	ref_dir=$3
else
	ref_lib=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libfabric.so.1" { print $NF; exit }')
	ref_dir=${ref_lib%/*}
fi
if [ -z "$ref_dir" ] || [ ! -e "$ref_dir/libfabric.so.1" ]; then
	echo "SKIP: tostr_diff: no reference libfabric.so.1 installed" >&2
	exit 77
fi
ref_dir=$(cd "$ref_dir" && pwd -P)
if [ "$ref_dir" = "$loom_dir" ]; then
	echo "tostr_diff: loom and reference directories are the same ($ref_dir)" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tostr_diff.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# LD_LIBRARY_PATH wins over any RUNPATH the binary was linked with, so each
# run gets the library we name, whatever the build did.
LD_LIBRARY_PATH="$loom_dir" "$bin" >"$work/loom.out" 2>"$work/loom.err"
loom_rc=$?
LD_LIBRARY_PATH="$ref_dir" "$bin" >"$work/ref.out" 2>"$work/ref.err"
ref_rc=$?

status=0
if [ $loom_rc -ne 0 ] || [ $ref_rc -ne 0 ]; then
	echo "tostr_diff: exit status loom $loom_rc, reference $ref_rc" >&2
	cat "$work/loom.err" "$work/ref.err" >&2
	status=1
fi

# The program names, on stderr, the file fi_tostr was found in.
loom_from=$(sed -n 's/^tostr_diff: fi_tostr from //p' "$work/loom.err")
ref_from=$(sed -n 's/^tostr_diff: fi_tostr from //p' "$work/ref.err")
loom_real=$(readlink -f "$loom_from" 2>/dev/null)
ref_real=$(readlink -f "$ref_from" 2>/dev/null)
case "$loom_real" in
"$loom_dir"/*) echo "tostr_diff: loom run used $loom_from" ;;
*)
	echo "tostr_diff: loom run did not use loom's library (used '$loom_from')" >&2
	status=1
	;;
esac
case "$ref_real" in
"$loom_dir"/*)
	echo "tostr_diff: reference run used loom's library ($ref_from)" >&2
	status=1
	;;
"$ref_dir"/*) echo "tostr_diff: reference run used $ref_from" ;;
*)
	echo "tostr_diff: reference run used an unexpected library ('$ref_from')" >&2
	status=1
	;;
esac

# What is meant to differ: loom has the 2.x API's version, the reference
# 1.17's; the texts of the two error codes 2.x added (270, 271); and the
# names of two capabilities 1.17 declares but does not print, FI_AV_USER_ID
# (bit 41) and FI_PEER (bit 43), which 2.x prints.  They are checked, then
# both outputs are compared without them.
if ! grep -qx 'VERSION: \[2\.6\.0\]' "$work/loom.out"; then
	echo "tostr_diff: loom's FI_TYPE_VERSION is not 2.6.0" >&2
	status=1
fi
if ! grep -qx 'strerror -270: Memory registration limit exceeded' "$work/loom.out"; then
	echo "tostr_diff: loom has no text for FI_ENOMR" >&2
	status=1
fi
for want in 'CAPS bit 41: [FI_AV_USER_ID]' 'CAPS bit 43: [FI_PEER]'; do
	if ! grep -qxF "$want" "$work/loom.out"; then
		echo "tostr_diff: loom does not print '$want'" >&2
		status=1
	fi
done
for side in loom ref; do
	grep -vE '^(VERSION: |trunc version |strerror -?27[01]: |CAPS bit 4[13]: )' \
		"$work/$side.out" | sed 's/, FI_AV_USER_ID, FI_PEER//; s/, FI_AV_USER_ID//; s/, FI_PEER//' \
		>"$work/$side.cmp" || true
	mv "$work/$side.cmp" "$work/$side.out"
done
if [ ! -s "$work/loom.out" ] || [ ! -s "$work/ref.out" ]; then
	echo "tostr_diff: empty output" >&2
	status=1
elif ! diff -u "$work/ref.out" "$work/loom.out" >"$work/diff"; then
	echo "tostr_diff: loom's output differs from the reference (- reference, + loom):" >&2
	head -n 200 "$work/diff" >&2
	status=1
else
	echo "tostr_diff: $(wc -l <"$work/ref.out") lines identical"
fi
exit $status
