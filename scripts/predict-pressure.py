#!/usr/bin/env python3
"""predict-pressure.py - capture-fake.py's workloads on the GPU under torch.cuda.set_per_process_memory_fraction:
does the real run run out of memory at a given limit? (traces/predict/pressure.csv, doc/predict.md)

  predict-pressure.py jobs ALLOCSIM TRACEDIR W...   the limits: predict's need (fits_from_high: every capacity from it
                                                     up fits) x0.95, x1, x1.05 and the real run's
                                                     reserved_bytes.all.peak (TRACEDIR/W.real.json) x0.95, x1.05
                                                     (outside and inside predict's default --margin of 4%)
  predict-pressure.py run JOBS OUTDIR                every job in parallel processes, the sum of the running limits
                                                     (+ 1 GiB each) kept below the GPU's free memory
  predict-pressure.py child W LIMIT OUTDIR           one run (run does this)
  predict-pressure.py csv JOBS OUTDIR                pressure.csv from the runs' JSON
  predict-pressure.py table ALLOCSIM TRACEDIR        doc/predict.md's table: predict's answer at each limit of
                                                     TRACEDIR/pressure.csv against the real run's outcome
"""
import csv as csvmod, gc, importlib.util, io, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BASES = ("need_x0.95", "need", "need_x1.05", "real_peak_x0.95", "real_peak_x1.05")


def jobs(allocsim, tdir, names):
    for w in names:
        out = subprocess.run([allocsim, "predict", "--capacity", "1TiB", "--format", "csv", "--no-advise",
                              os.path.join(tdir, w + ".trace.gz")], capture_output=True, text=True, check=True).stdout
        nh = int(next(csvmod.DictReader(io.StringIO(out)))["fits_from_high"])
        rp = json.load(open(os.path.join(tdir, w + ".real.json")))["memory_stats"]["reserved_bytes.all.peak"]
        for b, c in zip(BASES, (nh * 95 // 100, nh, nh * 105 // 100, rp * 95 // 100, rp * 105 // 100)):
            print(w, c, b)


def child(w, cap, out):
    spec = importlib.util.spec_from_file_location("cf", os.path.join(HERE, "capture-fake.py"))
    cf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cf)
    import torch
    gc.disable()
    torch.cuda.init()
    free0, total = torch.cuda.mem_get_info()
    frac = cap / total
    while int(frac * total) > cap:  # the allocator's limit is static_cast<size_t>(fraction * total)
        frac = frac * (1 - 1e-16)
    torch.cuda.set_per_process_memory_fraction(frac, 0)
    t0 = time.time()
    oom, msg, err = False, "", None
    try:
        cf.WORKLOADS[w](torch, "cuda")
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        oom, msg = True, str(e)[:400]
    except Exception as e:
        err = "%s: %s" % (type(e).__name__, str(e)[:400])
    st = torch.cuda.memory_stats()
    r = {"workload": w, "capacity_asked": cap, "fraction": frac, "limit_bytes": int(frac * total), "total_memory": total,
         "free_at_start": free0, "oom": oom, "num_ooms": st.get("num_ooms"), "reserved_peak": st["reserved_bytes.all.peak"],
         "num_device_alloc": st.get("num_device_alloc"), "seconds": time.time() - t0, "message": msg, "error": err,
         "torch": torch.__version__}
    json.dump(r, open(os.path.join(out, "%s-%d.json" % (w, cap)), "w"), indent=1)
    print(w, cap, "oom" if oom else "ran", st["reserved_bytes.all.peak"])


def run(jobfile, out):
    os.makedirs(out, exist_ok=True)
    todo = sorted((l.split() for l in open(jobfile) if l.strip()), key=lambda j: -int(j[1]))
    free = int(subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True).stdout.split()[0]) << 20
    budget, slot = min(130 << 30, free - (4 << 30)), 1 << 30
    log = open(os.path.join(out, "driver.log"), "w")
    log.write("free %d budget %d\n" % (free, budget))
    running = []
    while todo or running:
        for r in running[:]:
            if r[1].poll() is not None:
                log.write("%s %s rc=%d %.1fs\n" % (r[0][0], r[0][1], r[1].returncode, time.time() - r[2]))
                running.remove(r)
        for j in todo[:]:
            if sum(int(x[0][1]) + slot for x in running) + int(j[1]) + slot <= budget and len(running) < 14:
                env = dict(os.environ)
                env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
                f = open(os.path.join(out, "%s-%s.log" % (j[0], j[1])), "w")
                running.append((j, subprocess.Popen([sys.executable, os.path.abspath(__file__), "child", j[0], j[1], out],
                                                    stdout=f, stderr=subprocess.STDOUT, env=env), time.time()))
                todo.remove(j)
        time.sleep(0.5)
    log.write("done\n")


