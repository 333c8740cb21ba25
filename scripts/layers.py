#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/layers.py [ROOT] -- the include graph between the source folders.

Prints, for every pair of folders, how many files of the first include a
header of the second, and fails (exit 1) on any edge that does not point
down the layers (docs/DESIGN.md, "Layers"):

    tools -> socket -> engine -> transport -> base -> {wire, policy}

A folder may include any folder below it, never one beside or above it, so
the graph has no cycle.  The public header include/sdp/sdp.h is everyone's.

Also: below socket/, the library calls the C library through base/real.h
(sdp_real.*, sdp_close), never by the names socket/ interposes, which
would send its own calls through the socket switch.
"""
import os
import re
import sys

# Rank: a folder includes only folders of a lower rank.
RANK = {
    "tools": 6,
    "socket": 5,
    "engine": 4,
    "transport": 3,
    "base": 2,
    "wire": 1,
    "policy": 1,
}
PUBLIC = {"sdp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def sources(root):
    for top in ("src", "tools"):
        base = os.path.join(root, top)
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, root)
                    parts = rel.split(os.sep)
                    folder = "tools" if parts[0] == "tools" else parts[1]
                    yield folder, rel, path


def real_names(root):
    """The libc functions base/real.h resolves, and close."""
    with open(os.path.join(root, "src", "base", "real.h"), encoding="utf-8") as fh:
        text = fh.read()
    body = text[text.index("struct sdp_real_fns {"):]
    body = body[:body.index("};")]
    return sorted(set(re.findall(r"\(\*(\w+)\)\(", body)) | {"close"})


def interposed_calls(root):
    """Calls of interposed names in code lines below socket/."""
    names = real_names(root)
    call = re.compile(r"(?<![\w.>])(%s)\(" % "|".join(names))
    bad = []
    for folder, rel, path in sources(root):
        if folder not in ("engine", "transport", "base", "wire", "policy"):
            continue
        if not rel.endswith(".c") or rel == os.path.join("src", "base", "real.c"):
            continue
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for n, line in enumerate(lines, 1):
            stripped = line.lstrip()
            if stripped.startswith(("*", "/*", "//")):
                continue
            code = line.split("/*")[0]
            for m in call.finditer(code):
                if code[:m.start()].count('"') % 2 == 0:
                    bad.append(f"{rel}:{n}: calls {m.group(1)}() by its "
                               "interposed name (use sdp_real, base/real.h)")
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    edges, bad = {}, []
    for folder, rel, path in sources(root):
        if folder not in RANK:
            bad.append(f"{rel}: folder '{folder}' has no place in the layers")
            continue
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for target in sorted(set(INCLUDE.findall(text))):
            if target == folder or target in PUBLIC:
                continue
            edges.setdefault((folder, target), []).append(rel)
            if target not in RANK:
                bad.append(f"{rel}: includes '{target}/', which has no place in the layers")
            elif RANK[target] >= RANK[folder]:
                bad.append(f"{rel}: {folder} -> {target} does not point down")
    order = sorted(RANK, key=lambda f: (-RANK[f], f))
    print("folder include graph (files that include the other folder's headers):")
    for a in order:
        for b in order:
            if (a, b) in edges:
                print(f"  {a:9} -> {b:9} {len(edges[(a, b)]):3}")
    bad += interposed_calls(root)
    if bad:
        print("layering violations:", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        return 1
    print("no edge points up or sideways: the graph has no cycle")
    print("below socket/, no call goes through an interposed name")
    return 0


if __name__ == "__main__":
    sys.exit(main())
