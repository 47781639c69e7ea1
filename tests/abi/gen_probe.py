#!/usr/bin/env python3
# Generates the ABI probe: a C program that prints every size, offset, constant
# and type fact the reference libfabric headers define, one sorted line each.
"""Generate a C probe program from the reference libfabric headers.

The facts are discovered by tooling, never listed by hand:

* clang's JSON AST gives every struct/union (sizes, alignments, the offset,
  size and type of every field, recursing into anonymous nested aggregates),
  every enum type and constant, every typedef and every function prototype
  declared in the reference rdma/ directory;
* ``clang -dM -E`` gives the object-like FI_*/fi_* macros, of which only those
  that are integer constant expressions are kept.

Every candidate fact is test-compiled against the reference first and dropped
if the reference itself rejects it (function-type typedefs, string macros...),
so the probe compiles cleanly against the reference.  Compiled against another
set of headers (loom's) a missing name is a compile error, and a differing
value, offset or type shows up as a differing output line.

Usage: gen_probe.py [--ref-include DIR] [--cc CLANG] [-o probe.c]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# The public headers whose facts make up the ABI, in the order the probe
# includes them.  fi_ext.h pulls in rdma/providers/fi_{prov,log}.h, whose
# facts are kept too because fi_log/fi_param_* are exported functions.
HEADERS = [
    "fabric.h",
    "fi_errno.h",
    "fi_ext.h",
    "fi_domain.h",
    "fi_eq.h",
    "fi_cm.h",
    "fi_endpoint.h",
    "fi_rma.h",
    "fi_tagged.h",
    "fi_atomic.h",
    "fi_trigger.h",
    "fi_collective.h",
]

INCLUDES = "".join("#include <rdma/%s>\n" % h for h in HEADERS)


def die(msg):
    sys.stderr.write("gen_probe: %s\n" % msg)
    sys.exit(1)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class AstWalker:
    """Walks clang's JSON AST in document order.

    clang writes a location's "file" only when it differs from the previously
    printed one, so the current file has to be tracked across the whole dump.
    """

    def __init__(self, rdma_dir):
        self.rdma_dir = os.path.realpath(rdma_dir) + os.sep
        self.cur_file = ""

    def _track(self, loc):
        if not isinstance(loc, dict):
            return
        for key in ("spellingLoc", "expansionLoc"):
            if key in loc:
                self._track(loc[key])
        if "file" in loc:
            self.cur_file = loc["file"]

    def node_file(self, node):
        """Updates the tracker over the node's own locations; returns the file
        of the node's (expansion) location."""
        loc = node.get("loc", {})
        self._track(loc)
        where = self.cur_file
        rng = node.get("range", {})
        self._track(rng.get("begin"))
        self._track(rng.get("end"))
        return where

    def skip(self, node):
        """Advances the tracker over a whole subtree without collecting."""
        self.node_file(node)
        for child in node.get("inner", []):
            self.skip(child)

    def in_rdma(self, path):
        if not path:
            return False
        return os.path.realpath(path).startswith(self.rdma_dir)


def is_anon_type(qt):
    return "(unnamed" in qt or "(anonymous" in qt


class Facts:
    def __init__(self):
        # each entry: (key, kind, payload); kind picks the printing code
        self.items = {}

    def add(self, key, kind, payload):
        self.items.setdefault(key, (kind, payload))


