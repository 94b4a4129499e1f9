"""The optimizer of one ZeRO shard: fp32 master weights and Adam moments, on the device or
offloaded to the host (ZeRO-Offload), with the bytes the host path moves counted.

Mixed precision as Micikevicius et al. 2018 ("Mixed Precision Training", Section 3.1) and the
ZeRO paper (Rajbhandari et al. 2020, Section 3.1) keep it: 16-bit working weights and gradients
for forward and backward, and per parameter an fp32 master weight, Adam's momentum and variance
(12 bytes), here only for the rank's own shard. With ``dtype`` fp32 the master weight *is* the
working copy (no extra 4 bytes: the cost model's fp32 precision counts master 0).

Offload (Ren et al. 2021, "ZeRO-Offload", Section 4.1): the fp32 master, momentum and variance
live on the host and the update runs there; each step the rank's 16-bit gradient shard goes
device -> host and its updated 16-bit weights come back host -> device (2 + 2 bytes per element
of the shard; Section 4.1's "2M" each way for M parameters on one GPU). With ``params=True``
(ZeRO-Infinity's parameter offload, Rajbhandari et al. 2021, Section 5, with ZeRO stage 3) the
16-bit weight shard lives on the host too: nothing comes back after the update, and every
all-gather first copies the shard host -> device.

On a CPU-only machine host and device are the same memory: "host" here is a separate set of
buffers reached only through counted copies, so what offload measurably changes is the bytes
moved (``traffic``) and the bytes no longer held in the device ledger, not the speed.
"""

from __future__ import annotations

import math
from numbers import Real

import torch


def check_adamw(lr: object, betas: object, eps: object, weight_decay: object) -> None:
    """What ``torch.optim.AdamW`` refuses, refused here too: each a ValueError naming the value
    and the rule (lr >= 0 there; 0 < lr here, as a step that cannot move is a mistake)."""
    def real(name: str, v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, Real):
            raise ValueError(f"AdamW {name} must be a real number, got {v!r}")
        return float(v)

    if not real("lr", lr) > 0:
        raise ValueError(f"AdamW lr must be > 0, got {lr!r}")
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"AdamW betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        if not 0 <= real(f"betas[{i}]", b) < 1:
            raise ValueError(f"AdamW betas[{i}] must be in [0, 1) (a moving-average factor), got {b!r}")
    if not real("eps", eps) >= 0:
        raise ValueError(f"AdamW eps must be >= 0 (added to sqrt(v)), got {eps!r}")
    if not real("weight_decay", weight_decay) >= 0:
        raise ValueError(f"AdamW weight_decay must be >= 0, got {weight_decay!r}")


class ShardOptimizer:
    """AdamW (Loshchilov & Hutter 2019, Algorithm 2; the update of ``torch.optim.AdamW``'s
    single-tensor path, bias-corrected as Kingma & Ba 2015, Algorithm 1) on one flat shard.

    ``working``: the rank's 1-D shard of working weights (fp32, bf16 or fp16), updated in place
    after each step. ``offload``: keep master and moments on the "host" (see the module's
    docstring); ``params``: the working shard itself lives on the host (stage 3).
    """

    def __init__(self, working: torch.Tensor, *, lr: float, betas: tuple[float, float], eps: float,
                 weight_decay: float, offload: bool = False, params: bool = False):
        check_adamw(lr, betas, eps, weight_decay)
        self.lr, (self.beta1, self.beta2), self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.offload, self.params_on_host = offload, params
        self.working = working  # (shard,)
        same = working.dtype == torch.float32 and not offload
        # the master weights: the working shard itself in fp32 on the device, else an fp32 copy
        self.master = working if same else working.detach().to(torch.float32, copy=True)  # (shard,)
        self.exp_avg = torch.zeros_like(self.master)     # Adam's m, (shard,) fp32
        self.exp_avg_sq = torch.zeros_like(self.master)  # Adam's v, (shard,) fp32
        self.step_count = 0
        self.traffic = {"device_to_host": 0, "host_to_device": 0}

    def host_tensors(self) -> list[torch.Tensor]:
        """What lives on the host (empty without offload)."""
        if not self.offload:
            return []
        return [self.master, self.exp_avg, self.exp_avg_sq] + ([self.working] if self.params_on_host else [])

    def device_tensors(self) -> list[torch.Tensor]:
        """The optimizer states held on the device (the master counts once if it is the working copy)."""
        return [] if self.offload else [self.master, self.exp_avg, self.exp_avg_sq]

    @torch.no_grad()
    def step(self, grad: torch.Tensor, divide_by: float = 1) -> None:
        """One update of the shard from ``grad / divide_by`` (1-D: the summed gradient shard in
        the working dtype, divided in fp32 by the number of ranks that summed it, times the
        loss scale if there is one)."""
        if self.offload:  # device -> host: the 16-bit gradient shard
            self.traffic["device_to_host"] += grad.numel() * grad.element_size()
        g = grad.to(torch.float32) / divide_by  # (shard,) fp32, the transient copy of the update
        self.step_count += 1
        t, lr = self.step_count, self.lr
        if self.weight_decay:
            self.master.mul_(1 - lr * self.weight_decay)
        self.exp_avg.lerp_(g, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
        step_size = lr / (1 - self.beta1 ** t)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(1 - self.beta2 ** t)).add_(self.eps)
        self.master.addcdiv_(self.exp_avg, denom, value=-step_size)
        if self.master is not self.working:
            self.working.copy_(self.master)  # fp32 -> the working dtype
            if self.offload and not self.params_on_host:  # host -> device: the updated weights
                self.traffic["host_to_device"] += self.working.numel() * self.working.element_size()

    def fetch(self) -> torch.Tensor:
        """The working shard on the device, for an all-gather: with the parameters on the host, a
        counted host -> device copy; otherwise the shard itself."""
        if not self.params_on_host:
            return self.working
        self.traffic["host_to_device"] += self.working.numel() * self.working.element_size()
        return self.working.clone()


class ParamAdamW:
    """``ShardOptimizer``'s AdamW on whole parameters, with ``torch.optim``'s ``step()`` /
    ``zero_grad()``: the optimizer of a plain (unsharded) replica, e.g. DDP's, that needs no
    ``torch.optim`` (whose first construction in a fresh process imports torch._dynamo, seconds)."""

    def __init__(self, params, lr: float = 3e-3, betas: tuple[float, float] = (0.9, 0.95),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        self.pairs = [(p, ShardOptimizer(p.data.view(-1), lr=lr, betas=betas, eps=eps,
                                         weight_decay=weight_decay)) for p in params]

    def step(self) -> None:
        for p, opt in self.pairs:
            opt.step(p.grad.reshape(-1))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p, _ in self.pairs:
            p.grad = None

    def state_tensors(self) -> list[torch.Tensor]:
        """The moments (and master weights, the parameters themselves in fp32) it holds."""
        return [t for _, opt in self.pairs for t in opt.device_tensors()]
