"""How the ranks of an ``shm_direct`` collective agree on what they are doing before touching a peer's bytes.

A message of the local backend carries its collective's signature (``message.Signature``: op,
sequence number, dtype, shape, reduce op, root, algorithm), and its receiver compares it with
its own before it reduces or copies a byte. ``shm_direct`` reads the peers' windows (or their
memory, ``single_copy``) with no message, so the signature sits in the shared arena instead:
each rank writes it into its record for the collective (``Arena.records``: one per collective,
RECORDS in turn) before it publishes any counter of it, and a rank that has waited for a peer's
counter compares that peer's record with its own, the same comparison and the same one-line
``CollectiveMismatch``. No extra synchronisation: the record rides on the counters the
collective waits for anyway (x86 stores are seen in order: record, then counter).

So that no rank waits for ever on a peer that is elsewhere, a rank that finds a mismatch
publishes ``ABORT`` as its counter before it raises: every peer waiting for it wakes, finds the
mismatch too, and raises. A rank that has waited long (its spin over, between sleeps) also
looks at what the peer it waits for is doing: its record of this collective, and the messages
it has sent (a peer that chose a message algorithm for the same collective: ranks whose buffers
differ in size may default to different algorithms); a rank in a message algorithm does the
converse (``message_wait``) while it waits for a message. (MPI leaves such calls undefined;
NCCL hangs. Here they are an error, as for the small-message path.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from .errors import CollectiveMismatch
from .message import SIGNATURE_LEN, Header, Signature
from .shm import RECORD, RECORDS

ABORT = (1 << 62) + 1  # a counter past every chunk: "a mismatch: stop waiting for me"
STALL_S = 0.02  # seconds of waiting for a peer's counter before looking at what the peer is doing
assert 1 + SIGNATURE_LEN <= RECORD


class Agreement:
    """One rank's view of every rank's signature records (``Arena.records``)."""

    def __init__(self, rank: int, records: list[np.ndarray], publish: Callable[[int], None],
                 queued: Callable[[int], list[Header]]):
        self.rank, self.records, self.publish, self.queued = rank, records, publish, queued
        self.ops = 0  # shm_direct collectives entered (every rank alike): which record is next
        self.sig: Signature | None = None  # the one this rank is in (or was in last)

    def enter(self, sig: Signature) -> None:
        """Write this rank's record of its next collective, before any counter of it."""
        j, self.sig = self.ops, sig
        self.ops += 1
        rec = self.records[self.rank][j % RECORDS]
        rec[1:1 + SIGNATURE_LEN] = sig.code
        rec[0] = j + 1  # last: a peer that sees the number sees the code

    def agree(self, ranks: Iterable[int]) -> None:
        """Raise CollectiveMismatch unless every peer of ``ranks`` (whose counters this rank has
        waited for) is in this same collective with this same signature."""
        for r in ranks:
            if r != self.rank and not self._same(r):
                self._mismatch(r)

    def stalled(self, r: int) -> None:
        """This rank has waited long for peer ``r``: raise if ``r`` is in another collective."""
        if self.sig is None:
            return
        rec = self.records[r][(self.ops - 1) % RECORDS]
        if int(rec[0]) == self.ops and not self._same(r):
            self._mismatch(r)
        for h in self.queued(r):  # r sent messages of this very collective: a message algorithm
            if h.ctx == 0 and h.sig[0] != 0 and h.sig[1] == self.sig.seq:
                self._raise(h.sig, r)

    def aborted(self) -> None:
        """A peer published ABORT: find whom this rank disagrees with, and raise."""
        for r in range(len(self.records)):
            if r != self.rank and not self._same(r):
                self._mismatch(r)
        self._raise(self.sig.code, -1, self.sig)

    def message_wait(self, sig: Signature) -> None:
        """This rank waits long for a message in collective ``sig`` of the world: raise if a peer
        went into an shm_direct collective at this point (or earlier) that this rank did not."""
        j = self.ops
        for r, recs in enumerate(self.records):
            rec = recs[j % RECORDS]
            if r != self.rank and int(rec[0]) == j + 1 and int(rec[2]) <= sig.seq:
                self._raise(tuple(rec[1:1 + SIGNATURE_LEN].tolist()), r, sig)

    def _same(self, r: int) -> bool:
        rec = self.records[r][(self.ops - 1) % RECORDS]
        return int(rec[0]) == self.ops and tuple(rec[1:1 + SIGNATURE_LEN].tolist()) == self.sig.code

    def _mismatch(self, r: int) -> None:
        """Raise the mismatch with rank r, as r's latest record describes it."""
        recs = self.records[r]
        latest = recs[int(np.argmax(recs[:, 0]))]
        self._raise(tuple(latest[1:1 + SIGNATURE_LEN].tolist()), r)

    def _raise(self, code: tuple[int, ...], r: int, sig: Signature | None = None) -> None:
        """Publish ABORT (wake every peer waiting for this rank: it will not come), then raise
        the mismatch with rank r (``Signature.check``'s line; r -1: a peer found one elsewhere)."""
        sig = sig or self.sig
        self.publish(ABORT)
        if r >= 0:
            sig.check(code, self.rank, r)
        raise CollectiveMismatch(f"rank {self.rank} is in {sig.describe()} and a peer found another "
                                 "rank in a different collective: every rank of a group must call "
                                 "the same collectives in the same order, with the same shape, "
                                 "dtype and arguments")
