#!/usr/bin/env python3
"""capture-beyond.py - record PyTorch runs beyond plain eager work, with ground truth, on a CUDA machine.

Scenarios (each in a fresh process, under the settings of CONFS and at a memory limit of 1.10 x the
default run's peak allocated bytes, as the bundled p110 traces):
  graph_own      two manual torch.cuda.graph captures, each with its own private pool; a block freed
                 during capture; replays with eager work between; graph 1 freed mid-run + empty_cache
  graph_shared   the same, the second capture sharing the first one's pool (pool=g1.pool())
  compile_ro     torch.compile(mode="reduce-overhead") over several input shapes, eager work between
  mempool        torch.cuda.MemPool + use_mem_pool, the pool reused, released, empty_cache
  mempool_custom the same with a custom allocator (scripts/pluggable_alloc.c via CUDAPluggableAllocator)
  pinned         pinned host memory as a pin_memory DataLoader uses it: pinned batches copied
                 non_blocking on a copy stream, some kept, host empty_cache; every request logged
Each writes NAME.pickle.gz (the snapshot), NAME.meta.json (settings, limit, memory_stats(), the
host_memory_stats(), and "marks": at each named point the trace length and every segment with its
segment_pool_id, which is the ground truth of which pool each segment belonged to), and for pinned
NAME.host.csv (op,id,size,ptr: a = pinned alloc, f = freed by the program, d = our event recorded at the
free on the copy stream was seen complete before the next request, e = host empty_cache).

It also records capture.py's multistream workload with expandable_segments:True under several limits
and seeds (streams__sSEED__kK: limit K/100 x the seed's default peak allocated).

usage: capture-beyond.py OUTDIR [SCENARIO ...]   (python with torch, on the GPU machine)
"""
import concurrent.futures as cf
import gzip, json, os, pickle, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
CONFS = {"default": "", "ms128": "max_split_size_mb:128", "exp": "expandable_segments:True"}
SCENARIOS = ["graph_own", "graph_shared", "compile_ro", "mempool", "mempool_custom", "pinned"]
STREAM_SEEDS = [1, 2, 3]
STREAM_K = [105, 110, 115, 125]


class Marks:
    def __init__(self, torch):
        self.torch, self.marks = torch, []

    def __call__(self, name):
        s = self.torch.cuda.memory._snapshot()
        tr = s["device_traces"][0] if s.get("device_traces") else []
        segs = [{"address": x["address"], "total_size": x["total_size"], "stream": x["stream"],
                 "segment_type": x["segment_type"], "segment_pool_id": list(x.get("segment_pool_id", (0, 0))),
                 "is_expandable": x.get("is_expandable", False)} for x in s["segments"]]
        self.marks.append({"name": name, "trace_len": len(tr), "time_ns": time.time_ns(), "segments": segs})


CUSTOM_POOLS = set()
POOL_FLAGS = {}  # pool id -> "+nosplit", "+oom": MemPool(no_split=True), MemPool(use_on_oom=True)


def annotate_pools(torch):
    """Names the pool of every request in its trace entry's user_metadata ("allocsim.pool=A,B", with
    "+custom" for a MemPool with its own allocator), which PyTorch 2.11 does not record (newer
    releases write 'pool_id' on every entry): around graph capture (CUDAGraph.capture_begin/end,
    which torch.cuda.graph and torch.compile's CUDA graph trees use) and around the thread's routing
    to a pool (use_mem_pool, the graph trees' warm-up)."""
    stack = []
    mem = torch.cuda.memory

    def setm():
        if stack:
            a, b = stack[-1]
            mem._set_memory_metadata("allocsim.pool=%d,%d%s%s" % (a, b, "+custom" if (a, b) in CUSTOM_POOLS else "",
                                                                   POOL_FLAGS.get((a, b), "")))
        else:
            mem._set_memory_metadata("")

    cg = torch.cuda.CUDAGraph
    ob, oe = cg.capture_begin, cg.capture_end

    def capture_begin(self, pool=None, *args, **kw):
        # the graph's own pool is named before the capture (pool() answers only after it): a fresh
        # handle, as capture_begin would make one
        if pool is None:
            pool = torch.cuda.graph_pool_handle()
        ob(self, pool, *args, **kw)
        stack.append(tuple(pool))
        setm()

    def capture_end(self):
        oe(self)
        if stack:
            stack.pop()
        setm()

    cg.capture_begin, cg.capture_end = capture_begin, capture_end
    tb, te = torch._C._cuda_beginAllocateCurrentThreadToPool, torch._C._cuda_endAllocateToPool

    def begin(device, pool):
        tb(device, pool)
        stack.append(tuple(pool))
        setm()

    def end(device, pool):
        te(device, pool)
        if stack:
            stack.pop()
        setm()

    torch._C._cuda_beginAllocateCurrentThreadToPool, torch._C._cuda_endAllocateToPool = begin, end
    mem._cuda_beginAllocateCurrentThreadToPool, mem._cuda_endAllocateToPool = begin, end


