"""``World(n)``: a warm set of ranks that runs many functions without restarting processes.

    from parlab.comm import World

    with World(4, backend="local") as world:
        world.run(fn, 1000)                 # -> [result of rank 0, ..., rank 3], like launch
        world.run(other_fn)                 # same processes: no start-up, no torch re-import

The ranks are started once (``launch``'s ``_Launch``: the same arena, sockets, process groups
and watchdog); each ``run`` sends the function by value (cloudpickle, so notebook cells work)
and each rank runs it on a *fresh* communicator over the same links (sequence numbers and
traffic counters start at zero; sub-groups of an earlier run are gone). At the end of a run
every rank checks, as under ``launch``, that nothing was left undelivered (the local engine
exchanges an end-of-run frame with each peer; the torch backend reads its ledger).

A run that fails raises what ``launch`` raises (RankError with the rank and its traceback,
RankDied, CommTimeout, PeerGone, CollectiveMismatch, UnreceivedMessage), and the whole set of
ranks is ended at once; the next ``run`` starts a fresh set (a failed rank's links are in an
unknown state, so all are replaced, never one). Ctrl-C during ``run`` does the same: the ranks
are killed and freed, the KeyboardInterrupt goes on, and the world stays usable (its next run
starts a fresh set). ``close()``, the end of a ``with`` block, the world's garbage collection
and interpreter exit (``weakref.finalize``) end the ranks; nothing is left behind: no process,
no memfd, no store directory.

One function at a time: ``run`` (and ``start``) called while the world is running a function,
from another thread, raises RuntimeError at once, naming the thread that holds it (the ranks
serve one function each turn; two threads sending to them at once would interleave). Guard a
World shared by threads with a lock, or give each thread its own. ``close()`` from another
thread waits for the running function to end.

A rank that died between runs (killed, the OOM killer, ``os._exit`` from a thread the last
function left behind) is found before the next function is sent: nothing of that function has
run, so the whole set is replaced and the run proceeds on fresh ranks, with a RuntimeWarning
saying which rank died, how, and when (after which run). A rank that dies once the function has
been sent is a death during the run: RankDied, as above.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
import warnings
import weakref
from typing import Any

from . import shm
from .interrupts import DeferredInterrupts
from .launch import DEFAULT_CAPACITY, _checked, _code_index, _Launch, _relay
from .wire import send_obj


class _Ranks:
    """What the finalizer holds (never the World itself): the running set, or None."""

    def __init__(self) -> None:
        self.launch: _Launch | None = None

    def end(self) -> None:
        launch, self.launch = self.launch, None
        if launch is None:
            return
        interrupts = DeferredInterrupts()
        try:
            launch.cleanup()
        finally:
            interrupts.restore()


class World:
    """``n`` warm ranks on ``backend`` ('local' or 'torch'); ``timeout`` and ``capacity`` as in
    ``launch``. The ranks start at the first ``run`` (or ``start()``)."""

    def __init__(self, n: int, backend: str = "local", timeout: float = 60.0,
                 capacity: int = DEFAULT_CAPACITY):
        self.n, self.timeout, self.capacity = _checked(print, n, backend, timeout, capacity, False)
        self.backend = backend
        self.runs = 0  # functions run
        self.starts = 0  # sets of ranks started (1 + the replacements after failures)
        self._ranks = _Ranks()
        self._closed = False
        self._lock = threading.Lock()  # held for a whole run (or start); see _turn
        self._holder: tuple[int, str] = (0, "")  # the thread holding it (ident, name); 0: none
        self._last = (0.0, "")  # when the current set last finished something, and what
        self._finalizer = weakref.finalize(self, self._ranks.end)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._ranks.launch else "not started"
        return f"World({self.n}, backend={self.backend!r}, {state}, runs={self.runs})"

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def world_size(self) -> int:
        return self.n

    def start(self) -> None:
        """Start the ranks now (``run`` does it when they are not running)."""
        with self._turn("start"):
            self._start()

    def _turn(self, what: str) -> _Turn:
        """The world for one call (``run``, ``start``): RuntimeError if another call holds it."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(f"World.{what}: this World is already running a function (called from thread "
                               f"{self._holder[1]!r}); a World runs one function at a time: call it from one "
                               "thread, guard it with a lock, or make one World per thread")
        self._holder = (threading.get_ident(), threading.current_thread().name)
        return _Turn(self)

    def _start(self) -> None:
        if self._closed:
            raise RuntimeError("this World is closed; make a new one")
        if self._ranks.launch is not None:
            return
        interrupts = DeferredInterrupts()
        launch = None
        try:
            launch = _Launch(self.n, self.backend, self.timeout,
                             self.capacity if self.backend == "local" else 0, False)
            launch.warm = True
            launch.start(b"")
            with interrupts.allowed():
                launch.run()  # every rank reports ready (backend set up) or its failure
            self._ranks.launch, launch = launch, None
            self.starts += 1
            self._last = (time.monotonic(), "the ranks started")
        except BaseException as err:
            traceback.clear_frames(err.__traceback__)
            raise
        finally:
            try:
                if launch is not None:
                    launch.cleanup()
            finally:
                interrupts.restore()

    def run(self, fn, *args: Any) -> list:
        """Run ``fn(comm, *args)`` on every rank; return the list of results (rank order)."""
        if not callable(fn):
            raise TypeError(f"fn must be a function fn(comm, *args), got {type(fn).__name__}")
        import cloudpickle

        try:
            payload = cloudpickle.dumps((fn, args))
        except Exception as err:
            raise TypeError(f"World.run could not serialise the function or its arguments: {err}") from err
        with self._turn("run"):
            self._start()
            if (dead := self._dead_rank()) is not None:  # nothing of this run was sent yet
                self._ranks.end()
                self._start()
                warnings.warn(f"{dead}; World replaced the whole set of ranks and runs the function on "
                              "fresh ones", RuntimeWarning, stacklevel=2)
            return self._run(payload, fn, args)

    def _dead_rank(self) -> str | None:
        """How the first rank of the running set that has ended since the last run ended, or None."""
        launch = self._ranks.launch
        for rank in range(launch.n):
            if launch._ended(rank):
                code = launch.procs[rank].wait()
                how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
                at, what = self._last
                return (f"rank {rank} (pid {launch.procs[rank].pid}) {how} between runs: after {what}, "
                        f"within the {time.monotonic() - at:.1f} s before this run")
        return None

    def _run(self, payload: bytes, fn, args) -> list:
        launch = self._ranks.launch
        interrupts = DeferredInterrupts()
        ok = False
        try:
            launch.sources = _code_index((fn, *args))
            _rearm(launch.arena)
            for ctrl in launch.ctrl:
                try:
                    send_obj(ctrl, ("run", payload))
                except OSError:  # it died after _dead_rank looked: the run reports it (RankDied)
                    pass
            with interrupts.allowed():
                results = launch.run()
            ok = True
            self.runs += 1
            self._last = (time.monotonic(), f"run {self.runs} ended")
            return results
        except BaseException as err:
            traceback.clear_frames(err.__traceback__)
            raise
        finally:
            try:
                if ok:
                    _relay_output(launch)
                else:  # a failure or Ctrl-C: the whole set goes; the next run starts a new one
                    self._ranks.end()
            finally:
                interrupts.restore()

    def close(self) -> None:
        """End the ranks and free everything (idempotent). From another thread than the one
        running a function, it waits for that function to end."""
        mine = self._holder[0] == threading.get_ident()  # closed from inside its own run (a handler)
        held = not mine and self._lock.acquire()
        try:
            self._closed = True
            self._finalizer()
        finally:
            if held:
                self._lock.release()

    @property
    def closed(self) -> bool:
        return self._closed


class _Turn:
    """Gives the world's lock back at the end of a ``with`` block (``World._turn`` has taken it)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        self.world._holder = (0, "")
        self.world._lock.release()


def _rearm(arena: shm.Arena) -> None:
    """Every status row leaves "done" before any rank starts: a rank must never take a peer's
    state from the previous run for "returned" (the torch backend's ledger reads it). (No view
    of the arena is kept in a local: a kept exception's frames would keep it mapped.)"""
    now = time.monotonic()
    arena.status[:, shm.T_ENTER] = now
    arena.status[:, shm.T_PROGRESS] = now
    arena.status[:, shm.STATE] = shm.STARTING


def _relay_output(launch: _Launch) -> None:
    """Print what the ranks wrote during the run (rank by rank), as launch does at its end."""
    for key in list(launch.sel.get_map().values()):
        kind, rank = key.data
        if kind != "ctrl":
            launch._drain(key.fileobj, kind, rank)
            os.set_blocking(key.fileobj.fileno(), True)  # select then read, as the run expects
    for rank in range(launch.n):
        _relay(rank, b"".join(launch.out[rank]), sys.stdout)
        _relay(rank, b"".join(launch.err[rank]), sys.stderr)
        launch.out[rank].clear()
        launch.err[rank].clear()


