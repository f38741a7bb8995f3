#!/usr/bin/env python3
"""replay_jax.py - replay allocsim traces through JAX's real BFC allocator and record its statistics.

Each trace's allocations and frees are replayed, in order, in a fresh Python process (one per trace,
so every replay starts from an empty allocator) with

    XLA_PYTHON_CLIENT_PREALLOCATE=false   (BFC with allow_growth: regions of 2 MiB, doubling)

as `jax.device_put` of a numpy uint8 array of the request's size (a view of one host buffer) and
`.delete()`. After every device_put the script waits for the transfer (block_until_ready), so a later
delete frees at once, and after every delete it polls `memory_stats()` until bytes_in_use has dropped:
the allocator sees the trace's order and nothing else. Streams: JAX has one compute stream, so every
request goes to it whatever its stream in the trace. `e` (empty_cache) has no JAX equivalent for the
BFC allocator and is skipped; `r` (free requested) is skipped and the free happens at `f` (--free-at
completed, the default: PjRt keeps a buffer used on another stream until that use is done), or the
buffer is deleted at `r` and its `f` skipped (--free-at requested).

Input: allocsim's native text format (`allocsim convert T -o T.trace.gz`), plain or gzip'd.

  replay_jax.py -o truth.csv [-j N] [--budget S] [--log DIR] [--repeat K] [--free-at WHEN] TRACE...
      one row per trace and run: trace,run,events,allocs,frees,ooms,peak_bytes_in_use,peak_pool_bytes,
      num_allocs,largest_free_block_bytes,bytes_in_use,pool_bytes,bytes_limit,seconds
  replay_jax.py --probe -o probe.csv
      what one device_put of n bytes allocates (num_allocs, bytes_in_use, pool_bytes deltas) for a few n
  --log DIR writes DIR/NAME.run.csv.gz: after every event, the allocator's counters and the buffer
  address (for the address order of the regions).
"""
import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import time

STAT_KEYS = ("num_allocs", "bytes_in_use", "peak_bytes_in_use", "pool_bytes", "peak_pool_bytes",
             "largest_free_block_bytes", "bytes_limit", "largest_alloc_size")
COLUMNS = ["trace", "run", "events", "allocs", "frees", "ooms", "peak_bytes_in_use", "peak_pool_bytes",
           "num_allocs", "largest_free_block_bytes", "bytes_in_use", "pool_bytes", "bytes_limit", "seconds", "free_at"]


def read_trace(path, free_at="completed"):
    """The alloc/free records of a native trace: [('a', id, size) | ('f', id)], and the empty_cache count;
    with free_at "requested" a cross-stream free is its request (r), its completion (f) dropped."""
    opener = gzip.open if path.endswith(".gz") else open
    ev, nempty = [], 0
    early = set()
    with opener(path, "rt") as f:
        first = f.readline()
        if not first.startswith("#allocsim-trace 1"):
            sys.exit("%s: not an allocsim native trace (convert it with 'allocsim convert')" % path)
        for lineno, line in enumerate(f, 2):
            p = line.split()
            if not p or p[0].startswith("#"):
                continue
            try:
                if p[0] == "a":
                    ev.append(("a", int(p[1], 0), int(p[2], 0)))
                elif p[0] == "f":
                    i = int(p[1], 0)
                    if i in early:
                        early.discard(i)
                    else:
                        ev.append(("f", i))
                elif p[0] == "r" and free_at == "requested":
                    early.add(int(p[1], 0))
                    ev.append(("f", int(p[1], 0)))
                elif p[0] == "e":
                    nempty += 1
            except (IndexError, ValueError):
                sys.exit("%s:%d: bad record '%s'" % (path, lineno, line.strip()))
    return ev, nempty


def stats(dev):
    s = dev.memory_stats()
    return {k: int(s.get(k, -1)) for k in STAT_KEYS}


def child(path, logpath, free_at="completed"):
    """Runs in its own process: the replay of one trace. Prints one JSON line."""
    import numpy as np
    import jax
    dev = jax.devices()[0]
    ev, nempty = read_trace(path, free_at)
    biggest = max([e[2] for e in ev if e[0] == "a"] + [1])
    host = np.zeros(biggest, dtype=np.uint8)
    host[:] = 1  # touch every page once
    s0 = stats(dev)
    live = {}
    allocs = frees = ooms = 0
    log = gzip.open(logpath, "wt") if logpath else None
    if log:
        log.write("event,op,id,size,ptr,num_allocs,bytes_in_use,pool_bytes,largest_free_block_bytes\n")
        log.write("-1,init,0,0,0,%d,%d,%d,%d\n" % (s0["num_allocs"], s0["bytes_in_use"], s0["pool_bytes"],
                                                s0["largest_free_block_bytes"]))
    t0 = time.time()
    prev = s0
    for i, e in enumerate(ev):
        ptr = 0
        if e[0] == "a":
            allocs += 1
            try:
                x = jax.device_put(host[:e[2]], dev)
                x.block_until_ready()
            except Exception as exc:  # RESOURCE_EXHAUSTED: the allocator's OOM
                ooms += 1
                live[e[1]] = None
                if ooms == 1:
                    sys.stderr.write("%s: event %d: %s\n" % (path, i, str(exc).splitlines()[0]))
                s = stats(dev)
            else:
                live[e[1]] = x
                if log:
                    ptr = x.unsafe_buffer_pointer()
                s = stats(dev)
        else:
            x = live.pop(e[1], None)
            if x is None:
                continue
            frees += 1
            x.delete()
            # a delete may complete on another thread: wait until the allocator has seen it
            s = stats(dev)
            deadline = time.time() + 5.0
            while s["bytes_in_use"] >= prev["bytes_in_use"] and time.time() < deadline:
                time.sleep(0.0001)
                s = stats(dev)
            if s["bytes_in_use"] >= prev["bytes_in_use"]:
                sys.stderr.write("%s: event %d: free of %d did not lower bytes_in_use\n" % (path, i, e[1]))
        if log:
            log.write("%d,%s,%d,%d,%d,%d,%d,%d,%d\n" % (i, e[0], e[1], e[2] if e[0] == "a" else 0, ptr,
                      s["num_allocs"], s["bytes_in_use"], s["pool_bytes"], s["largest_free_block_bytes"]))
        prev = s
    s = stats(dev)
    if log:
        log.close()
    out = {"free_at": free_at, "events": len(ev), "allocs": allocs, "frees": frees, "ooms": ooms, "empty_cache_skipped": nempty,
           "seconds": round(time.time() - t0, 1), "initial": s0}
    out.update(s)
    print(json.dumps(out))


