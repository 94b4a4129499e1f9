"""ZeRO-1 over the DP group of a 3D run: each DP rank keeps AdamW's moments for 1/dp of its
pieces' parameters only (Rajbhandari et al. 2020, "ZeRO", Section 5.1, P_os).

Once per step, after the whole pipeline schedule (all micro-batches) and the tied-embedding sum:
the flat gradient of the rank's parameters is reduce-scattered over DP (each rank gets the sum of
its block), the owner updates its block (``zero.offload.ShardOptimizer``, fp32: its master weights
are the parameters themselves), and the updated blocks are all-gathered back: the same bytes as
DDP's all-reduce (a ring all-reduce is a reduce-scatter then an all-gather), 1/dp of the optimizer
states. The partition (padded to a multiple of dp) is ``zero.shard.shard_plan``'s, as
``zero.stages.ZeroDataParallel``; that engine reduces after every backward pass, which a pipeline
(m backward passes per step, then the tied-embedding sum) cannot use, hence this step-level form.
"""

from __future__ import annotations

import torch

from ..zero.offload import ShardOptimizer
from ..zero.shard import shard_plan


class Zero1:
    """ZeRO-1 for ``params`` (this rank's, in a fixed order) over ``dp_comm``. The parameters'
    storage is moved into one flat fp32 buffer (``.data`` views: the Parameter objects, and so
    tied weights, stay the same), so the owned block is a view the optimizer updates in place."""

    def __init__(self, params: list[torch.nn.Parameter], dp_comm, lr: float,
                 betas: tuple[float, float], eps: float):
        self.params, self.comm = params, dp_comm
        numel = sum(p.numel() for p in params)
        self.plan = shard_plan(numel, dp_comm.world_size)
        device = params[0].device if params else torch.device("cpu")
        self.flat = torch.zeros(self.plan.padded, dtype=torch.float32, device=device)  # (padded,)
        offset = 0
        with torch.no_grad():
            for p in params:
                n = p.numel()
                self.flat[offset:offset + n].copy_(p.detach().reshape(-1))
                p.data = self.flat[offset:offset + n].view(p.shape)
                offset += n
        lo = self.plan.start(dp_comm.rank)
        self.opt = ShardOptimizer(self.flat[lo:lo + self.plan.shard], lr=lr, betas=betas, eps=eps,
                                  weight_decay=0.0)

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor]) -> None:
        """Reduce-scatter the summed gradients, update the owned block, all-gather the blocks."""
        flat_grad = torch.zeros_like(self.flat)  # (padded,)
        torch.cat([g.reshape(-1) for g in grads], out=flat_grad[:self.plan.numel])
        shard = self.comm.reduce_scatter(flat_grad)  # (shard,) the sum over DP of my block
        self.opt.step(shard, divide_by=self.comm.world_size)
        self.flat.copy_(self.comm.all_gather(self.opt.working.clone()))  # (padded,)

    @torch.no_grad()
    def full_moments(self) -> tuple[torch.Tensor, torch.Tensor]:
        """AdamW's (exp_avg, exp_avg_sq) of all this rank's parameters, flat (numel,): collective
        over DP (an all-gather of the blocks), for a checkpoint."""
        n = self.plan.numel
        return tuple(self.comm.all_gather(t.contiguous())[:n] for t in (self.opt.exp_avg, self.opt.exp_avg_sq))

    @torch.no_grad()
    def load_moments(self, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, step: int) -> None:
        """Keep this rank's block of the flat (numel,) moments (from a checkpoint)."""
        lo, hi = self.plan.bounds(self.comm.rank)  # the real elements of my block (then padding)
        for mine, full in ((self.opt.exp_avg, exp_avg), (self.opt.exp_avg_sq, exp_avg_sq)):
            mine.zero_()
            mine[:hi - lo].copy_(full[lo:hi])
        self.opt.step_count = step

    def state_bytes(self) -> int:
        """Bytes of optimizer state this rank holds: the moments of its block (the master is
        the parameters themselves in fp32)."""
        return sum(t.numel() * t.element_size() for t in (self.opt.exp_avg, self.opt.exp_avg_sq))
