#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/meta/man.sh [BUILD] — the manual pages in docs/man/, checked against
# groff, man-db and the code:
#   - each page renders with `groff -ww -man -Tutf8` (every warning enabled)
#     and with `man -l` without a single message, whatis can read its NAME
#     line (lexgrog), its .TH names the file, it has the sections its kind
#     needs, and its references to the other pages name the right section;
#   - every option that `sdp_run --help`, `sdpstat --help` and
#     `sdpperf --help` print is in the OPTIONS section of the tool's page;
#   - every environment variable the code reads (getenv, secure_getenv and
#     sdp_env_u32 calls under src/ and tools/, literal or through a
#     #define; $SDP_*/$LIBSDP_* expansions in the shell scripts of tools/)
#     has an entry in sdp(7)'s ENVIRONMENT, and each SDP_*/LIBSDP_* one a
#     row in README.md's "Environment variables" table; neither documents a
#     variable the code does not read;
#   - for each sdp_env_u32 variable, sdp(7) gives the default and the range
#     the code has ("Default: D", "Range: MIN to MAX"), and README.md's
#     Default column begins with that default.
# BUILD (default: build/) is where the built sdpstat and sdpperf are.
# Output is TAP; exit 1 on any failure, 77 if groff or man-db cannot be
# installed.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
[ -d "$BUILD" ] && BUILD=$(cd "$BUILD" && pwd)
MAN=$SRC/docs/man
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sdp-man.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
N=0 FAILS=0

ok() { N=$((N + 1)); echo "ok $N - $*"; }
notok() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $*"; }
# show FILE: the first lines of a file as TAP comments
show() { head -n 15 "$1" | sed 's/^/#   /'; }

# The pages, with the sections each must have beyond NAME, SYNOPSIS,
# DESCRIPTION, EXAMPLES and SEE ALSO.
declare -A NEED=(
	[sdp_run.1]="OPTIONS|ENVIRONMENT|EXIT STATUS"
	[sdpstat.8]="OPTIONS|EXIT STATUS|FILES"
	[sdpperf.1]="OPTIONS|EXIT STATUS"
	[libsdp.conf.5]="FILES|ENVIRONMENT"
	[sdp.7]="ENVIRONMENT|FILES|SOCKET OPTIONS"
)

# ---- the tools: groff and man-db (Debian 12: groff-base, man-db) ------------
missing=""
for c in groff man lexgrog python3; do
	command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
if [ -n "$missing" ]; then
	echo "# missing:$missing; installing groff-base man-db python3"
	SDP_EXTRA_PKGS="groff-base man-db python3" "$SRC/scripts/install-deps.sh" >&2 || true
	for c in groff man lexgrog python3; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "1..0 # SKIP $c not installed (Debian packages groff-base, man-db, python3; run make deps)"
			exit 77
		fi
	done
fi
export LC_ALL=C.UTF-8 MANPAGER=cat PAGER=cat MANWIDTH=80

# ---- rendering ----------------------------------------------------------------
pages=()
for p in "${!NEED[@]}"; do
	if [ -f "$MAN/$p" ]; then
		ok "$p exists"
	else
		notok "$p is missing from docs/man/"
	fi
