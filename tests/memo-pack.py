#!/usr/bin/env python3
# memo-pack.py N - a snapshot pickle whose memo pages the reader packs (src/readers/pickle.c, memo_pack):
# N trace entries, each action a new memoized 'alloc' string (a page of them holds one interned
# string), then four entries that GET a packed slot, PUT into one (which unpacks its page), and GET a
# restored slot and the slot PUT. tests/spool-long.sh replays it: N + 4 allocations.
import io, pickle, sys
def body(o):
    f = io.BytesIO(); p = pickle.Pickler(f, protocol=4); p.fast = True; p.dump(o)
    b = f.getvalue()[2:-1]
    return b[9:] if b[:1] == b"\x95" else b
n, memo, keys = 0, 0, {}
def put():
    global memo; memo += 1; return b"\x94"
def string(v):  # a fresh object each time, memoized
    i = memo; return body(v) + put(), i
def key(k):
    if k in keys: return b"j" + keys[k].to_bytes(4, "little")
    keys[k] = memo; return body(k) + put()
def entry(action, addr, t):
    out = [b"}", put(), b"("]
    out.append(key("action"))
    out.append(action())
    out += [key("addr"), body(addr), key("size"), body(512), key("stream"), body(0),
            key("time_us"), body(t), b"u"]
    return b"".join(out)
N = int(sys.argv[1])
out = [b"\x80\x04}", put(), b"(", key("segments"), b"]", put(), key("device_traces"), b"]", put(), b"]", put()]
slots = []
for i in range(N):
    if i % 1000 == 0: out.append(b"(")
    def fresh():
        s, idx = string("alloc"); slots.append(idx); return s
    out.append(entry(fresh, 0x7f0000000000 + i * 512, 1000 + i))
    if i % 1000 == 999 or i == N - 1: out.append(b"e")
k1, k2, k3 = slots[5000], slots[5001], slots[5002]
out.append(b"(")
out.append(entry(lambda: b"j" + k1.to_bytes(4, "little"), 0x7e0000000000, 10 ** 7))           # GET of a packed slot
out.append(entry(lambda: body("alloc") + b"r" + k2.to_bytes(4, "little"), 0x7e0000001000, 10 ** 7 + 1))  # PUT into it: unpacks
out.append(entry(lambda: b"j" + k3.to_bytes(4, "little"), 0x7e0000002000, 10 ** 7 + 2))       # a restored slot
out.append(entry(lambda: b"j" + k2.to_bytes(4, "little"), 0x7e0000003000, 10 ** 7 + 3))       # the slot PUT
out.append(b"e")
out.append(b"a" + body("allocator_settings") + body({"PYTORCH_CUDA_ALLOC_CONF": ""}) + b"u.")
sys.stdout.buffer.write(b"".join(out))
