#!/usr/bin/env python3
"""gen-snapshot.py - a large PyTorch memory snapshot from copies of a real one, written as a stream.

usage: scripts/gen-snapshot.py [--memo] SOURCE.pickle.gz COPIES OUT.pickle[.gz]

The history of SOURCE's first device is laid down COPIES times, each copy after the previous (times
moved past its span, addresses moved 2^40 apart), each ended as torch.cuda.empty_cache() after
freeing what was left would end it (the blocks still live freed, every segment released), so that
`allocsim validate` follows every copy exactly as it follows SOURCE; the top-level keys come in the order PyTorch
writes them: segments (empty: the snapshot is taken after the run), device_traces, then
allocator_settings, so that a reader learns the settings only at the end. The pickle is written
entry by entry (protocol 4 opcodes, no memo; with --memo, memoized as PyTorch's writer does:
every trace entry's dict and its 'N/A' string get a memo slot, keys and repeated strings are
fetched from the memo), so a snapshot of millions of events costs this script
the memory of one copy, not of the whole (pickle.dump of the whole would hold it all). Used by
scripts/bench.sh for the peak-RSS ratios of snapshot replay and validate (issue 34).
"""
import gzip
import pickle
import sys


def body(obj):
    """obj's pickle without PROTO, FRAME and STOP, and without memo opcodes (fast mode)"""
    import io
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=4)
    p.fast = True
    p.dump(obj)
    b = f.getvalue()
    assert b[:2] == b"\x80\x04" and b[-1:] == b"."
    b = b[2:-1]
    if b[:1] == b"\x95":  # a FRAME header
        b = b[9:]
    return b


class Memo:
    """the writer's memo, as pickle.dump of the snapshot lays it down"""

    def __init__(self):
        self.next, self.strs = 0, {}

    def put(self):
        self.next += 1
        return b"\x94"  # MEMOIZE

    def get(self, i):
        return b"h" + bytes([i]) if i < 256 else b"j" + i.to_bytes(4, "little")

    def string(self, v, fresh=False):
        """a string: fetched if memoized before (unless fresh: a new object each entry, as 'N/A')"""
        if not fresh and v in self.strs:
            return self.get(self.strs[v])
        if not fresh:
            self.strs[v] = self.next
        return body(v) + self.put()

    def entry(self, e):
        out = [b"}", self.put(), b"("]
        for k, v in e.items():
            out.append(self.string(k))
            out.append(self.string(v, fresh=(v == "N/A")) if isinstance(v, str) else body(v))
        out.append(b"u")
        return b"".join(out)


def main():
    args = sys.argv[1:]
    memo = Memo() if args[:1] == ["--memo"] else None
    if memo:
        args = args[1:]
    if len(args) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    src, copies, out = args[0], int(args[1]), args[2]
    d = pickle.loads(gzip.decompress(open(src, "rb").read()))
    hist = d["device_traces"][0]
    ts = [e["time_us"] for e in hist if "time_us" in e]
    span = (max(ts) - min(ts) + 1) if ts else 0
    last = max(ts) if ts else 0
    live, segs = {}, {}
    for e in hist:
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = e
        elif a == "free_completed":
            live.pop(e["addr"], None)
        elif a == "segment_alloc":
            segs[e["addr"]] = e
        elif a == "segment_free":
            segs.pop(e["addr"], None)
    tail = []  # the copy's end: its live blocks freed, then its segments released
    for b in sorted(live.values(), key=lambda e: e["addr"]):
        for a in ("free_requested", "free_completed"):
            tail.append(dict(b, action=a, time_us=last))
    # (in the order PyTorch releases them: the large pool, then the small (2 MiB segments), each by
    # stream, size, address)
    for g in sorted(segs.values(), key=lambda e: (e["size"] == 2 << 20, e["stream"], e["size"], e["addr"])):
        tail.append(dict(g, action="segment_free", time_us=last))
    opener = gzip.open if out.endswith(".gz") else open
    with opener(out, "wb") as f:
        if memo:
            f.write(b"\x80\x04}" + memo.put() + b"(" + memo.string("segments") + b"]" + memo.put() +
                    memo.string("device_traces") + b"]" + memo.put() + b"]" + memo.put())
        else:
            f.write(b"\x80\x04}(" + body("segments") + b"]" + body("device_traces") + b"]]")
        for i in range(copies):
            chunk = [b"("]
            for e in hist + tail:
                e2 = dict(e)
                if "addr" in e2:
                    e2["addr"] += i << 40
                if "time_us" in e2:
                    e2["time_us"] += i * span
                chunk.append(memo.entry(e2) if memo else body(e2))
            chunk.append(b"e")  # APPENDS to the device's list
            f.write(b"".join(chunk))
        f.write(b"a")  # the device's list into device_traces
        f.write(body("allocator_settings") + body(d.get("allocator_settings", {})) + b"u.")


if __name__ == "__main__":
    main()
