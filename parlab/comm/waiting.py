"""How a local-backend rank waits: spin only where a spin can pay, then sleep on a real event.

A rank that waits for a peer can spin (look again and again, yielding the core) or block (let
the kernel wake it when the peer's bytes arrive). Spinning wins while every rank has a core of
its own: the wake-up costs microseconds a spin does not. It loses badly when ranks outnumber
the free cores (4 ranks on a 2-core laptop with a browser open): the spinner holds the core the
peer it waits for needs, so every step of a ring waits for the scheduler's time slice. gloo
always blocks, and wins there. So (MPICH and Open MPI's shared-memory transports do the same:
a bounded spin, then a blocking wait):

- ``WaitPolicy`` spins for ``spin_s`` only when the ranks fit the cores this process may use
  (``os.sched_getaffinity``), and watches its own spins: when fewer than a quarter of the last
  ``WINDOW`` spins saw the event arrive (the cores are busy with other work: load, not ranks),
  it stops spinning for the next ``REST`` waits, then tries again; and it does not spin while
  more tasks are runnable on the machine than it has cores (``/proc/loadavg``'s running count,
  read at each wait that would spin: 4 µs): then a spin only keeps a runnable task, perhaps
  the very peer it waits for, off a core;
- a rank's communication thread (``progress``) does not spin while its caller computes: the
  caller needs the core; only while the caller waits for it;
- ``futex_wait`` / ``futex_wake`` block on a 32-bit word of the shared arena (Linux's futex on
  a shared mapping: the waiter sleeps until a peer that changed the word wakes it), for the
  ``shm_direct`` counters, which have no socket to poll; where there is no futex it sleeps in
  short steps (200 µs at most) instead.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
import time
from collections.abc import Callable

import numpy as np

from . import tuning
from .progress import caller_computes

WINDOW = 64  # spins judged together
REST = 1024  # waits without spinning once spinning has stopped paying
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1  # shared (not FUTEX_PRIVATE_FLAG): the word is in a shared mapping
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower())


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)  # pragma: no cover - macOS


@functools.cache
def _loadavg_fd() -> int | None:
    """An open descriptor of /proc/loadavg, opened once (None: none on this system)."""
    try:
        return os.open("/proc/loadavg", os.O_RDONLY)
    except OSError:
        return None


def runnable_tasks() -> int | None:
    """Tasks running or waiting for a core on the whole machine at this instant (the 4th field
    of Linux's /proc/loadavg, "running/total"); None where the system does not say."""
    fd = _loadavg_fd()
    if fd is None:
        return None
    try:
        return int(os.pread(fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):  # pragma: no cover - an unexpected format
        return None


class WaitPolicy:
    """One rank's choice, wait by wait, between spinning first and blocking at once."""

    def __init__(self, ranks: int, spin_s: float | None = None, cores: int | None = None,
                 runnable: Callable[[], int | None] = runnable_tasks):
        cores = usable_cores() if cores is None else cores
        spin_s = tuning.read().spin_s if spin_s is None else spin_s  # PARLAB_SPIN
        self.spin_s = spin_s if ranks <= cores else 0.0  # oversubscribed: never spin
        self.cores, self.runnable = cores, runnable
        self.oversubscribed = ranks > cores
        self.spins = self.hits = 0
        self.resting = 0  # waits left without a spin

    def budget(self) -> float:
        """Seconds to spin before blocking, for the wait about to start."""
        if caller_computes():
            return 0.0  # a communication thread, while its caller computes on these cores
        if self.resting:
            self.resting -= 1
            return 0.0
        if self.spin_s and (busy := self.runnable()) is not None and busy > self.cores:
            return 0.0  # another task waits for a core: the spin would keep it waiting
        return self.spin_s

    def spun(self, hit: bool) -> None:
        """The spin just made saw the event (``hit``) or gave up and blocked."""
        self.spins += 1
        self.hits += hit
        if self.spins == WINDOW:
            if 4 * self.hits < WINDOW:  # spinning mostly burnt the core a peer needed
                self.resting = REST
            self.spins = self.hits = 0


def _syscall():
    if _SYS_FUTEX is None or not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None
    fn = libc.syscall
    fn.restype = ctypes.c_long
    return fn


_syscall_fn = _syscall()
HAVE_FUTEX = _syscall_fn is not None


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def futex_word(counter: np.ndarray) -> int:
    """The address of the low 32 bits of a one-element int64 counter in shared memory (little
    endian: the bits that change on every increment)."""
    assert counter.dtype == np.int64 and sys.byteorder == "little"
    return counter.ctypes.data


def futex_wait(address: int, expected: int, timeout_s: float) -> None:
    """Sleep until the 32-bit word at ``address`` is woken, while it still holds ``expected``
    (low 32 bits), for at most ``timeout_s``. Returns at once if the word has changed already:
    no wake-up is lost between the caller's last look and the sleep."""
    if _syscall_fn is None:  # pragma: no cover - no futex: a short sleep
        time.sleep(min(timeout_s, 200e-6))
        return
    ts = _Timespec(int(timeout_s), int((timeout_s % 1) * 1e9))
    _syscall_fn(_SYS_FUTEX, ctypes.c_void_p(address), _FUTEX_WAIT,
                ctypes.c_uint32(expected & 0xFFFFFFFF), ctypes.byref(ts), None, 0)


def futex_wake(address: int) -> None:
    """Wake every rank sleeping on the 32-bit word at ``address``."""
    if _syscall_fn is not None:
        _syscall_fn(_SYS_FUTEX, ctypes.c_void_p(address), _FUTEX_WAKE, 0x7FFFFFFF, None, None, 0)
