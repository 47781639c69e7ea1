#!/usr/bin/env bash
# The benchmark programs as correctness tests: every operation of fabric_bench
# on every provider/endpoint, tiny sizes and counts, data verification on; and
# every phys_bench baseline, verified. Speed is not judged here.
#
# Usage: bench_tiny.sh <dir of fabric_bench and phys_bench> <dir of the
#        libfabric.so.1 to run on>
#
# Environment:
#   BENCH_COMBOS   provider:endpoint pairs (default: the ones loom will have,
#                  "shm:rdm tcp:rdm tcp:msg udp:rdm udp:dgram")
#   BENCH_MISSING_OK=1  a provider the library lacks is a skip, not a failure
#                  (for loom while its providers are being written)
#   BENCH_SKIP     provider:endpoint:op triples not run (default
#                  "udp:rdm:fatomic": the reference's udp;ofi_rxd crashes in
#                  fetching atomics)
#   BENCH_TIMEOUT  seconds for one program run (default 90)
# Every run must report the library it was given (no silent fallback to
# another libfabric.so.1); every run is bounded and reaps its processes.
set -euo pipefail
. "$(dirname "$0")/../lib/refshm.sh"

if [ $# -ne 2 ]; then
	echo "usage: $0 <bench dir> <libfabric dir>" >&2
	exit 2
fi
bench_dir=$1
lib_dir=$(realpath "$2")
combos=${BENCH_COMBOS:-shm:rdm tcp:rdm tcp:msg udp:rdm udp:dgram}
skip=${BENCH_SKIP:-udp:rdm:fatomic}
missing_ok=${BENCH_MISSING_OK:-0}
limit=${BENCH_TIMEOUT:-90}
ops="send tagged write read writedata fatomic"

export LD_LIBRARY_PATH=$lib_dir
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
export FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo}

if [ ! -e "$lib_dir/libfabric.so.1" ]; then
	echo "FAIL: $lib_dir has no libfabric.so.1" >&2
	exit 1
