from . import memory  # noqa: F401
from .memory import MemoryPool, Stream  # noqa: F401