done
for f in "$MAN"/*.[1-8]; do
	[ -f "$f" ] && pages+=("$(basename "$f")")
done

for p in "${pages[@]}"; do
	f=$MAN/$p
	# groff, every warning enabled: any message fails.
	groff -ww -man -Tutf8 "$f" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	if [ "$rc" -eq 0 ] && [ ! -s "$TMP/err" ] && [ -s "$TMP/out" ]; then
		ok "$p: groff -ww -man -Tutf8 renders it without a warning"
	else
		notok "$p: groff -ww -man -Tutf8 (exit $rc, $(wc -l <"$TMP/err") lines on stderr)"
		show "$TMP/err"
	fi
	# man -l as a reader runs it (preprocessors, man-db's checks), at two
	# widths, with groff's warnings on.
	for w in 80 60; do
		MANWIDTH=$w man --warnings=all -l "$f" >"$TMP/out" 2>"$TMP/err"
		rc=$?
		if [ "$rc" -eq 0 ] && [ ! -s "$TMP/err" ] && grep -q '^NAME' "$TMP/out"; then
			ok "$p: man -l renders it at width $w without a message"
		else
			notok "$p: man -l at width $w (exit $rc, $(wc -l <"$TMP/err") lines on stderr)"
			show "$TMP/err"
		fi
	done
	# whatis/apropos: the NAME line must parse.
	if lexgrog "$f" >"$TMP/out" 2>&1; then
		ok "$p: lexgrog reads its NAME line: $(sed 's/^[^:]*: //' "$TMP/out")"
	else
		notok "$p: lexgrog cannot parse its NAME section"
		show "$TMP/out"
	fi
	# .TH TITLE SECTION: the file's name, upper case.
	th=$(awk '/^\.TH /{print $2, $3; exit}' "$f")
	want="$(printf '%s' "${p%.*}" | tr '[:lower:]' '[:upper:]') ${p##*.}"
	if [ "$th" = "$want" ]; then
		ok "$p: .TH $th"
	else
		notok "$p: .TH says '$th', expected '$want'"
	fi
	# Sections.
	for sec in NAME SYNOPSIS DESCRIPTION EXAMPLES "SEE ALSO"; do
		grep -qx "\.SH \"\?$sec\"\?" "$f" || notok "$p: no .SH $sec"
	done
	if [ -n "${NEED[$p]:-}" ]; then
		IFS='|' read -r -a secs <<<"${NEED[$p]}"
		for sec in "${secs[@]}"; do
			grep -qx "\.SH \"\?$sec\"\?" "$f" || notok "$p: no .SH $sec"
		done
	fi
done

# References between the pages: NAME (SECTION) must be a page here.
for p in "${pages[@]}"; do
	bad=""
	while read -r name sec; do
		for q in "${pages[@]}"; do
			[ "${q%.*}" = "$name" ] && [ "${q##*.}" != "$sec" ] &&
				bad="$bad $name($sec)"
		done
	done < <(grep -oE '^\.[BI]R? +[A-Za-z_.]+ +\(?[1-8]\)?' "$MAN/$p" |
		sed -E 's/^\.[BI]R? +([A-Za-z_.]+) +\(?([1-8])\)?/\1 \2/')
	if [ -z "$bad" ]; then
		ok "$p: its references to the other libsdp pages name their sections"
	else
		notok "$p: wrong section in$bad"
	fi
done

# ---- the tools' options ---------------------------------------------------------
# help_opts: the options a --help text names (long ones, and short ones at
# the start of an option line).
help_opts() { # HELPFILE
	{
		grep -oE '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' "$1" | sed -E 's/^[^-]*//'
		grep -oE '^ +-[A-Za-z]\b' "$1" | tr -d ' '
	} | sort -u
}
# options_text PAGE: its OPTIONS section, \- as - and font escapes removed.
options_text() {
	awk '/^\.SH /{ on = ($0 ~ /^\.SH "?OPTIONS"?$/) } on' "$1" |
		sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g'
}
check_help() { # PAGE HELPFILE
	local page=$1 help=$2 o missing=""
	[ -f "$MAN/$page" ] || return 0
	options_text "$MAN/$page" >"$TMP/text"
	for o in $(help_opts "$help"); do
		grep -qE -- "(^|[^A-Za-z0-9_-])$o([^A-Za-z0-9_-]|\$)" "$TMP/text" ||
			missing="$missing $o"
	done
	if [ -z "$missing" ]; then
		ok "$page: OPTIONS documents every option of --help: $(help_opts "$help" | tr '\n' ' ')"
	else
		notok "$page: OPTIONS does not document$missing"
	fi
}
sh "$SRC/tools/sdp_run" --help >"$TMP/help.sdp_run" 2>&1
check_help sdp_run.1 "$TMP/help.sdp_run"
for t in sdpstat sdpperf; do
	page=$t.8
	[ "$t" = sdpperf ] && page=$t.1
	if [ -x "$BUILD/bin/$t" ]; then
		"$BUILD/bin/$t" --help >"$TMP/help.$t" 2>&1
		check_help "$page" "$TMP/help.$t"
	else
		ok "$page: options against --help # SKIP $BUILD/bin/$t not built"
	fi