def mlp(torch, width, depth):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).cuda()


def eager(torch, g, n, live):
    for i in range(n):
        if i % 5 == 0:
            sz = int(torch.randint(1, 300 * MiB, (1,), generator=g))
        elif i % 5 == 1:
            sz = int(torch.randint(1, 24 * MiB, (1,), generator=g))
        else:
            sz = int(torch.randint(1, 1 * MiB, (1,), generator=g))
        live.append(torch.empty(sz, dtype=torch.uint8, device="cuda"))
        if len(live) > 12:
            live.pop(int(torch.randint(0, len(live), (1,), generator=g)))


def w_graph(torch, mark, shared):
    g = torch.Generator().manual_seed(11)
    live = []
    with torch.no_grad():
        model = mlp(torch, 4096, 3)
        x = torch.randn(2048, 4096, device="cuda")
        eager(torch, g, 30, live)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                y = model(x)
        torch.cuda.current_stream().wait_stream(s)
        del y
        mark("before capture 1")
        g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1):
            t = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
            t.fill_(1)
            del t                       # freed during capture: back to the private pool
            out1 = model(x)
        mark("after capture 1")
        for _ in range(4):
            g1.replay()
            eager(torch, g, 10, live)
        x2 = torch.randn(1024, 4096, device="cuda")
        g2 = torch.cuda.CUDAGraph()
        mark("before capture 2")
        if shared:
            with torch.cuda.graph(g2, pool=g1.pool()):
                out2 = model(x2) * 2
        else:
            with torch.cuda.graph(g2):
                out2 = model(x2) * 2
        mark("after capture 2")
        for _ in range(4):
            g2.replay()
            g1.replay()
            eager(torch, g, 10, live)
        del g1, out1                    # graph 1 freed mid-run
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mark("after freeing graph 1")
        eager(torch, g, 30, live)
        for _ in range(3):
            g2.replay()
        del g2, out2
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mark("after freeing graph 2")
        eager(torch, g, 20, live)
    torch.cuda.synchronize()


def w_graph_many(torch, mark):
    """Three manual graphs, the second sharing the first one's pool, the third its own, each replayed
    50 times between eager requests (replays allocate nothing: the pools stay as captured)."""
    g = torch.Generator().manual_seed(16)
    live = []
    with torch.no_grad():
        model = mlp(torch, 2048, 2)
        xs = [torch.randn(n, 2048, device="cuda") for n in (1024, 512, 1536)]
        eager(torch, g, 20, live)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for x in xs:
                y = model(x)
        torch.cuda.current_stream().wait_stream(s)
        del y
        graphs, outs = [], []
        for i, x in enumerate(xs):
            gr = torch.cuda.CUDAGraph()
            pool = graphs[0].pool() if i == 1 else None
            with torch.cuda.graph(gr, pool=pool):
                outs.append(model(x) + 1)
            graphs.append(gr)
            mark("after capture %d" % (i + 1))
            eager(torch, g, 5, live)
        for r in range(50):
            graphs[r % 3].replay()
            eager(torch, g, 2, live)
        mark("after replays")
        del graphs[2], outs[2]
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mark("after freeing graph 3")
        eager(torch, g, 20, live)
    torch.cuda.synchronize()


