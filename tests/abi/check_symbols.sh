#!/usr/bin/env bash
# Exported-symbol conformance: loom's libfabric.so.1 must export exactly the
# reference library's dynamic symbols, with the same symbol versions.
#
# Usage: check_symbols.sh <loom libfabric.so.1> [<reference libfabric.so.1>]
#        (reference default: /usr/lib/x86_64-linux-gnu/libfabric.so.1)
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

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 <loom libfabric.so.1> [<reference libfabric.so.1>]" >&2
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

so=$(soname "$loom")
if [ "$so" != "libfabric.so.1" ]; then
	echo "FAIL: loom's SONAME is '${so}', expected libfabric.so.1" >&2
	fail=1
fi

if [ "$fail" != 0 ]; then
	echo "check_symbols: FAILED" >&2
	exit 1
fi
echo "check_symbols: OK ($nref defined dynamic symbols and" \
	"$(wc -l <"$tmp/ref.verdefs") version definitions identical;" \
	"SONAME $so)"
