"""The torch backend: the same communicator over torch.distributed (gloo on CPU, NCCL on GPUs).

Collectives default to torch's own (``algorithm='native'``: ``all_reduce``,
``all_gather_single``, ``reduce_scatter_single``, ``all_to_all_single``, ...); naming an
algorithm ('ring', 'recursive_doubling', 'binomial_tree', 'naive', ...) runs parlab's version over torch's send/recv instead, the
same code the local backend runs. Point-to-point messages are a header tensor (int64, see
``parlab.comm.message``) followed by the payload as bytes, so ``recv`` needs no shape up front;
``send`` clones the payload and posts ``isend`` (eager, like the local backend).

Before a native collective every rank all-gathers its call's signature (a few int64) and raises
``CollectiveMismatch`` if they differ, so that mismatched calls fail with a clear message
instead of hanging or reducing unrelated bytes. Traffic of native collectives is *nominal*
(``parlab.costmodel.pricing.alphabeta.traffic``): torch does not report what gloo or NCCL moved.

Under ``launch`` the ranks also keep a *ledger* in the launch's shared arena (``Ledger``): per
ordered pair of ranks, how many messages one has sent the other and how many of those the other
has received, and how many signed native collectives each has entered with the other. gloo
cannot be asked whether a receive would ever complete (its send/recv works report completion
only to ``wait``), so a ``recv`` first waits on the ledger, then receives what it knows is
there, and the ledger turns what would be a hang or gloo's raw "Connection closed by peer"
into the local backend's errors:
- a recv from a rank that has returned with nothing left for it: ``PeerGone``;
- a recv from a rank that sits in a collective this rank has not entered: ``CollectiveMismatch``;
- a collective a member returned without entering: ``PeerGone``;
- a rank returns while a message sent to it was never received: ``UnreceivedMessage``.
Before it reports, a rank waits until every message it sent (on any group) has been received
or its receiver has returned, then until every rank has returned (``close``); the worker then
stays alive until the launcher has every result, so no connection closes under a message.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import os
import time
from collections.abc import Callable

import numpy as np

from parlab.costmodel import alphabeta

from . import arrays as A
from .communicator import Communicator
from .errors import CollectiveMismatch, PeerGone, UnreceivedMessage, connection_lost
from .message import HEADER_LEN, OPS, SIGNATURE_LEN, Header, Signature
from .shm import DONE, EXITING, FINISHING, OP, SEQ, STATE, Status

_NOMINAL = {"all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring",
            "all_to_all": "pairwise", "broadcast": "binomial_tree", "reduce": "binomial_tree",
            "gather": "naive", "scatter": "naive"}
RETURNED = (FINISHING, EXITING, DONE)  # states of a rank whose function has returned (or raised)
CONFIRM_S = 0.005  # a diagnosis from the ledger is looked at twice, this far apart, before it is raised


class Ledger:
    """What the ranks of one launch have sent, received and entered, in its shared arena.

    ``lines`` is the arena's (n, n, 8) int64 table of one cache line per ordered pair (src, dst);
    the local backend uses slot 0 of it, this backend slots 1-3, each written by one rank only:
    SENT (by src: messages sent to dst), RECVD (by dst: those received), ENTERED (by src: signed
    native collectives entered on a group that holds dst). ``table`` is the status table (each
    rank's state). Counters only grow, so a reader never sees a torn value."""

    SENT, RECVD, ENTERED = 1, 2, 3

    def __init__(self, rank: int, lines: np.ndarray, table: np.ndarray):
        self.rank, self.n = rank, lines.shape[0]
        self.lines, self.table = lines, table

    def add(self, src: int, dst: int, slot: int) -> int:
        self.lines[src, dst, slot] += 1
        return int(self.lines[src, dst, slot])

    def count(self, src: int, dst: int, slot: int) -> int:
        return int(self.lines[src, dst, slot])

    def unread(self, src: int) -> int:
        """Messages ``src`` has sent this rank that it has not received yet."""
        return self.count(src, self.rank, self.SENT) - self.count(src, self.rank, self.RECVD)

    def undelivered(self, dst: int) -> int:
        """Messages this rank has sent ``dst`` that ``dst`` has not received yet."""
        return self.count(self.rank, dst, self.SENT) - self.count(self.rank, dst, self.RECVD)

    def behind(self, peer: int) -> int:
        """How many more signed collectives this rank has entered with ``peer`` than it with us
        (negative: ``peer`` is in one this rank has not entered, and waits there for it)."""
        return self.count(self.rank, peer, self.ENTERED) - self.count(peer, self.rank, self.ENTERED)

    def returned(self, r: int) -> bool:
        return int(self.table[r, STATE]) in RETURNED

    def others(self) -> list[int]:
        return [r for r in range(self.n) if r != self.rank]


def wait_until(ready: Callable[[], bool], diagnose: Callable[[], Exception | None] = lambda: None) -> None:
    """Poll ``ready()`` (spinning with sched_yield, then sleeping up to 1 ms between looks);
    raise what ``diagnose()`` returns when it is still the diagnosis CONFIRM_S later (every
    other rank's stores have long become visible by then, on any CPU)."""
    spin_until = time.perf_counter() + 200e-6
    delay = 20e-6
    while not ready():
        err = diagnose()
        if err is not None:
            time.sleep(CONFIRM_S)
            if not ready() and diagnose() is not None:
                raise err
        if time.perf_counter() < spin_until:
            os.sched_yield()
        else:
            time.sleep(delay)
            delay = min(delay * 2, 1e-3)


def _gloo(method):
    """Turn gloo's raw "Connection reset/closed by peer" in a native collective into PeerGone."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except RuntimeError as err:
            if not connection_lost(str(err)):
                raise
            raise PeerGone(f"rank {self._me} lost its connection to a rank of its group in "
                           f"{self._sig.describe()}: that rank ended or was killed "
                           f"(gloo: {_first_line(err)})") from None
    return call


_NOT_IN_GLOO = frozenset({"int16", "uint16", "uint32", "uint64"})  # gloo: "Invalid scalar type"


def _gloo_reduces(x: A.Array, op: str) -> bool:
    """Whether gloo's own reductions take this dtype and op (not complex products either)."""
    dtype = A.dtype_name(x)
    return dtype not in _NOT_IN_GLOO and not (op == "prod" and dtype.startswith("complex"))


def _raw(t):
    """The bytes of a contiguous, non-empty tensor: a flat uint8 view (writes go to ``t``)."""
    import torch

    return t.reshape(-1).view(torch.uint8)


def _no_meta(x: object, op: str) -> None:
    """A meta tensor has a shape but no data: refused before anything is sent (the local backend
    refuses it too, as a tensor not in host memory)."""
    if A.is_torch(x) and x.device.type == "meta":
        raise TypeError(f"{op}: the torch backend moves tensors with data, got a tensor on the meta "
                        f"device (shape {tuple(x.shape)}, no storage); materialise it first")


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0][:200]


