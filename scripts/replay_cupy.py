#!/usr/bin/env python3
"""replay_cupy.py - replay allocsim native traces through a real cupy.cuda.MemoryPool (ground truth
for allocsim's `-p cupy`; doc/policies.md).

usage: replay_cupy.py [-o CSV] [--limit BYTES] [--ptr-log DIR] [--perturb N] [--free-at WHEN] [--same-process] TRACE...

Each trace is replayed in a fresh Python process (a child of this one) with a fresh
MemoryPool(allocator=counting_malloc), where counting_malloc wraps cupy.cuda.memory._malloc (one
cudaMalloc each) and counts the calls that succeed and those that fail. Event mapping (allocsim's
native format, doc/trace-format.md):
  a ID SIZE STREAM   pool.malloc(SIZE) with STREAM current (0 = the null stream, every other value
                     its own cupy.cuda.Stream); an OutOfMemoryError is counted and the id stays
                     unallocated
  r ID               --free-at completed (the default here, as traces/cupy-h200.csv was recorded):
                     nothing, the program holds the memory until the other streams are done with it;
                     --free-at requested (the cupy policy's default): the MemoryPointer is dropped
                     here (CuPy has no record_stream: reuse is ordered on the allocation's stream)
  f ID               the MemoryPointer is dropped (its chunk returns to the pool at once), unless
                     it was dropped at its r already
  e                  pool.free_all_blocks()
  e maybe            nothing: an inferred release of the recording allocator (PyTorch's own
                     fallback under its memory cap), not a call of the program
  p, S, X, M, U      nothing
total_bytes() and used_bytes() are read after every malloc (they only grow there). The CSV has one
row per trace: trace, peak_total_bytes, peak_used_bytes, num_cudamalloc, final_total, final_used,
then num_cudamalloc_failed, num_ooms, num_free_all_blocks, allocs, frees, cupy, python, seconds, free_at.
--ptr-log DIR writes DIR/NAME.ptr.gz: one line per alloc event (event index, address or 0 on OOM),
and one per cudaMalloc ('m' alloc-event index, address, size), to compare the pool's choices with the
simulation's. --perturb N first leaves N holes among the interpreter's 64-byte objects (the size of
a _Chunk), which moves the Python objects whose addresses order CuPy's free chunks of equal size: a
replay whose numbers do not change under it does not depend on that order. Exit status: 0 ok, 64 usage, 65 bad trace, 66 missing trace, 69 no CuPy/GPU.
"""
import argparse
import array
import gzip
import os
import subprocess
import sys
import time

FIELDS = ["trace", "peak_total_bytes", "peak_used_bytes", "num_cudamalloc", "final_total", "final_used",
          "num_cudamalloc_failed", "num_ooms", "num_free_all_blocks", "allocs", "frees", "cupy", "python", "seconds",
          "free_at"]

OP_ALLOC, OP_FREE, OP_EMPTY = 0, 1, 2


class TraceError(Exception):
    pass


def read_trace(path, free_at="completed"):
    """The events that reach the pool, as three parallel arrays (no Python objects per event while
    replaying), the largest id and the streams in order of first use."""
    ops, ids, args = array.array("b"), array.array("q"), array.array("q")
    streams = []
    maxid = 0
    early = set()  # ids dropped at their free request (--free-at requested)
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        first = f.readline().rstrip("\r\n")
        if not first.startswith("#allocsim-trace "):
            raise TraceError(f"{path}:1: not an allocsim native trace (convert it with 'allocsim convert')")
        for lineno, line in enumerate(f, start=2):
            t = line.split()
            if not t or t[0].startswith("#"):
                continue
            try:
                if t[0] == "a":
                    i, size, stream = int(t[1], 0), int(t[2], 0), int(t[3], 0)
                    if size < 0 or i < 0 or stream < 0:
                        raise ValueError
                    if stream not in streams:
                        streams.append(stream)
                    ops.append(OP_ALLOC); ids.append(i); args.append(size)
                    args.append(streams.index(stream))
                    maxid = max(maxid, i)
                elif t[0] == "f":
                    i = int(t[1], 0)
                    if i in early:
                        early.discard(i)
                    else:
                        ops.append(OP_FREE); ids.append(i)
                elif t[0] == "r" and free_at == "requested":
                    i = int(t[1], 0)
                    early.add(i)
                    ops.append(OP_FREE); ids.append(i)
                elif t[0] == "e":
                    if "maybe" not in t[1:]:
                        ops.append(OP_EMPTY); ids.append(0)
                elif t[0] in ("r", "p", "S", "X", "M", "U"):
                    pass
                else:
                    raise ValueError
            except (ValueError, IndexError):
                raise TraceError(f"{path}:{lineno}: bad record '{line.strip()}'")
    return ops, ids, args, maxid, streams


