#!/usr/bin/env bash
# Programs built against libfabric 2.6 run on loom:
#  * v2_rdm (tests/compat/v2_rdm.c, built against 2.6's headers and linked
#    against 2.6's library: it references fi_getinfo@FABRIC_1.9 and
#    fi_fabric2@FABRIC_1.8) on loom's shm and tcp providers, then once on
#    2.6 itself, which checks the program;
#  * 2.6's own bin/fi_info on loom: --version, -l, and the answers for each
#    provider and endpoint type, printed with the same fields as 2.6 prints
#    its own.
# Every run on loom must have loaded loom's library: v2_rdm checks
# /proc/self/maps itself, and LD_DEBUG=libs (to a private file) must show
# "calling init: <loom dir>/libfabric.so.1" and no other libfabric.
# 2.6's fi_pingpong on loom is compat/debian_pingpong.sh with BIN_DIR.
#
# Usage: v2_rdm.sh <v2_rdm> <dir of loom's libfabric.so.1>
#                  <libfabric-2.6.0 dir> <dir with a libfabric.so.1 link to 2.6's>
# Environment: V2_PORT (default 9400; the tcp runs use it to +3).
set -euo pipefail

if [ $# -ne 4 ]; then
	echo "usage: $0 <v2_rdm> <loom lib dir> <libfabric-2.6.0 dir> <2.6 lib dir>" >&2
	exit 2
fi
prog=$1
loom_dir=$(realpath "$2")
ref26=$3
ref26_lib=$(realpath "$4")
port=${V2_PORT:-9400}
export FI_TCP_IFACE=lo
unset FI_PROVIDER FI_LOG_LEVEL

tmp=$(mktemp -d "${TMPDIR:-/tmp}/v2_rdm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail=0
failmsg() {
	echo "FAIL: $*" >&2
	fail=1
}

# on_loom TAG CMD...: CMD with loom's library, its output in $tmp/TAG.out;
# fails unless it exits 0 having loaded loom's library and no other.
on_loom() {
	local tag=$1 rc=0
	shift
	mkdir -p "$tmp/$tag.ld"
	env LD_LIBRARY_PATH="$loom_dir" LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$tag.ld/trace" \
		timeout 120 "$@" >"$tmp/$tag.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		failmsg "$tag: exit $rc"
		tail -n 20 "$tmp/$tag.out" >&2
		return 1
	fi
	if ! grep -qs "calling init: $loom_dir/libfabric.so.1" "$tmp/$tag.ld"/trace.*; then
		failmsg "$tag: did not load $loom_dir/libfabric.so.1"
		return 1
	fi
	if grep -hs "calling init: .*libfabric.so" "$tmp/$tag.ld"/trace.* |
		grep -qv "$loom_dir/"; then
		failmsg "$tag: also loaded another libfabric"
		return 1
	fi
	return 0
}

# The program is a 2.x one: it binds to the 2.x symbol versions.
syms=$(objdump -T "$prog")
for s in "FABRIC_1.9.*fi_getinfo" "FABRIC_1.8.*fi_fabric2"; do
	if ! grep -q "$s" <<<"$syms"; then
		failmsg "$prog does not reference $s"
	fi
done

for prov in shm tcp; do
	if on_loom "v2_rdm-$prov" "$prog" "$prov" "$port" "$loom_dir" loom; then
		echo "ok: v2_rdm on loom's $prov"
		sed 's/^/    /' "$tmp/v2_rdm-$prov.out"
	fi
	port=$((port + 2))
done

# The same program on 2.6 itself: what it asserts is what libfabric does.
for prov in shm tcp; do
	rc=0
	LD_LIBRARY_PATH="$ref26_lib" timeout 120 "$prog" "$prov" "$port" "$ref26_lib" ref \
		>"$tmp/ref-$prov.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		failmsg "v2_rdm on libfabric 2.6's $prov: exit $rc"
		tail -n 20 "$tmp/ref-$prov.out" >&2
	else
		echo "ok: v2_rdm on libfabric 2.6's $prov"
	fi
	port=$((port + 2))
done

# 2.6's fi_info on loom.
info=$ref26/bin/fi_info
if on_loom info-version "$info" --version; then
	if ! grep -q '^libfabric api: 2\.6$' "$tmp/info-version.out" ||
		! grep -q '^libfabric: ' "$tmp/info-version.out"; then
		failmsg "fi_info --version printed:"
		cat "$tmp/info-version.out" >&2
	else
		echo "ok: fi_info --version"
	fi
fi
if on_loom info-list "$info" -l; then
	for prov in shm tcp; do
		if ! grep -q "^$prov:\$" "$tmp/info-list.out"; then
			failmsg "fi_info -l does not list $prov"
		fi
	done
	echo "ok: fi_info -l"
fi
for pe in shm:FI_EP_RDM tcp:FI_EP_RDM tcp:FI_EP_MSG; do
	prov=${pe%%:*} ep=${pe#*:}
	if on_loom "info-$prov-$ep" "$info" -p "$prov" -t "$ep" -c "FI_MSG|FI_TAGGED" -v; then
		# fi_ep_attr's "type:" line, one per answer.
		n=$(grep -cE "^ +type: $ep\$" "$tmp/info-$prov-$ep.out" || true)
		if [ "$n" -lt 1 ] ||
			grep -E "^ +type: " "$tmp/info-$prov-$ep.out" | grep -qv "type: $ep\$"; then
			failmsg "fi_info -p $prov -t $ep: no or wrong answers"
			head -n 40 "$tmp/info-$prov-$ep.out" >&2
		else
			echo "ok: fi_info -p $prov -t $ep -v ($n answers)"
		fi
		# Field for field as 2.6 prints its own answer to the same call
		# (2.x's layout: no comp_order, total_buffered_recv or control
		# progress; fi_domain_attr's 2.x fields): the values are the
		# providers' own.
		rc=0
		# (FI_MSG alone: 2.6's tcp has no tagged MSG endpoint.)
		LD_LIBRARY_PATH="$ref26_lib" timeout 60 "$info" -p "$prov" -t "$ep" \
			-c FI_MSG -v >"$tmp/ref-info-$prov-$ep.out" 2>&1 || rc=$?
		on_loom "info-msg-$prov-$ep" "$info" -p "$prov" -t "$ep" -c FI_MSG -v || rc=$?
		fields() { sed -n '1,/^---$/{/^---$/d;s/: .*/:/;p}' "$1"; }
		if [ "$rc" != 0 ]; then
			failmsg "2.6's fi_info -p $prov -t $ep -c FI_MSG: exit $rc"
		elif ! diff <(fields "$tmp/ref-info-$prov-$ep.out") \
			<(fields "$tmp/info-msg-$prov-$ep.out") >"$tmp/fields.diff"; then
			failmsg "fi_info -p $prov -t $ep -v: fields differ from 2.6's"
			cat "$tmp/fields.diff" >&2
		else
			echo "ok: fi_info -p $prov -t $ep -v prints 2.6's fields"
		fi
		# No 2.x capability bit loom does not implement is reported.
		if grep -E 'FI_TAGGED_DIRECTED_RECV|FI_TAGGED_MULTI_RECV|FI_EXACT_DIRECTED_RECV' \
			"$tmp/info-$prov-$ep.out"; then
			failmsg "fi_info -p $prov -t $ep reports a capability loom does not implement"
		fi
	fi
done
exit $fail
