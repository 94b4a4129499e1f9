"""The local backend: parlab's own communicator, on the shared-memory engine of ``engine.py``.

It implements the communicator's three primitives with the engine (``_send``, ``_recv`` and the
fused ``_forward`` of recv_reduce_send / recv_copy_send); every collective comes from
``parlab.comm.algorithms``. Sub-groups share the world's engine and rings, and keep their
messages apart by group context.
"""

from __future__ import annotations

import time

from . import arrays as A
from .communicator import Communicator
from .engine import Engine, copier, reducer
from .message import Header
from .shm import Status

# From this size up the default all-reduce of the world (3 ranks or more) is shm_direct: 2
# synchronisations per window-sized chunk beat the ring's 2(p-1) steps once the copies
# dominate; so is the default broadcast of the world (2 ranks or more): every peer copies the
# root's window once, where the chain copies each chunk in and out at every hop.
DIRECT_MIN_BYTES = 1 << 20


class LocalCommunicator(Communicator):
    """The home-made backend: one engine per process, shared by its communicators."""

    backend = "local"

    def __init__(self, rank: int, ranks, ctx: int, status: Status, t0: float, engine: Engine):
        super().__init__(rank, ranks, ctx, status, t0)
        self._engine = engine

    def _send(self, x: A.Array, dst: int, header: Header) -> None:
        self._engine.send(self.ranks[dst], header, A.byte_view(A.on_cpu(x)))

    def _recv(self, src: int, out: A.Array | None, op: str | None) -> tuple[Header, A.Array]:
        if out is not None:
            A.on_cpu(out)
        return self._engine.recv(self.ranks[src], self.ctx, lambda h: self._accept(h, src, out, op),
                                 copier if op is None else reducer(op), self._stall_check())

    def _forward(self, src: int, dst: int, buf: A.Array, op: str | None, header: Header) -> Header:
        A.on_cpu(buf)
        h = self._engine.forward(self.ranks[src], self.ctx, lambda h: self._accept(h, src, buf, None),
                                 self.ranks[dst], header, buf, op, self._stall_check())
        return h if h is not None else super()._forward(src, dst, buf, op, header)

    def _make_group(self, rank: int | None, members: list[int], ctx: int) -> Communicator | None:
        if rank is None:
            return None
        return LocalCommunicator(rank, members, ctx, self._status, self._acct.t0, self._engine)

    def _stall_check(self):
        """In a collective of the world: what a long wait for a message checks (a peer that went
        into an shm_direct collective instead, ``agreement``); else None."""
        direct, sig = self._direct(), self._sig
        if direct is None or sig.op == "p2p":
            return None
        return lambda: direct.agreement.message_wait(sig)

    def _direct(self):
        """The shared windows of the world, for shm_direct (None: send messages instead)."""
        return self._engine.direct if self.ctx == 0 and self.world_size == self._engine.n else None

    def _algorithm(self, op: str, algorithm: str | None, nbytes: int) -> str:
        """The default large all-reduce and broadcast of the world communicator read the peers'
        windows."""
        if (algorithm is None and nbytes >= DIRECT_MIN_BYTES and self._direct() is not None
                and (op == "broadcast" or (op == "all_reduce" and self.world_size > 2))):
            return "shm_direct"
        return super()._algorithm(op, algorithm, nbytes)

    def close(self) -> None:
        self._engine.close()

    def _check_signature(self, sig, nbytes: int) -> None:
        """Remember the collective (``Engine.signed``): a message of the same one left unreceived
        at the end is then named as the mismatch it is."""
        self._engine.signed.append((self.ctx, sig.code))

    def fresh(self) -> LocalCommunicator:
        self._engine.signed.clear()  # a new run: sequence numbers start anew
        return LocalCommunicator(self.rank, self.ranks, 0, self._status, time.monotonic(), self._engine)

    def end_run(self) -> None:
        self._engine.end_run()
