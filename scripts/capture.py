#!/usr/bin/env python3
"""capture.py - record real PyTorch allocator traces with ground truth, on a CUDA machine.

For each (workload, PYTORCH_CUDA_ALLOC_CONF, memory fraction) it runs a fresh Python process
that records the allocator history (torch.cuda.memory._record_memory_history(context=None)),
runs the workload, and writes NAME.pickle.gz (the snapshot, as _dump_snapshot would), NAME.meta.json
(settings, fraction, device total, OOM message, full torch.cuda.memory_stats()) and
NAME.summary.txt (torch.cuda.memory_summary()), plus ground-truth.csv and memory-stats.csv in the
layout of the shared traces (scripts/ground-truth.py). Limited runs use a fraction giving 1.10 x the peak allocated bytes of the
unlimited default run, as the shared p110_* traces do.

usage: capture.py OUTDIR [WORKLOAD ...]
"""
import gzip, json, os, pickle, subprocess, sys

CONFS = {
    "default": "",
    "ms128": "max_split_size_mb:128",
    "exp": "expandable_segments:True",
    "rplist": "roundup_power2_divisions:[1:4,4:2,64:8,>:2]",
}
LIMITED = {"p110_default": "", "p110_exp": "expandable_segments:True", "p110_gc05": "garbage_collection_threshold:0.5",
           "p110_gc06ms128": "garbage_collection_threshold:0.6,max_split_size_mb:128"}