def collect_record_fields(walker, rec, agg, prefix, facts):
    """Adds offset/size/type facts for every field of record node `rec`,
    where `agg` is the C type the offsets are taken in (e.g. "struct fi_info")
    and `prefix` the member path leading to `rec` inside it."""
    pending_anon = []  # anonymous RecordDecls awaiting their FieldDecl
    for child in rec.get("inner", []):
        kind = child.get("kind")
        if kind == "RecordDecl" and not child.get("name"):
            walker.skip(child)
            pending_anon.append(child)
            continue
        if kind == "RecordDecl":
            # a named struct declared inside another one is a file-scope type
            # in C; it is collected on its own by the caller.
            collect_record(walker, child, facts)
            continue
        if kind != "FieldDecl":
            walker.skip(child)
            continue
        walker.skip(child)
        qt = child.get("type", {}).get("qualType", "")
        name = child.get("name", "")
        if child.get("isBitfield"):
            # offsetof cannot take a bit-field; its width is still a fact
            if name:
                path = prefix + name
                facts.add("fieldsize %s.%s" % (agg, path), "bitfield",
                          (agg, path))
            continue
        if is_anon_type(qt) and pending_anon:
            sub = pending_anon.pop(0)
            saved = walker.cur_file
            if name:
                path = prefix + name
                facts.add("offsetof %s.%s" % (agg, path), "offsetof",
                          (agg, path))
                facts.add("fieldsize %s.%s" % (agg, path), "fieldsize",
                          (agg, path))
                collect_record_fields(walker, sub, agg, path + ".", facts)
            else:
                # C11 anonymous member: its fields belong to the outer type
                collect_record_fields(walker, sub, agg, prefix, facts)
            walker.cur_file = saved
            continue
        if not name:
            continue
        path = prefix + name
        facts.add("offsetof %s.%s" % (agg, path), "offsetof", (agg, path))
        facts.add("fieldsize %s.%s" % (agg, path), "fieldsize", (agg, path))
        if not is_anon_type(qt):
            facts.add("fieldtype %s.%s" % (agg, path), "fieldtype",
                      (agg, path, qt))


def collect_record(walker, node, facts):
    name = node.get("name")
    if not name or not node.get("completeDefinition"):
        walker.skip(node)
        return
    walker.node_file(node)
    tag = node.get("tagUsed", "struct")
    agg = "%s %s" % (tag, name)
    facts.add("sizeof %s" % agg, "sizeof", agg)
    facts.add("alignof %s" % agg, "alignof", agg)
    collect_record_fields(walker, node, agg, "", facts)


def walk_top(walker, ast, facts):
    last_anon = None
    for node in ast.get("inner", []):
        kind = node.get("kind")
        where = walker.node_file(node)
        mine = walker.in_rdma(where)
        if not mine:
            for child in node.get("inner", []):
                walker.skip(child)
            last_anon = None
            continue
        if kind == "RecordDecl":
            if node.get("name") and node.get("completeDefinition"):
                collect_record(walker, node, facts)
                last_anon = None
                continue
            for child in node.get("inner", []):
                walker.skip(child)
            last_anon = None if node.get("name") else node
            continue
        if kind == "TypedefDecl":
            for child in node.get("inner", []):
                walker.skip(child)
            tname = node.get("name")
            if node.get("isImplicit") or not tname:
                continue
            qt = node.get("type", {}).get("qualType", "")
            facts.add("sizeof %s" % tname, "sizeof", tname)
            facts.add("alignof %s" % tname, "alignof", tname)
            if is_anon_type(qt):
                if last_anon is not None and "enum" not in qt.split()[0]:
                    sub = last_anon
                    saved = walker.cur_file
                    collect_record_fields(walker, sub, tname, "", facts)
                    walker.cur_file = saved
            else:
                facts.add("typedef %s" % tname, "typedef", (tname, qt))
            last_anon = None
            continue
        if kind == "EnumDecl":
            ename = node.get("name")
            if ename:
                facts.add("sizeof enum %s" % ename, "sizeof", "enum " + ename)
            for child in node.get("inner", []):
                walker.skip(child)
                if child.get("kind") == "EnumConstantDecl":
                    facts.add("enum %s" % child["name"], "enum", child["name"])
            last_anon = None
            continue
        if kind == "FunctionDecl":
            for child in node.get("inner", []):
                walker.skip(child)
            fname = node.get("name")
            qt = node.get("type", {}).get("qualType", "")
            if fname and qt:
                facts.add("proto %s" % fname, "proto", (fname, qt))
            last_anon = None
            continue
        for child in node.get("inner", []):
            walker.skip(child)
        last_anon = None


