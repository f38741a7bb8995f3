#!/usr/bin/env python3
"""ground-truth.py - (re)write a capture folder's ground-truth.csv and memory-stats.csv from its
NAME.meta.json files (capture.py's and capture-beyond.py's), the layout the shell tests read.

usage: ground-truth.py FOLDER"""
import csv, glob, json, os, sys

COLS = ("name,workload,tag,alloc_conf,fraction,capacity_bytes,device_total_bytes,torch,oom,trace_entries,peak_allocated,"
        "peak_reserved,peak_active,peak_requested,final_reserved,final_allocated,num_device_alloc,num_device_free,"
        "num_alloc_retries,num_ooms,num_sync_all_streams,oversize_allocations_peak,oversize_segments_peak,"
        "inactive_split_bytes_peak").split(",")


def row(name, m):
    s = m["memory_stats"]
    cap = str(int(float(m["fraction"]) * m["total_memory"])) if m["fraction"] else ""
    return [name, m.get("workload") or m.get("scenario"), name.split("__")[1], m["alloc_conf"], m["fraction"] or "", cap,
            m["total_memory"], m["torch"], int(bool(m["oom"])), m["n_trace_entries"], s.get("allocated_bytes.all.peak", 0),
            s.get("reserved_bytes.all.peak", 0), s.get("active_bytes.all.peak", 0), s.get("requested_bytes.all.peak", 0),
            s.get("reserved_bytes.all.current", 0), s.get("allocated_bytes.all.current", 0), s.get("num_device_alloc", 0),
            s.get("num_device_free", 0), s.get("num_alloc_retries", 0), s.get("num_ooms", 0), s.get("num_sync_all_streams", 0),
            s.get("oversize_allocations.peak", 0), s.get("oversize_segments.peak", 0), s.get("inactive_split_bytes.all.peak", 0)]


def main():
    folder = sys.argv[1]
    # (pinned host-memory captures have tests of their own: tests/pinned*)
    metas = [p for p in sorted(glob.glob(os.path.join(folder, "*.meta.json"))) if json.load(open(p)).get("scenario") not in ("pinned", "pinned_loader")]
    with open(os.path.join(folder, "ground-truth.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLS)
        for p in metas:
            w.writerow(row(os.path.basename(p)[:-len(".meta.json")], json.load(open(p))))
    with open(os.path.join(folder, "memory-stats.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["name", "key", "value"])
        for p in metas:
            st = json.load(open(p))["memory_stats"]
            for k in sorted(st):
                w.writerow([os.path.basename(p)[:-len(".meta.json")], k, st[k]])


if __name__ == "__main__":
    main()
