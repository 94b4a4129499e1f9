"""Shared memory for one launch: an anonymous arena (status table + one ring per ordered pair).

The arena is a single file descriptor made by the launcher and inherited by the workers, never a
name: ``os.memfd_create`` on Linux (no /dev/shm entry at all, and no /dev/shm size limit, which
is 64 MB in a default Docker container); elsewhere a POSIX segment named
``parlab-<pid>-<random>`` that is unlinked the moment it is created. Either way the kernel frees
the memory when the last process holding it exits, however it exits, and two launches can never
see each other's data: each has its own anonymous file.

Layout: a status table of ``STATUS_FIELDS`` float64 per rank (what each rank is doing, read by
the launcher's watchdog), one cache line per ordered pair (src, dst) where the receiver
publishes how far it has read that pair's ring, both padded to a page; then ``n * (n - 1)``
rings of ``capacity`` bytes, one per ordered pair; then (local backend) two *windows* of
``capacity`` bytes per rank, which every rank may read: the ``shm_direct`` all-reduce stages its
chunks there (``parlab.comm.direct``). Rank r's barrier counter for it is slot BARRIER of the
unused diagonal line (r, r); the line's other slots carry what ``shm_direct`` tells the peers
about the rank's own memory (its pid, where its buffer is: ``Arena.line``). After the lines,
``RECORDS`` signature records per rank: the signature of each ``shm_direct`` collective the rank
enters, which its peers compare with their own before they touch its bytes (``Arena.records``).
"""

from __future__ import annotations

import errno
import mmap
import os
import secrets
import time

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None

import numpy as np

PAGE = 4096
STATUS_FIELDS = 8
# status fields
STATE, OP, PEER, SEQ, T_ENTER, T_PROGRESS, CTX, ALGO = range(STATUS_FIELDS)
# states
STARTING, RUNNING, IN_OP, WAITING, FINISHING, EXITING, DONE = range(7)
STATE_NAMES = ("starting", "running its own code", "in", "waiting in", "finishing",
               "returned from its function, waiting for the others to return", "done")


LINE = 64  # bytes per read position: one cache line each, so no two ranks write the same line


RECORDS, RECORD = 4, 16  # signature records per rank, int64 each (by shm_direct collective, in turn)


def _header_size(world_size: int) -> int:
    n = world_size
    return -(-(n * STATUS_FIELDS * 8 + n * n * LINE + n * RECORDS * RECORD * 8) // PAGE) * PAGE


BARRIER = 4  # slot of line (r, r): rank r's shm_direct barrier generation


def arena_size(world_size: int, capacity: int) -> int:
    return _header_size(world_size) + (world_size * (world_size - 1) + 2 * world_size) * capacity


def _too_big(size: int, limit: int) -> OSError:
    return OSError(errno.EFBIG, f"the launch's shared-memory arena needs {size} bytes but this "
                   f"process may not make a file larger than {limit} bytes (RLIMIT_FSIZE, "
                   f"`ulimit -f`): raise the limit (`ulimit -f unlimited`) or pass a smaller "
                   f"capacity= or fewer ranks")


def create_fd(size: int) -> int:
    """An anonymous shared-memory file of ``size`` bytes (zero pages, allocated on first touch).
    A file-size limit (RLIMIT_FSIZE) below it is refused before the file grows (growing past it
    raises SIGXFSZ, which kills a process that does not ignore it) with one OSError line."""
    size = max(size, PAGE)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0] if resource else -1
    if 0 <= limit < size:  # RLIM_INFINITY is -1 here
        raise _too_big(size, limit)
    name = f"parlab-{os.getpid()}-{secrets.token_hex(6)}"
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, 0)
    else:  # pragma: no cover - macOS / BSD
        import _posixshmem

        fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        _posixshmem.shm_unlink("/" + name)
    try:
        os.ftruncate(fd, size)
    except OSError as err:
        os.close(fd)
        if err.errno == errno.EFBIG:
            raise _too_big(size, limit) from None
        raise
    except BaseException:
        os.close(fd)
        raise
    return fd


class Arena:
    """A mapping of the launch's arena: ``status`` (world_size, STATUS_FIELDS) and ``ring(src, dst)``."""

    def __init__(self, fd: int, world_size: int, capacity: int):
        self.world_size, self.capacity = world_size, capacity
        self._map = mmap.mmap(fd, max(arena_size(world_size, capacity), PAGE))
        buf = np.frombuffer(self._map, np.uint8)
        n, s = world_size, world_size * STATUS_FIELDS * 8
        self.status = buf[:s].view(np.float64).reshape(n, STATUS_FIELDS)
        self._read = buf[s:s + n * n * LINE].view(np.int64).reshape(n, n, LINE // 8)
        s += n * n * LINE
        self._records = buf[s:s + n * RECORDS * RECORD * 8].view(np.int64).reshape(n, RECORDS, RECORD)
        self._rings = buf[_header_size(n):]

    def read_pos(self, src: int, dst: int) -> np.ndarray:
        """A one-element int64 view: how far ``dst`` has read the ring from ``src``."""
        return self._read[src, dst, :1]

    def ring(self, src: int, dst: int) -> np.ndarray:
        """The ``capacity`` bytes that carry messages from ``src`` to ``dst``."""
        n, c = self.world_size, self.capacity
        i = src * (n - 1) + (dst if dst < src else dst - 1)
        return self._rings[i * c:(i + 1) * c]

    def window(self, rank: int, k: int) -> np.ndarray:
        """Rank ``rank``'s window ``k`` (0 or 1): ``capacity`` bytes it writes, all ranks read."""
        n, c = self.world_size, self.capacity
        i = n * (n - 1) + 2 * rank + k
        return self._rings[i * c:(i + 1) * c]

    def barrier_count(self, rank: int) -> np.ndarray:
        """A one-element int64 view: how many shm_direct barriers ``rank`` has entered."""
        return self._read[rank, rank, BARRIER:BARRIER + 1]

    def line(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s own line (LINE // 8 int64): it writes, every rank reads. Slot BARRIER
        is its barrier counter; ``parlab.comm.direct`` names the others."""
        return self._read[rank, rank]

    def records(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s (RECORDS, RECORD) int64 signature records: it writes, every rank reads."""
        return self._records[rank]

    def close(self) -> None:
        self.status = self._rings = self._read = self._records = None
        try:
            self._map.close()
        except BufferError:  # a view is still alive somewhere; the kernel frees it at exit
            pass


class Status:
    """One rank's row of the status table: what it is doing, for the watchdog and for errors."""

    def __init__(self, row: np.ndarray | None):
        self.row = row if row is not None else np.zeros(STATUS_FIELDS)

    def set(self, state: int, op: int = -1, seq: int = -1, ctx: int = 0, algo: int = 0) -> None:
        now = time.monotonic()
        r = self.row
        r[OP], r[SEQ], r[CTX], r[ALGO], r[PEER] = op, seq, ctx, algo, -1
        r[T_ENTER] = r[T_PROGRESS] = now
        r[STATE] = state

    def waiting(self, peer: int) -> None:
        self.row[PEER] = peer
        self.row[STATE] = WAITING

    def working(self) -> None:
        self.row[STATE] = IN_OP

    def progress(self) -> None:
        self.row[T_PROGRESS] = time.monotonic()
