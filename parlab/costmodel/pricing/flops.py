"""Training compute: FLOPs (6ND and Megatron-LM Eq. 3) and the wall-clock time they take."""

from __future__ import annotations

from parlab.costmodel.pricing.memory import get_precision
from parlab.costmodel.specs._check import boolean, fraction, positive
from parlab.costmodel.specs.hardware import GPUSpec, get_gpu
from parlab.costmodel.specs.models import ModelSpec

SECONDS_PER_DAY = 86_400
SECONDS_PER_YEAR = 365.25 * SECONDS_PER_DAY


def train_flops_6nd(n_params: float, tokens: float) -> float:
    """C = 6 N D: forward 2ND + backward 4ND FLOPs (Kaplan et al. 2020, Section 2.1)."""
    return 6 * positive("n_params", n_params) * positive("tokens", tokens)


def megatron_flops_per_iteration(model: ModelSpec, global_batch: int, recompute: bool = True) -> float:
    """FLOPs of one training iteration, Narayanan et al. 2021, Eq. 3.

    With full activation recomputation (one extra forward pass):
    F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
    Without it, the transformer layers run three passes instead of four:
    F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
    Both count matmuls only (2 FLOPs per multiply-add), as the paper does.
    """
    positive("global_batch", global_batch, integer=True)
    boolean("recompute", recompute)
    B, s, L, h, V = global_batch, model.seq_len, model.layers, model.hidden, model.vocab  # L = l
    if recompute:
        return 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    return 72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))


def training_seconds(total_flops: float, n_gpus: int, gpu: str | GPUSpec,
                     utilisation: float = 0.5, dtype: str = "mixed") -> float:
    """Wall-clock seconds: total FLOPs / (GPUs x peak FLOP/s of ``dtype`` x utilisation).

    ``utilisation`` is the achieved fraction of peak (model FLOPs utilisation, MFU; Chowdhery
    et al. 2022, PaLM, Appendix B). Megatron-LM reaches 0.44-0.52 on A100s (2021, Table 1).
    """
    positive("total_flops", total_flops)
    positive("n_gpus", n_gpus, integer=True)
    fraction("utilisation", utilisation)
    g = get_gpu(gpu)
    peak = g.peak_flops(get_precision(dtype).compute_dtype)
    return total_flops / (n_gpus * peak * utilisation)


def implied_utilisation(total_flops: float, seconds: float, n_gpus: int, gpu: str | GPUSpec,
                        dtype: str = "mixed") -> float:
    """The utilisation at which ``n_gpus`` GPUs finish ``total_flops`` in ``seconds``
    (``training_seconds`` solved for utilisation): how to check a quoted training time."""
    positive("seconds", seconds)
    positive("n_gpus", n_gpus, integer=True)
    g = get_gpu(gpu)
    return total_flops / (seconds * n_gpus * g.peak_flops(get_precision(dtype).compute_dtype))
