#!/usr/bin/env python3
"""Flatten the memory_stats of every NAME.meta.json in a trace folder into one CSV
(name,key,value) that the shell tests read: traces/pytorch-h200/memory-stats.csv."""
import csv, glob, json, os, sys

folder = sys.argv[1] if len(sys.argv) > 1 else "traces/pytorch-h200"
out = csv.writer(open(os.path.join(folder, "memory-stats.csv"), "w", newline=""), lineterminator="\n")
out.writerow(["name", "key", "value"])
for path in sorted(glob.glob(os.path.join(folder, "*.meta.json"))):
    name = os.path.basename(path)[: -len(".meta.json")]
    stats = json.load(open(path))["memory_stats"]
    for k in sorted(stats):
        out.writerow([name, k, stats[k]])
