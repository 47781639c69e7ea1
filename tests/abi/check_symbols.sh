#!/usr/bin/env bash
# Exported-symbol conformance: loom's libfabric.so.1 must export exactly the
# reference library's dynamic symbols, with the same symbol versions.
#
# Usage: check_symbols.sh [--superset] <loom libfabric.so.1>
#                         [<reference libfabric.so.1>]
#        (reference default: /usr/lib/x86_64-linux-gnu/libfabric.so.1)
#
# With --superset the reference is an older libfabric (Debian's 1.17 beside
# loom's 2.6-level table): every symbol it defines must be in loom at the
# same version, default or compat (a binary linked against it names the
# version, not which one was the default), with the same type, bind and
# visibility; its chain of version definitions must be the start of loom's.
# What loom adds after it is not compared there: the exact comparison with
# the newer reference covers it.
#
# What it proves: a binary linked against the reference resolves every
# versioned reference (fi_getinfo@FABRIC_1.0 ... fi_getinfo@@FABRIC_1.3) in
# loom, and a binary linked against loom binds to the same default versions.
# Compared, for defined (non-UND) dynamic symbols only:
#  * name, version, default (@@) or compat (@) binding, type, bind and
#    visibility, read with readelf --dyn-syms; objdump -T is read too and must
#    agree with readelf on names and versions (compat versions are the ones
#    it shows in parentheses);
#  * the version definitions and their parent chain (objdump -p);
#  * the SONAME, which must be libfabric.so.1.
set -euo pipefail

superset=0
if [ "${1:-}" = --superset ]; then
	superset=1
	shift
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 [--superset] <loom libfabric.so.1> [<reference libfabric.so.1>]" >&2
	exit 2
fi
loom=$1
ref=${2:-/usr/lib/x86_64-linux-gnu/libfabric.so.1}
for f in "$loom" "$ref"; do
	if [ ! -f "$f" ]; then
		echo "FAIL: $f does not exist" >&2
		exit 1
	fi
done
# A symbolic link flattened by a copy (shared/libfabric-2.6.0/lib has them)
# is a short text file naming its target beside it.
if ! readelf -h "$ref" >/dev/null 2>&1 && [ "$(stat -c %s "$ref")" -lt 256 ]; then
	target=$(dirname "$ref")/$(head -c 255 "$ref")
	if [ -f "$target" ]; then
		ref=$target
	fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_symbols.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# "name@@VER TYPE BIND VIS" for every defined dynamic symbol, per readelf.
# Version-definition symbols (FABRIC_1.x, ABS) appear under their own name.
readelf_syms() {
	readelf --dyn-syms -W "$1" |
		awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && NF >= 8 {
			print $8, $4, $5, $6
		}' | sort -u
}

# The same names as readelf would print them, from objdump -T:
# "(VER) name" is a compat version, "VER name" the default one.
objdump_names() {
	objdump -T "$1" | awk '
		/^[0-9a-f]+ / {
			sec = substr($0, 26); split(sec, a, /[ \t]+/)
			if (a[1] == "*UND*") next
			n = split($0, f, /[ \t]+/)
			name = f[n]; ver = f[n - 1]
			if (ver ~ /^\(.*\)$/) {
				print name "@" substr(ver, 2, length(ver) - 2)
			} else if (ver == "Base" || ver == name || ver ~ /^[0-9a-f]+$/) {
				print name
			} else {
				print name "@@" ver
			}
		}' | sort -u
}

# "VER <- PARENT" lines for the version definitions.
verdefs() {
	objdump -p "$1" | awk '
		/^Version definitions:/ { on = 1; next }
		/^Version References:/ || /^$/ { on = 0; next }  # read on: no SIGPIPE
		on && /^[0-9]+ / { cur = $4; print cur; next }
		on && /^\t/ { gsub(/[ \t]/, ""); print cur " <- " $0 }' | sort
}

soname() {
	readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p'
}

