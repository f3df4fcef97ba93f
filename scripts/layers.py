#!/usr/bin/env python3
"""Calls between lib/'s files, from the objects' symbols (nm), checked
against the layers in lib/LAYERS: no call cycle between files, no call
from a folder to one above it, none between two folders of one level;
and within a folder with a private header (*_internal.h), none against
the order its opening comment writes: a table of the folder's files, each
calling only those above it. A private header is included by its own
folder's files only (and cmd/ by none), but for the folders a line
"shares FOLDER OTHER" of lib/LAYERS lets in.

    layers.py BUILD_LIB_DIR [LAYERS]   exit 1 on any cycle or violation
"""
import os
import re
import subprocess
import sys


def symbols(obj):
    """(defined, undefined) global symbols of @obj."""
    out = subprocess.run(["nm", "-g", obj], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCGSV":
            defined.add(parts[2])
    return defined, undefined


def read_layers(path):
    """({folder: level}, {(folder, other)} sharing folder's private
    header), the first level line the highest level."""
    groups, shares = {}, set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if words[0] == "shares":
                shares.add((words[1], words[2]))
                continue
            level, folder = words
            groups[folder] = int(level)
    return groups, shares


INCLUDE = re.compile(r'^#include "([a-z_]+)/([a-z_]+_internal\.h)"', re.M)


def include_problems(srcdir, shares):
    """Private headers included from outside their folder."""
    bad = 0
    top = os.path.dirname(srcdir)
    for d, _, files in os.walk(top):
        rel = os.path.relpath(d, top)
        if rel.split(os.sep)[0] not in ("lib", "cmd"):
            continue
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            with open(os.path.join(d, f)) as fh:
                text = fh.read()
            here = rel.split(os.sep)[1] if rel.startswith("lib" + os.sep) else rel
            for folder, head in INCLUDE.findall(text):
                if folder != here and (folder, here) not in shares:
                    print("%s/%s includes %s/%s, private to %s/" % (
                        rel, f, folder, head, folder))
                    bad += 1
    return bad


def group_of(name, groups):
    """(level, folder) of the object "folder/file", None if unlisted."""
    folder = name.split("/", 1)[0]
    if folder in groups:
        return groups[folder], folder
    return None


def written_order(srcdir, folder):
    """The folder's files in its private header's table, bottom first;
    None without a private header, [] for one without a table."""
    d = os.path.join(srcdir, folder)
    heads = [f for f in os.listdir(d) if f.endswith("_internal.h")] if os.path.isdir(d) else []
    if not heads:
        return None
    order, in_table = [], False
    with open(os.path.join(d, heads[0])) as f:
        for line in f:
            if "calls only" in line and "above it" in line + next(f, ""):
                in_table = True
                continue
            if in_table:
                m = re.match(r"^ \*\s+(\w+)\.c\s", line)
                if m:
                    order.append(m.group(1))
                elif line.strip() == "*/":
                    break
    return order


def order_problems(srcdir, groups, defs, edges):
    bad = 0
    for folder in sorted(groups):
        order = written_order(srcdir, folder)
        if order is None:
            continue
        files = sorted(n.split("/", 1)[1] for n in defs if n.startswith(folder + "/"))
        if not order:
            print("%s/: its private header writes no call order" % folder)
            bad += 1
            continue
        for f in files:
            if f not in order:
                print("%s/%s.c: not in the private header's call order" % (folder, f))
                bad += 1
        for a in files:
            for b in sorted(edges.get(folder + "/" + a, {})):
                if not b.startswith(folder + "/"):
                    continue
                bb = b.split("/", 1)[1]
                if a in order and bb in order and order.index(bb) > order.index(a):
                    print("against the written order: %s/%s.c -> %s.c: %s" % (
                        folder, a, bb, " ".join(sorted(edges[folder + "/" + a][b])[:4])))
                    bad += 1
    return bad


def cycles(edges, nodes):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    libdir = sys.argv[1]
    layers = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "lib", "LAYERS")
    groups, shares = read_layers(layers)
    objs = sorted(os.path.relpath(os.path.join(d, f), libdir)
                  for d, _, files in os.walk(libdir)
                  for f in files if f.endswith(".o"))
    defs, undefs, owner = {}, {}, {}
    for o in objs:
        name = o[:-2]
        defs[name], undefs[name] = symbols(os.path.join(libdir, o))
        for s in defs[name]:
            owner[s] = name
    edges = {}
    for name in undefs:
        for s in undefs[name]:
            if s in owner and owner[s] != name:
                edges.setdefault(name, {}).setdefault(owner[s], []).append(s)
    bad = 0
    for name in sorted(defs):
        if group_of(name, groups) is None:
            print("%s.c: in no folder of %s" % (name, layers))
            bad += 1
    for comp in cycles(edges, defs):
        bad += 1
        print("cycle: %s" % " ".join(c + ".c" for c in comp))
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    print("    %s.c -> %s.c: %s" % (a, b, " ".join(sorted(edges[a][b])[:4])))
    for a in sorted(edges):
        ga = group_of(a, groups)
        for b in sorted(edges[a]):
            gb = group_of(b, groups)
            if not ga or not gb or ga[1] == gb[1]:
                continue
            if gb[0] > ga[0] or gb[0] == ga[0]:
                bad += 1
                print("against the layers: %s.c (%s) -> %s.c (%s): %s" % (
                    a, ga[1], b, gb[1], " ".join(sorted(edges[a][b])[:4])))
    srcdir = os.path.dirname(os.path.abspath(layers))
    bad += order_problems(srcdir, groups, defs, edges)
    bad += include_problems(srcdir, shares)
    print("%d files, %d calls between them, %d problems" % (
        len(defs), sum(len(v) for v in edges.values()), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