def collect_ast(cc, ref_inc, src):
    res = run([cc, "-std=gnu11", "-isystem", ref_inc, "-Xclang",
               "-ast-dump=json", "-fsyntax-only", src])
    if res.returncode != 0:
        die("clang AST dump failed:\n" + res.stderr)
    ast = json.loads(res.stdout)
    walker = AstWalker(os.path.join(ref_inc, "rdma"))
    facts = Facts()
    walk_top(walker, ast, facts)
    return facts


def collect_macros(cc, ref_inc, src, facts):
    res = run([cc, "-std=gnu11", "-isystem", ref_inc, "-dM", "-E", src])
    if res.returncode != 0:
        die("macro dump failed:\n" + res.stderr)
    for line in res.stdout.splitlines():
        m = re.match(r"#define ((?:FI_|fi_)\w*)(\(?)(.*)$", line)
        if not m or m.group(2) == "(":
            continue
        if not m.group(3).strip():
            continue
        facts.add("macro %s" % m.group(1), "macro", m.group(1))


INT_GENERIC = ("_Generic((%s), _Bool: 1, char: 1, signed char: 1, "
               "unsigned char: 1, short: 1, unsigned short: 1, int: 1, "
               "unsigned int: 1, long: 1, unsigned long: 1, long long: 1, "
               "unsigned long long: 1, default: 0)")


def validity_check(kind, payload):
    """A file-scope declaration the reference must accept for the fact to be
    kept; an integer constant expression is required for constants."""
    if kind in ("macro", "enum"):
        e = "(%s)" % payload
        return "_Static_assert(%s && ((%s) || 1), \"\");" % (
            INT_GENERIC % e, e)
    if kind in ("sizeof", "alignof"):
        return "_Static_assert(sizeof(%s) > 0 && _Alignof(%s) > 0, \"\");" % (
            payload, payload)
    if kind == "offsetof":
        return "_Static_assert(offsetof(%s, %s) + 1 > 0, \"\");" % payload
    if kind == "fieldsize":
        agg, path = payload
        return "_Static_assert(sizeof(((%s *)0)->%s) > 0, \"\");" % (
            agg, path)
    if kind == "bitfield":
        return "_Static_assert(1, \"\");"
    if kind == "fieldtype":
        agg, path, qt = payload
        return ("_Static_assert(__builtin_types_compatible_p("
                "__typeof__(((%s *)0)->%s), %s), \"\");" % (agg, path, qt))
    if kind == "typedef":
        tname, qt = payload
        return ("_Static_assert(__builtin_types_compatible_p(%s, %s), \"\");"
                % (tname, qt))
    if kind == "proto":
        fname, qt = payload
        return ("_Static_assert(__builtin_types_compatible_p("
                "__typeof__(%s), %s), \"\");" % (fname, qt))
    raise ValueError(kind)


