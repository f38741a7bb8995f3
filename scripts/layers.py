#!/usr/bin/env python3
"""layers.py - the include graph and the call graph of allocsim's sources, checked against its floors.

  util < device, readers, gen < policies < engine < cli

An arrow (a file that includes another, or calls or reads a symbol another defines) may run
sideways within a folder or down to a lower floor, never up; device and readers, on one floor, do
not use each other; and no files form a circle (in the include graph, or in the call graph, which
nm gives from the built objects: who defines, who uses). A header named *_impl.h (engine_impl.h: the
engine's state) is private to its folder. Prints every violation and exits 1 if any.

usage: layers.py [--src DIR] [--build DIR] [--nm NM] [-v]
  --src    the source tree (default .); --build the build tree holding the objects (default --src)
"""
import argparse
import os
import re
import subprocess
import sys

FLOORS = {'src/util': 0, 'src/device': 1, 'src/readers': 1, 'src/gen': 1, 'src/policies': 2, 'src/engine': 3, 'src/cli': 4}
APART = {frozenset(('src/device', 'src/readers'))}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder(path):
    d = os.path.dirname(path)
    return d if d in FLOORS else None


def sources(src):
    out = []
    for d in FLOORS:
        full = os.path.join(src, d)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            if name.endswith(('.c', '.h')):
                out.append(d + '/' + name)
    return out


def include_graph(src, files):
    known = set(files)
    edges = {}
    for f in files:
        with open(os.path.join(src, f), encoding='utf-8', errors='replace') as fp:
            text = fp.read()
        for inc in INCLUDE.findall(text):
            # as the compiler looks: beside the file, then -I src, then -I . (the top)
            for cand in (os.path.normpath(os.path.join(os.path.dirname(f), inc)), 'src/' + inc, inc):
                if cand in known:
                    if cand != f:
                        edges.setdefault(f, set()).add(cand)
                    break
    return edges


def objects(build, files):
    """{source .c: object path} for the objects built from the sources (automake may prefix a
    target's name: libasim_a-engine.o)."""
    want = {f[:-2]: f for f in files if f.endswith('.c')}
    out = {}
    for d in FLOORS:
        full = os.path.join(build, d)
        if not os.path.isdir(full):
            continue
        for name in os.listdir(full):
            if not name.endswith('.o'):
                continue
            base = re.sub(r'^[A-Za-z0-9_]+-', '', name[:-2])
            for stem in (d + '/' + name[:-2], d + '/' + base):
                if stem in want:
                    out[want[stem]] = os.path.join(full, name)
                    break
    return out


def call_graph(objs, nm):
    defs, uses = {}, {}
    for f, o in objs.items():
        res = subprocess.run([nm, '-P', o], capture_output=True, text=True, check=True)
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == 'U':
                uses.setdefault(f, set()).add(sym)
            elif kind in 'TDRBCGSV' or kind in 'W':
                defs.setdefault(sym, f)
    edges, why = {}, {}
    for f, syms in uses.items():
        for s in syms:
            g = defs.get(s)
            if g and g != f:
                edges.setdefault(f, set()).add(g)
                why.setdefault((f, g), s)
    return edges, why


def circles(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    nodes = set(edges) | {g for v in edges.values() for g in v}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def check(kind, edges, why=None):
    bad = []
    for f in sorted(edges):
        for g in sorted(edges[f]):
            a, b = folder(f), folder(g)
            if a is None or b is None or a == b:
                continue
            via = ' (%s)' % why[(f, g)] if why else ''
            if g.endswith('_impl.h'):
                bad.append('%s: %s -> %s (a header private to %s)' % (kind, f, g, b))
            elif FLOORS[a] < FLOORS[b]:
                bad.append('%s: upward arrow %s -> %s%s (%s is below %s)' % (kind, f, g, via, a, b))
            elif frozenset((a, b)) in APART:
                bad.append('%s: %s -> %s%s (%s and %s do not use each other)' % (kind, f, g, via, a, b))
    for comp in circles(edges):
        bad.append('%s: circle between %s' % (kind, ', '.join(comp)))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--src', default='.')
    ap.add_argument('--build', default=None)
    ap.add_argument('--nm', default=os.environ.get('NM', 'nm'))
    ap.add_argument('-v', action='store_true', help='print the folder-level arrows too')
    a = ap.parse_args()
    build = a.build or a.src
    files = sources(a.src)
    inc = include_graph(a.src, files)
    objs = objects(build, files)
    if not objs:
        print('layers.py: no objects under %s (build first)' % build, file=sys.stderr)
        return 2
    calls, why = call_graph(objs, a.nm)
    bad = check('include', inc) + check('call', calls, why)
    ninc = sum(len(v) for v in inc.values())
    ncall = sum(len(v) for v in calls.values())
    print('layers: %d files, %d objects, %d include arrows, %d call arrows, %d violation(s)' %
          (len(files), len(objs), ninc, ncall, len(bad)))
    if a.v:
        arrows = {}
        for kind, edges in (('include', inc), ('call', calls)):
            for f, gs in edges.items():
                for g in gs:
                    if folder(f) != folder(g):
                        arrows.setdefault((folder(f), folder(g)), set()).add(kind)
        for (x, y), kinds in sorted(arrows.items()):
            print('  %s -> %s (%s)' % (x, y, ', '.join(sorted(kinds))))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
