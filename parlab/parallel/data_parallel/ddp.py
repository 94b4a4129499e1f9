"""Data parallelism written from scratch: ``DistributedDataParallel`` on a parlab communicator.

Every rank holds the whole model and runs its own block of the global batch; after backward
the ranks average their gradients with all-reduce, so every optimizer step sees the gradient
of the full batch and the replicas stay identical (guide 1.4). The design is PyTorch's
(Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
VLDB, Section 3): parameters broadcast from rank 0 at construction, gradients grouped into
buckets in reverse parameter order (``bucket``), a hook per parameter that marks its
gradient ready, and an all-reduce started as soon as a bucket is complete, so communication
overlaps the rest of backward (Section 3.2.3); ``no_sync()`` skips the all-reduce for the
micro-batches of gradient accumulation (Section 3.2.4, guide 1.5).

    ddp = DistributedDataParallel(TinyGPT(cfg), comm, bucket_cap_mb=25)
    loss = ddp(x, y)                 # x, y: this rank's (b / world, s) block
    loss.backward()                  # buckets all-reduced during backward; at its end the
    opt.step()                       # last ones are waited for (an autograd queue callback)

    with ddp.no_sync():              # gradient accumulation: nothing sent ...
        ddp(x0, y0).backward()
    ddp(x1, y1).backward()           # ... until the last micro-batch

Waiting: the first gradient hook of a backward queues a callback on the autograd engine
(``Variable._execution_engine.queue_callback``, as torch DDP does) that runs when backward
ends and waits for every bucket's all-reduce, so ``.grad`` holds the averaged gradient when
``backward()`` returns; ``finish()`` does the same by hand and is a no-op afterwards.
Buffers are broadcast from rank 0 once, at construction (not before every forward).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from .bucket import bucket_bytes, bucket_plan, cap_bytes


# ---------------------------------------------------------------------------- communication
class _Done:
    """The handle of a call that already finished (a communicator without ``async_op``)."""

    def __init__(self, result):
        self._result = result

    def wait(self):
        return self._result

    def is_completed(self) -> bool:
        return True


def supports_async(comm) -> bool:
    """Whether ``comm.all_reduce`` takes ``async_op`` (and returns a handle with ``wait()``)."""
    try:
        return "async_op" in inspect.signature(comm.all_reduce).parameters
    except (TypeError, ValueError):
        return False


def start_all_reduce(comm, flat: torch.Tensor, asynchronous: bool = True):
    """Start the sum all-reduce of ``flat`` (1-D) and return its handle: ``wait()`` gives the
    summed tensor. Asynchronous when asked and the communicator can; otherwise the call runs
    to the end here and the handle is already complete."""
    if asynchronous and supports_async(comm):
        return comm.all_reduce(flat, inplace=True, async_op=True)
    return _Done(comm.all_reduce(flat, inplace=True))


def allreduce_gradients(module: nn.Module, comm) -> int:
    """The naive data parallelism that buckets improve on: after backward, one all-reduce per
    parameter, then divide by the world size. Returns the number of calls made."""
    calls = 0
    for p in module.parameters():
        if p.grad is None:
            continue
        p.grad.copy_(start_all_reduce(comm, p.grad.contiguous(), False).wait())
        p.grad.div_(comm.world_size)
        calls += 1
    return calls


# ---------------------------------------------------------------------------- construction
def _describe(module: nn.Module) -> list[tuple[str, tuple[int, ...], str, bool]]:
    """(name, shape, dtype, requires_grad) of every parameter then every buffer, in a fixed order."""
    items = [(f"parameter {n}", tuple(p.shape), str(p.dtype), p.requires_grad)
             for n, p in module.named_parameters()]
    items += [(f"buffer {n}", tuple(b.shape), str(b.dtype), False) for n, b in module.named_buffers()]
    return items


def check_same_shapes(module: nn.Module, comm, who: str = "DistributedDataParallel") -> None:
    """Every rank must hold the same parameters and buffers (names, shapes, dtypes, and which
    parameters train: ``requires_grad``); each rank gathers everyone's list, so all ranks raise
    the same ValueError naming the first difference (instead of hanging in a mismatched
    broadcast, or pairing the wrong gradients later)."""
    mine = json.dumps(_describe(module)).encode()
    lengths = comm.all_gather(np.array([len(mine)], np.int64))
    longest = int(lengths.max())
    padded = np.zeros(longest, np.uint8)
    padded[:len(mine)] = np.frombuffer(mine, np.uint8)
    every = comm.all_gather(padded).reshape(comm.world_size, longest)
    lists = [[(n, tuple(s), d, g) for n, s, d, g in json.loads(bytes(every[r, :int(lengths[r])]))]
             for r in range(comm.world_size)]
    want = lists[0]
    for r, got in enumerate(lists[1:], start=1):
        for a, b in zip(want, got, strict=False):
            if a[:3] != b[:3]:
                raise ValueError(f"{who}: the module differs across ranks: rank 0 "
                                 f"has {a[0]} of shape {a[1]} ({a[2]}), rank {r} has {b[0]} of shape "
                                 f"{b[1]} ({b[2]}); every rank must build the same model")
            if a[3] != b[3]:
                raise ValueError(f"{who}: {a[0]} has requires_grad={a[3]} on rank 0 but "
                                 f"requires_grad={b[3]} on rank {r}; every rank must train the same "
                                 f"parameters (freeze them on every rank, before wrapping)")
        if len(want) != len(got):
            extra = (want if len(want) > len(got) else got)[min(len(want), len(got))]
            raise ValueError(f"{who}: the module differs across ranks: rank 0 has "
                             f"{len(want)} parameters and buffers, rank {r} has {len(got)} "
                             f"(first unmatched: {extra[0]}); every rank must build the same model")


@torch.no_grad()
def broadcast_state(module: nn.Module, comm, src: int = 0) -> int:
    """Copy rank ``src``'s parameters and buffers to every rank (guide 1.4: replicas start
    equal), one flat broadcast per dtype. Returns the number of broadcasts."""
    tensors = list(module.parameters()) + list(module.buffers())
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = torch.cat([t.detach().reshape(-1) for t in group])  # (sum of numels,)
        flat = comm.broadcast(flat, src)
        offset = 0
        for t in group:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()
    return len(by_dtype)


# ---------------------------------------------------------------------------- the wrapper
class DistributedDataParallel(nn.Module):
    """``module`` replicated on every rank of ``comm``, gradients averaged in buckets.

    ``bucket_cap_mb`` (MiB, > 0): a bucket's all-reduce starts once it holds this much
    gradient (25 MiB as in torch). ``overlap=False`` keeps the buckets but sends them all
    only after backward ends (the baseline that overlap beats). ``clock`` (a
    ``parlab.parallel.measure.PhaseClock``) records one ``("comm", bucket)`` span per
    all-reduce, from its start until its result was waited for.
    """

    def __init__(self, module: nn.Module, comm, bucket_cap_mb: float = 25.0, *,
                 overlap: bool = True, clock=None):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if not isinstance(overlap, bool):
            raise TypeError(f"overlap must be True or False, got {overlap!r}")
        self.module = module
        self.comm = comm
        self.overlap = overlap
        self.clock = clock
        self.cap_bytes = cap_bytes(bucket_cap_mb)
        check_same_shapes(module, comm)
        broadcast_state(module, comm)
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._trainable = [(n, p, p.requires_grad) for n, p in module.named_parameters()]
        sizes = [p.numel() * p.element_size() for p in self._params]
        self.plan = bucket_plan(sizes, self.cap_bytes, [str(p.dtype) for p in self._params])
        self.bucket_bytes = bucket_bytes(sizes, self.plan)
        self._bucket_of = {i: b for b, bucket in enumerate(self.plan) for i in bucket}
        self._sync = True
        self._reset()
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook(i))
                       for i, p in enumerate(self._params)]

    def forward(self, *args, **kwargs):
        for name, p, trainable in self._trainable:
            if p.requires_grad != trainable:
                raise RuntimeError(f"DistributedDataParallel: parameter {name} has requires_grad="
                                   f"{p.requires_grad} now but {trainable} when it was wrapped: the "
                                   f"buckets are planned once, alike on every rank; set "
                                   f"requires_grad before wrapping")
        return self.module(*args, **kwargs)

    @property
    def launched(self) -> int:
        """How many buckets' all-reduces this backward has started so far."""
        return self._next

    # ---------------------------------------------------------------- one backward
    def _reset(self) -> None:
        self._pending = [len(b) for b in self.plan]  # gradients each bucket still waits for
        self._next = 0                               # the next bucket to send (in plan order)
        self._inflight: list[tuple[int, object, torch.Tensor, float]] = []
        self._queued = False

    def _hook(self, i: int):
        def hook(param: torch.Tensor) -> None:
            if not self._sync:
                return  # no_sync: the gradient accumulates locally
            if not self._queued:
                torch.autograd.Variable._execution_engine.queue_callback(self.finish)
                self._queued = True
            b = self._bucket_of[i]
            self._pending[b] -= 1
            if self.overlap:
                self._launch_ready()
        return hook

    def _launch_ready(self, everything: bool = False) -> None:
        """Start the all-reduce of every complete bucket, in plan order (all ranks must issue
        the collectives in the same order; a later bucket waits for an earlier one)."""
        while self._next < len(self.plan) and (everything or self._pending[self._next] == 0):
            self._launch(self._next)
            self._next += 1

    def _launch(self, b: int) -> None:
        params = [self._params[i] for i in self.plan[b]]
        # an unused parameter (no gradient this step) contributes zeros
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in params])  # (bucket numel,)
        t0 = time.monotonic()
        self._inflight.append((b, start_all_reduce(self.comm, flat), flat, t0))

    @torch.no_grad()
    def finish(self) -> None:
        """Send what is left, wait for every all-reduce of this backward, and write the
        averaged gradients into ``.grad`` (called automatically when backward ends)."""
        if not self._queued:
            return
        self._launch_ready(everything=True)
        n = self.comm.world_size
        for b, handle, flat, t0 in self._inflight:
            summed = handle.wait()  # (bucket numel,)
            if self.clock is not None:
                self.clock.spans.append((("comm", b), t0, time.monotonic()))
            # one division per bucket (in place when the result is our own buffer, not a view of
            # a backend's memory)
            summed = summed.div_(n) if summed is flat else summed.div(n)
            offset = 0
            for i in self.plan[b]:
                p = self._params[i]
                g = summed[offset:offset + p.numel()].view_as(p)
                if p.grad is None:
                    p.grad = g.clone()
                else:
                    p.grad.copy_(g)
                offset += p.numel()
        self._reset()

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradient accumulation: backward passes inside only add to the local ``.grad``; the
        first backward after the block all-reduces the accumulated sum (guide 1.5)."""
        before, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = before

    def remove_hooks(self) -> None:
        """Detach the gradient hooks (the module trains alone again)."""
        for h in self._hooks:
            h.remove()
        self._hooks = []


# ---------------------------------------------------------------------------- measuring
def measure_step(ddp: DistributedDataParallel, x: torch.Tensor, y: torch.Tensor,
                 lr: float = 0.1) -> list[tuple[object, float, float]]:
    """Run one training step (forward, backward with the bucketed all-reduces, plain SGD) and
    return its spans ``(label, start, end)`` in seconds of ``time.monotonic()`` (the clock the
    machine's processes share, so ranks line up with ``measure.align``): 'forward',
    'backward', 'optimizer', and ``("comm", k)`` for the k-th all-reduce as the communicator
    recorded it (on the local backend the rank's communication thread runs it while backward
    goes on)."""
    from ..measure import PhaseClock

    clock = PhaseClock()
    comm = ddp.comm
    with comm.recording() as events:
        with clock.phase("forward"):
            loss = ddp(x, y)
        with clock.phase("backward"):
            loss.backward()
    with clock.phase("optimizer"), torch.no_grad():
        for p in ddp.parameters():
            p -= lr * p.grad
            p.grad = None
    origin = comm._acct.t0  # the communicator's Event times count from here (monotonic)
    comm_spans = [(("comm", k), origin + e.start, origin + e.end)
                  for k, e in enumerate(e for e in events if e.kind == "op" and e.op == "all_reduce")]
    return clock.spans + comm_spans
