"""Asynchronous communication: ``comm.all_reduce(x, async_op=True)`` returns a ``Work``.

One communication thread per rank (``Progress``, shared by the world communicator and its
sub-groups, since they share one engine or one process group) runs the operations issued with
``async_op=True`` one after another, in issue order, while the caller's thread computes: the
shared-memory copies and reductions (numpy) and gloo's socket calls release the GIL, so the
bytes move while torch or numpy compute in the caller (the overlap DDP relies on, Li et al.
2020, "PyTorch Distributed", section 3.2.3). A blocking call first waits for every operation
issued before it, so the order the ranks see is the order of the calls. An error in a
background operation is raised by its ``wait()``, and by the next call on any communicator of
the rank (every later operation fails with it: the rank's links are in an unknown state); one
that the function never saw ends the run when the function returns.

While the caller computes, the communication thread does not spin when it waits for a peer
(``waiting.WaitPolicy`` asks ``caller_computes``): on CPU ranks the caller's compute needs the
very core a spin would hold; while the caller waits in ``wait()`` or a blocking call, it may.

The arrays passed to an asynchronous call must not be changed (or, for ``out=``/inplace, read)
before ``wait()`` returns, as with torch.distributed's ``async_op=True``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

THREAD_NAME = "parlab-comm"
_waiting = [0]  # caller threads of this process blocked in Work.wait() or Progress.drain()
_waiting_lock = threading.Lock()


def caller_computes() -> bool:
    """On a communication thread, whether no caller thread of this process waits for it (so
    the caller computes, or is busy with anything but this thread's operations)."""
    return _waiting[0] == 0 and threading.current_thread().name == THREAD_NAME


def _blocked(wait: Callable[[], object]):
    """Run ``wait`` (a caller blocking on the communication thread), counted in ``_waiting``."""
    with _waiting_lock:
        _waiting[0] += 1
    try:
        return wait()
    finally:
        with _waiting_lock:
            _waiting[0] -= 1


class Work:
    """The handle of one asynchronous operation (torch.distributed's ``Work``)."""

    def __init__(self, what: str, progress: Progress | None = None):
        self.what, self._progress = what, progress
        self._done = threading.Event()
        self._result = None
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        state = "failed" if self._error else "completed" if self._done.is_set() else "pending"
        return f"Work({self.what}, {state})"

    def is_completed(self) -> bool:
        """Whether the operation has finished (successfully or not); never blocks."""
        return self._done.is_set()

    def wait(self):
        """Block until the operation has finished; return what the blocking call returns, or
        raise its error."""
        if not self._done.is_set():
            _blocked(self._done.wait)
        if self._error is not None:
            if self._progress is not None:
                self._progress.seen = True
            raise self._error
        return self._result

    def _finish(self, result=None, error: BaseException | None = None) -> None:
        self._result, self._error = result, error
        self._done.set()


class Progress:
    """One rank's communication thread and its FIFO queue of operations."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Callable[[], object], Work]] = deque()
        self._cond = threading.Condition()
        self._busy = 0  # operations queued or running
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.seen = False  # the error has reached the caller (at a wait() or a later call)
        self._closed = False

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, call: Callable[[], object], what: str) -> Work:
        if self.error is not None:
            self.seen = True
            raise self.error
        work = Work(what, self)
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True)
                self._thread.start()
            self._queue.append((call, work))
            self._busy += 1
            self._cond.notify_all()
        return work

    def drain(self, unseen_only: bool = False) -> None:
        """Wait until every operation issued so far has finished; raise the first error
        (``unseen_only``: only if the caller has not been given it yet)."""
        if self._busy:
            def until_idle():
                with self._cond:
                    while self._busy:
                        self._cond.wait()
            _blocked(until_idle)
        if self.error is not None and not (unseen_only and self.seen):
            self.seen = True
            raise self.error

    def close(self) -> None:
        """The run is over (a warm ``World`` makes a new communicator for the next one): the
        thread ends once its queue is empty, instead of waiting for work forever."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None and not self.on_thread():
            self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    if self._closed:
                        return
                    self._cond.wait()
                call, work = self._queue.popleft()
            if self.error is not None:  # an earlier operation failed: so does every later one
                work._finish(error=self.error)
            else:
                try:
                    work._finish(call())
                except BaseException as err:  # noqa: BLE001 - raised at wait() / the next call
                    self.error = err
                    work._finish(error=err)
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()
