#!/usr/bin/env python3
# capture-fragmenter.py - a program written to fragment PyTorch's caching allocator, whose culprit
# line is known, run on a GPU under every setting of `allocsim advise`'s grid at one memory limit.
#
# The workload: each step allocates a 100 MiB activation and a 30 MiB buffer, frees the activation,
# and keeps a 2 MiB tensor (the CULPRIT line): the caching allocator carves it from the freed
# activation's segment (best fit), so that segment can never hold another activation again and a
# new one is needed. Settings that keep large blocks whole (max_split_size_mb) or reuse pages
# (expandable_segments) avoid it.
#
# usage (GPU machine): OUT=dir python3 scripts/capture-fragmenter.py
#   1. runs the default settings without a limit, with stacks (OUT/fragmenter__unlimited.pickle.gz);
#   2. sets the limit at 1.1x that run's peak allocated bytes (as the bundled p110 runs);
#   3. runs every setting of the grid at that limit in a fresh process (OUT/fragmenter__<tag>.pickle.gz
#      for the default one) and writes OUT/fragmenter.csv: tag, alloc_conf, limit, oom, peak reserved,
#      peak allocated, cudaMalloc calls.
import gzip, json, os, pickle, subprocess, sys

GRID = [  # tag, PYTORCH_CUDA_ALLOC_CONF (as allocsim advise builds them on top of no settings)
    ("current", ""),
    ("expandable_segments", "expandable_segments:True"),
    ("max_split_size_mb:64", "max_split_size_mb:64"),
    ("max_split_size_mb:128", "max_split_size_mb:128"),
    ("max_split_size_mb:256", "max_split_size_mb:256"),
    ("max_split_size_mb:512", "max_split_size_mb:512"),
    ("roundup_power2_divisions:4", "roundup_power2_divisions:4"),
    ("roundup_power2_divisions:8", "roundup_power2_divisions:8"),
    ("roundup_power2_divisions:[list]", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"),
    ("garbage_collection_threshold:0.6", "garbage_collection_threshold:0.6"),
    ("garbage_collection_threshold:0.8", "garbage_collection_threshold:0.8"),
    ("expandable+roundup:4", "expandable_segments:True,roundup_power2_divisions:4"),
    ("expandable+gc:0.8", "expandable_segments:True,garbage_collection_threshold:0.8"),
    ("max_split:128+gc:0.8", "max_split_size_mb:128,garbage_collection_threshold:0.8"),
    ("expandable+max_split:128", "expandable_segments:True,max_split_size_mb:128"),
]
MiB = 1 << 20


def workload(torch, steps):
    keep = []
    for i in range(steps):
        act = torch.empty((100 + (i % 3) * 2) * MiB, dtype=torch.uint8, device="cuda")
        buf = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
        act.fill_(1)
        del act
        keep.append(torch.empty(2 * MiB, dtype=torch.uint8, device="cuda"))  # CULPRIT: kept across steps
        buf.fill_(2)
        del buf
    torch.cuda.synchronize()
    return keep


def child(limit, out_pickle, steps):
    import torch
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    if limit:
        torch.cuda.set_per_process_memory_fraction(limit / total)
    torch.cuda.memory._record_memory_history(max_entries=1000000, stacks="python")
    oom = 0
    try:
        workload(torch, steps)
    except torch.cuda.OutOfMemoryError:
        oom = 1
    st = torch.cuda.memory_stats()
    if out_pickle:
        raw = out_pickle[:-3]
        torch.cuda.memory._dump_snapshot(raw)
        with open(raw, "rb") as f, gzip.open(out_pickle, "wb") as g:
            g.write(f.read())
        os.remove(raw)
    print(json.dumps({"oom": oom, "total": total, "peak_reserved": st["reserved_bytes.all.peak"],
                      "peak_allocated": st["allocated_bytes.all.peak"], "num_device_alloc": st["num_device_alloc"],
                      "num_ooms": st["num_ooms"], "torch": torch.__version__}))


def run(conf, limit, out_pickle, steps):
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
    p = subprocess.run([sys.executable, __file__, "--child", str(limit), out_pickle or "", str(steps)],
                       env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), sys.argv[3] or None, int(sys.argv[4]))
        return
    out = os.environ["OUT"]
    steps = int(os.environ.get("STEPS", "12"))
    u = run("", 0, out + "/fragmenter__unlimited.pickle.gz", steps)
    limit = u["peak_allocated"] * 11 // 10 // (2 * MiB) * (2 * MiB)  # 1.1x, as the bundled p110 runs
    rows = [("unlimited", "", 0, u)]
    for tag, conf in GRID:
        pk = out + "/fragmenter__limit.pickle.gz" if tag == "current" else None
        rows.append((tag, conf, limit, run(conf, limit, pk, steps)))
    with open(out + "/fragmenter.csv", "w") as f:
        f.write("tag,alloc_conf,limit_bytes,device_total_bytes,oom,peak_reserved,peak_allocated,num_device_alloc,num_ooms,torch\n")
        for tag, conf, lim, r in rows:
            f.write('%s,"%s",%d,%d,%d,%d,%d,%d,%d,%s\n' % (tag, conf, lim, r["total"], r["oom"], r["peak_reserved"],
                    r["peak_allocated"], r["num_device_alloc"], r["num_ooms"], r["torch"]))
    print(open(out + "/fragmenter.csv").read())


if __name__ == "__main__":
    main()
