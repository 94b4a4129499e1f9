"""Mixed precision from scratch on TinyGPT: what fp16 and bf16 can hold (``torch.finfo``), fp16's
overflow past 65504 and its underflow of small gradients, a dynamic loss scaler that repairs a run
which underflows (Micikevicius et al. 2018, "Mixed Precision Training", Sec. 3.2), held against
``torch.amp.GradScaler``, and the memory 16-bit weights and activations save, measured.

    float_format(torch.float16).max                    # 65504.0
    run = train_mixed(GPTConfig(), steps=8, dtype=torch.float16, scaler=DynamicLossScaler())
    run.losses, run.scales, run.skipped

The recipe (Micikevicius et al. 2018, Sec. 3): an fp32 master copy of the weights is what the
optimizer updates; each step casts it to a 16-bit working copy that runs forward and backward;
the loss is multiplied by a scale S before the backward pass, so gradients too small for fp16
(below 2^-24) are moved into its range; the fp32 gradients are divided by S again before the
update, and a step whose gradients hold an inf or nan is skipped and S is halved.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from parlab.costmodel._check import positive
from parlab.guide import CLAIMS

from .dataset import batches
from .measure import SavedActivations
from .model import GPTConfig, TinyGPT, lm_loss, make_optimizer

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
GUIDE_FP16_MAX = float(CLAIMS["fp16-max"].value)  # guide 1.21: "overflows to inf past 65506" (it is 65504)


# ---------------------------------------------------------------------------- the formats
@dataclass(frozen=True)
class FloatFormat:
    """What a floating-point type holds (IEEE 754-2008 binary32/binary16, and bfloat16: fp32's 8
    exponent bits with 7 mantissa bits), read from ``torch.finfo``."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int  # stored fraction bits (the leading 1 is implicit)
    max: float  # largest finite value: (2 - 2^-m) * 2^emax
    smallest_normal: float  # 2^(1 - bias)
    smallest_subnormal: float  # smallest_normal * 2^-m: below half of it, a value rounds to 0
    eps: float  # 2^-m, the gap between 1 and the next value: relative precision

    @property
    def overflow_at(self) -> float:
        """The smallest value that rounds to inf: max plus half the gap at the top of the range,
        (2 - 2^-(m+1)) * 2^emax (round to nearest even; 65520 for fp16)."""
        return self.max + self.max * self.eps / (2 - self.eps) / 2

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits, log10(2^(m+1))."""
        return (self.mantissa_bits + 1) * math.log10(2)


def float_format(dtype: torch.dtype | str) -> FloatFormat:
    """The ``FloatFormat`` of a torch floating dtype (or its name: 'float16', 'bfloat16', 'float32')."""
    dt = _dtype(dtype)
    fi = torch.finfo(dt)
    mantissa = round(-math.log2(fi.eps))
    return FloatFormat(str(dt).removeprefix("torch."), fi.bits, fi.bits - 1 - mantissa, mantissa,
                       fi.max, fi.smallest_normal, fi.smallest_normal * fi.eps, fi.eps)


def _dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    if dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype must be a torch floating dtype or one of {', '.join(DTYPES)}, got {dtype!r}")


def largest_from_bits(dtype: torch.dtype | str = torch.float16) -> float:
    """The largest finite value from the bit layout alone: the top exponent below the all-ones
    (inf/nan) pattern, 2^(2^(e-1) - 1), times the significand with every fraction bit set,
    2 - 2^-m. For fp16 (e = 5, m = 10): (2 - 2^-10) * 2^15 = 65504."""
    f = float_format(dtype)
    return (2 - 2.0 ** -f.mantissa_bits) * 2.0 ** (2 ** (f.exponent_bits - 1) - 1)


def round_trip(values: Iterable[float], dtype: torch.dtype | str) -> list[float]:
    """``values`` stored in ``dtype`` and read back (round to nearest even; inf past the range)."""
    return torch.tensor(list(values), dtype=torch.float64).to(_dtype(dtype)).double().tolist()


def zero_fraction(tensors: Iterable[torch.Tensor]) -> float:
    """Fraction of the elements of ``tensors`` that are exactly zero."""
    ts = [t.detach() for t in tensors if t is not None]
    total = sum(t.numel() for t in ts)
    return sum(int((t == 0).sum()) for t in ts) / total if total else 0.0


def underflow_fraction(values: torch.Tensor, dtype: torch.dtype | str = torch.float16) -> float:
    """Fraction of the non-zero ``values`` that become zero when stored in ``dtype``."""
    nonzero = values[values != 0]
    if not nonzero.numel():
        return 0.0
    return float((nonzero.to(_dtype(dtype)) == 0).double().mean())


# ---------------------------------------------------------------------------- loss scaling
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


# ---------------------------------------------------------------------------- training
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
    dt = _dtype(dtype)
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


# ---------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class PrecisionMemory:
    """Bytes TinyGPT holds in one dtype: its weights, and what one forward saves for backward."""

    dtype: str
    weight_bytes: int
    saved_bytes: int


def precision_memory(cfg: GPTConfig, idx: torch.Tensor, targets: torch.Tensor,
                     dtype: torch.dtype | str = torch.float32) -> PrecisionMemory:
    """Build TinyGPT in ``dtype``, count its parameter bytes and the bytes one forward saves
    (``SavedActivations``); 16-bit halves both, except the int64 token ids and targets."""
    dt = _dtype(dtype)
    model = TinyGPT(cfg).to(dt)
    acts = SavedActivations(model.parameters())
    with acts.tag("forward"):
        loss = model(idx, targets)
    saved = acts.peak_bytes
    del loss
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return PrecisionMemory(str(dt).removeprefix("torch."), weights, saved)
