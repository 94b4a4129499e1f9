"""Stages 0-2's collectives in buckets: consecutive units, in the one reduce order, coalesced
into one collective of about ``bucket_cap_mb`` MiB, as DDP's gradient buckets (Li et al. 2020,
VLDB, Sec. 3.2.3) and DeepSpeed's ``reduce_bucket_size`` / ``allgather_bucket_size`` do.

Why: every collective is a rendezvous of all the ranks, and its fixed cost (the alpha of the
alpha-beta model) is paid per call. On CPU processes it dominates: measured on 2 cores with 4
ranks over gloo, five all-reduces of 0.8 MB took about 24 ms, one of 3.2 MB 8 ms. So stages 0-1
reduce a bucket, not a unit, and stages 1-2 all-gather the updated weights a bucket at a time.

Layout. A unit's (padded,) gradient viewed (n, shard) has its owner's block in row r. A bucket
of units u1..uk is copied rank-major into one (n, S) tensor, S = the sum of their shards, row r
the concatenation of every unit's block r: one reduce-scatter then gives each rank exactly its
shard of every unit (stage 1), and the step's all-gather fills the same layout the other way
round. That copy is held only while the bucket's collective is in flight (the memory ledger
counts it as gradients): DeepSpeed's ZeRO-1/2 copy into their "ipg" bucket the same way, and
torch DDP, by default, into its buckets. Stage 0 (no shards) needs no copy: a bucket's units
keep their gradients in one flat buffer (``share_storage``, DDP's gradient_as_bucket_view),
all-reduced in place. A bucket of one unit needs no copy at any stage.

    buckets = bucket_units(units, cap_bytes(25))   # [[4, 3, 2, 1, 0]]: unit indices
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data_parallel.bucket import bucket_plan
from ..data_parallel.ddp import _Done, supports_async
from .unit import Unit


def bucket_units(units: list[Unit], cap: int) -> list[list[int]]:
    """Unit indices grouped into buckets, last unit first (the one reduce order: blocks last to
    first, then the root at index 0); a bucket closes once it holds ``cap`` bytes or more."""
    return bucket_plan([u.nbytes for u in units], cap)


def share_storage(units: list[Unit]) -> torch.Tensor:
    """Stage 0: a bucket's units' gradients as views of one zeroed flat buffer, which is returned
    (the sum of their (padded,) sizes), so that the bucket is all-reduced in place."""
    flat = torch.zeros(sum(u.plan.padded for u in units), dtype=units[0].buffer.dtype)
    offset = 0
    for u in units:
        u.attach_grads(flat[offset:offset + u.plan.padded])
        offset += u.plan.padded
    return flat


@dataclass
class Reduction:
    """A bucket's gradient reduction in flight: its units, the fused copy (None for a bucket of
    one unit) and the collective's handle."""

    units: list[Unit]
    fused: torch.Tensor | None
    work: object


class BucketCollectives:
    """The bucketed collectives of ``stages.ZeroDataParallel`` (``self.comm``, ``self.stage``,
    ``self.world``, ``self._named``, ``self._buckets``, ``self._flats``, ``self._reducing``)."""

    def _start_reduce(self, index: int) -> None:
        """Stages 0-1: start the reduction of a bucket's full gradients (stage 0 an all-reduce,
        stage 1 a reduce-scatter) once backward has produced them all, in the background where
        the communicator can, so it overlaps the rest of backward; ``_wait_reduce`` takes it.
        ``index``: the bucket's place in ``self._buckets``."""
        if self.world == 1:
            return
        units = [self.units[j] for j in self._buckets[index]]
        asynchronous = supports_async(self.comm)
        n = self.world
        if self.stage == 0 or len(units) == 1:
            fused = None  # stage 0: the bucket's shared flat buffer, reduced in place
            flat = self._flats[index] if self.stage == 0 else units[0].grad_bucket  # (padded,)
        else:  # (n, S): row r holds every unit's block r
            fused = torch.cat([u.grad_bucket.view(n, -1) for u in units], dim=1)
            flat = fused.view(-1)  # (n * S,)
        with self._named(units[0], "reducing the gradients of"):
            if self.stage == 0:
                work = (self.comm.all_reduce(flat, inplace=True, async_op=True) if asynchronous
                        else _Done(self.comm.all_reduce(flat, inplace=True)))
            else:
                work = (self.comm.reduce_scatter(flat, async_op=True) if asynchronous
                        else _Done(self.comm.reduce_scatter(flat)))
        self._reducing.append(Reduction(units, fused, work))
        if fused is not None:
            self.ledger.sample(("reduce", self.units.index(units[0])))

    @torch.no_grad()
    def _wait_reduce(self, reduction: Reduction) -> None:
        """Stages 0-1: the bucket's reduced gradients in place (stage 1: each unit's owned slice
        of its full bucket, which is the unit's ``grad_shard``)."""
        with self._named(reduction.units[0], "reducing the gradients of"):
            done = reduction.work.wait()  # stage 0: the flat bucket; 1: (S,) the owned shards
        if self.stage == 0:  # reduced in place
            return
        offset = 0
        for u in reduction.units:
            u.grad_shard = u.owned(u.grad_bucket).copy_(done[offset:offset + u.plan.shard])
            offset += u.plan.shard

    def _wait_reductions(self) -> None:
        """Every reduction of this backward, in the order they started; stage 1 with one rank
        (nothing to reduce): each unit's shard is its whole gradient."""
        for reduction in self._reducing:
            self._wait_reduce(reduction)
        self._reducing = []
        if self.stage == 1 and self.world == 1:
            for u in self.units:
                u.grad_shard = u.owned(u.grad_bucket)

    @torch.no_grad()
    def _gather_updated(self) -> None:
        """Stages 1-2 after the update: every rank's updated shard of every unit, a bucket per
        all-gather, into the units' working buffers."""
        n = self.world
        for bucket in self._buckets:
            units = [self.units[j] for j in bucket]
            if len(units) == 1:  # the shard is a view of the output: gathered from a copy
                u = units[0]
                self.comm.all_gather(u.opt.working.clone(), out=u.buffer.data)
                continue
            mine = torch.cat([u.opt.working for u in units])  # (S,)
            every = self.comm.all_gather(mine).view(n, -1)   # (n, S): row r is rank r's shards
            offset = 0
            for u in units:
                u.buffer.data.view(n, -1).copy_(every[:, offset:offset + u.plan.shard])
                offset += u.plan.shard
