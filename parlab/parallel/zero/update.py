"""The update of ``stages.ZeroDataParallel``: AdamW on each rank's owned shard from the averaged
gradient (Rajbhandari et al. 2020, Section 5.1: each rank updates its 1/Nd of the parameters),
stages 1-2's all-gather of the updated weights, fp16's skipped steps (Micikevicius et al. 2018,
Sec. 3.2: a step whose gradients hold an inf or nan on any rank is not taken), and the full fp32
master weights gathered back.
"""

from __future__ import annotations

import torch


class ShardUpdate:
    """``step`` and ``full_parameters`` of a ZeRO engine (``self.units``, ``self.comm``,
    ``self.stage``, ``self.world``, ``self.scaler``, ``self.ledger``, ``self._reduced``,
    ``self.skipped_steps``, ``self._gather_updated``)."""

    def _grads(self) -> list[torch.Tensor]:
        return [u.grad_bucket if self.stage == 0 else u.grad_shard for u in self.units]

    @torch.no_grad()
    def _all_finite(self) -> bool:
        """Whether every rank's gradients are free of inf and nan (stage 0: they are the same
        everywhere; else one 1-element all-reduce of the flags, so every rank decides alike)."""
        bad = torch.tensor([float(not all(bool(torch.isfinite(g).all()) for g in self._grads()))])
        if self.stage >= 1 and self.world > 1:
            bad = self.comm.all_reduce(bad, op="max")
        return not bool(bad[0])

    @torch.no_grad()
    def step(self) -> None:
        """AdamW on each owned shard from the averaged gradient; stages 1-2 then all-gather the
        updated weights (stage 0 updated them all; stage 3 gathers them when next used). With a
        loss scaler: a step whose gradients hold an inf or nan on any rank is skipped."""
        if not self._reduced or any(g is None for g in self._grads()):
            raise RuntimeError("step() before backward(): no gradient to apply")
        divide = self.world
        if self.scaler is not None:
            self.scaler.found_inf = not self._all_finite()
            divide = self.world * self.scaler.scale_value
            if self.scaler.found_inf:
                self.skipped_steps += 1
        if self.scaler is None or not self.scaler.found_inf:
            for u in self.units:
                u.opt.step(u.grad_bucket if self.stage == 0 else u.grad_shard, divide_by=divide)
            self.ledger.sample("updated")
            if self.stage in (1, 2) and self.world > 1:
                self._gather_updated()
        for u in self.units:
            if self.stage <= 1:
                u.grad_bucket.zero_()
            u.grad_shard = None
        if self.scaler is not None:
            self.scaler.update()
        self._reduced = False
        self.ledger.sample("step end")

    @torch.no_grad()
    def full_parameters(self) -> list[torch.Tensor]:
        """The fp32 master weights of the whole model, in ``module.parameters()`` order
        (collective: every rank of the group must call it); a frozen parameter as it is, in fp32."""
        full = {}
        for u in self.units:
            master = u.opt.master
            flat = self.comm.all_gather(master.contiguous()) if self.stage >= 1 and self.world > 1 else master
            for p, v in zip(u.params, u.views(flat), strict=True):
                full[id(p)] = v.view(p.shape).clone()
        return [full[id(p)] if id(p) in full else p.detach().to(torch.float32, copy=True)
                for p in self.module.parameters()]
