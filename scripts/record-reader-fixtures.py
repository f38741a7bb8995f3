# record-reader-fixtures.py - two real snapshots for the reader's tests: one taken with _record_memory_history()'s
# defaults (stack frames on every entry and block), one dumped without recording any history.
# Run on a GPU machine with OUT set to a folder: OUT=dir python3 scripts/record-reader-fixtures.py
import gzip, json, os, pickle, shutil, torch
out = os.environ["OUT"]
torch.cuda.init()
keep = [torch.empty(1 << 20, device="cuda") for _ in range(4)]
torch.cuda.memory._dump_snapshot(out + "/nohist.pickle")
del keep
torch.cuda.empty_cache()
torch.cuda.reset_peak_memory_stats()
torch.cuda.memory._record_memory_history()  # defaults: context and stacks "all"
def work():
    ys = []
    for i in range(300):
        ys.append(torch.randn(1000 + i * 4099, device="cuda"))
        if i % 3 == 0:
            ys.pop(0)
    lin = torch.nn.Linear(512, 512).cuda()
    z = lin(torch.randn(64, 512, device="cuda"))
    z.sum().backward()
    del ys
    return float(z.sum().item())
work()
torch.cuda.synchronize()
torch.cuda.memory._dump_snapshot(out + "/frames.pickle")
stats = {k: v for k, v in torch.cuda.memory_stats().items() if isinstance(v, (int, float))}
json.dump({"torch": torch.__version__, "stats": stats}, open(out + "/frames.stats.json", "w"), indent=1, sort_keys=True)
for n in ("nohist", "frames"):
    with open(out + "/" + n + ".pickle", "rb") as f, gzip.open(out + "/" + n + ".pickle.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(out + "/" + n + ".pickle")
d = pickle.load(gzip.open(out + "/frames.pickle.gz"))
tr = d["device_traces"]
print("devices", len(tr), "entries", [len(x) for x in tr], "keys", list(d))
e = tr[0][len(tr[0]) // 2]
print("an entry:", {k: (v if k != "frames" else "%d frames" % len(v)) for k, v in e.items()})
print("peak reserved", stats.get("reserved_bytes.all.peak"), "allocated", stats.get("allocated_bytes.all.peak"))
