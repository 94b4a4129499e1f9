"""Pipeline pieces made of tensor-parallel blocks: virtual stage u of p * v holds a contiguous
block of Megatron blocks (``tensor_parallel.transformer.ParallelBlock``), the vocabulary-parallel embedding on
the first piece, the final LayerNorm, the vocabulary-parallel LM head and cross-entropy on the
last (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", Section 2.3: PP across the stages, TP inside each).

    tp_model, chunks = build_tp_chunks(cfg, tp_comm, p=2, v=1, pp_rank=0)
    h = chunks[0](x)                    # (b, s) ids -> (b, s, h)

Every rank builds the whole (tiny) ``TensorParallelGPT`` of its TP rank from the seed, so its
shards are the serial model's slices bit for bit, and keeps the pieces it runs; parameters carry
the serial model's names (``tensor_parallel.transformer.shard_tensors`` slices any serial tensor to match).
The chunks have the interface ``pipeline_parallel.executor.run_schedule`` expects of ``pipeline_parallel.stage.StageChunk``
(``chunk(x)``, ``chunk(x, targets)`` -> the loss on the last piece), so the same executor runs
them; the TP collectives happen inside each op, in the same order on every rank of a TP group.
Without sequence parallelism: every TP rank of a stage holds the full (b, s, h) activation and
sends it to its peer of the next stage (Megatron's scatter/gather of it over TP is not done).
"""

from __future__ import annotations

import torch
from torch import nn

from ..model import GPTConfig, check_tokens
from ..pipeline_parallel.stage import split_layers
from ..tensor_parallel.cross_entropy import vocab_parallel_cross_entropy
from ..tensor_parallel.transformer import TensorParallelGPT


class TensorParallelChunk(nn.Module):
    """Virtual stage ``u`` of ``n_virtual`` of a ``TensorParallelGPT``: ids -> hidden (first),
    hidden -> hidden, hidden -> loss (last, given targets). Shares the model's parameters."""

    def __init__(self, model: TensorParallelGPT, u: int, n_virtual: int):
        super().__init__()
        cfg = model.config
        start, end = split_layers(cfg.n_layer, n_virtual)[u]
        self.u, self.first, self.last = u, u == 0, u == n_virtual - 1
        self.layers = (start, end)
        self.config, self.comm = cfg, model.comm
        self.blocks = nn.ModuleList(model.blocks[start:end])
        self.wte = model.wte if self.first else None
        self.wpe = model.wpe if self.first else None
        self.ln_f = model.ln_f if self.last else None
        self.lm_head = model.lm_head if self.last else None  # shares wte's shard when tied

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if self.first:  # (b, s) ids -> (b, s, h)
            check_tokens(x, self.config, targets)
            x = self.wte(x) + self.wpe(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)  # (b, s, h) -> (b, s, h)
        if not self.last:
            return x
        logits = self.lm_head(self.ln_f(x))  # (b, s, h) @ (h, V/t) -> (b, s, V/t)
        if targets is None:
            return logits
        return vocab_parallel_cross_entropy(logits, targets, self.comm).mean()


def build_tp_chunks(config: GPTConfig, tp_comm, p: int, v: int,
                    pp_rank: int) -> tuple[TensorParallelGPT, list[TensorParallelChunk]]:
    """This TP rank's whole model and the v chunks pipeline rank ``pp_rank`` runs (chunk c is
    virtual stage c * p + pp_rank, Narayanan et al. 2021, Section 2.2)."""
    split_layers(config.n_layer, p * v)  # the rule, before any piece is built
    model = TensorParallelGPT(config, tp_comm)
    return model, [TensorParallelChunk(model, c * p + pp_rank, p * v) for c in range(v)]


def stage_of(name: str, config: GPTConfig, p: int, v: int) -> int:
    """The pipeline rank whose chunks own parameter ``name`` (a serial TinyGPT name): the
    embeddings on rank 0 (the tied LM head too: rank 0 writes it, the last rank holds a copy),
    block i on the rank of its virtual stage, the final LayerNorm and an untied head on the last."""
    if name.startswith(("wte.", "wpe.")):
        return 0
    if name.startswith("blocks."):
        layer = int(name.split(".")[1])
        for u, (start, end) in enumerate(split_layers(config.n_layer, p * v)):
            if start <= layer < end:
                return u % p
    return p - 1
