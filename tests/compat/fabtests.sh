#!/usr/bin/env bash
# fabtests.sh BUILD_DIR FABTESTS_DIR DIFFERENCES [PROV...]
#
# libfabric's own test suite on loom.  Proves four things:
#  1. a program builds against loom's installed headers and libfabric.pc:
#     upstream fabtests 1.17.0 (FABTESTS_DIR: the tarball, build.sh,
#     run_all.sh and reference/) is built against a `meson install` of
#     BUILD_DIR into a scratch prefix;
#  2. its quick set runs on every provider loom lists (or on PROV...), with
#     every test process on BUILD_DIR/src/libfabric.so.1 (checked through
#     the loader's trace: a fallback to the system library fails);
#  3. the results are compared with libfabric 1.17's own
#     (FABTESTS_DIR/reference/<prov>.tsv; for tcp also tcp;ofi_rxm, for udp
#     also udp;ofi_rxd: loom's provider is held to the best of both);
#  4. a test loom does not pass fails this script unless DIFFERENCES lists
#     it (one line each: provider, tab, test, tab, the reason), whether
#     the reference passes it or not: what loom passes beyond libfabric
#     (shared contexts, scalable endpoints) is held too.
# Prints per provider loom's counts beside the reference's.  Logs of each
# test stay under $FABTESTS_WORK (default BUILD_DIR/fabtests).
set -uo pipefail

build=$(cd "$1" && pwd)
ftdir=$(cd "$2" && pwd)
diffs=$3
shift 3
work=${FABTESTS_WORK:-$build/fabtests}
lib=$build/src

fail() {
	echo "fabtests.sh: $*" >&2
	exit 1
}

for f in fabtests-1.17.0.tar.xz build.sh run_all.sh reference; do
	[ -e "$ftdir/$f" ] || fail "no $f in $ftdir"
done
[ -f "$diffs" ] || fail "no differences list $diffs"
rm -rf "$work"
mkdir -p "$work" || fail "cannot make $work"

