"""The torch backend: the same communicator over torch.distributed (gloo on CPU, NCCL on GPUs).

Collectives default to torch's own (``algorithm='native'``: ``all_reduce``,
``all_gather_single``, ``reduce_scatter_single``, ``all_to_all_single``, ...); naming an
algorithm ('ring', 'tree', 'naive') runs parlab's version over torch's send/recv instead, the
same code the local backend runs. Point-to-point messages are a header tensor (int64, see
``parlab.comm.message``) followed by the payload as bytes, so ``recv`` needs no shape up front;
``send`` clones the payload and posts ``isend`` (eager, like the local backend).

Before a native collective every rank all-gathers its call's signature (a few int64) and raises
``CollectiveMismatch`` if they differ, so that mismatched calls fail with a clear message
instead of hanging or reducing unrelated bytes. Traffic of native collectives is *nominal*
(``parlab.costmodel.alphabeta.traffic``): torch does not report what gloo or NCCL moved.
"""

from __future__ import annotations

import atexit
import datetime
import os
import time

from parlab.costmodel import alphabeta

from . import arrays as A
from .communicator import Communicator
from .message import HEADER_LEN, OPS, SIGNATURE_LEN, Header, Signature
from .shm import Status

_NOMINAL = {"all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring",
            "all_to_all": "pairwise", "broadcast": "tree", "reduce": "tree",
            "gather": "naive", "scatter": "naive"}


class TorchCommunicator(Communicator):
    backend = "torch"
    native = frozenset(OPS) - {"p2p"}

    def __init__(self, rank: int, ranks, ctx: int, status: Status, t0: float, group=None,
                 device=None, check: bool = True):
        super().__init__(rank, ranks, ctx, status, t0)
        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        self._group = group  # None: the default (world) process group
        self._device = device or torch.device("cpu")
        self._pending: list = []  # (works, tensors) of sends not yet known complete
        self.check = check  # all-gather signatures before each native collective

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_launch(cls, rank: int, world_size: int, store_path: str, status: Status, t0: float,
                    timeout: float) -> TorchCommunicator:
        """Join the launch's gloo group through a FileStore (no port to pick, none to clash)."""
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout + 30))
        return cls(rank, range(world_size), 0, status, t0)

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
        if rank is None:
            return None
        return TorchCommunicator(rank, members, ctx, self._status, self._acct.t0, pg, self._device, self.check)

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

    # ------------------------------------------------------------------ point-to-point
    def _send(self, x: A.Array, dst: int, header: Header) -> None:
        torch, dist = self._torch, self._dist
        head = torch.tensor(header.encode(), dtype=torch.int64, device=self._device)
        works = [dist.isend(head, group=self._group, group_dst=dst)]
        payload = None
        if header.nbytes:
            payload = self._bytes(x).to(self._device, copy=True)  # eager: x may change at once
            works.append(dist.isend(payload, group=self._group, group_dst=dst))
        self._pending.append((works, head, payload))
        self._pending = [p for p in self._pending if not all(w.is_completed() for w in p[0])]

    def _recv(self, src: int, out: A.Array | None, op: str | None) -> tuple[Header, A.Array]:
        torch, dist = self._torch, self._dist
        head = torch.empty(HEADER_LEN, dtype=torch.int64, device=self._device)
        dist.recv(head, group=self._group, group_src=src)
        header = Header.decode(head.tolist())
        dest = self._accept(header, src, out, op)
        if header.nbytes:
            if op is None:  # straight into the destination's bytes (numpy memory is shared)
                dist.recv(self._bytes(dest), group=self._group, group_src=src)
            else:
                mine = self._tensor(dest).reshape(-1)
                raw = torch.empty(header.nbytes, dtype=torch.uint8, device=mine.device)
                dist.recv(raw, group=self._group, group_src=src)
                A.reduce_arrays(mine, raw.view(mine.dtype), op)
        return header, dest

    def _empty(self, kind: str, dtype: str, shape: tuple[int, ...]) -> A.Array:
        if kind == "torch":
            return self._torch.empty(shape, dtype=getattr(self._torch, dtype), device=self._device)
        return A.empty(kind, dtype, shape)

    def close(self) -> None:
        for works, *_ in self._pending:
            for w in works:
                w.wait()
        self._pending = []

    # ------------------------------------------------------------------ native collectives
    def _check_signature(self, sig: Signature, nbytes: int) -> None:
        if sig.algorithm != "native":
            return
        self._count(sig, nbytes)
        if not self.check or self.world_size == 1:
            return
        torch = self._torch
        mine = torch.tensor(sig.code, dtype=torch.int64, device=self._device)
        every = torch.empty(self.world_size * SIGNATURE_LEN, dtype=torch.int64, device=self._device)
        self._dist.all_gather_single(every, mine, group=self._group)
        for peer, row in enumerate(every.reshape(self.world_size, SIGNATURE_LEN).tolist()):
            sig.check(row, self.rank, peer)

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

    def _native_barrier(self, token: A.Array) -> None:
        self._dist.barrier(group=self._group)

    def _native_broadcast(self, x: A.Array, root: int) -> A.Array:
        self._dist.broadcast(self._tensor(x), group=self._group, group_src=root)
        return x

    def _native_reduce(self, x: A.Array, root: int, op: str) -> A.Array:
        self._dist.reduce(self._tensor(x), op=self._reduce_op(op), group=self._group, group_dst=root)
        return x

    def _native_all_reduce(self, x: A.Array, op: str) -> A.Array:
        self._dist.all_reduce(self._tensor(x), op=self._reduce_op(op), group=self._group)
        return x

    def _native_all_gather(self, x: A.Array, out: A.Array | None = None) -> A.Array:
        t = self._tensor(x)
        o = self._torch.empty(A.concat_shape(tuple(t.shape), self.world_size), dtype=t.dtype,
                              device=t.device) if out is None else self._tensor(out)
        self._dist.all_gather_single(o, t.reshape(-1) if t.dim() == 0 else t, group=self._group)
        return self._like(o, x) if out is None else out

    def _native_reduce_scatter(self, x: A.Array, op: str, out: A.Array | None = None) -> A.Array:
        t = self._tensor(x)
        o = self._torch.empty((t.shape[0] // self.world_size, *t.shape[1:]), dtype=t.dtype,
                              device=t.device) if out is None else self._tensor(out)
        self._dist.reduce_scatter_single(o, t, op=self._reduce_op(op), group=self._group)
        return self._like(o, x) if out is None else out

    def _native_gather(self, x: A.Array, root: int) -> A.Array | None:
        t = self._tensor(x)
        out = None
        parts = None
        if self.rank == root:
            out = self._torch.empty(A.concat_shape(tuple(t.shape), self.world_size), dtype=t.dtype, device=t.device)
            parts = list(out.reshape(self.world_size, -1).unbind(0))
        self._dist.gather(t.reshape(-1), gather_list=parts, group=self._group, group_dst=root)
        return None if out is None else self._like(out, x)

    def _native_scatter(self, x: A.Array, root: int) -> A.Array:
        t = self._tensor(x)
        n = self.world_size
        out = self._torch.empty((t.shape[0] // n, *t.shape[1:]), dtype=t.dtype, device=t.device)
        parts = list(t.reshape(n, -1).unbind(0)) if self.rank == root else None
        self._dist.scatter(out.reshape(-1), scatter_list=parts, group=self._group, group_src=root)
        return self._like(out, x)

    def _native_all_to_all(self, x: A.Array) -> A.Array:
        t = self._tensor(x)
        out = self._torch.empty_like(t)
        self._dist.all_to_all_single(out, t, group=self._group)
        return self._like(out, x)