class Pruner:
    """Finds which of many one-line checks a compiler rejects, in few runs.

    All checks go into one file, one per line; the lines the diagnostics name
    are dropped and the rest recompiled until the file compiles.  When the
    compiler blames no line it can be mapped to, the set is split in halves.
    """

    def __init__(self, cc, flags, tmpdir, head, tail):
        self.cc = cc
        self.flags = flags
        self.path = os.path.join(tmpdir, "prune.c")
        self.head = head
        self.tail = tail
        self.first = head.count("\n") + 1

    def compiles(self, lines):
        return self._compile(lines)[0] == 0

    def _compile(self, lines):
        with open(self.path, "w") as f:
            f.write(self.head)
            for line in lines:
                f.write(line + "\n")
            f.write(self.tail)
        res = run([self.cc, "-std=gnu11", "-fsyntax-only", "-ferror-limit=0",
                   "-fno-caret-diagnostics", "-w"] + self.flags + [self.path])
        return res.returncode, res.stderr

    def _blamed(self, keys, lines):
        rc, err = self._compile(lines)
        if rc == 0:
            return set()
        bad = set()
        pat = re.compile(re.escape(self.path) + r":(\d+):\d+: ")
        for line in err.splitlines():
            m = pat.search(line)
            if m:
                n = int(m.group(1)) - self.first
                if 0 <= n < len(keys):
                    bad.add(keys[n])
        return bad or None

    def failing(self, keys, stmt_of):
        """Returns the subset of `keys` whose statement does not compile."""
        failed = set()

        def prune(ks):
            while ks:
                bad = self._blamed(ks, [stmt_of(k) for k in ks])
                if bad is None:
                    break
                if not bad:
                    return
                failed.update(bad)
                ks = [k for k in ks if k not in bad]
            if not ks:
                return
            if len(ks) == 1:
                failed.update(ks)
                return
            mid = len(ks) // 2
            prune(ks[:mid])
            prune(ks[mid:])

        prune(list(keys))
        return failed


def validate(cc, ref_inc, facts):
    """Drops the facts the reference headers do not accept; returns them."""
    keys = sorted(facts.items)
    with tempfile.TemporaryDirectory(prefix="gen_probe.") as tmp:
        pruner = Pruner(cc, ["-isystem", ref_inc, "-pedantic-errors"], tmp,
                        "#include <stddef.h>\n" + INCLUDES, "")
        dropped = pruner.failing(
            keys, lambda k: validity_check(*facts.items[k]))
    for k in dropped:
        del facts.items[k]
    return sorted(dropped)


PROBE_HEAD = r"""/* Generated by tests/abi/gen_probe.py from the reference libfabric headers;
 * prints one line per ABI fact.  Do not edit: regenerate instead. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
%s
#define LM_SIGNED(x) (((__typeof__((x) + 0))-1) < 0)

static void lm_int(const char *key, int is_signed, long long s,
                   unsigned long long u, size_t size)
{
	if (is_signed && s < 0)
		printf("%%s = %%lld\n", key, s);
	else
		printf("%%s = 0x%%llx\n", key, u);
	printf("%%s type = %%c%%zu\n", key, is_signed ? 's' : 'u', size);
}

#define LM_INT(key, x) \
	lm_int(key, LM_SIGNED(x), (long long)(x), (unsigned long long)(x), \
	       sizeof(x))

static void lm_size(const char *key, size_t v)
{
	printf("%%s = %%zu\n", key, v);
}

static void lm_same(const char *key, int same)
{
	printf("%%s = %%s\n", key, same ? "same" : "DIFFERENT");
}

#define LM_SAME(key, a, b) lm_same(key, __builtin_types_compatible_p(a, b))

int main(void)
{
""" % INCLUDES

PROBE_TAIL = "\treturn 0;\n}\n"


def bitfield_width_expr(agg, path):
    # sets the bit-field to all ones in a zeroed object and counts the bits
    return ("({ %s lm_o = {0}; lm_o.%s = ~0ULL; unsigned long long lm_v = "
            "lm_o.%s; int lm_n = 0; while (lm_v) { lm_n++; lm_v >>= 1; } "
            "(size_t)lm_n; })" % (agg, path, path))


def statement(key, kind, p):
    k = json.dumps(key)
    if kind in ("macro", "enum"):
        return "LM_INT(%s, (%s));" % (k, p)
    if kind == "sizeof":
        return "lm_size(%s, sizeof(%s));" % (k, p)
    if kind == "alignof":
        return "lm_size(%s, _Alignof(%s));" % (k, p)
    if kind == "offsetof":
        return "lm_size(%s, offsetof(%s, %s));" % (k, p[0], p[1])
    if kind == "fieldsize":
        return "lm_size(%s, sizeof(((%s *)0)->%s));" % (k, p[0], p[1])
    if kind == "bitfield":
        return "lm_size(%s, %s);" % (k, bitfield_width_expr(*p))
    if kind == "fieldtype":
        return "LM_SAME(%s, __typeof__(((%s *)0)->%s), %s);" % (
            k, p[0], p[1], p[2])
    if kind == "typedef":
        return "LM_SAME(%s, %s, %s);" % (k, p[0], p[1])
    if kind == "proto":
        return "LM_SAME(%s, __typeof__(%s), %s);" % (k, p[0], p[1])
    raise ValueError(kind)


