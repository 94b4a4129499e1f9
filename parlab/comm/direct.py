"""``shm_direct``: intra-host collectives by direct reads of every peer's shared window.

What shared-memory transports do inside one host (MPICH's and Open MPI's shared-memory
collectives; NCCL's single-node path with P2P/SHM, where each GPU reads its peers' buffers
instead of forwarding through a ring): the buffer goes in chunks of at most ``capacity``
bytes (the local backend's ring size). The all-reduce takes each chunk of m bytes, for p
ranks, in three phases:

1. every rank copies its chunk into its own window in the arena;
2. reduce-scatter by direct reads: rank r combines block r (m/p bytes) of every rank's window,
   in rank order (``((x0 op x1) op x2) ...``, so every rank ends with the same bits), into its
   window's block r;
3. all-gather by direct reads: every rank copies block j of rank j's window into its result.

The broadcast is one phase: the root copies the chunk into its window and every peer copies
it out, so the chunk crosses memory once per reader instead of being forwarded along a chain.

The two windows of a rank are cut in slots that successive chunks use in turn; instead of
barriers each rank publishes a counter after each phase (3g+1, 3g+2, 3g+3 for chunk g: in my
slot, reduced, read everything I needed of it), so a rank waits only for the data it reads,
and for the peers to have read a slot before it reuses it. Per rank and chunk the all-reduce
reads (p-1)/p m bytes from its peers in each of its two reading phases, 2(p-1)/p m in all, as
the ring sends, in 2 synchronisations instead of 2(p-1) steps; the broadcast has every peer
read m once, in 1: ``parlab.costmodel.pricing.alphabeta`` models both so. The counters are one per
rank in the arena (x86's ordered stores make the window's bytes visible before the counter;
elsewhere the local backend sends messages, ``algorithms.shm_direct_all_reduce`` and
``algorithms.shm_direct_broadcast``).

Where the kernel lets a rank read its peers' memory (``parlab.comm.single_copy``: Linux's
``process_vm_readv``), the broadcast skips the window: the root publishes where its buffer is
and every peer copies it straight into its own, one copy instead of two (Open MPI's
single-copy path for large messages does the same). The ranks try it once per world, all
together, and keep the windows if any of them cannot.

Before a rank touches a peer's bytes it compares the peer's signature with its own, as the
message path does: each collective's signature sits in the arena (``agreement``), so a call
whose ranks disagree on dtype, shape, op, root or algorithm raises ``CollectiveMismatch`` on
every rank that depends on the odd one, instead of reinterpreting bytes or waiting for ever.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np

from . import arrays as A
from . import single_copy, tuning
from .agreement import ABORT, STALL_S, Agreement
from .algorithms import block_bounds, slices
from .message import Header
from .shm import BARRIER, Arena, Status
from .waiting import WaitPolicy, futex_wait, futex_wake, futex_word

PUMP_S = 1e-3  # a rank asleep on a counter wakes this often to push its pending sends
# slots of a rank's own line (``Arena.line``; BARRIER is its counter), for single-copy reads
PID, PROBE_ADDR, PROBE_OK, DATA_ADDR, DATA_BYTES = 0, 1, 2, 3, 5
assert BARRIER not in (PID, PROBE_ADDR, PROBE_OK, DATA_ADDR, DATA_BYTES)


class Direct:
    """One rank's view of every rank's windows and progress counters."""

    def __init__(self, rank: int, arena: Arena, status: Status, pump: Callable[[], None],
                 policy: WaitPolicy | None = None,
                 queued: Callable[[int], list[Header]] = lambda peer: []):
        self.rank, self.n, self.arena, self.status = rank, arena.world_size, arena, status
        self.pump = pump  # the engine's pending sends move on while this rank waits here
        self.policy = policy or WaitPolicy(self.n)  # spin first, or sleep at once (waiting.py)
        # bytes of x per chunk (<= capacity), and slots in turn (at most): few, so that every
        # rank's slots stay in the last-level cache (PARLAB_DIRECT_CHUNK, _SLOTS: tuning.py)
        tune = tuning.read()
        self.slot_bytes = min(arena.capacity, tune.direct_chunk)
        per_window = max(1, min(arena.capacity // self.slot_bytes, tune.direct_slots // 2))
        self.slots = [[arena.window(r, k)[i * self.slot_bytes:(i + 1) * self.slot_bytes]
                       for k in (0, 1) for i in range(per_window)] for r in range(self.n)]
        self.counts = [arena.barrier_count(r) for r in range(self.n)]
        self.words = [futex_word(c) for c in self.counts]  # where a waiter sleeps on each
        self.chunks = 0  # chunks done (by every rank alike): which slot the next one uses
        self.lines = [arena.line(r) for r in range(self.n)]
        self._probe = np.array([os.getpid()], np.int64)  # what a peer's probe read must find
        line = self.lines[rank]
        line[PID], line[PROBE_ADDR] = os.getpid(), self._probe.ctypes.data
        self._single: bool | None = None  # single-copy reads agreed (None: not tried yet)
        # every rank's signature records; ``queued(peer)``: headers of peer's unreceived messages
        self.agreement = Agreement(rank, [arena.records(r) for r in range(self.n)], self.publish, queued)
        if single_copy.AVAILABLE:
            single_copy.allow_siblings()

    def publish(self, value: int) -> None:
        self.counts[self.rank][0] = value  # after the bytes it announces (x86: stores in order)
        futex_wake(self.words[self.rank])  # peers asleep on it (waiting.py)

    def wait_all(self, value: int, ranks: range | tuple[int, ...] | None = None) -> None:
        """Until the counter of every peer (of ``ranks``: default all) has reached ``value``: a
        short spin where the ranks have cores to spare (``WaitPolicy``), else asleep on the
        counter until its owner wakes us."""
        budget = self.policy.budget()
        now = time.perf_counter()
        spin_until, stall_at = now + budget, now + STALL_S
        hit = True
        for r in range(self.n) if ranks is None else ranks:
            count = self.counts[r]
            if r == self.rank:
                continue
            if (seen := int(count[0])) < value:
                self.status.waiting(r)
                while (seen := int(count[0])) < value:
                    self.pump()
                    if time.perf_counter() < spin_until:
                        os.sched_yield()
                    else:
                        hit = False
                        if time.perf_counter() > stall_at:  # waited long: is r elsewhere?
                            self.agreement.stalled(r)
                        futex_wait(self.words[r], seen, PUMP_S)
                self.status.working()
            if seen >= ABORT:  # r found a mismatch and will not come
                self.agreement.aborted()
        if budget:
            self.policy.spun(hit)
        self.status.progress()

    def all_reduce(self, comm, x: A.Array, op: str) -> A.Array:
        """x reduced over the world, in place (x is contiguous, on the CPU).

        Chunk g goes through slot g mod S of the windows (S slots of slot_bytes); each rank's
        counter reads 3g+1 once its chunk g is in its slot, 3g+2 once its block of it is
        reduced, 3g+3 once it has gathered the chunk. A rank reduces chunk g when every counter
        is >= 3g+1, gathers it when >= 3g+2, and reuses a slot when every peer has gathered the
        chunk that was there (>= 3(g-S)+3): no barrier, so a rank runs up to S chunks ahead of
        the slowest."""
        flat, n, me = A.flat(x), self.n, self.rank
        size = A.itemsize(A.dtype_name(x))
        per_chunk = max(n, (self.slot_bytes // size) // n * n)
        S = len(self.slots[me])
        raw = A.byte_view(x)
        sig, acct = comm._sig, comm._acct
        self.agreement.enter(sig)
        first = self.chunks
        for lo, hi in slices(len(flat), per_chunk):
            start = acct.now()
            g = self.chunks
            self.chunks += 1
            slot = [self.slots[r][g % S] for r in range(n)]
            base, nbytes = lo * size, (hi - lo) * size
            if g >= S:
                self.wait_all(3 * (g - S) + 3)
            slot[me][:nbytes] = raw[base:base + nbytes]
            self.publish(3 * g + 1)
            self.wait_all(3 * g + 1)
            if g == first:  # every peer's record is written: the same collective, or raise
                self.agreement.agree(range(n))
            bounds = [(a * size, b * size) for a, b in block_bounds(hi - lo, n)]
            a, b = bounds[me]
            if b > a:  # x's own block is in the slot now: reduce into x, then publish it
                acc = A.typed(raw[base + a:base + b], x)
                view = [A.typed(slot[r][a:b], x) for r in range(n)]
                A.reduce_arrays(view[0], view[1], op, out=acc)
                for r in range(2, n):
                    A.reduce_arrays(acc, view[r], op)
                slot[me][a:b] = raw[base + a:base + b]
            self.publish(3 * g + 2)
            self.wait_all(3 * g + 2)
            for r in range(n):
                if r != me:
                    ra, rb = bounds[r]
                    raw[base + ra:base + rb] = slot[r][ra:rb]
            for r in range(n):  # what this rank read of r's slot, and r of its slot
                if r != me:
                    got = (b - a) + (bounds[r][1] - bounds[r][0])
                    acct.message(sig.op, "recv", got, r, start, sig.seq)
                    acct.message(sig.op, "send", got, r, start, sig.seq)
            self.publish(3 * g + 3)
        return x

    def broadcast(self, comm, x: A.Array, root: int) -> A.Array:
        """x from ``root`` on every rank, in place (x is contiguous, on the CPU).

        Chunk g goes through slot g mod S of the root's windows: the root copies it in once the
        peers have read the chunk that was there (every counter >= 3(g-S)+3) and publishes
        3g+3; a peer copies it out once the root's counter is >= 3g+1 and publishes 3g+3. The
        root writes chunk g while the peers still read chunk g-1. A peer compares the root's
        signature with its own before it reads; the root compares every peer's once they have
        read the last chunk."""
        self.agreement.enter(comm._sig)
        if self.single_copy():
            return self._broadcast_single_copy(comm, x, root)
        n, me = self.n, self.rank
        size = A.itemsize(A.dtype_name(x))
        per_chunk = max(1, self.slot_bytes // size)
        S = len(self.slots[root])
        raw = A.byte_view(x)
        sig, acct = comm._sig, comm._acct
        first = self.chunks
        for lo, hi in slices(len(A.flat(x)), per_chunk):
            start = acct.now()
            g = self.chunks
            self.chunks += 1
            slot = self.slots[root][g % S]
            base, nbytes = lo * size, (hi - lo) * size
            if me == root:
                if g >= S:
                    self.wait_all(3 * (g - S) + 3)
                slot[:nbytes] = raw[base:base + nbytes]
                for r in range(n):  # what each peer will read of this rank's slot
                    if r != me:
                        acct.message(sig.op, "send", nbytes, r, start, sig.seq)
            else:
                self.wait_all(3 * g + 1, (root,))
                if g == first:
                    self.agreement.agree((root,))
                raw[base:base + nbytes] = slot[:nbytes]
                acct.message(sig.op, "recv", nbytes, root, start, sig.seq)
            self.publish(3 * g + 3)
        if me == root:  # the peers have read it all: were they all in this broadcast?
            self.wait_all(3 * (self.chunks - 1) + 3)
            self.agreement.agree(range(n))
        return x

    def single_copy(self) -> bool:
        """Whether every rank can read every peer's memory (``single_copy``), found out once per
        world by all ranks together, as one step of the counters: each publishes 3g+1 (its pid
        and probe are in its line), reads every peer's probe, publishes its verdict with 3g+2,
        and all take the same decision from the same verdicts."""
        if self._single is None:
            g, line = self.chunks, self.lines[self.rank]
            self.chunks += 1
            self.publish(3 * g + 1)
            self.wait_all(3 * g + 1)
            line[PROBE_OK] = 1 if single_copy.AVAILABLE and all(
                self._probe_peer(r) for r in range(self.n) if r != self.rank) else 2
            self.publish(3 * g + 2)
            self.wait_all(3 * g + 2)
            self._single = all(int(self.lines[r][PROBE_OK]) == 1 for r in range(self.n))
            self.publish(3 * g + 3)
        return self._single

    def _probe_peer(self, r: int) -> bool:
        got = np.zeros(1, np.int64)
        pid = int(self.lines[r][PID])
        try:
            single_copy.readv(pid, int(self.lines[r][PROBE_ADDR]), got.ctypes.data, got.nbytes)
        except OSError:
            return False
        return int(got[0]) == pid

    def _broadcast_single_copy(self, comm, x: A.Array, root: int) -> A.Array:
        """The root publishes where x is (3g+1) and waits until every peer has copied it straight
        out of its memory (3g+3), so x stays as it was until then. A peer copies it in the pieces
        the windows would carry, pushing its pending sends between them; both paths count the
        same messages (one per piece and peer), so what a rank reports does not depend on what
        its kernel allows."""
        me, sig, acct = self.rank, comm._sig, comm._acct
        size = A.itemsize(A.dtype_name(x))
        pieces = [(lo * size, hi * size) for lo, hi in slices(len(A.flat(x)), max(1, self.slot_bytes // size))]
        raw = A.byte_view(x)
        nbytes, start = raw.nbytes, acct.now()
        g = self.chunks
        self.chunks += 1
        if me == root:
            line = self.lines[me]
            line[DATA_ADDR], line[DATA_BYTES] = raw.ctypes.data, nbytes
            self.publish(3 * g + 1)
            self.wait_all(3 * g + 3)
            self.agreement.agree(range(self.n))
            for lo, hi in pieces:
                for r in range(self.n):
                    if r != me:
                        acct.message(sig.op, "send", hi - lo, r, start, sig.seq)
        else:
            self.wait_all(3 * g + 1, (root,))
            self.agreement.agree((root,))  # the root's dtype and shape are this rank's
            line = self.lines[root]
            pid, remote = int(line[PID]), int(line[DATA_ADDR])
            for lo, hi in pieces:
                single_copy.readv(pid, remote + lo, raw.ctypes.data + lo, hi - lo)
                acct.message(sig.op, "recv", hi - lo, root, start, sig.seq)
                self.pump()
        self.publish(3 * g + 3)
        return x
