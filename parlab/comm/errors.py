"""What can go wrong in a launch, each error naming the rank and what it was doing."""

from __future__ import annotations

import re

# what gloo (and the OS) say when the other end of a connection has gone
_CONNECTION_LOST = re.compile(r"Connection (reset|closed|refused)|Broken pipe|Socket closed|"
                              r"ECONNRESET|EPIPE", re.IGNORECASE)


def connection_lost(text: str) -> bool:
    """Whether an error's text says a connection to another rank broke (its process ended)."""
    return bool(_CONNECTION_LOST.search(text))


class CommError(RuntimeError):
    """Base class of the errors a launch raises in the caller."""


class RankError(CommError):
    """A rank raised an exception. ``rank``, ``exc_type`` (its class name), ``remote_traceback``
    (the text of that rank's traceback); ``__cause__`` is the exception itself when it could be
    sent back."""

    def __init__(self, message: str, rank: int, exc_type: str = "", remote_traceback: str = ""):
        super().__init__(message)
        self.rank = rank
        self.exc_type = exc_type
        self.remote_traceback = remote_traceback


class RankDied(CommError):
    """A rank's process ended without reporting a result (killed, ``os._exit``, a crash)."""

    def __init__(self, message: str, rank: int, exitcode: int | None):
        super().__init__(message)
        self.rank = rank
        self.exitcode = exitcode


class CommTimeout(CommError, TimeoutError):
    """Some rank waited in a communication call longer than the launch's timeout: a deadlock
    (a recv nobody sends to, ranks calling different collectives) or a rank that never came."""

    def __init__(self, message: str, stuck: list[int]):
        super().__init__(message)
        self.stuck = stuck


class CollectiveMismatch(ValueError):
    """Raised on a rank that received a message from a different collective, or from the same
    collective called with a different shape, dtype, op, root or algorithm."""


class UnreceivedMessage(RuntimeError):
    """Raised on a rank that returned from its function while a message sent to it was never
    received: a send without a matching recv, or ranks that called different collectives."""


class PeerGone(ConnectionError):
    """Raised on a rank whose peer closed its connection (the peer ended or died), or returned
    from its function while this rank waited for it. ``peer``: that rank in the launch, when
    known (the launcher uses it to blame the peer's own failure, if it had one)."""

    def __init__(self, message: str = "", peer: int | None = None):
        super().__init__(message)
        self.peer = peer

    def __str__(self) -> str:
        return self.args[0] if self.args else ""

    def __reduce__(self):
        return (type(self), (str(self), self.peer))
