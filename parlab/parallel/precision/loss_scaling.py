"""Dynamic loss scaling (Micikevicius et al. 2018, "Mixed Precision Training", Sec. 3.2), from
scratch, and its history over a pattern of good and overflowing steps held against
``torch.amp.GradScaler``'s."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from parlab.costmodel.specs._check import positive


class DynamicLossScaler:
    """Dynamic loss scaling (Micikevicius et al. 2018, Sec. 3.2; the rule of
    ``torch.amp.GradScaler`` with the same defaults): multiply the loss by ``scale`` before the
    backward pass; after it, divide the gradients by ``scale``; a step whose gradients hold an inf
    or nan is skipped and the scale multiplied by ``backoff_factor``; after ``growth_interval``
    steps in a row without one, the scale is multiplied by ``growth_factor``.

        scaler.scale(loss).backward()
        if scaler.unscale_(master_grads):   # False: inf/nan found, skip the update
            optimizer.step()
        scaler.update()
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        positive("init_scale", init_scale)
        if not growth_factor > 1:
            raise ValueError(f"growth_factor must be > 1, got {growth_factor!r}")
        if not 0 < backoff_factor < 1:
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff_factor!r}")
        positive("growth_interval", growth_interval, integer=True)
        self.scale_value = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = growth_interval
        self.good_steps = 0  # steps since the last inf/nan (GradScaler's growth tracker)
        self.found_inf = False

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale_value

    def unscale_(self, grads: Iterable[torch.Tensor]) -> bool:
        """Divide ``grads`` (fp32, in place) by the scale; True if all are finite (step may run)."""
        grads = [g for g in grads if g is not None]
        self.found_inf = not all(bool(torch.isfinite(g).all()) for g in grads)
        for g in grads:
            g.mul_(1.0 / self.scale_value)
        return not self.found_inf

    def update(self) -> None:
        """Back off after an inf/nan step, grow after ``growth_interval`` good ones."""
        if self.found_inf:
            self.scale_value *= self.backoff_factor
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps == self.growth_interval:
                self.scale_value *= self.growth_factor
                self.good_steps = 0
        self.found_inf = False


def scale_history(pattern: Iterable[bool], scaler: DynamicLossScaler) -> tuple[list[float], list[bool]]:
    """Drive ``scaler`` with a pattern of steps (True: this step's gradients overflow): the scale
    used at each step and whether the step was taken. Each step backpropagates a scaled loss of
    one fp32 parameter, whose gradient is made inf where ``pattern`` says."""
    p = torch.zeros(1, requires_grad=True)
    scales, taken = [], []
    for bad in pattern:
        p.grad = None
        scales.append(scaler.scale_value)
        scaler.scale((p * (math.inf if bad else 1.0)).sum() + 1.0).backward()
        taken.append(scaler.unscale_([p.grad]))
        scaler.update()
    return scales, taken


def torch_scale_history(pattern: Iterable[bool], **kwargs) -> tuple[list[float], list[bool]]:
    """The same pattern through ``torch.amp.GradScaler('cpu', **kwargs)`` and an SGD step: its
    scale at each step and whether the step changed the parameter (was not skipped)."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    scaler = torch.amp.GradScaler("cpu", **kwargs)
    scales, taken = [], []
    for bad in pattern:
        opt.zero_grad(set_to_none=True)
        scales.append(scaler.get_scale())
        before = p.detach().clone()
        scaler.scale((p * (math.inf if bad else 1.0)).sum() + 1.0).backward()
        scaler.step(opt)
        scaler.update()
        taken.append(not torch.equal(before, p.detach()))
    return scales, taken
