"""A short mixed-precision training run of TinyGPT, by hand and by torch's own recipe.

The recipe (Micikevicius et al. 2018, "Mixed Precision Training", Sec. 3): an fp32 master copy of
the weights is what the optimizer updates; each step casts it to a 16-bit working copy that runs
forward and backward; the loss is multiplied by a scale S before the backward pass, so gradients
too small for fp16 (below 2^-24) are moved into its range; the fp32 gradients are divided by S
again before the update, and a step whose gradients hold an inf or nan is skipped and S is halved.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from parlab.costmodel.specs._check import positive

from ..dataset import batches
from ..model import GPTConfig, TinyGPT, lm_loss, make_optimizer
from .formats import as_dtype, zero_fraction
from .loss_scaling import DynamicLossScaler


@dataclass(frozen=True)
class MixedRun:
    """A short training run: loss per step (before its update, unweighted), the loss scale used,
    which steps were skipped, and the fraction of 16-bit gradient elements that were zero."""

    dtype: str
    losses: list[float]
    scales: list[float]
    skipped: list[bool]
    zero_grads: list[float]

    @property
    def improvement(self) -> float:
        """First loss minus last: how much the run learned."""
        return self.losses[0] - self.losses[-1]


def train_mixed(cfg: GPTConfig, steps: int = 8, batch_size: int = 8, dtype: torch.dtype | str = torch.float16,
                scaler: DynamicLossScaler | None = None, loss_weight: float = 1.0, lr: float = 3e-3,
                seed: int = 0) -> MixedRun:
    """Train TinyGPT ``steps`` steps with an fp32 master copy (AdamW on it) and a ``dtype`` working
    copy that runs forward and backward (Micikevicius et al. 2018, Sec. 3.1). The loss is
    multiplied by ``loss_weight`` before the backward pass (a micro-batch's share of a large
    accumulated batch: 1/m for m micro-batches), then by the ``scaler``'s scale if one is given.
    With ``dtype`` float32 this is plain fp32 training, the reference.

    The loss is computed from fp32 logits: were it fp16, the backward pass would start from the
    scale itself, and GradScaler's default 2^16 = 65536 is past fp16's largest value (inf)."""
    positive("steps", steps, integer=True)
    positive("loss_weight", loss_weight)
    dt = as_dtype(dtype)
    master = TinyGPT(cfg)
    working = copy.deepcopy(master).to(dt)
    opt = make_optimizer(master.parameters(), "adamw", lr)
    data = batches(batch_size, cfg.seq_len, seed=seed)
    losses, scales, skipped, zeros = [], [], [], []
    for _ in range(steps):
        x, y = next(data)
        with torch.no_grad():
            for w, m in zip(working.parameters(), master.parameters(), strict=True):
                w.copy_(m)  # fp32 master -> 16-bit working copy
        working.zero_grad(set_to_none=True)
        loss = lm_loss(working(x).float(), y)  # fp32 logits for the loss, as Megatron-LM does
        weighted = loss * loss_weight
        scales.append(scaler.scale_value if scaler else 1.0)
        (scaler.scale(weighted) if scaler else weighted).backward()
        zeros.append(zero_fraction(w.grad for w in working.parameters()))
        for w, m in zip(working.parameters(), master.parameters(), strict=True):
            m.grad = w.grad.float()  # 16-bit gradients -> fp32 for the update
        ok = scaler.unscale_(m.grad for m in master.parameters()) if scaler else True
        if ok:
            opt.step()
        if scaler:
            scaler.update()
        losses.append(loss.item())
        skipped.append(not ok)
    return MixedRun(str(dt).removeprefix("torch."), losses, scales, skipped, zeros)


def train_autocast(cfg: GPTConfig, steps: int = 8, batch_size: int = 8, grad_scaler: bool = True,
                   loss_weight: float = 1.0, lr: float = 3e-3, seed: int = 0) -> MixedRun:
    """The same run as ``train_mixed`` with torch's own recipe: fp32 parameters, the forward under
    ``torch.autocast('cpu', dtype=torch.float16)`` (matmuls in fp16, the loss in fp32) and
    ``torch.amp.GradScaler`` (or none). The reference ``train_mixed`` is held against."""
    positive("steps", steps, integer=True)
    positive("loss_weight", loss_weight)
    model = TinyGPT(cfg)
    opt = make_optimizer(model.parameters(), "adamw", lr)
    scaler = torch.amp.GradScaler("cpu", enabled=grad_scaler)
    data = batches(batch_size, cfg.seq_len, seed=seed)
    losses, scales, skipped, zeros = [], [], [], []
    for _ in range(steps):
        x, y = next(data)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(x, y)
        scales.append(scaler.get_scale() if grad_scaler else 1.0)
        scaler.scale(loss * loss_weight).backward()
        zeros.append(zero_fraction(p.grad for p in model.parameters()))
        before = scaler.get_scale() if grad_scaler else 1.0
        scaler.step(opt)
        scaler.update()
        skipped.append(grad_scaler and scaler.get_scale() < before)  # GradScaler backs off only on inf/nan
        losses.append(loss.item())
    return MixedRun("float16 (autocast)", losses, scales, skipped, zeros)