fi
want=$(realpath "$lib_dir/libfabric.so.1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_tiny.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

passed=0 failed=0 skipped=0
pass() {
	passed=$((passed + 1))
	echo "ok   $*"
}
fail() {
	failed=$((failed + 1))
	echo "FAIL $*"
}

# run NAME CMD...: bounded run, output in $tmp/NAME.{out,err}, exit code echoed
run() {
	local name=$1 rc=0
	shift
	clean_ref_shm
	timeout -k 5 "$limit" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	echo "$rc"
}

# The library line fabric_bench prints (dladdr of fi_getinfo) must name ours.
loaded_ok() {
	local got
	got=$(sed -n 's/^# library: //p' "$tmp/$1.out" | head -1)
	[ -n "$got" ] && [ "$(realpath "$got")" = "$want" ]
}

for combo in $combos; do
	prov=${combo%%:*} ep=${combo##*:}
	sizes="1,4k,64k"
	[ "$ep" = dgram ] && sizes="1,1k"
	for op in $ops; do
		name="$prov-$ep-$op"
		if [[ " $skip " == *" $prov:$ep:$op "* ]]; then
			skipped=$((skipped + 1))
			echo "skip $name (BENCH_SKIP)"
			continue
		fi
		rc=$(run "$name-probe" "$bench_dir/fabric_bench" -P -p "$prov" -e "$ep" -o "$op")
		if ! loaded_ok "$name-probe"; then
			fail "$name: loaded '$(sed -n 's/^# library: //p' "$tmp/$name-probe.out")'," \
				"expected $want"
			continue
		fi
		if [ "$rc" = 2 ]; then
			# A provider that lacks send lacks everything: that is a
			# missing provider. Other operations may legitimately be
			# absent (tcp msg has no tagged or atomics).
			if [ "$op" = send ] && [ "$missing_ok" != 1 ]; then
				fail "$name: provider $prov/$ep missing from $want"
				break
			fi
			skipped=$((skipped + 1))
			echo "skip $name (not offered by the library)"
			[ "$op" = send ] && break
			continue
		elif [ "$rc" != 0 ]; then
			fail "$name: probe exit $rc: $(tail -3 "$tmp/$name-probe.err")"
			continue
		fi
		for kind in lat bw; do
			[ "$ep" = dgram ] && [ "$kind" = bw ] && continue
			rc=$(run "$name-$kind" "$bench_dir/fabric_bench" -p "$prov" -e "$ep" \
				-o "$op" -k "$kind" -S "$sizes" -I 40 -r 2 -w 8 -c -T $((limit - 10)))
			rows=$(grep -c "^fabric,$op," "$tmp/$name-$kind.out" || true)
			if [ "$rc" != 0 ]; then
				fail "$name $kind: exit $rc: $(tail -3 "$tmp/$name-$kind.err" | tr '\n' ' ')"
			elif ! loaded_ok "$name-$kind"; then
				fail "$name $kind: wrong library loaded"
			elif [ "$rows" -lt 1 ]; then
				fail "$name $kind: no CSV row"
			else
				pass "$name $kind ($rows rows, verified)"
			fi
		done
	done
done

# Two pairs at once: the aggregate path and the launcher's barrier.
first=${combos%% *}
rc=$(run pairs "$bench_dir/fabric_bench" -p "${first%%:*}" -e "${first##*:}" -o send \
	-k bw -S 64,4k -I 64 -r 2 -w 8 -n 2 -c -T $((limit - 10)))
if [ "$rc" = 0 ] && grep -q '^fabric,send,rate,.*,2,2,' "$tmp/pairs.out"; then
	pass "2 pairs $first: aggregate rate row"
elif [ "$missing_ok" = 1 ] && grep -q 'fi_getinfo' "$tmp/pairs.err"; then
	skipped=$((skipped + 1))
	echo "skip 2 pairs $first (provider missing)"
else
	fail "2 pairs $first: exit $rc: $(tail -3 "$tmp/pairs.err" | tr '\n' ' ')"
fi

# self_msg (bench/icount's program): an endpoint sending to itself, every
# message's contents and completion checked, on each RDM provider.
for combo in $combos; do
	[ "${combo##*:}" = rdm ] || continue
	prov=${combo%%:*}
	for t in "" -t; do
		name="self-$prov${t}"
		rc=$(run "$name" "$bench_dir/self_msg" -p "$prov" -I 2000 $t)
		if [ "$rc" = 0 ] && loaded_ok "$name" && grep -q 'ns/msg$' "$tmp/$name.out"; then
			pass "self_msg $prov $t (2000 messages, verified)"
		elif [ "$missing_ok" = 1 ] && grep -q 'fi_getinfo' "$tmp/$name.err"; then
			skipped=$((skipped + 1))
			echo "skip self_msg $prov (provider missing)"
		else
			fail "self_msg $prov $t: exit $rc: $(tail -2 "$tmp/$name.err" | tr '\n' ' ')"
		fi
	done
done

for b in tcp_lat tcp_bw udp_lat shm_lat memcpy_bw cma_bw; do
	rc=$(run "phys-$b" "$bench_dir/phys_bench" -o "$b" -S 1,4k,64k -I 50 -r 2 -c \
		-T $((limit - 10)))
	rows=$(grep -c "^phys,$b," "$tmp/phys-$b.out" || true)
	if [ "$rc" = 0 ] && [ "$rows" -ge 1 ]; then
		pass "baseline $b ($rows rows, verified)"
	else
		fail "baseline $b: exit $rc: $(tail -3 "$tmp/phys-$b.err" | tr '\n' ' ')"
	fi
done

# A run that cannot finish is cut by its own deadline, reaps its processes
# and fails: a 1-second limit on a large transfer.
first_prov=${first%%:*} first_ep=${first##*:}
start=$(date +%s)
rc=$(run deadline "$bench_dir/fabric_bench" -p "$first_prov" -e "$first_ep" -o send \
	-k lat -S 1m -I 100000 -B 100000 -r 1 -T 1)
took=$(($(date +%s) - start))
if [ "$rc" != 0 ] && [ "$took" -le 15 ] && grep -q 'timeout\|fi_getinfo' "$tmp/deadline.err"; then
	pass "deadline: exit $rc after ${took}s"
else
	fail "deadline: exit $rc after ${took}s: $(tail -2 "$tmp/deadline.err" | tr '\n' ' ')"
fi

echo "bench_tiny: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
