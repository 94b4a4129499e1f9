"""Ctrl-C during a launch: taken only while the launch waits, held back while it starts or cleans up.

A notebook kernel survives a KeyboardInterrupt, so whatever a launch had made when the
interrupt arrived must still be freed: a ``KeyboardInterrupt`` raised between ``Popen``
returning and the child being recorded loses the child (a zombie, or a running worker), one
raised in the middle of clean-up leaves the rest undone. So while a launch owns processes and
descriptors, SIGINT goes to a handler that only notes it; it is delivered (the previous
handler runs, by default raising ``KeyboardInterrupt``) where nothing can be lost: in the
wait for results (``allowed()``), or after clean-up (``restore()``).

Python runs signal handlers in the main thread only, so only a launch in the main thread
installs the handler; a launch in another thread never receives a KeyboardInterrupt.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class DeferredInterrupts:
    """Install at the start of a launch; ``allowed()`` around the wait; ``restore()`` at the end."""

    def __init__(self) -> None:
        self.pending = False  # a Ctrl-C came while it could not be taken
        self._open = False
        self._old = None
        self._installed = False
        if threading.current_thread() is not threading.main_thread():
            return
        old = signal.getsignal(signal.SIGINT)
        if old is signal.SIG_IGN or old is None:  # ignored stays ignored; None: a C handler
            return
        self._old = old
        # signal.signal runs any pending handler *before* the swap, so a KeyboardInterrupt
        # either comes before anything was made or is noted by _handler from here on
        signal.signal(signal.SIGINT, self._handler)
        self._installed = True

    def _handler(self, signum: int, frame) -> None:
        if self._open:
            self._open = False  # a second Ctrl-C lands in the clean-up: note it
            self._deliver(signum, frame)
        else:
            self.pending = True

    def _deliver(self, signum: int, frame) -> None:
        if callable(self._old):
            self._old(signum, frame)  # default_int_handler raises KeyboardInterrupt
        else:  # SIG_DFL would end the caller without freeing anything: raise instead
            raise KeyboardInterrupt

    @contextmanager
    def allowed(self) -> Iterator[None]:
        """A Ctrl-C raises here (one noted earlier, during start-up, at once)."""
        if self.pending:
            self.pending = False
            self._deliver(signal.SIGINT, None)
        self._open = True
        try:
            yield
        finally:
            self._open = False

    def restore(self) -> None:
        """Put the caller's handler back; deliver a Ctrl-C noted meanwhile."""
        if not self._installed:
            return
        signal.signal(signal.SIGINT, self._old)  # runs _handler first if a signal is pending
        self._installed = False
        if self.pending:
            self.pending = False
            self._deliver(signal.SIGINT, None)
