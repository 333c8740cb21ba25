#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/layers.py [ROOT] -- the include graph between the source folders.

Prints, for every pair of folders, how many files of the first include a
header of the second, and fails (exit 1) on any edge that does not point
down the layers (docs/DESIGN.md, "Layers"):

    tools -> socket -> engine -> transport -> base -> {wire, policy}

A folder may include any folder below it, never one beside or above it, so
the graph has no cycle.  The public header include/sdp/sdp.h is everyone's.
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
    if bad:
        print("layering violations:", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        return 1
    print("no edge points up or sideways: the graph has no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
