"""The communicator interface both backends share: point-to-point, collectives, groups, accounting.

A communicator is one rank's handle on a group of processes. Its point-to-point calls are the
only ones a backend must provide (``_send``/``_recv``); every collective is either run by an
algorithm of ``parlab.comm.algorithms`` written against those calls (ring, binomial_tree, ...)
or handed to the backend's own implementation (``algorithm='native'``, torch.distributed).

Semantics, the same on both backends:
- ``send`` is *eager* (buffered): it returns once the data is copied out, whether or not the
  receiver has posted its ``recv``, so ``send`` then ``recv`` in a ring never deadlocks.
- Messages between a pair of ranks in one group arrive in the order they were sent.
- Collectives return new arrays (``all_reduce(..., inplace=True)`` reduces in place) of the
  caller's type: numpy in, numpy out; torch in, torch out. A numpy scalar (``x.sum()``) is
  taken as a 0-d array where a call only reads it (0-d array out), and refused where a call
  writes into it (``out=``, ``into=``, ``inplace=True``); a Python number or list is refused.
- Every argument is checked where the call is made: a wrong op, rank, peer (a rank never
  sends to itself), group or array is a ValueError/TypeError naming it, its value and the rule.
- Every message carries its collective's signature (op, sequence number, shape, dtype, reduce
  op, root, algorithm); a rank that receives from a different collective raises
  ``CollectiveMismatch`` rather than reduce unrelated bytes.
"""

from __future__ import annotations

import operator
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from . import algorithms
from . import arrays as A
from .accounting import Accounting, Event, Traffic
from .message import ALGORITHMS, OPS, Header, Signature
from .progress import Progress, Work
from .shm import IN_OP, RUNNING, Status

P2P = Signature()