# 1. loom installed into a scratch prefix; fabtests built against it.
dest=$work/dest
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; fail "meson install failed"; }
pc=$(find "$dest" -name libfabric.pc | head -1)
[ -n "$pc" ] || fail "meson install put no libfabric.pc under $dest"
export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=${pc%/*}
cflags=$(pkg-config --cflags libfabric) && libs=$(pkg-config --libs-only-L libfabric) ||
	fail "pkg-config cannot read $pc"
case "$cflags" in *"$dest"*) ;; *) fail "libfabric.pc gives $cflags, not loom's headers" ;; esac
prefix=$(sed -n 's/^prefix=//p' "$pc")
[ -f "$dest$prefix/include/rdma/fabric.h" ] || fail "no rdma/fabric.h under $dest$prefix"
echo "=== building fabtests 1.17.0 against $dest$prefix ($cflags $libs)"
CPPFLAGS="$cflags" LDFLAGS="$libs" bash "$ftdir/build.sh" "$work/install" "$dest$prefix" \
	>"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fail "fabtests did not build"; }
ft=$work/install/bin
[ -x "$ft/fi_getinfo_test" ] || fail "fabtests built no fi_getinfo_test"

# 2. Every test process on loom's library: the loader says which file.
LD_LIBRARY_PATH=$lib LD_DEBUG=libs "$ft/fi_getinfo_test" -h >/dev/null 2>"$work/ld.log"
grep -q "calling init: $lib/libfabric.so.1" "$work/ld.log" ||
	{ grep libfabric "$work/ld.log"; fail "fabtests did not load $lib/libfabric.so.1"; }

provs=("$@")
if [ ${#provs[@]} -eq 0 ]; then
	mapfile -t provs < <(LD_LIBRARY_PATH=$lib FI_LOG_LEVEL= "$build/tools/fi_info" -l |
		sed -n 's/^\([a-z0-9_;]*\):$/\1/p')
fi
[ ${#provs[@]} -gt 0 ] || fail "loom lists no provider"

# 3 and 4.
refs_of() {
	case $1 in
	tcp) echo "tcp tcp_ofi_rxm" ;;
	udp) echo "udp udp_ofi_rxd" ;;
	*) echo "$1" ;;
	esac
}

# The quick set on one provider (after the command words given first, if
# any), its report into $work/<prov>.run.
run_prov() {
	local prov=$1
	shift
	FT=$work/install RUNDIR=$work/run-$prov LIBDIR=$lib TO=${FABTESTS_TO:-30} \
		"$@" bash "$ftdir/run_all.sh" "$work/out" "$prov" 2>&1 |
		sed 's/^/  /' >"$work/$prov.run"
}
# Providers on IP share fabtests' port (9228), which run_all.sh waits to
# see free before each test, and shm names its endpoints in memory.  As
# root each provider runs in a network namespace of its own, where no
# other holds that port, all of them at once (their tests mostly wait);
# otherwise they go one after the other.
beside=() after=()
for prov in "${provs[@]}"; do
	if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
		beside+=("$prov")
	else
		after+=("$prov")
	fi
done
pids=()
for prov in "${beside[@]}"; do
	run_prov "$prov" unshare --net bash -c 'ip link set lo up && exec "$@"' netns &
	pids+=($!)
done
for prov in "${after[@]}"; do
	run_prov "$prov" env
done
for p in "${pids[@]}"; do
	wait "$p"
done

rc=0
summary=()
for prov in "${provs[@]}"; do
	echo "=== fabtests quick set on loom $prov"
	cat "$work/$prov.run"
	yaml=$work/out/$prov.yaml
	[ -s "$yaml" ] || { echo "no results for $prov"; rc=1; continue; }
	# "test<TAB>result" for loom; the provider suffix dropped.
	awk '/^- name: /{sub(/^- name: /,""); sub(/ -p "[^"]*"$/,""); n=$0}
	     /^  result: /{print n "\t" $2}' "$yaml" | sort >"$work/$prov.loom"
	: >"$work/$prov.ref"
	refnames=""
	for r in $(refs_of "$prov"); do
		t=$ftdir/reference/$r.tsv
		[ -f "$t" ] || continue
		refnames="$refnames ${r/_/;}"
		awk -F'\t' '{sub(/ -p "[^"]*"$/,"",$2); print $2 "\t" $1}' "$t" >>"$work/$prov.ref"
	done
	[ -s "$work/$prov.ref" ] || { echo "no reference results for $prov"; rc=1; continue; }
	# A test passes for the reference when any of its providers passes it.
	awk -F'\t' '$2=="Pass"{print $1}' "$work/$prov.ref" | sort -u >"$work/$prov.refpass"
	refpass=$(wc -l <"$work/$prov.refpass")
	loompass=$(awk -F'\t' '$2=="Pass"' "$work/$prov.loom" | wc -l)
	total=$(wc -l <"$work/$prov.loom")
	regress=0 listed=0 extra=0
	while IFS= read -r t; do
		res=$(awk -F'\t' -v t="$t" '$1==t{print $2}' "$work/$prov.loom")
		[ "$res" = Pass ] && continue
		if awk -F'\t' -v p="$prov" -v t="$t" '$1==p && $2==t{f=1} END{exit !f}' "$diffs"; then
			listed=$((listed + 1))
			continue
		fi
		echo "REGRESSION ($prov): '$t' passes on libfabric 1.17 (${refnames# }), ${res:-not run} on loom"
		regress=$((regress + 1))
	done <"$work/$prov.refpass"
	# Not passed by loom and not listed with its reason: what loom passed
	# before (or should) and lost, whatever the reference does.
	while IFS=$'\t' read -r t res; do
		[ "$res" = Pass ] && continue
		awk -F'\t' -v p="$prov" -v t="$t" '$1==p && $2==t{f=1} END{exit !f}' "$diffs" &&
			continue
		grep -qxF "$t" "$work/$prov.refpass" && continue # counted above
		echo "REGRESSION ($prov): '$t' is $res on loom and not listed in $diffs"
		regress=$((regress + 1))
	done <"$work/$prov.loom"
	# Passed by loom, not by the reference.
	extra=$(awk -F'\t' '$2=="Pass"{print $1}' "$work/$prov.loom" |
		grep -vxF -f "$work/$prov.refpass" | wc -l)
	# Listed differences that loom now passes: the list is stale.
	while IFS=$'\t' read -r p t _; do
		[ "$p" = "$prov" ] || continue
		awk -F'\t' -v t="$t" '$1==t && $2=="Pass"{f=1} END{exit !f}' "$work/$prov.loom" &&
			echo "note ($prov): '$t' is listed as a difference but passes now"
	done < <(grep -v '^#' "$diffs")
	summary+=("$(printf '%-8s loom %2d/%d pass (%d beyond the reference)   libfabric 1.17 (%s) %2d   missing: %d unlisted, %d listed' \
		"$prov" "$loompass" "$total" "$extra" "${refnames# }" "$refpass" "$regress" "$listed")")
	[ "$regress" -eq 0 ] || rc=1
done

echo "=== fabtests 1.17.0 quick set: loom against libfabric 1.17"
printf '%s\n' "${summary[@]}"
exit $rc