fail=0
for which in ref loom; do
	lib=${!which}
	if ! readelf -h "$lib" >/dev/null 2>&1; then
		echo "FAIL: $lib is not an ELF file" >&2
		exit 1
	fi
	readelf_syms "$lib" >"$tmp/$which.syms"
	objdump_names "$lib" >"$tmp/$which.objdump"
	cut -d' ' -f1 "$tmp/$which.syms" | sort -u >"$tmp/$which.names"
	verdefs "$lib" >"$tmp/$which.verdefs"
	if ! diff -u "$tmp/$which.names" "$tmp/$which.objdump" \
		>"$tmp/$which.tooldiff"; then
		echo "FAIL: readelf and objdump disagree on $lib" \
			"(- readelf, + objdump):" >&2
		cat "$tmp/$which.tooldiff" >&2
		fail=1
	fi
done

nref=$(wc -l <"$tmp/ref.syms")
if [ "$nref" -eq 0 ]; then
	echo "FAIL: reference $ref exports no symbols" >&2
	exit 1
fi

if [ "$superset" = 1 ]; then
	# name@VER whatever the binding, then what the reference defines and
	# loom lacks.
	for which in ref loom; do
		sed 's/@@/@/' "$tmp/$which.syms" | sort -u >"$tmp/$which.anysyms"
	done
	comm -23 "$tmp/ref.anysyms" "$tmp/loom.anysyms" >"$tmp/missing"
	if [ -s "$tmp/missing" ]; then
		echo "FAIL: symbols of $ref that loom lacks (name@version type" \
			"bind visibility):" >&2
		cat "$tmp/missing" >&2
		fail=1
	fi
	# The version chain: the reference's nodes with their parents, in
	# order, are loom's first ones.
	chain() {
		objdump -p "$1" | awk '/^Version definitions:/ { on = 1; next }
			/^Version References:/ || /^$/ { on = 0; next }
			on && /^[0-9]+ / { printf "\n%s", $4; next }
			on && /^\t/ { printf " <- %s", $1 }
			END { printf "\n" }' | sed '/^$/d'
	}
	chain "$ref" >"$tmp/ref.chain"
	chain "$loom" | head -n "$(wc -l <"$tmp/ref.chain")" >"$tmp/loom.chain"
	if ! diff -u --label "reference $ref" --label "loom $loom" \
		"$tmp/ref.chain" "$tmp/loom.chain" >"$tmp/chain.diff"; then
		echo "FAIL: loom's version definitions do not start with the" \
			"reference's:" >&2
		cat "$tmp/chain.diff" >&2
		fail=1
	fi
else
	if ! diff -u --label "reference $ref" --label "loom $loom" \
		"$tmp/ref.syms" "$tmp/loom.syms" >"$tmp/syms.diff"; then
		echo "FAIL: exported dynamic symbols differ" \
			"(- only in reference, + only in loom):" >&2
		cat "$tmp/syms.diff" >&2
		fail=1
	fi

	if ! diff -u --label "reference $ref" --label "loom $loom" \
		"$tmp/ref.verdefs" "$tmp/loom.verdefs" >"$tmp/verdefs.diff"; then
		echo "FAIL: symbol version definitions differ:" >&2
		cat "$tmp/verdefs.diff" >&2
		fail=1
	fi
fi

so=$(soname "$loom")
if [ "$so" != "libfabric.so.1" ]; then
	echo "FAIL: loom's SONAME is '${so}', expected libfabric.so.1" >&2
	fail=1
fi

if [ "$fail" != 0 ]; then
	echo "check_symbols: FAILED" >&2
	exit 1
fi
if [ "$superset" = 1 ]; then
	echo "check_symbols: OK (all $nref defined dynamic symbols and the" \
		"$(wc -l <"$tmp/ref.chain") version definitions of $ref in loom;" \
		"SONAME $so)"
	exit 0
fi
echo "check_symbols: OK ($nref defined dynamic symbols and" \
	"$(wc -l <"$tmp/ref.verdefs") version definitions identical;" \
	"SONAME $so)"