class Communicator(ABC):
    """One rank's view of a group: ``rank`` in ``0..world_size-1``; ``ranks`` maps each member
    to its rank in the launch (the world)."""

    backend = ""
    native: frozenset[str] = frozenset()  # ops the backend implements itself

    def __init__(self, rank: int, ranks: Sequence[int], ctx: int, status: Status, t0: float):
        self.rank = rank
        self.world_size = len(ranks)
        self.ranks = tuple(ranks)
        self.ctx = ctx
        self._status = status
        self._acct = Accounting(t0=t0)
        self._seq = 0
        self._sig = P2P
        self._groups = 0
        self._progress = Progress()  # the rank's communication thread (shared with sub-groups)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size})"

    # ------------------------------------------------------------------ point-to-point
    def send(self, x: A.Array, dst: int, *, async_op: bool = False) -> Work | None:
        """Send ``x`` to rank ``dst``. Eager: returns once ``x`` has been copied out
        (``async_op=True``: a ``Work`` at once; ``x`` must stay unchanged until its ``wait()``)."""
        if async_op:
            self._other(dst, "dst")
            return self._submit("send", lambda: self.send(x, dst), A.as_array(x))
        self._sync()
        x, kind, dtype, shape, nbytes = A.describe(x)
        self._other(dst, "dst")
        header = Header(kind, dtype, shape, nbytes, self.ctx, self._sig.code)
        start = self._acct.now()
        self._send(x, dst, header)
        self._acct.message(self._sig.op, "send", header.nbytes, dst, start, self._sig.seq)

    def recv(self, src: int, out: A.Array | None = None, *, async_op: bool = False) -> A.Array | Work:
        """The next message from rank ``src``: a new array, or written into ``out``
        (``async_op=True``: a ``Work`` whose ``wait()`` returns it)."""
        if async_op:
            self._other(src, "src")
            return self._submit("recv", lambda: self.recv(src, out), None)
        return self._receive(src, out, None)

    def recv_reduce(self, src: int, into: A.Array, op: str = "sum") -> A.Array:
        """Receive from ``src`` and combine it into ``into`` in place (``into = op(into, msg)``),
        without a temporary copy (NCCL's recvReduceCopy primitive). Returns ``into``."""
        A.check_reduce_op(op, A.dtype_name(self._writable(into, "into")))
        return self._receive(src, into, op)

    def recv_reduce_send(self, src: int, block: A.Array, dst: int, op: str = "sum") -> None:
        """Receive from ``src``, combine with ``block`` and send the result to ``dst``; ``block``
        is left as it is. The middle steps of a ring reduce-scatter (NCCL's recvReduceSend)."""
        A.check_reduce_op(op, A.dtype_name(self._writable(block, "block")))
        self._relay(src, dst, block, op)

    def recv_copy_send(self, src: int, out: A.Array, dst: int) -> None:
        """Receive from ``src`` into ``out`` and send the same bytes on to ``dst``. The middle
        steps of a ring all-gather (NCCL's recvCopySend)."""
        self._relay(src, dst, out, None)

    def _relay(self, src: int, dst: int, buf: A.Array, op: str | None) -> None:
        self._sync()
        self._other(src, "src")
        self._other(dst, "dst")
        if not _writable_contiguous(self._writable(buf, "block" if op else "out")):
            raise ValueError("recv_reduce_send/recv_copy_send need a C-contiguous array")
        _, kind, dtype, shape, nbytes = A.describe(buf)
        header = Header(kind, dtype, shape, nbytes, self.ctx, self._sig.code)
        start = self._acct.now()
        self._waiting(src)
        incoming = self._forward(src, dst, buf, op, header)
        self._done_waiting()
        self._acct.message(self._sig.op, "recv", incoming.nbytes, src, start, self._sig.seq)
        self._acct.message(self._sig.op, "send", header.nbytes, dst, start, self._sig.seq)

    def _forward(self, src: int, dst: int, buf: A.Array, op: str | None, header: Header) -> Header:
        """Receive then send (backends may fuse the two into one pass over the bytes)."""
        if op is None:
            incoming, _ = self._recv(src, buf, None)
            self._send(buf, dst, header)
            return incoming
        incoming, tmp = self._recv(src, self._empty(header.kind, header.dtype, header.shape), None)
        A.reduce_arrays(tmp, buf, op)  # incoming op mine, as the fused path computes it
        self._send(tmp, dst, header)
        return incoming

    def _receive(self, src: int, out: A.Array | None, op: str | None) -> A.Array:
        self._sync()
        self._other(src, "src")
        if out is not None and not _writable_contiguous(self._writable(out, "into" if op else "out")):
            raise ValueError("recv(out=...) needs a C-contiguous array to write into; got a "
                             "non-contiguous view (pass a contiguous buffer)")
        start = self._acct.now()
        self._waiting(src)
        header, arr = self._recv(src, out, op)
        self._done_waiting()
        self._acct.message(self._sig.op, "recv", header.nbytes, src, start, self._sig.seq)
        return arr

    def _waiting(self, src: int) -> None:
        if self._sig is P2P:  # the user's own recv: show it in the status table as an op
            self._status.set(IN_OP, 0, -1, self.ctx)
        self._status.waiting(self.ranks[src])

    def _done_waiting(self) -> None:
        if self._sig is P2P:
            self._status.set(RUNNING)
        else:
            self._status.working()

    def _accept(self, header: Header, src: int, out: A.Array | None, op: str | None) -> A.Array:
        """Check an arriving message against this rank's call; return the array to fill."""
        self._sig.check(header.sig, self.rank, src)
        if out is None:
            return self._empty(header.kind, header.dtype, header.shape)
        nbytes, dtype = A.nbytes(out), A.dtype_name(out)
        if header.nbytes != nbytes or header.dtype != dtype:
            raise ValueError(
                f"rank {self.rank} posted a receive of {nbytes} bytes ({dtype} {tuple(out.shape)}) "
                f"but rank {src} sent {header.nbytes} bytes ({header.dtype} {header.shape}); "
                f"sender and receiver must agree on dtype and size")
        return out

    def _empty(self, kind: str, dtype: str, shape: tuple[int, ...]) -> A.Array:
        """A new array for an incoming message (a backend may put tensors on its device)."""
        return A.empty(kind, dtype, shape)

    @abstractmethod
    def _send(self, x: A.Array, dst: int, header: Header) -> None: ...

    @abstractmethod
    def _recv(self, src: int, out: A.Array | None, op: str | None) -> tuple[Header, A.Array]: ...

    # ------------------------------------------------------------------ collectives
    def barrier(self, *, algorithm: str | None = None) -> None:
        """Return only after every rank of the group has entered the barrier."""
        self._collective("barrier", np.empty(0, np.uint8), algorithm)

    def broadcast(self, x: A.Array, src: int = 0, *, algorithm: str | None = None,
                  inplace: bool = False, async_op: bool = False) -> A.Array | Work:
        """Rank ``src``'s ``x`` on every rank (all ranks pass an array of the same shape and dtype).
        ``inplace=True``: into ``x`` itself, without a copy, as ``torch.distributed.broadcast``
        does."""
        x = self._writable(x, "x") if inplace else A.as_array(x)
        if inplace and not _writable_contiguous(x):
            raise ValueError("broadcast(inplace=True) needs a C-contiguous array")
        self._peer(src, "src")
        if async_op:
            return self._submit("broadcast", lambda: self.broadcast(
                x, src, algorithm=algorithm, inplace=inplace), x, algorithm=algorithm)
        return self._collective("broadcast", x, algorithm, root=src, work=not inplace)

    def reduce(self, x: A.Array, dst: int = 0, op: str = "sum", *,
               algorithm: str | None = None) -> A.Array | None:
        """``op`` over every rank's ``x``, on rank ``dst``; ``None`` on the others."""
        x = A.as_array(x)
        self._peer(dst, "dst")
        out = self._collective("reduce", x, algorithm, reduce=A.reduce_op_name(op), root=dst, work=True)
        return self._finish(out, op) if self.rank == dst else None

    def all_reduce(self, x: A.Array, op: str = "sum", *, algorithm: str | None = None,
                   inplace: bool = False, async_op: bool = False) -> A.Array | Work:
        """``op`` over every rank's ``x``, on every rank (in ``x`` itself if ``inplace``).
        ``async_op=True``: return a ``Work`` at once; its ``wait()`` returns the result."""
        x = self._writable(x, "x") if inplace else A.as_array(x)
        if inplace and not _writable_contiguous(x):
            raise ValueError("all_reduce(inplace=True) needs a C-contiguous array")
        if async_op:
            return self._submit("all_reduce", lambda: self.all_reduce(
                x, op, algorithm=algorithm, inplace=inplace), x, reduce=op, algorithm=algorithm)
        out = self._collective("all_reduce", x, algorithm, reduce=A.reduce_op_name(op), work=not inplace)
        return self._finish(out, op)

    def all_gather(self, x: A.Array, *, algorithm: str | None = None, out: A.Array | None = None,
                   async_op: bool = False) -> A.Array | Work:
        """Every rank's ``x`` stacked along dim 0, rank order: shape (n * d0, ...) (into ``out``
        if given, a contiguous array of that shape and dtype, to reuse a buffer)."""
        x = A.as_array(x)
        self._out(out, x, A.concat_shape(tuple(x.shape), self.world_size))
        if async_op:
            return self._submit("all_gather", lambda: self.all_gather(x, algorithm=algorithm, out=out),
                                x, algorithm=algorithm)
        return self._collective("all_gather", x, algorithm, out=out)

    def reduce_scatter(self, x: A.Array, op: str = "sum", *, algorithm: str | None = None,
                       out: A.Array | None = None, async_op: bool = False) -> A.Array | Work:
        """``op`` over every rank's ``x`` (shape (n * k, ...)), block ``rank`` of it: shape (k, ...)."""
        x = A.as_array(x)
        self._blocks(x, "reduce_scatter")
        self._out(out, x, (x.shape[0] // self.world_size, *x.shape[1:]))
        if async_op:
            return self._submit("reduce_scatter", lambda: self.reduce_scatter(
                x, op, algorithm=algorithm, out=out), x, reduce=op, algorithm=algorithm)
        return self._finish(self._collective("reduce_scatter", x, algorithm, reduce=A.reduce_op_name(op),
                                             out=out), op)

    def gather(self, x: A.Array, dst: int = 0, *, algorithm: str | None = None) -> A.Array | None:
        """Every rank's ``x`` stacked along dim 0 on rank ``dst``; ``None`` on the others."""
        x = A.as_array(x)
        self._peer(dst, "dst")
        return self._collective("gather", x, algorithm, root=dst)

    def scatter(self, x: A.Array, src: int = 0, *, algorithm: str | None = None) -> A.Array:
        """Block ``rank`` (along dim 0) of rank ``src``'s ``x`` (shape (n * k, ...) on every rank;
        only the root's contents are used)."""
        x = A.as_array(x)
        self._peer(src, "src")
        self._blocks(x, "scatter")
        return self._collective("scatter", x, algorithm, root=src)

    def all_to_all(self, x: A.Array, *, algorithm: str | None = None) -> A.Array:
        """Block j (along dim 0) of ``x`` goes to rank j; block i of the result came from rank i."""
        x = A.as_array(x)
        self._blocks(x, "all_to_all")
        return self._collective("all_to_all", x, algorithm)

    def _collective(self, op: str, x: A.Array, algorithm: str | None, *, reduce: str | None = None,
                    root: int = -1, work: bool = False, out: A.Array | None = None) -> A.Array:
        """Check the arguments, sign the call, and run it with the chosen algorithm."""
        self._sync()
        x = A.contiguous(x)
        dtype, shape = A.dtype_name(x), A.check_shape(tuple(x.shape))
        if reduce is not None:  # a reduction: 'mean', 'avg' of integers are refused here
            A.check_reduce_op(reduce, dtype)
        nbytes = A.nbytes(x)
        algo = self._algorithm(op, algorithm, nbytes)
        sig = Signature(op, self._seq, dtype, shape, reduce or "", root, algo)
        self._seq += 1
        buf = A.copy_of(x) if work else x
        args = (buf,) + ((root,) if root >= 0 else ()) + ((reduce,) if reduce is not None else ())
        kwargs = {} if out is None else {"out": out}
        impl = getattr(self, f"_native_{op}") if algo == "native" else algorithms.get(op, algo)
        with self._signed(sig, nbytes):
            return impl(self, *args, **kwargs) if algo != "native" else impl(*args, **kwargs)

    # ------------------------------------------------------------------ asynchronous calls
    def _submit(self, op: str, call, x: A.Array | None, *, reduce: str | None = None,
                algorithm: str | None = None) -> Work:
        """Queue ``call`` on the rank's communication thread, after the checks that need no
        communication (so a wrong argument raises here, in the caller)."""
        if x is not None and op != "send":
            x = A.contiguous(x)
            dtype = A.dtype_name(x)
            A.check_shape(tuple(x.shape))
            if reduce is not None:
                A.check_reduce_op(A.reduce_op_name(reduce), dtype)
            self._algorithm(op, algorithm, A.nbytes(x))
        if self._progress.on_thread():  # issued from a background operation: run it in order
            work = Work(op)
            work._finish(call())
            return work
        return self._progress.submit(call, op)

    def _sync(self) -> None:
        """Before a blocking call: wait for the asynchronous ones issued before it."""
        if not self._progress.on_thread():
            self._progress.drain()

    def _drain_async(self) -> None:
        """The function has returned: finish what it left in flight (and raise an error it
        has not seen)."""
        self._progress.drain(unseen_only=True)

    @contextmanager
    def _signed(self, sig: Signature, nbytes: int) -> Iterator[None]:
        self._sig = sig
        self._status.set(IN_OP, OPS.index(sig.op), sig.seq, self.ctx, ALGORITHMS.index(sig.algorithm))
        start = self._acct.now()
        try:
            self._check_signature(sig, nbytes)
            yield
        finally:
            self._sig = P2P
            self._status.set(RUNNING)
        self._acct.counter(sig.op).calls += 1
        if self._acct.timeline is not None:
            self._acct.timeline.append(Event(sig.op, "op", start, self._acct.now(), None, nbytes, sig.seq))

    def _check_signature(self, sig: Signature, nbytes: int) -> None:  # noqa: B027 - optional hook
        """Backends whose messages do not carry signatures (native collectives) compare them here."""

    def _algorithm(self, op: str, algorithm: str | None, nbytes: int) -> str:
        choices = algorithms.CHOICES[op] + (("native",) if op in self.native else ())
        if algorithm is None:
            return "native" if op in self.native else algorithms.default(op, nbytes, self.world_size)
        if algorithm not in choices:
            raise ValueError(f"unknown algorithm {algorithm!r} for {op} on the {self.backend} "
                             f"backend; allowed: {', '.join(choices)}")
        return algorithm

    def _finish(self, out: A.Array, op: str) -> A.Array:
        return A.divide_(out, self.world_size) if op == "avg" else out

    def _out(self, out: A.Array | None, x: A.Array, shape: tuple[int, ...]) -> None:
        if out is None:
            return
        self._writable(out, "out")
        if (A.kind_of(out) != A.kind_of(x) or A.dtype_name(out) != A.dtype_name(x)
                or tuple(out.shape) != shape or not _writable_contiguous(out)):
            raise ValueError(f"out must be a contiguous {A.kind_of(x)} array of shape {shape} and "
                             f"dtype {A.dtype_name(x)}, got {A.kind_of(out)} {tuple(out.shape)} "
                             f"{A.dtype_name(out)}")

    def _blocks(self, x: A.Array, op: str) -> None:
        if not x.shape or x.shape[0] % self.world_size:
            raise ValueError(f"{op} splits dim 0 into world_size={self.world_size} equal blocks; "
                             f"got shape {tuple(x.shape)}")

    def _peer(self, r: int, name: str) -> None:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r < self.world_size:
            raise ValueError(f"{name} must be a rank in 0..{self.world_size - 1}, got {r!r}")

    def _other(self, r: int, name: str) -> None:
        """A point-to-point peer: a rank of the group, not this one."""
        self._peer(r, name)
        if r == self.rank:
            raise ValueError(f"{name} must be another rank than this one, got {name}={r} on rank "
                             f"{self.rank}: a rank cannot send to or receive from itself (copy the "
                             f"array instead)")

    @staticmethod
    def _writable(x: A.Array, name: str) -> A.Array:
        """An array this call writes into: a numpy scalar is immutable, so it is refused."""
        if isinstance(x, np.generic):
            raise TypeError(f"{name} must be an array this call can write into, got a numpy scalar "
                            f"({type(x).__name__}), which is immutable: pass np.array(value)")
        return A.as_array(x, name)

    # ------------------------------------------------------------------ groups
    def new_group(self, ranks: Sequence[int]) -> Communicator | None:
        """A communicator over ``ranks`` (ranks of this group; member i gets rank i in it).
        Every rank of this group calls it, in the same order; non-members get ``None``."""
        ranks = _rank_list(ranks)
        if not ranks or len(set(ranks)) != len(ranks) or not all(0 <= r < self.world_size for r in ranks):
            raise ValueError(f"new_group needs distinct ranks in 0..{self.world_size - 1}, got {ranks}")
        self._groups += 1
        ctx = zlib.crc32(f"{self.ctx}/{self._groups}/{ranks}".encode()) & 0x3FFFFFFF or 1
        members = [self.ranks[r] for r in ranks]
        self._sync()
        self._status.set(IN_OP, OPS.index("new_group"), self._groups, self.ctx)
        try:
            group = self._make_group(ranks.index(self.rank) if self.rank in ranks else None, members, ctx)
        finally:
            self._status.set(RUNNING)
        if group is not None:
            group._progress = self._progress  # one engine or process group: one thread, one order
        return group

    def split(self, color: int, key: int = 0) -> Communicator:
        """MPI_Comm_split: one group per distinct ``color``, ordered by (key, rank)."""
        mine = np.array([_integer(color, "color"), _integer(key, "key"), self.rank], np.int64)
        table = self.all_gather(mine).reshape(self.world_size, 3)
        groups: dict[int, list[tuple[int, int]]] = {}
        for c, k, r in table.tolist():
            groups.setdefault(c, []).append((k, r))
        out = None
        for c in sorted(groups):
            g = self.new_group([r for _, r in sorted(groups[c])])
            out = g if c == color else out
        return out

    @abstractmethod
    def _make_group(self, rank: int | None, members: list[int], ctx: int) -> Communicator | None:
        """The member's communicator (rank None: this rank is not a member, return None)."""

    # ------------------------------------------------------------------ accounting
    def traffic(self) -> dict[str, Traffic]:
        """Messages and bytes this rank sent and received, by operation kind ('p2p' for its own
        send/recv), since the start or the last ``reset_traffic()`` (after the asynchronous
        operations issued so far have finished)."""
        self._sync()
        return self._acct.snapshot()

    def reset_traffic(self) -> None:
        """Start the counts anew (after the asynchronous operations issued so far have
        finished, so that none of theirs lands after the reset)."""
        self._sync()
        self._acct.by_op.clear()

    @contextmanager
    def recording(self) -> Iterator[list[Event]]:
        """``with comm.recording() as events:`` collects the timeline of the calls inside."""
        events: list[Event] = []
        self._acct.timeline = events
        try:
            yield events
        finally:
            self._acct.timeline = None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Finish outstanding sends (the launcher calls this after the user's function)."""

    def fresh(self) -> Communicator:
        """A new world communicator on the same links, for the next function of a warm
        ``World``: sequence numbers, traffic and sub-groups start anew."""
        raise NotImplementedError(f"the {self.backend} backend has no warm worlds")

    def end_run(self) -> None:
        """The end of one function's run on a warm ``World`` (the links stay open)."""
        raise NotImplementedError(f"the {self.backend} backend has no warm worlds")


def _integer(v: object, name: str) -> int:
    """v as an int if it is an integer (int, numpy or 0-d torch integer; not a bool), else TypeError."""
    if not isinstance(v, (bool, np.bool_)):
        try:
            return operator.index(v)
        except TypeError:
            pass
    raise TypeError(f"{name} must be an integer, got {v!r} ({type(v).__name__})")


def _rank_list(ranks: object) -> list[int]:
    """new_group's ranks as a list of ints; anything but a sequence of integers is a TypeError."""
    if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Iterable):
        raise TypeError(f"new_group(ranks) needs a list of ranks (integers), got {ranks!r}")
    items = list(ranks)
    try:
        return [_integer(r, "each rank") for r in items]
    except TypeError as err:
        raise TypeError(f"new_group(ranks) needs integer ranks: {err}, in {items!r}") from None


def _writable_contiguous(x: A.Array) -> bool:
    if A.is_torch(x):
        return x.is_contiguous()
    return isinstance(x, np.ndarray) and x.flags.c_contiguous and x.flags.writeable