def w_compile(torch, mark):
    g = torch.Generator().manual_seed(12)
    live = []
    model = mlp(torch, 2048, 3)
    f = torch.compile(model, mode="reduce-overhead")
    shapes = [512, 1024, 768, 1024, 512, 2048, 768, 2048]
    with torch.no_grad():
        for step in range(3 * len(shapes)):
            x = torch.randn(shapes[step % len(shapes)], 2048, device="cuda")
            y = f(x)
            live.append(y.sum())
            del y, x
            eager(torch, g, 4, live)
            if step % len(shapes) == len(shapes) - 1:
                mark("after round %d" % (step // len(shapes)))
    torch.cuda.synchronize()


def w_mempool(torch, mark, custom):
    g = torch.Generator().manual_seed(13)
    live, inpool = [], []
    eager(torch, g, 20, live)
    if custom:
        so = os.path.join(os.environ.get("TMPDIR", "/tmp"), "pluggable_alloc.so")
        if not os.path.exists(so):
            subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", so, os.path.join(HERE, "pluggable_alloc.c"), "-ldl"], check=True)
        alloc = torch.cuda.memory.CUDAPluggableAllocator(so, "pa_alloc", "pa_free")
        pool = torch.cuda.MemPool(alloc.allocator())
        CUSTOM_POOLS.add(tuple(pool.id))
    else:
        pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        for i in range(40):
            sz = int(torch.randint(1, (64 if i % 4 == 0 else 2) * MiB, (1,), generator=g))
            inpool.append(torch.empty(sz, dtype=torch.uint8, device="cuda"))
            if len(inpool) > 10:
                inpool.pop(int(torch.randint(0, len(inpool), (1,), generator=g)))
    mark("after pool use 1")
    eager(torch, g, 30, live)           # ordinary requests never take the pool's free blocks
    with torch.cuda.use_mem_pool(pool):
        for i in range(20):
            sz = int(torch.randint(1, (96 if i % 3 == 0 else 4) * MiB, (1,), generator=g))
            inpool.append(torch.empty(sz, dtype=torch.uint8, device="cuda"))
            if len(inpool) > 10:
                inpool.pop(int(torch.randint(0, len(inpool), (1,), generator=g)))
    mark("after pool use 2")
    del inpool
    eager(torch, g, 10, live)
    torch.cuda.empty_cache()            # the pool is alive: its segments stay
    mark("after empty_cache, pool alive")
    del pool
    torch.cuda.synchronize()
    torch.cuda.empty_cache()            # released: its free segments go
    mark("after pool released")
    eager(torch, g, 20, live)
    torch.cuda.synchronize()


def w_mempool_flags(torch, mark):
    """MemPool(no_split=True): a pool's blocks are handed out whole; MemPool(use_on_oom=True): its free
    blocks serve ordinary requests that run out of memory (at the limit)."""
    g = torch.Generator().manual_seed(15)
    live = []
    eager(torch, g, 10, live)
    ns = torch.cuda.MemPool(no_split=True)
    POOL_FLAGS[tuple(ns.id)] = "+nosplit"
    oomp = torch.cuda.MemPool(use_on_oom=True)
    POOL_FLAGS[tuple(oomp.id)] = "+oom"
    keep = []
    with torch.cuda.use_mem_pool(ns):
        a = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (30 * MiB, 8 * MiB, 3 * MiB, 500 * 1024, 100 * 1024)]
        del a[0], a[1]
        for n in (10 * MiB, 2 * MiB, 200 * 1024, 40 * 1024, 12 * MiB):
            keep.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        del a
    with torch.cuda.use_mem_pool(oomp):
        b = [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
        c = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (5 * MiB, 600 * 1024)]
        del b, c
    mark("pools ready")
    for i in range(60):
        sz = int(torch.randint(1, 96 * MiB, (1,), generator=g)) if i % 3 else int(torch.randint(1, 1 * MiB, (1,), generator=g))
        live.append(torch.empty(sz, dtype=torch.uint8, device="cuda"))
        if len(live) > 14:
            live.pop(int(torch.randint(0, len(live), (1,), generator=g)))
    mark("end")
    torch.cuda.synchronize()


def w_pinned(torch, mark, log):
    g = torch.Generator().manual_seed(14)
    copy = torch.cuda.Stream()
    pending, keep, nid = [], [], [0]
    sizes = [10, 4096, 4097, 1 << 20, (1 << 20) + 1, 3 << 20, 12 << 20, 33 << 20]

    def poll():
        for p in list(pending):
            if p[1].query():
                log.append(("d", p[0], 0, 0))
                pending.remove(p)

    def alloc(n):
        poll()
        t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        nid[0] += 1
        log.append(("a", nid[0], n, t.data_ptr()))
        return nid[0], t

    def free(i, t, used_on_copy):
        del t
        log.append(("f", i, 0, 0))
        if used_on_copy:
            ev = torch.cuda.Event()
            ev.record(copy)
            pending.append((i, ev))

    big = torch.randn(4096, 4096, device="cuda")
    for step in range(200):
        n = sizes[int(torch.randint(0, len(sizes), (1,), generator=g))] + int(torch.randint(0, 64, (1,), generator=g))
        i, t = alloc(n)
        with torch.cuda.stream(copy):
            d = t.to("cuda", non_blocking=True)
            if step % 7 == 0:
                for _ in range(3):
                    big = big @ big * 1e-3      # keep the copy stream busy: the block's event stays pending
        if step % 5 == 0:
            keep.append((i, t))
        else:
            free(i, t, True)
        del t, d
        if len(keep) > 6:
            j, u = keep.pop(0)
            free(j, u, True)
            del u
        if step % 50 == 49:
            copy.synchronize()
            poll()
            if step == 99:
                torch._C._host_emptyCache()
                log.append(("e", 0, 0, 0))
            mark("step %d" % step)
    while keep:
        j, u = keep.pop()
        free(j, u, True)
        del u
    copy.synchronize()
    torch.cuda.synchronize()
    poll()


def w_pinned_loader(torch, mark, log):
    """A real DataLoader with pin_memory=True (num_workers=0: it pins in this thread, so the log's order
    is the allocator's), batches copied with non_blocking=True and dropped. Every pinned storage is
    logged when DataLoader's pin_memory makes it (a) and when it dies (f, with our event recorded then
    on the copying stream; d when that event is seen complete before the next pinning)."""
    import weakref
    import torch.utils.data._utils.pin_memory as pm
    from torch.utils.data import DataLoader, Dataset

    class Images(Dataset):
        def __len__(self):
            return 160

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            h = (64, 96, 128, 224)[i % 4]
            return torch.rand(3, h, h, generator=g), torch.tensor(i % 10)

    pending, nid = [], [0]

    def poll():
        for p in list(pending):
            if p[1].query():
                log.append(("d", p[0], 0, 0))
                pending.remove(p)

    def on_free(i):
        log.append(("f", i, 0, 0))
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream())
        pending.append((i, ev))

    orig = pm.pin_memory

    def logged(data, device=None):
        # pin_memory recurses into lists through this same name: a tensor is logged at its own call
        # only (the bundled pinned_loader capture was made logging the list's call too, and every
        # tensor twice; traces/captured/pinned_loader__default.host.csv is the log without the second
        # record of each, .raw the log as it came)
        if not torch.is_tensor(data):
            return orig(data, device)
        poll()
        t = orig(data, device)
        if t.is_pinned():
            nid[0] += 1
            log.append(("a", nid[0], t.untyped_storage().nbytes(), t.data_ptr()))
            weakref.finalize(t, on_free, nid[0])
        return t

    pm.pin_memory = logged
    import torch.utils.data.dataloader as dl
    if getattr(dl, "_utils", None) is not None:
        dl._utils.pin_memory.pin_memory = logged
    # batch sizes vary with the image size (a sampler of one size per batch: 4 sizes, 8 per batch)
    sampler = [list(range(k, k + 32, 4)) for k in range(0, 128, 32)] + [list(range(k, k + 32, 4)) for k in range(1, 128, 32)]
    loader = DataLoader(Images(), batch_sampler=sampler * 6, pin_memory=True, num_workers=0)
    acc = torch.zeros((), device="cuda")
    for step, (x, y) in enumerate(loader):
        xb = x.to("cuda", non_blocking=True)
        yb = y.to("cuda", non_blocking=True)
        acc += xb.mean() + yb.float().mean()
        del x, y, xb, yb
        if step % 10 == 9:
            torch.cuda.synchronize()
            poll()
    torch.cuda.synchronize()
    poll()
    mark("end")


