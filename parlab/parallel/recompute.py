"""Activation recomputation on TinyGPT with ``torch.utils.checkpoint``: none, full (every block
re-run in the backward pass) and selective (only the attention core, Korthikanti et al. 2022,
Sec. 5), with the bytes autograd really stores measured by saved-tensor hooks and set beside the
cost model's Table 2 formulas for the same tiny model.

    run = measure_recompute(GPTConfig(), x, y, "selective", dtype=torch.bfloat16)
    run.layer_bytes        # bytes each block saved for the backward pass (measured)
    modelled_layer_bytes(GPTConfig(), 4, "selective", torch.bfloat16)   # the cost model's

Checkpointing (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost") keeps only a
segment's inputs and re-runs its forward in the backward pass. Full recompute checkpoints every
block: a layer keeps its input, 2 s b h bytes at 16 bits. Selective recompute checkpoints only
softmax(Q K^T) V, whose s x s scores are the a s^2 b part of Table 2 that grows with s, and keeps
the 34 s b h rest (32 s b h here, with no dropout masks).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from parlab.costmodel import RECOMPUTE, activation_bytes_per_layer
from parlab.costmodel.specs._check import canonical, positive

from .measure import SavedActivations
from .model import (
    Block,
    GPTConfig,
    TinyGPT,
    causal_attention,
    check_tokens,
    lm_loss,
    merge_heads,
    split_heads,
)

MODEL_BYTES = 2  # Korthikanti et al. 2022, Table 2 counts 16-bit activations


def selective_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    """``Block.forward`` with only the attention core checkpointed (Korthikanti et al. 2022, Sec. 5):
    the QKV output and every linear layer's input are kept, the s x s scores are recomputed."""
    attn = block.attn
    qkv = attn.qkv(block.ln_1(x))  # (b, s, h) @ (h, 3h) -> (b, s, 3h)
    q, k, v = split_heads(qkv, attn.n_head)  # (b, a, s, d) each
    y = checkpoint(causal_attention, q, k, v, attn.attn_drop, use_reentrant=False)  # (b, a, s, d)
    x = x + attn.resid_drop(attn.proj(merge_heads(y)))  # (b, s, h) @ (h, h) -> (b, s, h)
    return x + block.mlp(block.ln_2(x))


def block_forward(block: Block, x: torch.Tensor, recompute: str = "none") -> torch.Tensor:
    """One block under a recompute policy: 'none', 'full' (the whole block is a checkpoint; only
    its input x (b, s, h) is kept) or 'selective' (``selective_block``)."""
    recompute = canonical("recompute", recompute, RECOMPUTE)
    if recompute == "full":
        return checkpoint(block, x, use_reentrant=False)
    if recompute == "selective":
        return selective_block(block, x)
    return block(x)


def forward(model: TinyGPT, idx: torch.Tensor, targets: torch.Tensor, recompute: str = "none",
            acts: SavedActivations | None = None) -> torch.Tensor:
    """``TinyGPT``'s loss with every block under ``recompute``; with ``acts``, what block i saves is
    tagged ``("layer", i)`` and the rest (embedding, final norm, head, loss) ``"ends"``."""
    check_tokens(idx, model.config, targets)
    acts = acts if acts is not None else SavedActivations(model.parameters())
    with acts.tag("ends"):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = model.drop(model.wte(idx) + model.wpe(pos))  # (b, s, h)
    for i, block in enumerate(model.blocks):
        with acts.tag(("layer", i)):
            x = block_forward(block, x, recompute)
    with acts.tag("ends"):
        return lm_loss(model.lm_head(model.ln_f(x)), targets)  # (b, s, h) @ (h, V) -> (b, s, V)


@dataclass(frozen=True)
class RecomputeRun:
    """One forward + backward of TinyGPT under a recompute policy, measured."""

    recompute: str
    dtype: str
    loss: float
    grads: dict[str, torch.Tensor]  # parameter name -> gradient
    layer_bytes: list[int]  # bytes each block saved for the backward pass
    ends_bytes: int  # saved outside the blocks (token ids, final norm, head, loss)
    peak_bytes: int  # the most saved bytes alive at once (at the end of the forward)


