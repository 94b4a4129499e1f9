"""The two walls of guide 1.1 on a single GPU: memory (states + activations) and compute (days).

Compositions of the engine's formulas for chapter 01 and its dashboards; no new formula here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from parlab.costmodel.answers.phases import OneGpuFit, one_gpu_fit
from parlab.costmodel.plan.spec import TRAINING_OPTIMIZERS
from parlab.costmodel.pricing.flops import train_flops_6nd, training_seconds
from parlab.costmodel.pricing.memory import (
    ModelStateMemory,
    activation_bytes,
    get_precision,
    model_state_memory,
)
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.hardware import GPUS, GPUSpec, get_gpu
from parlab.costmodel.specs.models import ModelSpec

#: The GPUs chapter 01's walls compare (table, memory bars, compute lines): the data-centre cards
#: of the guide's era, V100 to H200. ``GPUS`` holds more (H800, B200, RTX 4090, ...); add a name
#: here, and re-run chapter 01, to show it on the walls.
WALL_GPUS = ("v100-32gb", "a100-40gb", "a100-80gb", "a800-80gb", "h100-sxm", "h200")


#: memory-wall precision -> (Plan dtype, fp32 gradients) of the same model states, for the
#: one-GPU estimate; the pure 16-bit precisions keep no fp32 master copy, which a Plan does not model
PLAN_DTYPES = {"fp32": ("fp32", False), "mixed": ("mixed", False), "mixed-fp32-grad": ("mixed", True)}


@dataclass(frozen=True)
class GPUFit:
    """Whether a job fits one ``gpu``, and the fewest GPUs that could hold it if the model states
    were split evenly over them (ZeRO-3 style) while each keeps its activations.

    ``fits_one`` is the course's one answer for training (``phases.one_gpu_fit``: the cost model's
    estimate, every term counted: the states and activations of the wall plus the runtime buffers,
    allocator fragmentation and the optimizer step's fp32 gradient copy) wherever a ``Plan``
    models the precision and optimizer; ``estimate`` is that total in bytes. Elsewhere
    (inference, pure 16-bit training) ``estimate`` is None and ``fits_one`` compares the wall's
    states + activations with the card."""

    gpu: GPUSpec
    fits_one: bool
    min_gpus: int | None  # None: the activations alone exceed one GPU
    estimate: float | None = None


@dataclass(frozen=True)
class MemoryWall:
    """Bytes needed to train ``model`` on one GPU: model states plus activations."""

    model: ModelSpec
    states: ModelStateMemory
    activations: float
    micro_batch: int
    recompute: str

    @property
    def total(self) -> float:
        return self.states.total + self.activations

    def terms(self) -> dict[str, float]:
        return {**self.states.terms(), "activations": self.activations}

    @property
    def estimate_total(self) -> float | None:
        """Bytes of the cost model's one-GPU estimate of this job (``estimate_fit``; the same on
        every card), or None where no ``Plan`` models it."""
        est = self.estimate_fit("a100-80gb")
        return None if est is None else est.total

    def estimate_fit(self, gpu: str | GPUSpec) -> OneGpuFit | None:
        """The cost model's one-GPU estimate of this job on ``gpu`` (``phases.one_gpu_fit``, the
        walk chapter 09 prints), with the wall's precision, optimizer, micro-batch and recompute;
        None for inference and the pure 16-bit precisions (no ``Plan`` models them). On a card
        without bf16 (V100) the 16-bit type is fp16: the same bytes."""
        plan = PLAN_DTYPES.get(self.states.precision)
        if plan is None or self.states.optimizer not in TRAINING_OPTIMIZERS:
            return None
        g = get_gpu(gpu)
        dtype, fp32_grads = plan
        if dtype == "mixed" and not g.bf16:
            dtype = "fp16"
        return one_gpu_fit(self.model, g, self.micro_batch, self.recompute, dtype=dtype,
                           fp32_grads=fp32_grads, optimizer=self.states.optimizer)

    def fit(self, gpu: str | GPUSpec) -> GPUFit:
        g = get_gpu(gpu)
        room = g.memory_bytes - self.activations
        est = self.estimate_fit(g)
        total = self.total if est is None else est.total
        if room <= 0:
            return GPUFit(g, False, None, None if est is None else est.total)
        return GPUFit(g, total <= g.memory_bytes, max(1, math.ceil(self.states.total / room)),
                      None if est is None else est.total)

    def fits(self) -> list[GPUFit]:
        return [self.fit(GPUS[g]) for g in WALL_GPUS]


def memory_wall(model: str | ModelSpec, dtype: str = "mixed", optimizer: str = "adam",
                micro_batch: int = 1, recompute: str = "none") -> MemoryWall:
    """Model states (ZeRO paper, Sec. 3.1) + activations (Korthikanti et al. 2022) on one GPU.

    With ``optimizer='none'`` (inference) there is no backward pass, so no activations are kept.
    """
    m = get_model(model)
    states = model_state_memory(m.num_params(), dtype, optimizer)
    acts = 0.0 if states.optimizer == "none" else activation_bytes(m, micro_batch, recompute)
    return MemoryWall(m, states, acts, micro_batch, recompute)


@dataclass(frozen=True)
class ComputeWall:
    """Time to train ``model`` on ``tokens`` with ``n_gpus`` GPUs at ``utilisation`` of peak,
    assuming perfect scaling (the best case; later chapters price the communication)."""

    model: ModelSpec
    tokens: float
    flops: float
    gpu: GPUSpec
    n_gpus: int
    utilisation: float
    dtype: str
    seconds: float

    @property
    def seconds_one_gpu(self) -> float:
        return self.seconds * self.n_gpus

    @property
    def days(self) -> float:
        return self.seconds / 86_400

    @property
    def days_one_gpu(self) -> float:
        return self.days * self.n_gpus

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s of one GPU in the compute type of ``dtype``."""
        return self.gpu.peak_flops(get_precision(self.dtype).compute_dtype)


def compute_wall(model: str | ModelSpec, tokens: float = 300e9, gpu: str | GPUSpec = "a100-80gb",
                 n_gpus: int = 1, utilisation: float = 0.5, dtype: str = "mixed") -> ComputeWall:
    """C = 6 N D training FLOPs (Kaplan et al. 2020) over n GPUs x peak x utilisation."""
    m = get_model(model)
    positive("tokens", tokens)
    flops = train_flops_6nd(m.num_params(), tokens)
    g = get_gpu(gpu)
    seconds = training_seconds(flops, n_gpus, g, utilisation, dtype)
    return ComputeWall(m, tokens, flops, g, n_gpus, utilisation, dtype, seconds)


def largest_trainable(gpu: str | GPUSpec, dtype: str = "mixed", optimizer: str = "adam",
                      micro_batch: int = 1, recompute: str = "none") -> MemoryWall:
    """The biggest GPT-style model (``gpt_like`` shapes, seq 2048) whose training memory —
    states and activations — fits one ``gpu``, found by bisection on the parameter count."""
    from parlab.costmodel.specs.models import gpt_like

    capacity = get_gpu(gpu).memory_bytes
    lo, hi = 1e8, 1e13  # gpt_like's shapes start near 5e7 parameters
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if memory_wall(gpt_like(mid), dtype, optimizer, micro_batch, recompute).total <= capacity:
            lo = mid
        else:
            hi = mid
    return memory_wall(gpt_like(lo), dtype, optimizer, micro_batch, recompute)