class TorchCommunicator(Communicator):
    backend = "torch"
    native = frozenset(OPS) - {"p2p"}

    def __init__(self, rank: int, ranks, ctx: int, status: Status, t0: float, group=None,
                 device=None, check: bool = True, ledger: Ledger | None = None,
                 pending: list | None = None):
        super().__init__(rank, ranks, ctx, status, t0)
        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        self._group = group  # None: the default (world) process group
        self._device = device or torch.device("cpu")
        # sends not yet known received, of this communicator and its sub-groups (shared list):
        # (dst in the world, its message number, works, tensors)
        self._pending: list = [] if pending is None else pending
        self._ledger = ledger  # None: not under launch (torchrun): no ledger, plain gloo calls
        self._me = self.ranks[rank]  # this rank in the world
        self.check = check  # all-gather signatures before each native collective
        self._made: list = []  # sub-groups made through this (world) communicator

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_launch(cls, rank: int, world_size: int, store_path: str, status: Status, t0: float,
                    timeout: float, arena=None) -> TorchCommunicator:
        """Join the launch's gloo group through a FileStore (no port to pick, none to clash);
        ``arena`` (the launch's ``shm.Arena``) holds the ledger."""
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout + 30))
        # the per-pair lines of the arena (shm.Arena keeps them as _read; the local backend's
        # read positions use slot 0 of each line, this backend's ledger slots 1-3)
        ledger = None if arena is None else Ledger(rank, arena._read, arena.status)
        return cls(rank, range(world_size), 0, status, t0, ledger=ledger)

    @classmethod
    def from_env(cls, backend: str | None = None, timeout: float = 600.0) -> TorchCommunicator:
        """Under torchrun: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are in the environment."""
        import torch
        import torch.distributed as dist

        missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing and not dist.is_initialized():
            raise RuntimeError(f"from_torchrun() needs the torchrun environment; missing {', '.join(missing)}")
        if not dist.is_initialized():
            backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
        device = None
        if dist.get_backend() == "nccl":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        comm = cls(dist.get_rank(), range(dist.get_world_size()), 0, Status(None), time.monotonic(),
                   device=device)
        atexit.register(comm._shutdown)  # a script that just ends must not abort in gloo's teardown
        return comm

    def _shutdown(self) -> None:
        """Wait for outstanding sends, then take the process group down (end of a torchrun script)."""
        self.close()
        if self._dist.is_initialized():
            self._dist.destroy_process_group()

    def _make_group(self, rank: int | None, members: list[int], ctx: int) -> Communicator | None:
        # torch.distributed builds a group collectively: every rank of the world calls new_group
        # with the same ranks in the same order (its group-local variant names groups by how
        # many each process has made, which differs between ranks and hangs)
        if self._group is not None:
            raise ValueError("on the torch backend, make sub-groups from the world communicator "
                             "(torch.distributed needs every rank of the world to take part)")
        pg = self._dist.new_group(members, sort_ranks=False)
        self._made.append(pg)
        if rank is None:
            return None
        return TorchCommunicator(rank, members, ctx, self._status, self._acct.t0, pg, self._device,
                                 self.check, self._ledger, self._pending)

    # ------------------------------------------------------------------ helpers
    def _tensor(self, x: A.Array):
        """A torch view of x (numpy arrays share their memory)."""
        return x if A.is_torch(x) else self._torch.from_numpy(x)

    def _bytes(self, x: A.Array):
        t = self._tensor(x).reshape(-1)
        return t.view(self._torch.uint8) if t.numel() else t.to(self._torch.uint8)

    def _like(self, t, x: A.Array) -> A.Array:
        return t if A.is_torch(x) else t.numpy()

    def _reduce_op(self, op: str):
        R = self._dist.ReduceOp
        return {"sum": R.SUM, "avg": R.SUM, "prod": R.PRODUCT, "max": R.MAX, "min": R.MIN}[op]

    def _where(self, peer: int) -> dict:
        return {"group": self._group, "group_dst": peer}

    # ------------------------------------------------------------------ meta tensors refused
    def _collective(self, op: str, x: A.Array, *args, out: A.Array | None = None, **kwargs) -> A.Array:
        _no_meta(x, op)
        _no_meta(out, op)
        return super()._collective(op, x, *args, out=out, **kwargs)

    def _submit(self, op: str, call, x: A.Array | None, **kwargs):
        _no_meta(x, op)
        return super()._submit(op, call, x, **kwargs)

    # ------------------------------------------------------------------ point-to-point
    def _send(self, x: A.Array, dst: int, header: Header) -> None:
        _no_meta(x, "send")
        torch, dist = self._torch, self._dist
        head = torch.tensor(header.encode(), dtype=torch.int64, device=self._device)
        payload = None
        try:
            works = [dist.isend(head, group=self._group, group_dst=dst)]
            if header.nbytes:
                payload = self._bytes(x).to(self._device, copy=True)  # eager: x may change at once
                works.append(dist.isend(payload, group=self._group, group_dst=dst))
        except RuntimeError as err:
            raise self._lost(err, dst, "send to") from None
        peer = self.ranks[dst]
        number = self._ledger.add(self._me, peer, Ledger.SENT) if self._ledger else 0
        self._pending.append((peer, number, works, head, payload))
        self._settle()

    def _settle(self) -> None:
        """Finish (``wait``) the sends their receivers have received; keep the others."""
        if self._ledger is None:
            return
        keep = []
        for entry in self._pending:
            peer, number, works = entry[:3]
            if self._ledger.count(self._me, peer, Ledger.RECVD) >= number:
                for w in works:
                    w.wait()
            else:
                keep.append(entry)
        self._pending[:] = keep

    def _recv(self, src: int, out: A.Array | None, op: str | None) -> tuple[Header, A.Array]:
        torch, dist = self._torch, self._dist
        peer = self.ranks[src]
        if self._ledger is not None:  # receive only what is known to be on its way
            wait_until(lambda: self._ledger.unread(peer) > 0, lambda: self._stuck(peer))
        head = torch.empty(HEADER_LEN, dtype=torch.int64, device=self._device)
        try:
            dist.recv(head, group=self._group, group_src=src)
            header = Header.decode(head.tolist())
            dest = self._accept(header, src, out, op)
            if header.nbytes:
                if op is None:  # straight into the destination's bytes (numpy memory is shared)
                    dist.recv(self._bytes(dest), group=self._group, group_src=src)
                elif not A.is_torch(dest):  # numpy reduces every dtype (torch lacks uint16 adds)
                    raw = np.empty(header.nbytes, np.uint8)
                    dist.recv(torch.from_numpy(raw), group=self._group, group_src=src)
                    A.reduce_arrays(dest.reshape(-1), raw.view(dest.dtype), op)
                else:
                    mine = dest.reshape(-1)
                    raw = torch.empty(header.nbytes, dtype=torch.uint8, device=mine.device)
                    dist.recv(raw, group=self._group, group_src=src)
                    A.reduce_arrays(mine, raw.view(mine.dtype), op)
        except RuntimeError as err:
            raise self._lost(err, src, "receive from") from None
        if self._ledger is not None:
            self._ledger.add(peer, self._me, Ledger.RECVD)
        return header, dest

    def _stuck(self, peer: int) -> Exception | None:
        """Why nothing from ``peer`` (a world rank) can come any more, or None while it can."""
        L = self._ledger
        gone = L.returned(peer)  # read before the counts: its last sends precede its return
        if L.unread(peer) > 0:
            return None
        if gone:
            return PeerGone(f"rank {peer} returned from its function (or ended) while rank {self._me} "
                            f"waited for a message from it: a recv with no matching send", peer=peer)
        if L.behind(peer) < 0:  # it waits in a collective for us, we wait in a recv for it
            row = L.table[peer]  # for the message only (another rank writes it as we read)
            theirs = Signature(OPS[int(row[OP])], int(row[SEQ])) if 1 <= int(row[OP]) < len(OPS) else None
            what = f"{theirs.op} #{theirs.seq} (native)" if theirs else "a collective"
            return CollectiveMismatch(
                f"rank {self._me} is in {self._sig.describe()} but rank {peer} is in {what}, one "
                f"that rank {self._me} has not entered: every rank of a group must call the same "
                f"collectives in the same order, with the same shape, dtype and arguments")
        return None

    def _lost(self, err: RuntimeError, src: int, what: str) -> Exception:
        """gloo's "Connection closed/reset by peer" on a point-to-point call, as PeerGone."""
        if not connection_lost(str(err)):
            return err
        peer = self.ranks[src]
        return PeerGone(f"rank {self._me} could not {what} rank {peer}: its connection closed (rank "
                        f"{peer} ended or was killed; gloo: {_first_line(err)})", peer=peer)

    def _empty(self, kind: str, dtype: str, shape: tuple[int, ...]) -> A.Array:
        if kind == "torch":
            return self._torch.empty(shape, dtype=getattr(self._torch, dtype), device=self._device)
        return A.empty(kind, dtype, shape)

    def close(self) -> None:
        """The function has returned. Wait until every message sent on any group has been
        received (or its receiver has returned too), then until every rank has returned; a
        message sent to this rank and never received is then an error, as on the local backend."""
        if self._ledger is None:
            for _, _, works, *_ in self._pending:
                for w in works:
                    w.wait()
            self._pending.clear()
            return
        L, others = self._ledger, self._ledger.others()
        # returned, waiting for others (not watched by the launcher: a receiver may compute for
        # longer than the timeout before it receives; the local backend's rings hold such sends)
        self._status.set(EXITING)
        wait_until(lambda: all(L.undelivered(d) <= 0 or L.returned(d) for d in others))
        self._settle()
        wait_until(lambda: all(L.returned(r) for r in others))
        time.sleep(CONFIRM_S)  # the others' last counts are visible by now, on any CPU
        for src in others:
            if (k := L.unread(src)) > 0:
                raise UnreceivedMessage(
                    f"rank {self._me} returned from its function, but rank {src} had sent it {k} "
                    f"message(s) it never received: every send needs a matching recv, and every "
                    f"rank must call the same collectives")

    def fresh(self) -> TorchCommunicator:
        """The next run's world communicator on a warm ``World`` (the default process group and
        the ledger stay; its counters only grow, and every finished run leaves them balanced)."""
        return TorchCommunicator(self.rank, self.ranks, 0, self._status, time.monotonic(),
                                 device=self._device, check=self.check, ledger=self._ledger)

    def end_run(self) -> None:
        """The end of a run on a warm ``World``: ``close``'s checks; then the sub-groups the run
        made go (every rank made the same ones, in the same order)."""
        self.close()
        for pg in self._made:
            try:
                self._dist.destroy_process_group(pg)
            except Exception:  # noqa: BLE001 - a group torch has already let go of
                pass
        self._made.clear()

    # ------------------------------------------------------------------ native collectives
    @_gloo
    def _check_signature(self, sig: Signature, nbytes: int) -> None:
        if sig.algorithm != "native":
            return
        self._count(sig, nbytes)
        if not self.check or self.world_size == 1:
            return
        torch = self._torch
        mine = torch.tensor(sig.code, dtype=torch.int64, device=self._device)
        every = torch.empty(self.world_size * SIGNATURE_LEN, dtype=torch.int64, device=self._device)
        work = self._dist.all_gather_single(every, mine, group=self._group, async_op=True)
        if self._ledger is not None:  # the exchange needs every member: count it, watch them
            members = [r for r in self.ranks if r != self._me]
            for r in members:
                self._ledger.add(self._me, r, Ledger.ENTERED)
            wait_until(work.is_completed, lambda: self._absent(members, sig))
        work.wait()
        for peer, row in enumerate(every.reshape(self.world_size, SIGNATURE_LEN).tolist()):
            sig.check(row, self.rank, peer)

    def _absent(self, members: list[int], sig: Signature) -> Exception | None:
        """A member that returned without entering this collective (it never will)."""
        L = self._ledger
        for r in members:
            if L.returned(r) and L.behind(r) > 0:
                return PeerGone(f"rank {r} returned from its function (or ended) while rank {self._me} "
                                f"waited for it in {sig.describe()}: every rank of a group must call "
                                f"the same collectives in the same order", peer=r)
        return None

    def _count(self, sig: Signature, nbytes: int) -> None:
        """Nominal traffic of a native collective (what the usual algorithm moves)."""
        if sig.op == "barrier" or self.world_size == 1:
            return
        full = nbytes * self.world_size if sig.op in ("all_gather", "gather") else nbytes
        sent, recvd = alphabeta.traffic(sig.op, _NOMINAL[sig.op], self.world_size, full,
                                        self.rank, max(sig.root, 0))
        t = self._acct.counter(sig.op)
        t.nominal = True
        t.bytes_sent += round(sent)
        t.bytes_recv += round(recvd)
        t.msgs_sent += sent > 0
        t.msgs_recv += recvd > 0

    @_gloo
    def _native_barrier(self, token: A.Array) -> None:
        self._dist.barrier(group=self._group)

    # The collectives that only move data move bytes (a uint8 view of each tensor): gloo has no
    # kernels for int16 and the unsigned types ("Invalid scalar type"), and bytes are bytes.
    @_gloo
    def _native_broadcast(self, x: A.Array, root: int) -> A.Array:
        t = self._tensor(x)
        if t.numel():
            self._dist.broadcast(_raw(t), group=self._group, group_src=root)
        return x

    @_gloo
    def _native_reduce(self, x: A.Array, root: int, op: str) -> A.Array:
        if not _gloo_reduces(x, op):
            return self._fold_everyone(x, op)
        self._dist.reduce(self._tensor(x), op=self._reduce_op(op), group=self._group, group_dst=root)
        return x

    @_gloo
    def _native_all_reduce(self, x: A.Array, op: str) -> A.Array:
        if not _gloo_reduces(x, op):
            return self._fold_everyone(x, op)
        self._dist.all_reduce(self._tensor(x), op=self._reduce_op(op), group=self._group)
        return x

    def _fold_everyone(self, x: A.Array, op: str) -> A.Array:
        """x = op over every rank's x, for what gloo cannot reduce (16-bit and unsigned
        integers, complex products): all-gather the bytes, combine them in rank order (the
        same order on every rank, so every rank gets the same bits). In place; returns x."""
        t = self._tensor(x)
        if not t.numel():
            return x
        raw = self._bytes(t)
        every = self._torch.empty(self.world_size * raw.numel(), dtype=self._torch.uint8, device=t.device)
        self._dist.all_gather_single(every, raw, group=self._group)
        parts = every.cpu().numpy().reshape(self.world_size, -1).view(np.dtype(A.dtype_name(t)))
        acc = parts[0].copy()
        for part in parts[1:]:
            A.reduce_arrays(acc, part, op)
        t.copy_(self._torch.from_numpy(acc).reshape(t.shape))
        return x

    @_gloo
    def _native_all_gather(self, x: A.Array, out: A.Array | None = None) -> A.Array:
        t = self._tensor(x)
        o = self._torch.empty(A.concat_shape(tuple(t.shape), self.world_size), dtype=t.dtype,
                              device=t.device) if out is None else self._tensor(out)
        if t.numel():
            self._dist.all_gather_single(_raw(o), _raw(t), group=self._group)
        return self._like(o, x) if out is None else out

    @_gloo
    def _native_reduce_scatter(self, x: A.Array, op: str, out: A.Array | None = None) -> A.Array:
        t = self._tensor(x)
        if not _gloo_reduces(x, op):  # reduce it all, keep block rank
            k = t.shape[0] // self.world_size
            block = self._fold_everyone(t.clone(), op)[self.rank * k:(self.rank + 1) * k]  # x is the caller's
            if out is None:
                return self._like(block.clone(), x)
            self._tensor(out).copy_(block)
            return out
        o = self._torch.empty((t.shape[0] // self.world_size, *t.shape[1:]), dtype=t.dtype,
                              device=t.device) if out is None else self._tensor(out)
        self._dist.reduce_scatter_single(o, t, op=self._reduce_op(op), group=self._group)
        return self._like(o, x) if out is None else out

    @_gloo
    def _native_gather(self, x: A.Array, root: int) -> A.Array | None:
        t = self._tensor(x)
        out = None
        parts = None
        if self.rank == root:
            out = self._torch.empty(A.concat_shape(tuple(t.shape), self.world_size), dtype=t.dtype, device=t.device)
            parts = list(_raw(out).reshape(self.world_size, -1).unbind(0)) if t.numel() else None
        if t.numel():
            self._dist.gather(_raw(t), gather_list=parts, group=self._group, group_dst=root)
        return None if out is None else self._like(out, x)

    @_gloo
    def _native_scatter(self, x: A.Array, root: int) -> A.Array:
        t = self._tensor(x)
        n = self.world_size
        out = self._torch.empty((t.shape[0] // n, *t.shape[1:]), dtype=t.dtype, device=t.device)
        if out.numel():
            parts = list(_raw(t).reshape(n, -1).unbind(0)) if self.rank == root else None
            self._dist.scatter(_raw(out), scatter_list=parts, group=self._group, group_src=root)
        return self._like(out, x)

    @_gloo
    def _native_all_to_all(self, x: A.Array) -> A.Array:
        t = self._tensor(x)
        out = self._torch.empty_like(t)
        if t.numel():  # dim 0 in n equal blocks: the bytes in n equal blocks
            self._dist.all_to_all_single(_raw(out), _raw(t), group=self._group)
        return self._like(out, x)