def broken_statement(key):
    return "printf(\"%%s = DOES NOT COMPILE\\n\", %s);" % json.dumps(key)


def lenient_failures(cc, facts, against):
    """Keys whose probe statement fails to compile against the headers in
    `against` (searched before the system's), or None when those headers do
    not even compile on their own."""
    keys = sorted(facts.items)
    with tempfile.TemporaryDirectory(prefix="gen_probe.") as tmp:
        pruner = Pruner(cc, ["-I", against], tmp, PROBE_HEAD, PROBE_TAIL)
        if not pruner.compiles([]):
            return None
        return pruner.failing(
            keys, lambda k: statement(k, *facts.items[k]))


def emit(facts, out, broken):
    out.write(PROBE_HEAD)
    n = 0
    for key in sorted(facts.items):
        if key in broken:
            line = broken_statement(key)
        else:
            line = statement(key, *facts.items[key])
        out.write("\t" + line + "\n")
        n += 1
    out.write(PROBE_TAIL)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref-include", default="/usr/include",
                    help="directory holding the reference rdma/ headers")
    ap.add_argument("--cc", default="clang",
                    help="clang binary (its JSON AST dump is used)")
    ap.add_argument("--lenient-against", metavar="DIR",
                    help="replace each fact that does not compile against "
                    "the headers in DIR by a line saying so, so that one "
                    "run reports every difference (diagnostic use only)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="list the candidate facts the reference rejected")
    ap.add_argument("-o", "--output", default="-",
                    help="where to write the probe (default stdout)")
    args = ap.parse_args()

    ref_inc = os.path.realpath(args.ref_include)
    for h in HEADERS:
        if not os.path.isfile(os.path.join(ref_inc, "rdma", h)):
            die("reference header %s/rdma/%s not found" % (ref_inc, h))

    with tempfile.TemporaryDirectory(prefix="gen_probe.") as tmp:
        src = os.path.join(tmp, "all.c")
        with open(src, "w") as f:
            f.write(INCLUDES)
        facts = collect_ast(args.cc, ref_inc, src)
        collect_macros(args.cc, ref_inc, src, facts)

    # A few facts every libfabric 1.x header set has: their absence means the
    # AST walk lost track (e.g. a clang whose JSON dump differs), not an ABI.
    for must in ("sizeof struct fi_info", "offsetof struct fi_info.caps",
                 "enum FI_EP_MSG", "macro FI_MSG", "proto fi_getinfo",
                 "sizeof fi_addr_t"):
        if must not in facts.items:
            die("expected fact '%s' not found: AST walk is broken" % must)

    dropped = validate(args.cc, ref_inc, facts)
    if args.verbose:
        for k in dropped:
            sys.stderr.write("gen_probe: dropped (reference rejects): %s\n"
                             % k)
    if not facts.items:
        die("no facts found in the reference headers")

    broken = set()
    if args.lenient_against:
        broken = lenient_failures(args.cc, facts, args.lenient_against)
        if broken is None:
            die("the headers in %s do not compile on their own"
                % args.lenient_against)

    if args.output == "-":
        n = emit(facts, sys.stdout, broken)
    else:
        tmp_out = args.output + ".tmp"
        with open(tmp_out, "w") as f:
            n = emit(facts, f, broken)
        os.replace(tmp_out, args.output)
    sys.stderr.write("gen_probe: %d facts%s\n" % (
        n, ", %d not compilable" % len(broken) if broken else ""))


if __name__ == "__main__":
    main()
