"""What a communicator moved: messages and bytes per operation kind, and an optional timeline.

Every send and receive is counted under the operation it belongs to (``'p2p'`` for the user's
own send/recv, ``'all_reduce'`` for the steps of an all-reduce, ...), so a chapter can print the
measured traffic beside the cost model (a ring all-reduce sends 2(n-1)/n of the data per rank).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace


@dataclass
class Traffic:
    """Counters for one operation kind on one rank. For the torch backend's native collectives
    the counts are nominal (those of a ring, as torch does not report its own)."""

    calls: int = 0
    msgs_sent: int = 0
    bytes_sent: int = 0
    msgs_recv: int = 0
    bytes_recv: int = 0
    nominal: bool = False


@dataclass(frozen=True)
class Event:
    """One interval on a rank's timeline: a collective (kind='op') or one of its messages
    (kind='send' / 'recv', with the peer's rank in the communicator). Times are seconds since
    the launch started (a clock shared by all ranks of the machine)."""

    op: str
    kind: str
    start: float
    end: float
    peer: int | None = None
    nbytes: int = 0
    seq: int = 0


@dataclass
class Accounting:
    t0: float = field(default_factory=time.monotonic)
    by_op: dict[str, Traffic] = field(default_factory=dict)
    timeline: list[Event] | None = None  # a list while recording

    def now(self) -> float:
        return time.monotonic() - self.t0

    def counter(self, op: str) -> Traffic:
        t = self.by_op.get(op)
        if t is None:
            t = self.by_op[op] = Traffic()
        return t

    def message(self, op: str, kind: str, nbytes: int, peer: int, start: float, seq: int) -> None:
        t = self.counter(op)
        if kind == "send":
            t.msgs_sent += 1
            t.bytes_sent += nbytes
        else:
            t.msgs_recv += 1
            t.bytes_recv += nbytes
        if self.timeline is not None:
            self.timeline.append(Event(op, kind, start, self.now(), peer, nbytes, seq))

    def snapshot(self) -> dict[str, Traffic]:
        return {k: replace(v) for k, v in self.by_op.items()}
