#!/usr/bin/env python3
"""cupy_ties.py - which of several equal free chunks the real CuPy pool took (doc/policies.md).

usage: cupy_ties.py TRACE PTRLOG [LIMIT]

TRACE is an allocsim native trace, PTRLOG the address log replay_cupy.py --ptr-log wrote for it
(traces/cupy-h200-logs.tar.gz), LIMIT the set_limit it ran under. The pool is replayed following the
real run's own choices; at every tie (several free chunks of the smallest fitting size in the
arena) it counts whether the chunk the real pool took was the one created first (oldest) or last
(newest), and the one at the lowest or highest device address. Prints one line of counts; exit
status 1 if the real run cannot be followed (its cudaMalloc sequence or an address disagrees).
"""
import collections
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_cupy import read_trace, OP_ALLOC, OP_FREE  # noqa: E402


class Chunk:
    __slots__ = ("seg", "off", "size", "serial", "prev", "next", "free", "stream")


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(64)
    ops, ids, args, _, _ = read_trace(sys.argv[1])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    allocs, segs = [], []
    with gzip.open(sys.argv[2], "rt") as f:
        for line in f:
            t = line.split()
            if t[0] == "m":
                segs.append((int(t[1]), int(t[2], 16), int(t[3])))
            else:
                allocs.append(int(t[1], 16))
    serial = 0
    free = collections.defaultdict(list)  # stream -> free chunks
    live, stats = {}, collections.Counter()
    total = nseg = k = j = 0

    def new(seg, off, size, stream):
        nonlocal serial
        c = Chunk()
        c.seg, c.off, c.size, c.stream, c.prev, c.next, c.free = seg, off, size, stream, None, None, False
        serial += 1
        c.serial = serial
        return c

    def addr(c):
        return segs[c.seg][1] + c.off

    def free_all():
        nonlocal total
        for s in free:
            keep = []
            for c in free[s]:
                if c.prev is None and c.next is None:
                    total -= c.size
                else:
                    keep.append(c)
            free[s] = keep

    for n in range(len(ops)):
        if ops[n] == OP_ALLOC:
            size, s = (args[k] + 511) // 512 * 512, args[k + 1]
            k += 2
            fits = [c for c in free[s] if c.size >= size]
            if fits:
                m = min(c.size for c in fits)
                cands = [c for c in fits if c.size == m]
                c = cands[0]
                if len(cands) > 1:
                    taken = [x for x in cands if addr(x) == allocs[j]]
                    if len(taken) != 1:
                        print(f"alloc {j}: the real address {allocs[j]:#x} is none of the tied chunks", file=sys.stderr)
                        sys.exit(1)
                    c = taken[0]
                    by_age = sorted(cands, key=lambda x: x.serial)
                    by_addr = sorted(cands, key=addr)
                    stats["ties"] += 1
                    stats["oldest" if by_age[0] is c else "newest" if by_age[-1] is c else "age_between"] += 1
                    stats["lowest_addr" if by_addr[0] is c else "highest_addr" if by_addr[-1] is c else "addr_between"] += 1
                free[s].remove(c)
                c.free = False
                if c.size > size:
                    r = new(c.seg, c.off + size, c.size - size, s)
                    r.next, r.prev, r.free = c.next, c, True
                    if r.next:
                        r.next.prev = r
                    c.next, c.size = r, size
                    free[s].append(r)
            else:
                lim = limit or 1 << 64
                if size <= lim and total + size > lim:
                    free_all()
                if size > lim or total + size > lim:
                    stats["ooms"] += 1
                    j += 1
                    continue
                if nseg >= len(segs) or segs[nseg][0] != j:
                    print(f"alloc {j}: the real pool's cudaMalloc sequence differs", file=sys.stderr)
                    sys.exit(1)
                c = new(nseg, 0, size, s)
                nseg += 1
                total += size
            if addr(c) != allocs[j]:
                print(f"alloc {j}: address {addr(c):#x}, the real pool's {allocs[j]:#x}", file=sys.stderr)
                sys.exit(1)
            live[ids[n]] = c
            j += 1
        elif ops[n] == OP_FREE:
            c = live.pop(ids[n], None)
            if c is None:
                continue
            fl = free[c.stream]
            while c.next is not None and c.next.free:
                nx = c.next
                fl.remove(nx)
                c.size += nx.size
                c.next = nx.next
                if c.next:
                    c.next.prev = c
            while c.prev is not None and c.prev.free:
                pv = c.prev
                fl.remove(pv)
                pv.size += c.size
                pv.next = c.next
                if pv.next:
                    pv.next.prev = pv
                c = pv
            c.free = True
            fl.append(c)
        else:
            free_all()
    print(" ".join(f"{key}={stats[key]}" for key in ("ties", "oldest", "newest", "age_between", "lowest_addr",
                                                       "highest_addr", "addr_between", "ooms")))


if __name__ == "__main__":
    main()