def child(scen, name, out, fraction):
    import torch
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    if fraction:
        torch.cuda.set_per_process_memory_fraction(float(fraction))
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=3_000_000)
    if os.environ.get("CAPTURE_ANNOTATE", "1") == "1":
        annotate_pools(torch)
    mark, log, oom, err = Marks(torch), [], "", ""
    try:
        if scen == "graph_own":
            w_graph(torch, mark, False)
        elif scen == "graph_shared":
            w_graph(torch, mark, True)
        elif scen == "graph_many":
            w_graph_many(torch, mark)
        elif scen == "compile_ro":
            w_compile(torch, mark)
        elif scen == "mempool":
            w_mempool(torch, mark, False)
        elif scen == "mempool_custom":
            w_mempool(torch, mark, True)
        elif scen == "pinned":
            w_pinned(torch, mark, log)
        elif scen == "mempool_flags":
            w_mempool_flags(torch, mark)
        elif scen == "pinned_loader":
            w_pinned_loader(torch, mark, log)
    except torch.OutOfMemoryError as e:
        oom = str(e)
    except Exception as e:  # noqa: BLE001 - recorded, the snapshot is still written
        err = "%s: %s" % (type(e).__name__, e)
    snap = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats()
    try:
        hstats = dict(torch.cuda.host_memory_stats())
    except Exception as e:  # noqa: BLE001
        hstats = {"error": str(e)}
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    meta = {"scenario": scen, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "fraction": fraction,
            "torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
            "total_memory": total, "oom": oom, "error": err, "n_trace_entries": len(snap["device_traces"][0]),
            "snapshot_keys": sorted(snap.keys()), "memory_stats": dict(stats), "host_memory_stats": hstats,
            "marks": mark.marks}
    json.dump(meta, open(os.path.join(out, name + ".meta.json"), "w"), indent=1)
    open(os.path.join(out, name + ".summary.txt"), "w").write(torch.cuda.memory_summary())
    if log:
        with open(os.path.join(out, name + ".host.csv"), "w") as f:
            f.write("op,id,size,ptr\n")
            for r in log:
                f.write("%s,%d,%d,%d\n" % r)