def measure_recompute(cfg: GPTConfig, idx: torch.Tensor, targets: torch.Tensor, recompute: str = "none",
                      dtype: torch.dtype = torch.float32) -> RecomputeRun:
    """Build ``TinyGPT(cfg)`` in ``dtype``, run forward and backward on one batch under ``recompute``
    and return what was stored (``SavedActivations``), the loss and the gradients."""
    recompute = canonical("recompute", recompute, RECOMPUTE)
    model = TinyGPT(cfg).to(dtype)
    acts = SavedActivations(model.parameters())
    loss = forward(model, idx, targets, recompute, acts)
    peak = acts.peak_bytes
    loss.backward()
    if acts.live_bytes:
        raise RuntimeError(f"{acts.live_bytes} saved bytes still alive after backward")
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    layers = [acts.bytes_of.get(("layer", i), 0) for i in range(cfg.n_layer)]
    return RecomputeRun(recompute, str(dtype).removeprefix("torch."), loss.item(), grads, layers,
                        acts.bytes_of.get("ends", 0), peak)


def step_seconds(cfg: GPTConfig, idx: torch.Tensor, targets: torch.Tensor, recompute: str = "none",
                 repeats: int = 3) -> float:
    """Best-of-``repeats`` wall time of one forward + backward under ``recompute`` (fp32). Full
    recompute re-runs every block's forward: about one forward more, 4/3 of the step's FLOPs
    (Korthikanti et al. 2022, Sec. 5: 30-40% overhead); selective re-runs only the attention core."""
    positive("repeats", repeats, integer=True)
    model = TinyGPT(cfg)
    best = float("inf")
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        forward(model, idx, targets, recompute).backward()
        best = min(best, time.perf_counter() - t0)
    return best


def modelled_layer_bytes(cfg: GPTConfig, micro_batch: int, recompute: str = "none",
                         dtype: torch.dtype = torch.bfloat16) -> float:
    """The cost model's bytes per layer for this tiny model (``activation_bytes_per_layer``,
    Korthikanti et al. 2022, Table 2), scaled from its 16-bit count to ``dtype``'s element size."""
    per_16bit = activation_bytes_per_layer(cfg.model_spec(), micro_batch, recompute=recompute)
    return per_16bit * torch.finfo(dtype).bits / 8 / MODEL_BYTES


def untabled_layer_bytes(cfg: GPTConfig, micro_batch: int, recompute: str = "none",
                         dtype: torch.dtype = torch.bfloat16) -> int:
    """What TinyGPT's block stores beyond Table 2's count, in bytes: each LayerNorm's per-row mean
    and 1/std (2 x s b elements per norm, two norms; Table 2 counts only the norm's input; PyTorch's
    CPU kernel keeps them in the input's dtype, its CUDA kernel in fp32) and
    the s x s bool causal mask ``masked_fill`` keeps (s^2 B, built per call; a fused attention
    kernel keeps none). Selective recompute re-builds the mask, full recompute both."""
    recompute = canonical("recompute", recompute, RECOMPUTE)
    s, b = cfg.seq_len, micro_batch
    if recompute == "full":
        return 0
    stats = 2 * 2 * s * b * torch.finfo(dtype).bits // 8
    return stats + (s * s if recompute == "none" else 0)


def recompute_table(cfg: GPTConfig, idx: torch.Tensor, targets: torch.Tensor,
                    dtype: torch.dtype = torch.bfloat16) -> list[dict]:
    """One row per policy: measured bytes per layer, the cost model's, the untabled extras, and
    the model's total per layer + extras (equal to the measurement), and the loss."""
    rows = []
    for policy in RECOMPUTE:
        run = measure_recompute(cfg, idx, targets, policy, dtype)
        model = modelled_layer_bytes(cfg, idx.shape[0], policy, dtype)
        extra = untabled_layer_bytes(cfg, idx.shape[0], policy, dtype)
        rows.append({"recompute": policy, "measured B/layer": run.layer_bytes[0], "Table 2 B/layer": model,
                     "norm stats + mask B": extra, "model + extras B": model + extra,
                     "loss": run.loss})
    return rows
