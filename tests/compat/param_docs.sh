#!/bin/bash
# Holds each provider's page (docs/providers/<prov>.md) to the runtime
# parameters loom's library defines, as loom's fi_info prints them:
#   * every provider `fi_info -l` lists has a page;
#   * every FI_<PROV>_<NAME> parameter `fi_info -e` lists for a provider has
#     a row in that provider's page, "| `FI_<PROV>_<NAME>` | type | default
#     | effect |", whose type is the one fi_info -e prints (Boolean, Integer,
#     String, size_t ...) and whose default is the text fi_info -e prints
#     after "(default: " -- so a parameter added without its docs fails;
#   * every FI_<PROV>_* name written in any provider page is a parameter
#     fi_info -e lists -- so a page cannot document one that is gone.
# The dynamic loader's trace proves that loom's library, not another
# libfabric.so.1, is the one fi_info ran on.
#
# usage: param_docs.sh LOOM_TOOLS_DIR LIBDIR PAGES_DIR
#   LOOM_TOOLS_DIR  directory holding loom's built fi_info
#   LIBDIR          directory holding loom's libfabric.so.1
#   PAGES_DIR       docs/providers
set -euo pipefail

die() {
	echo "FAIL: $*" >&2
	exit 1
}

[ $# -eq 3 ] || die "usage: $0 LOOM_TOOLS_DIR LIBDIR PAGES_DIR"
fi_info=$1/fi_info
lib_dir=$(cd "$2" && pwd)
pages=$3
[ -x "$fi_info" ] || die "no executable $fi_info"
[ -d "$pages" ] || die "no directory $pages"
want_lib=$(realpath "$lib_dir/libfabric.so.1") || die "no libfabric.so.1 in $2"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Parameter values set in the environment would not change the names, but
# keep the run independent of them; an ASan runtime preloaded by the
# harness stays, nothing else preloaded does.
while read -r var; do
	unset "$var"
done < <(compgen -e | grep -E '^FI_' || true)
case "${LD_PRELOAD:-}" in *libasan*) ;; *) unset LD_PRELOAD ;; esac
unset LD_DEBUG LD_DEBUG_OUTPUT
export LC_ALL=C

# info OUT ARGS...: loom's fi_info ARGS on LIBDIR, stdout to OUT; fails
# unless the loader initialised exactly LIBDIR's libfabric.so.1.
info() {
	local out=$1 loaded
	shift
	rm -f "$tmp"/ld.*
	LD_LIBRARY_PATH=$lib_dir LD_DEBUG=libs LD_DEBUG_OUTPUT=$tmp/ld \
		"$fi_info" "$@" >"$out" || die "fi_info $* failed"
	loaded=$(sed -n 's/.*calling init: \(.*libfabric\.so[.0-9]*\)$/\1/p' "$tmp"/ld.* |
		sort -u)
	[ -n "$loaded" ] || die "fi_info $*: no libfabric.so.1 was loaded"
	[ "$(echo "$loaded" | wc -l)" -eq 1 ] ||
		die "fi_info $*: several libfabric copies loaded: $loaded"
	[ "$(realpath "$loaded")" = "$want_lib" ] ||
		die "fi_info $*: loaded $loaded, expected $want_lib"
}

info "$tmp/list" -l
info "$tmp/env" -e

# Providers: the unindented "name:" lines of fi_info -l.
mapfile -t provs < <(sed -n 's/^\([A-Za-z0-9_]*\):$/\1/p' "$tmp/list")
[ "${#provs[@]}" -gt 0 ] || die "fi_info -l lists no provider"

# Parameters: "# FI_X: Type ..." then "# description (default: D)".
# One line each: NAME<TAB>TYPE<TAB>DEFAULT.
awk '
	/^# FI_[A-Z0-9_]*: / {
		name = $2; sub(/:$/, "", name)
		type = $3
		next
	}
	/^# / && name != "" {
		d = ""
		i = index($0, "(default: ")
		if (i) {
			d = substr($0, i + 10)
			sub(/\)$/, "", d)
		}
		print name "\t" type "\t" d
		name = ""
	}
' "$tmp/env" >"$tmp/params"
[ -s "$tmp/params" ] || die "fi_info -e printed no parameter"

trim() {
	local s=$1
	s=${s#"${s%%[![:space:]]*}"}
	s=${s%"${s##*[![:space:]]}"}
	printf '%s' "$s"
}

passed=0
failed=0
ok() {
	echo "ok - $*"
	passed=$((passed + 1))
}
not_ok() {
	echo "not ok - $*"
	failed=$((failed + 1))
}

prefixes=
for prov in "${provs[@]}"; do
	PROV=$(echo "$prov" | tr '[:lower:]' '[:upper:]')
	prefixes="$prefixes${prefixes:+|}FI_${PROV}_"
	page=$pages/$prov.md
	if [ ! -f "$page" ]; then
		not_ok "$prov: no page $page"
		continue
	fi
	ok "$prov: page $page"
	while IFS=$'\t' read -r name type def; do
		case "$name" in "FI_${PROV}_"*) ;; *) continue ;; esac
		# The row: | `NAME` | type | default | effect |
		row=$(grep -F "| \`$name\` |" "$page" || true)
		if [ -z "$row" ]; then
			not_ok "$name: listed by fi_info -e, no row in $page"
			continue
		fi
		if [ "$(echo "$row" | wc -l)" -ne 1 ]; then
			not_ok "$name: several rows in $page"
			continue
		fi
		IFS='|' read -r _ _ rtype rdef _ <<<"$row"
		rtype=$(trim "$rtype")
		rdef=$(trim "$rdef")
		if [ "$rtype" != "$type" ]; then
			not_ok "$name: type '$rtype' in $page, fi_info -e says '$type'"
		elif [ "$rdef" != "$def" ]; then
			not_ok "$name: default '$rdef' in $page, fi_info -e says '$def'"
		else
			ok "$name ($type, default: $def)"
		fi
	done <"$tmp/params"
done

# The reverse: every FI_<PROV>_* name a page writes is listed by fi_info -e.
for page in "$pages"/*.md; do
	[ -f "$page" ] || continue
	while read -r name; do
		if cut -f1 "$tmp/params" | grep -qxF "$name"; then
			ok "$(basename "$page"): $name is a parameter"
		else
			not_ok "$(basename "$page") names $name, which fi_info -e does not list"
		fi
	done < <(grep -oE "($prefixes)[A-Z0-9_]+" "$page" | sort -u)
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