def replay(path, limit, ptr_log, perturb=0, free_at="completed"):
    import cupy
    from cupy.cuda import memory

    ops, ids, args, maxid, stream_ids = read_trace(path, free_at)
    raw_malloc = memory._malloc
    counts = [0, 0]  # cudaMalloc calls that succeeded, that failed
    seg_log = array.array("q")  # alloc-event index, address, size per cudaMalloc
    cur = [0]

    def counting_malloc(size):
        try:
            mp = raw_malloc(size)
        except Exception:
            counts[1] += 1
            raise
        counts[0] += 1
        if ptr_log:
            seg_log.append(cur[0]); seg_log.append(mp.ptr); seg_log.append(size)
        return mp

    if perturb:
        # 3-tuples take 64 bytes with their GC header, like a _Chunk: free every other one
        keep = [(i, i, i) for i in range(2 * perturb)]
        del keep[::2]
    pool = cupy.cuda.MemoryPool(allocator=counting_malloc)
    pool.set_limit(size=limit if limit is not None else 0)  # also overrides CUPY_GPU_MEMORY_LIMIT
    streams = [cupy.cuda.Stream.null if s == 0 else cupy.cuda.Stream(non_blocking=True) for s in stream_ids]
    live = [None] * (maxid + 1)
    ptrs = array.array("Q", bytes(8 * sum(1 for o in ops if o == OP_ALLOC))) if ptr_log else None
    OOM = memory.OutOfMemoryError
    peak_total = peak_used = 0
    ooms = empties = allocs = frees = 0
    current = -1
    k = 0  # argument cursor
    t0 = time.monotonic()
    for n in range(len(ops)):
        op = ops[n]
        if op == OP_ALLOC:
            size, s = args[k], args[k + 1]
            k += 2
            if s != current:
                streams[s].use()
                current = s
            cur[0] = allocs
            try:
                live[ids[n]] = pool.malloc(size)
            except OOM:
                ooms += 1
            else:
                if ptr_log:
                    ptrs[allocs] = live[ids[n]].ptr
            allocs += 1
            tb = pool.total_bytes()
            if tb > peak_total:
                peak_total = tb
            ub = pool.used_bytes()
            if ub > peak_used:
                peak_used = ub
        elif op == OP_FREE:
            live[ids[n]] = None
            frees += 1
        else:
            pool.free_all_blocks()
            empties += 1
    secs = time.monotonic() - t0
    cupy.cuda.Stream.null.use()
    name = os.path.basename(path).split(".")[0]
    row = [name, peak_total, peak_used, counts[0], pool.total_bytes(), pool.used_bytes(),
           counts[1], ooms, empties, allocs, frees, cupy.__version__, sys.version.split()[0], f"{secs:.3f}", free_at]
    if ptr_log:
        with gzip.open(os.path.join(ptr_log, name + ".ptr.gz"), "wt") as g:
            for j in range(allocs):
                g.write(f"{j} {ptrs[j]:#x}\n")
            for j in range(0, len(seg_log), 3):
                g.write(f"m {seg_log[j]} {seg_log[j + 1]:#x} {seg_log[j + 2]}\n")
    live = None
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("-o", "--output", help="CSV (default: standard output)")
    ap.add_argument("--limit", type=int, help="pool.set_limit(size=LIMIT) before replaying")
    ap.add_argument("--ptr-log", help="directory for the per-trace address logs")
    ap.add_argument("--perturb", type=int, default=0, help="leave N holes among 64-byte objects first")
    ap.add_argument("--free-at", choices=("requested", "completed"), default="completed",
                    help="drop a cross-stream free's memory at its request (r) or its completion (f, the default)")
    ap.add_argument("--same-process", action="store_true", help="replay in this process (one trace)")
    try:
        a = ap.parse_args()
    except SystemExit as e:
        sys.exit(64 if e.code else 0)
    for t in a.traces:
        if not os.path.exists(t):
            print(f"replay_cupy.py: {t}: no such file", file=sys.stderr)
            sys.exit(66)
    if a.same_process:
        if len(a.traces) != 1:
            print("replay_cupy.py: --same-process takes one trace", file=sys.stderr)
            sys.exit(64)
        try:
            import cupy  # noqa: F401
        except Exception as e:
            print(f"replay_cupy.py: cannot use CuPy: {e}", file=sys.stderr)
            sys.exit(69)
        try:
            row = replay(a.traces[0], a.limit, a.ptr_log, a.perturb, a.free_at)
        except TraceError as e:
            print(f"replay_cupy.py: {e}", file=sys.stderr)
            sys.exit(65)
        print(",".join(str(x) for x in row))
        return
    rows = []
    for t in a.traces:
        cmd = [sys.executable, os.path.abspath(__file__), "--same-process", t]
        if a.limit is not None:
            cmd += ["--limit", str(a.limit)]
        if a.ptr_log:
            cmd += ["--ptr-log", a.ptr_log]
        if a.perturb:
            cmd += ["--perturb", str(a.perturb)]
        cmd += ["--free-at", a.free_at]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if p.returncode:
            sys.exit(p.returncode)
        rows.append(p.stdout.strip())
        print(f"replay_cupy.py: {rows[-1]}", file=sys.stderr)
    out = open(a.output + ".tmp", "w") if a.output else sys.stdout
    out.write(",".join(FIELDS) + "\n")
    for r in rows:
        out.write(r + "\n")
    if a.output:
        out.close()
        os.replace(a.output + ".tmp", a.output)


if __name__ == "__main__":
    main()