def spawn(args, conf, env_extra=None):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    env.update(env_extra or {})
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable] + args, env=env, capture_output=True, text=True,
                           timeout=int(os.environ.get("CAPTURE_TIMEOUT", "240")))
    except subprocess.TimeoutExpired:
        return args, -1, time.time() - t0, "timed out"
    return args, p.returncode, time.time() - t0, p.stderr[-2000:]


def peak_fraction(path, k):
    m = json.load(open(path))
    return "%.6f" % (k / 100.0 * m["memory_stats"]["allocated_bytes.all.peak"] / m["total_memory"])


def main():
    if sys.argv[1] == "--child":
        return child(*sys.argv[2:6])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    scens = sys.argv[2:] or SCENARIOS + ["streams"]
    me, cap = os.path.abspath(__file__), os.path.join(HERE, "capture.py")
    jobs1, jobs2 = [], []
    for s in scens:
        if s == "streams":
            for seed in STREAM_SEEDS:
                jobs1.append(([cap, "--child", "multistream", "streams__s%d__unlimited" % seed, out, ""], "", {"CAPTURE_SEED": str(seed)}))
            continue
        for tag, conf in CONFS.items():
            if s in ("pinned", "pinned_loader") and tag != "default":
                continue
            jobs1.append(([me, "--child", s, "%s__%s" % (s, tag), out, ""], conf, None))
    log = open(os.path.join(out, "capture-beyond.log"), "a")
    with cf.ThreadPoolExecutor(max_workers=10) as ex:
        for args, rc, dt, err in ex.map(lambda j: spawn(*j), jobs1):
            log.write("%s rc=%d %.1fs\n%s\n" % (args[3], rc, dt, err))
            log.flush()
    for s in scens:
        if s == "streams":
            for seed in STREAM_SEEDS:
                base = os.path.join(out, "streams__s%d__unlimited.meta.json" % seed)
                if os.path.exists(base):
                    for k in STREAM_K:
                        jobs2.append(([cap, "--child", "multistream", "streams__s%d__k%d" % (seed, k), out, peak_fraction(base, k)],
                                      "expandable_segments:True", {"CAPTURE_SEED": str(seed)}))
            continue
        base = os.path.join(out, "%s__default.meta.json" % s)
        if s not in ("pinned", "pinned_loader") and os.path.exists(base):
            jobs2.append(([me, "--child", s, "%s__p110_default" % s, out, peak_fraction(base, 110)], "", None))
            jobs2.append(([me, "--child", s, "%s__p110_exp" % s, out, peak_fraction(base, 110)], "expandable_segments:True", None))
    with cf.ThreadPoolExecutor(max_workers=10) as ex:
        for args, rc, dt, err in ex.map(lambda j: spawn(*j), jobs2):
            log.write("%s rc=%d %.1fs\n%s\n" % (args[3], rc, dt, err))
            log.flush()
    subprocess.run([sys.executable, os.path.join(HERE, "ground-truth.py"), out], check=True)


if __name__ == "__main__":
    main()