def probe(outpath):
    import numpy as np
    import jax
    dev = jax.devices()[0]
    host = np.ones(64 << 20, dtype=np.uint8)
    rows = []
    info = {"jax": jax.__version__}
    try:
        import jaxlib
        info["jaxlib"] = jaxlib.__version__
        import jaxlib.version as jv
        for k in dir(jv):
            if "git" in k.lower() or "hash" in k.lower() or "commit" in k.lower():
                info["jaxlib." + k] = str(getattr(jv, k))
    except Exception as exc:
        info["jaxlib_error"] = str(exc)
    info["device"] = str(dev.device_kind)
    info["initial_stats"] = dev.memory_stats()
    for n in [0, 1, 255, 256, 257, 1000, 4096, 1 << 20, (1 << 20) + 1, (2 << 20) - 255, 2 << 20,
              (2 << 20) + 1, 3 << 20, 5 << 20, 33 << 20]:
        a = stats(dev)
        x = jax.device_put(host[:n], dev)
        x.block_until_ready()
        b = stats(dev)
        ptr = x.unsafe_buffer_pointer() if n else 0
        x.delete()
        time.sleep(0.01)
        c = stats(dev)
        rows.append([n, b["num_allocs"] - a["num_allocs"], b["bytes_in_use"] - a["bytes_in_use"],
                     b["pool_bytes"] - a["pool_bytes"], c["bytes_in_use"] - b["bytes_in_use"], hex(ptr),
                     c["pool_bytes"], c["largest_free_block_bytes"]])
    # region placement: two regions, which address is lower?
    xs = [jax.device_put(host[:n], dev) for n in (8 << 20, 16 << 20, 32 << 20)]
    for x in xs:
        x.block_until_ready()
    info["region_ptrs"] = [hex(x.unsafe_buffer_pointer()) for x in xs]
    info["after_regions"] = stats(dev)
    with open(outpath, "w") as f:
        w = csv.writer(f)
        w.writerow(["size", "d_num_allocs", "d_bytes_in_use", "d_pool_bytes", "d_bytes_in_use_after_delete",
                    "ptr", "pool_bytes", "largest_free_block_bytes"])
        w.writerows(rows)
        f.write("# " + json.dumps(info, default=str) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("-j", "--jobs", type=int, default=1, help="traces replayed at once (one process each)")
    ap.add_argument("--repeat", type=int, default=1, help="replay each trace this many times")
    ap.add_argument("--budget", type=float, default=0, help="start no replay after this many seconds")
    ap.add_argument("--log", help="directory for per-event logs")
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--free-at", choices=("requested", "completed"), default="completed",
                    help="delete a cross-stream free's buffer at its request (r) or completion (f, the default)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-log", help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if a.child:
        child(a.child, a.child_log, a.free_at)
        return
    if a.probe:
        probe(a.output)
        return
    if a.log:
        os.makedirs(a.log, exist_ok=True)
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    queue, seen = [], {}
    for t in a.traces * a.repeat:  # a trace listed twice runs twice (run 1, run 2)
        seen[t] = seen.get(t, 0) + 1
        queue.append((t, seen[t]))
    start = time.time()
    running = []
    with open(a.output, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        f.flush()
        while queue or running:
            while queue and len(running) < a.jobs and not (a.budget and time.time() - start > a.budget):
                t, r = queue.pop(0)
                name = os.path.basename(t).split(".")[0]
                cmd = [sys.executable, os.path.abspath(__file__), "-o", "-", "--child", t, "--free-at", a.free_at]
                if a.log:
                    cmd += ["--child-log", os.path.join(a.log, "%s.run%d.csv.gz" % (name, r))]
                running.append((name, r, subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)))
            if a.budget and time.time() - start > a.budget:
                queue = []
            for item in list(running):
                name, r, p = item
                if p.poll() is None:
                    continue
                running.remove(item)
                out = p.stdout.read().strip().splitlines()
                if p.returncode or not out:
                    sys.stderr.write("%s run %d: exit %d\n" % (name, r, p.returncode))
                    continue
                d = json.loads(out[-1])
                d["trace"], d["run"] = name, r
                w.writerow([d[c] for c in COLUMNS])
                f.flush()
                sys.stderr.write("%s run %d: %s s, initial %s\n" % (name, r, d["seconds"], d["initial"]))
            time.sleep(0.05)


if __name__ == "__main__":
    main()
