import bisect
import gc
import os

UNIT = 512
_state = {"next": 1 << 40, "reserved": 0, "cap": int(os.environ.get("FAKE_CUPY_CAPACITY", "0") or 0), "stream": 0}


class CUDARuntimeError(RuntimeError):
    status = 2  # cudaErrorMemoryAllocation


class OutOfMemoryError(MemoryError):
    pass


class Stream:
    _n = 0

    def __init__(self, non_blocking=False):
        Stream._n += 1
        self.ptr = 0x1000 * Stream._n

    def use(self):
        _state["stream"] = self.ptr
        return self


Stream.null = Stream.__new__(Stream)
Stream.null.ptr = 0


class Memory:
    def __init__(self, size):
        if _state["cap"] and _state["reserved"] + size > _state["cap"]:
            raise CUDARuntimeError("cudaErrorMemoryAllocation")
        self.ptr, self.size = _state["next"], size
        _state["next"] += (size + (1 << 21) - 1) >> 21 << 21
        _state["reserved"] += size

    def __del__(self):
        _state["reserved"] -= self.size


class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset


def _malloc(size):
    return MemoryPointer(Memory(size), 0)


_TIE = os.environ.get("FAKE_CUPY_TIE", "id")  # id: id() of the chunk object; oldest; address
_serial = [0]


class _Chunk:
    __slots__ = ("mem", "offset", "size", "arena", "prev", "next", "key")

    def __init__(self, mem, offset, size, arena):
        self.mem, self.offset, self.size, self.arena = mem, offset, size, arena
        self.prev = self.next = None
        _serial[0] += 1
        self.key = id(self) if _TIE == "id" else _serial[0] if _TIE == "oldest" else mem.ptr + offset

    def ptr(self):
        return self.mem.ptr + self.offset

    def split(self, size):
        if self.size == size:
            return None
        rem = _Chunk(self.mem, self.offset + size, self.size - size, self.arena)
        self.size = size
        if self.next is not None:
            rem.next = self.next
            rem.next.prev = rem
        self.next = rem
        rem.prev = self
        return rem

    def merge_next(self):
        self.next.arena = None
        self.size += self.next.size
        self.next = self.next.next
        if self.next is not None:
            self.next.prev = self


class _Arena:
    def __init__(self):
        self.index = []  # sorted (size, id, chunk)

    def insert_chunk(self, c, merge=True):
        if merge:
            while c.next is not None and self.try_remove(c.next):
                c.merge_next()
            while c.prev is not None and self.try_remove(c.prev):
                c = c.prev
                c.merge_next()
        bisect.insort(self.index, (c.size, c.key, c))

    def try_remove(self, c):
        i = bisect.bisect_left(self.index, (c.size, c.key))
        if i < len(self.index) and self.index[i][2] is c:
            del self.index[i]
            return True
        return False

    def get_chunk(self, size):
        i = bisect.bisect_left(self.index, (size, 0))
        if i == len(self.index):
            return None
        c = self.index.pop(i)[2]
        rem = c.split(size)
        if rem is not None:
            self.insert_chunk(rem, merge=False)
        return c

    def free_all(self):
        freed, keep = 0, []
        for e in self.index:
            c = e[2]
            if c.prev is None and c.next is None:
                c.arena = None
                freed += c.size
            else:
                keep.append(e)
        self.index = keep
        return freed


class PooledMemory:
    def __init__(self, chunk, pool):
        self.chunk, self.pool, self.ptr, self.size = chunk, pool, chunk.ptr(), chunk.size

    def __del__(self):
        self.pool._free(self.chunk)


class MemoryPool:
    def __init__(self, allocator=None):
        self._allocator = allocator or _malloc
        self._arenas = {}
        self._total = self._used = self._limit = 0

    def set_limit(self, size=None, fraction=None):
        self._limit = int(size or 0)

    def used_bytes(self):
        return self._used

    def total_bytes(self):
        return self._total

    def _arena(self, s):
        return self._arenas.setdefault(s, _Arena())

    def free_all_blocks(self, stream=None):
        for a in list(self._arenas.values()):
            self._total -= a.free_all()

    def _block(self, size):
        lim = self._limit or (1 << 64) - 1
        if size > lim:
            raise OutOfMemoryError(size)
        if self._total <= lim - size:
            self._total += size
            return True
        return False

    def _try_malloc(self, size):
        ok = self._block(size)
        if not ok:
            self.free_all_blocks()
            ok = self._block(size)
        if not ok:
            gc.collect()
            self.free_all_blocks()
            ok = self._block(size)
        if not ok:
            raise OutOfMemoryError(size)
        for i in range(3):
            try:
                return self._allocator(size).mem
            except CUDARuntimeError:
                if i == 2:
                    self._total -= size
                    raise OutOfMemoryError(size)
                self.free_all_blocks()

    def malloc(self, size):
        size = (size + UNIT - 1) // UNIT * UNIT
        if size == 0:
            return MemoryPointer(Memory(0), 0)
        arena = self._arena(_state["stream"])
        c = arena.get_chunk(size)
        if c is None:
            c = _Chunk(self._try_malloc(size), 0, size, arena)
        self._used += c.size
        return MemoryPointer(PooledMemory(c, self), 0)

    def _free(self, c):
        self._used -= c.size
        c.arena.insert_chunk(c)