def w_multistream(torch):
    """Allocations on three streams, cross-stream use with record_stream, frees that complete
    only after the other stream's work, phases with torch.cuda.synchronize()."""
    g = torch.Generator().manual_seed(int(os.environ.get("CAPTURE_SEED", "1")))
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    keep = []
    for it in range(40):
        n = int(torch.randint(64, 4096, (1,), generator=g))
        with torch.cuda.stream(s1):
            a = torch.randn(n, 1024, device="cuda")          # 256 KiB .. 16 MiB on s1
            b = torch.empty(int(torch.randint(1, 3 << 20, (1,), generator=g)), dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(s2):
            s2.wait_stream(s1)
            big = torch.randn(2048, 2048, device="cuda")
            for _ in range(4):
                big = big @ big * 1e-3                       # keep s2 busy so frees stay pending
            c = a.sum(0)
        a.record_stream(s2)
        del a                                                 # completes only after s2's work
        x = torch.empty(int(torch.randint(1 << 10, 40 << 20, (1,), generator=g)), dtype=torch.uint8, device="cuda")
        y = torch.empty(int(torch.randint(1, 1 << 20, (1,), generator=g)), dtype=torch.uint8, device="cuda")
        keep.append(c)
        keep.append(x if it % 3 == 0 else y)
        del b, big, x, y
        if it % 10 == 9:
            torch.cuda.synchronize()
            keep = keep[-6:]
    torch.cuda.synchronize()


def w_emptycache(torch):
    """Phases separated by torch.cuda.empty_cache(): some followed by cache hits, some by a
    request that misses at once (the ambiguous case for snapshot inference)."""
    g = torch.Generator().manual_seed(2)
    live = []
    for phase in range(8):
        for i in range(60):
            n = int(torch.randint(1, 64 << 20, (1,), generator=g)) if i % 4 == 0 else int(torch.randint(1, 2 << 20, (1,), generator=g))
            live.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
            if len(live) > 25:
                live.pop(int(torch.randint(0, len(live), (1,), generator=g)))
        live = live[::3]
        torch.cuda.empty_cache()
        if phase % 2 == 0:
            live.append(torch.empty((96 + 2 * phase) << 20, dtype=torch.uint8, device="cuda"))  # misses right after
    torch.cuda.empty_cache()


def w_rounding(torch):
    """Sizes across every roundup interval and around the pool/segment thresholds."""
    sizes = [1, 511, 512, 513, 1200, 614400, 1 << 20, (1 << 20) + 1, 1310721, 2621441, 3 << 20, 3407873,
             5 << 20, (10 << 20) - 1, 10 << 20, (12 << 20) + 1, 15 << 20, 70 << 20, 73400321, 300 << 20,
             1363148801, 5 << 30]
    live = []
    for rep in range(3):
        for s in sizes:
            live.append(torch.empty(s + rep * 4097, dtype=torch.uint8, device="cuda"))
        for t in live[::2]:
            del t
        live = live[1::2]
    del live


def w_kvserve(torch):
    """A KV-cache serving loop without paging: up to 8 sequences decode together, each with its own
    contiguous K/V tensors grown by torch.cat at every step (the pattern of a simple HF-style generate
    loop); requests arrive with random prompt and output lengths, finish and are replaced."""
    kvserve_loop(torch, "cuda", int(os.environ.get("CAPTURE_SEED", "3")))
    torch.cuda.synchronize()


def kvserve_loop(torch, dev, seed):
    """w_kvserve's work on device dev (scripts/capture-fake.py runs it on the meta device)."""
    g = torch.Generator().manual_seed(seed)
    layers, heads, dim = 6, 16, 64
    w = torch.randn(heads * dim, heads * dim, device=dev, dtype=torch.float16) * 0.02
    active, served = [], 0

    def admit():
        plen = int(torch.randint(16, 1500, (1,), generator=g))
        olen = int(torch.randint(8, 300, (1,), generator=g))
        kv = [(torch.randn(1, heads, plen, dim, device=dev, dtype=torch.float16),
               torch.randn(1, heads, plen, dim, device=dev, dtype=torch.float16)) for _ in range(layers)]
        return {"kv": kv, "left": olen}

    with torch.no_grad():
        while served < 24 or active:
            while len(active) < 8 and served < 24:
                active.append(admit())
                served += 1
            for seq in active:
                x = torch.randn(1, heads * dim, device=dev, dtype=torch.float16)
                for li in range(layers):
                    k, v = seq["kv"][li]
                    h = (x @ w).view(1, heads, 1, dim)
                    seq["kv"][li] = (torch.cat([k, h], dim=2), torch.cat([v, h], dim=2))
                    att = torch.softmax(h @ seq["kv"][li][0].transpose(-1, -2), -1) @ seq["kv"][li][1]
                    x = att.reshape(1, heads * dim)
                seq["left"] -= 1
            active = [s for s in active if s["left"] > 0]


def w_gpt2grow(torch):
    """GPT-2 small (transformers, random weights) trained with AdamW at a batch that grows every step
    (2, 4, 6, ... sequences of 1024 tokens) until it runs out of memory under the run's memory limit;
    seconds per step go to the meta file ("step_seconds") to measure what recording frames costs."""
    import time
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    STEP_SECONDS.clear()
    for step in range(1, 40):
        t0 = time.time()
        x = torch.randint(0, 50257, (2 * step, 1024), device="cuda")
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x
        torch.cuda.synchronize()
        STEP_SECONDS.append(time.time() - t0)


STEP_SECONDS = []


WORKLOADS = {"multistream": w_multistream, "emptycache": w_emptycache, "rounding": w_rounding,
             "kvserve": w_kvserve, "gpt2grow": w_gpt2grow}


def child(workload, name, out, fraction):
    import torch
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    if fraction:
        torch.cuda.set_per_process_memory_fraction(float(fraction))
    # CAPTURE_CONTEXT=all keeps the Python frames of every allocation and free (blame's culprits);
    # the default, None, keeps none (smaller files, less overhead)
    ctx = os.environ.get("CAPTURE_CONTEXT") or None
    torch.cuda.memory._record_memory_history(enabled="all", context=ctx, stacks="python", max_entries=3_000_000)
    oom = ""
    try:
        WORKLOADS[workload](torch)
    except torch.OutOfMemoryError as e:
        oom = str(e)
    snap = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats()
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    meta = {"workload": workload, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "fraction": fraction,
            "torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
            "total_memory": total, "oom": oom, "n_trace_entries": len(snap["device_traces"][0]), "memory_stats": dict(stats),
            "context": ctx or "", "step_seconds": list(STEP_SECONDS)}
    json.dump(meta, open(os.path.join(out, name + ".meta.json"), "w"), indent=1)
    open(os.path.join(out, name + ".summary.txt"), "w").write(torch.cuda.memory_summary())


def run(workload, tag, conf, fraction, out):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    name = "%s__%s" % (workload, tag)
    subprocess.run([sys.executable, __file__, "--child", workload, name, out, fraction or ""], env=env, check=True)
    return name


def main():
    if sys.argv[1] == "--child":
        return child(*sys.argv[2:6])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    names = []
    for w in sys.argv[2:] or list(WORKLOADS):
        for tag, conf in CONFS.items():
            names.append(run(w, tag, conf, None, out))
        m = json.load(open(os.path.join(out, w + "__default.meta.json")))
        frac = "%.6f" % (1.10 * m["memory_stats"]["allocated_bytes.all.peak"] / m["total_memory"])
        for tag, conf in LIMITED.items():
            names.append(run(w, tag, conf, frac, out))
    # ground-truth.csv and memory-stats.csv from every NAME.meta.json of the folder
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ground-truth.py"), out], check=True)


if __name__ == "__main__":
    main()
