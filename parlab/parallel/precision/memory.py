"""The memory 16-bit weights and activations save, measured: TinyGPT's parameter bytes and the
bytes one forward saves for the backward (``measure.SavedActivations``), in one dtype (2 bytes an
element in fp16 and bf16, 4 in fp32)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..measure import SavedActivations
from ..model import GPTConfig, TinyGPT
from .formats import as_dtype


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
    dt = as_dtype(dtype)
    model = TinyGPT(cfg).to(dt)
    acts = SavedActivations(model.parameters())
    with acts.tag("forward"):
        loss = model(idx, targets)
    saved = acts.peak_bytes
    del loss
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return PrecisionMemory(str(dt).removeprefix("torch."), weights, saved)