done

# ---- environment variables ----------------------------------------------------------
python3 - "$SRC" >"$TMP/env.tap" 2>&1 <<'PY'
import os, re, sys

SRC = sys.argv[1]

# Calls whose first argument names an environment variable, besides
# getenv/secure_getenv: the helpers that read one.
ACCESSORS = {"sdp_env_u32"}
# getenv() calls that forward a helper's parameter: (file, argument).
FORWARDERS = {("src/base/config.c", "name")}
# Read by the code, not rows of README.md's table; each must still be named
# in README.md (and have its entry in sdp.7).
NOT_IN_README_TABLE = {
    "SDP_RELAYED": "written by libsdp into the environment of an image it "
                   "execs with relayed connections, not a setting (README "
                   "explains it below the table)",
    "SDP_RUN_LIBRARY": "read by tools/sdp_run, not by the library (README "
                       "documents it under \"Transparent mode (sdp_run)\"; "
                       "sdp_run.1 too)",
}
# Read by the library under names outside SDP_*/LIBSDP_*: sdp.7 must list
# them; README.md must name them (it does in "Configuration").
results = []
def ok(msg): results.append("ok - " + msg)
def notok(msg): results.append("not ok - " + msg)

def strip_c_comments(text):
    """Comments become blanks (newlines kept), strings stay."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1]); i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith("//", i):
            j = text.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        else:
            out.append(c); i += 1
    return "".join(out)

def c_files(*dirs):
    for d in dirs:
        for root, _, files in os.walk(os.path.join(SRC, d)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    p = os.path.join(root, f)
                    with open(p, errors="replace") as fh:
                        yield os.path.relpath(p, SRC), strip_c_comments(fh.read())

sources = dict(c_files("src", "include", "tools"))

# Macros and enum constants, for names and numbers.
strmacro, nummacro = {}, {}
for path, text in sources.items():
    for m in re.finditer(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(.+?)[ \t]*$', text, re.M):
        name, val = m.group(1), m.group(2).strip()
        if re.fullmatch(r'"[^"\\]*"', val):
            strmacro[name] = val[1:-1]
        else:
            nummacro.setdefault(name, val)
    for m in re.finditer(r'\benum\b[^{;]*\{([^}]*)\}', text):
        for item in m.group(1).split(","):
            if "=" in item:
                k, v = item.split("=", 1)
                nummacro.setdefault(k.strip(), v.strip())

def evaluate(expr, depth=0):
    """A C integer constant expression of literals and macros, or None."""
    expr = expr.strip()
    if depth > 8:
        return None
    def sub(m):
        w = m.group(0)
        if re.fullmatch(r'(0[xX][0-9a-fA-F]+|\d+)[uUlL]*', w):
            return re.sub(r'[uUlL]+$', '', w)
        if w in nummacro:
            v = evaluate(nummacro[w], depth + 1)
            return "(%d)" % v if v is not None else "@"
        return "@"
    py = re.sub(r'\b\w+\b', sub, expr)
    if "@" in py or not re.fullmatch(r'[\d\sxXa-fA-F()+\-*/<>|&~]*', py):
        return None
    try:
        return int(eval(py.replace("/", "//"), {"__builtins__": {}}))
    except Exception:
        return None

def call_args(text, start):
    """Arguments of the call whose '(' is at start: list of strings."""
    depth, args, cur, i = 0, [], [], start
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1]); i = j + 1; continue
        if c == "(":
            depth += 1
            if depth == 1:
                i += 1; continue
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip()); return args
        elif c == "," and depth == 1:
            args.append("".join(cur).strip()); cur = []; i += 1; continue
        cur.append(c); i += 1
    return args

def lineno(text, pos):
    return text.count("\n", 0, pos) + 1

read = {}        # name -> "file:line" of one read
u32 = {}         # name -> (default, min, max) or an error string
for path, text in sources.items():
    for m in re.finditer(r'\b(secure_getenv|getenv|%s)\s*\(' % "|".join(ACCESSORS), text):
        fn = m.group(1)
        # skip the definition of an accessor itself
        before = text[:m.start()].rstrip()
        if fn in ACCESSORS and re.search(r'\b(int|void|uint32_t|static|const)\s*\**\s*$', before):
            continue
        args = call_args(text, m.end() - 1)
        where = "%s:%d" % (path, lineno(text, m.start()))
        if not args:
            notok("cannot parse the call at %s" % where); continue
        a = args[0]
        if re.fullmatch(r'"[A-Za-z_][A-Za-z0-9_]*"', a):
            name = a[1:-1]
        elif a in strmacro:
            name = strmacro[a]
        elif (path, a) in FORWARDERS:
            continue
        else:
            notok("cannot tell which variable %s reads: %s(%s); use a literal "
                  "or a #define, or list the helper in tests/meta/man.sh" % (where, fn, a))
            continue
        read.setdefault(name, where)
        if fn == "sdp_env_u32":
            if len(args) != 4:
                u32[name] = "sdp_env_u32 with %d arguments at %s" % (len(args), where); continue
            lo, hi = evaluate(args[2]), evaluate(args[3])
            target, dflt = args[1].strip(), None
            mt = re.fullmatch(r'&\s*sdp_cfg\.(\w+)', target)
            mv = re.fullmatch(r'&\s*(\w+)', target)
            if mt:
                init = re.search(r'\.%s\s*=\s*([^,}]+)' % mt.group(1), text)
                dflt = evaluate(init.group(1)) if init else None
            elif mv:
                assigns = list(re.finditer(r'\b%s\s*=\s*([^;,]+)[;,]' % mv.group(1), text[:m.start()]))
                dflt = evaluate(assigns[-1].group(1)) if assigns else None
            if None in (dflt, lo, hi):
                u32[name] = "cannot evaluate the default or range of %s at %s (%s)" % (name, where, ", ".join(args[1:]))
            else:
                u32[name] = (dflt, lo, hi)

# Shell scripts in tools/: $SDP_*/${SDP_*...} outside comments and quoted
# here-documents.
for f in sorted(os.listdir(os.path.join(SRC, "tools"))):
    p = os.path.join(SRC, "tools", f)
    if not os.path.isfile(p):
        continue
    with open(p, errors="replace") as fh:
        text = fh.read()
    if not re.match(r'#!.*\bsh\b', text):
        continue
    text = re.sub(r"<<-?\s*(['\"])(\w+)\1.*?\n\2\n", "\n", text, flags=re.S)
    text = re.sub(r"<<-?\s*\\(\w+).*?\n\1\n", "\n", text, flags=re.S)
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("#"):
            continue
        for m in re.finditer(r'\$\{?((?:SDP|LIBSDP)_[A-Z0-9_]+)', line):
            read.setdefault(m.group(1), "tools/%s" % f)

if not read:
    notok("found no environment variable read under src/ and tools/")
ours = lambda v: re.match(r'(SDP|LIBSDP)_', v) is not None

# README.md: the "Environment variables" section and its table.
with open(os.path.join(SRC, "README.md")) as fh:
    readme = fh.read()
sec = re.search(r'^## Environment variables\n(.*?)(?=^## )', readme, re.M | re.S)
table = {}
if not sec:
    notok("README.md has no \"## Environment variables\" section")
else:
    for m in re.finditer(r'^\|\s*`([A-Za-z_][A-Za-z0-9_]*)`\s*\|([^|]*)\|', sec.group(1), re.M):
        table[m.group(1)] = m.group(2).strip()

# sdp.7: the entries (.TP/.TQ tags) of ENVIRONMENT, and their text.
with open(os.path.join(SRC, "docs/man/sdp.7")) as fh:
    lines = fh.read().split("\n")
env, cur, in_env = {}, None, False
for i, l in enumerate(lines):
    if l.startswith(".SH "):
        in_env = l[4:].strip().strip('"') == "ENVIRONMENT"; cur = None; continue
    if not in_env:
        continue
    if i > 0 and lines[i - 1].strip() in (".TP", ".TQ") and re.match(r'\.(B|BR|I|IR|BI)\s', l):
        cur = re.split(r'\s+', l.strip())[1].strip('"')
        cur = re.sub(r'\\f[BIRP]|\\&', '', cur)
        env[cur] = []; continue
    if l.startswith(".SS "):
        cur = None; continue
    if cur:
        env[cur].append(l)
def entry_text(name):
    t = " ".join(x for x in env.get(name, []) if not x.startswith(('.TP', '.TQ', '.PP', '.RS', '.RE', '.EX', '.EE')))
    t = re.sub(r'^\.(B|I|BR|IR|RB|RI|BI|IB)\s+', '', t)
    t = re.sub(r'\s\.(B|I|BR|IR|RB|RI|BI|IB)\s+', ' ', t)
    t = re.sub(r'\\f[BIRP]|\\&|"', '', t).replace("\\-", "-")
    return re.sub(r'\s+', ' ', t)

for v in sorted(read):
    where = read[v]
    if v in env:
        ok("sdp.7 documents %s (read at %s)" % (v, where))
    else:
        notok("sdp.7's ENVIRONMENT has no entry for %s (read at %s)" % (v, where))
    if ours(v) and v not in NOT_IN_README_TABLE:
        if v in table:
            ok("README.md's environment table has %s" % v)
        else:
            notok("README.md's environment table has no row for %s (read at %s)" % (v, where))
    elif "`%s`" % v in readme:
        ok("README.md names %s%s" % (v, " (not a table row: %s)" % NOT_IN_README_TABLE[v]
                                      if v in NOT_IN_README_TABLE else ""))
    else:
        notok("README.md does not name %s (read at %s)" % (v, where))
for v in sorted(table):
    if v not in read:
        notok("README.md's environment table documents %s, which the code does not read" % v)
    elif v in NOT_IN_README_TABLE:
        notok("README.md's environment table has %s, listed in man.sh as not a row: %s" % (v, NOT_IN_README_TABLE[v]))
for v in sorted(env):
    if v not in read:
        notok("sdp.7 documents %s, which the code does not read" % v)

# Defaults and ranges of the sdp_env_u32 variables.
for v in sorted(u32):
    d = u32[v]
    if isinstance(d, str):
        notok(d); continue
    dflt, lo, hi = d
    t = entry_text(v)
    if re.search(r'Default: %d(?!\d)' % dflt, t) and re.search(r'Range: %d to %d(?!\d)' % (lo, hi), t):
        ok("sdp.7: %s Default: %d, Range: %d to %d, as in the code" % (v, dflt, lo, hi))
    elif v in env:
        notok("sdp.7: %s must say \"Default: %d\" and \"Range: %d to %d\" (the code's); it says: %s"
              % (v, dflt, lo, hi, t[-160:]))
    if v in table:
        if re.match(r'`?%d(?!\d)' % dflt, table[v]):
            ok("README.md: %s default %s" % (v, table[v]))
        else:
            notok("README.md: %s default is \"%s\"; the code's is %d" % (v, table[v], dflt))

print("\n".join(results))
PY
rc=$?
while IFS= read -r line; do
	case "$line" in
	"ok - "*) ok "${line#ok - }" ;;
	"not ok - "*) notok "${line#not ok - }" ;;
	*) echo "# $line" ;;
	esac
done <"$TMP/env.tap"
[ "$rc" -eq 0 ] || notok "the environment check itself failed (python3 exit $rc)"

echo "1..$N"
[ "$FAILS" -eq 0 ]