def csv(jobfile, out):
    print("workload,basis,limit_bytes,fraction,real_oom,real_num_ooms,real_peak_reserved")
    for w, c, b in (l.split() for l in open(jobfile) if l.strip()):
        f = os.path.join(out, "%s-%s.json" % (w, c))
        if not os.path.exists(f):
            sys.stderr.write("%s at %s: no result (not run, or stopped)\n" % (w, c))
            continue
        d = json.load(open(f))
        if d["error"] is not None:
            sys.exit("%s at %s: %s" % (w, c, d["error"]))
        print("%s,%s,%d,%.17g,%d,%d,%d" % (w, b, d["limit_bytes"], d["fraction"], int(d["oom"]), d["num_ooms"], d["reserved_peak"]))


NAMES = {"need_x0.95": "predict's need x 0.95", "need": "predict's need", "need_x1.05": "predict's need x 1.05",
         "real_peak_x0.95": "real peak x 0.95", "real_peak_x1.05": "real peak x 1.05"}


def table(allocsim, tdir):
    print("| workload | limit | bytes (GiB) | real run | predict | right? |")
    print("|---|---|---|---|---|---|")
    n = {"right": 0, "uncertain": 0, "wrong": 0}
    for r in csvmod.DictReader(open(os.path.join(tdir, "pressure.csv"))):
        out = subprocess.run([allocsim, "predict", "--capacity", r["limit_bytes"], "--format", "csv", "--no-advise",
                              os.path.join(tdir, r["workload"] + ".trace.gz")], capture_output=True, text=True).stdout
        got = next(csvmod.DictReader(io.StringIO(out)))["fits"]
        oom = r["real_oom"] == "1"
        v = "uncertain" if got == "uncertain" else "right" if (got == "no") == oom else "wrong"
        n[v] += 1
        lim = int(r["limit_bytes"])
        print("| %s | %s | %d (%.3f) | %s | %s | %s |" % (
            r["workload"], NAMES.get(r["basis"], r["basis"]), lim, lim / 2**30,
            "out of memory" if oom else "ran (peak reserved %.3f GiB)" % (int(r["real_peak_reserved"]) / 2**30), got,
            {"right": "yes", "uncertain": "uncertain", "wrong": "**no**"}[v]))
    print("\n**%d of %d right, %d uncertain, %d wrong.**" % (n["right"], sum(n.values()), n["uncertain"], n["wrong"]))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["jobs"] and len(a) >= 4:
        jobs(a[1], a[2], a[3:])
    elif a[:1] == ["child"] and len(a) == 4:
        child(a[1], int(a[2]), a[3])
    elif a[:1] == ["run"] and len(a) == 3:
        run(a[1], a[2])
    elif a[:1] == ["csv"] and len(a) == 3:
        csv(a[1], a[2])
    elif a[:1] == ["table"] and len(a) == 3:
        table(a[1], a[2])
    else:
        sys.stderr.write(__doc__)
        sys.exit(64)
