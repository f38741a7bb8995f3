"""A stand-in for CuPy on machines without a GPU, for tests of scripts/replay_cupy.py: the memory
pool of cupy/cuda/memory.pyx (v14.2.0) ported to Python, over a pretend device whose cudaMalloc
hands out increasing addresses and fails above FAKE_CUPY_CAPACITY bytes (0 or unset: never).
Free chunks of one size are taken in order of id() of the chunk object, as CuPy's std::set of
(size, _Chunk address) does (FAKE_CUPY_TIE=oldest or address: by creation or by device address)."""
from . import cuda  # noqa: F401
__version__ = "14.2.0-fake"
