"""TinyGPT cut into pipeline pieces: virtual stage u of p * v holds a contiguous block of layers,
the embedding on the first, the final LayerNorm and LM head on the last (Megatron-LM's split;
with v chunks per rank, chunk c of rank r is virtual stage c * p + r, Narayanan et al. 2021,
Sec. 2.2).

    pieces = split_layers(n_layer=8, pieces=4)        # [(0, 2), (2, 4), (4, 6), (6, 8)]
    chunk = StageChunk(model, u=0, n_virtual=4)       # wte + wpe + blocks 0-1
    h = chunk(x)                                      # (b, s) ids -> (b, s, h)

Every rank builds the whole (tiny) model from its seed and keeps the pieces it runs, so the
weights are the serial model's bit for bit. With tied embeddings the first and the last piece
both use the token embedding; their gradients are summed between the two ranks after the step
(``sync_tied_grads``: Megatron-LM's embedding group all-reduce, here a pair of p2p messages).
"""

from __future__ import annotations

import torch
from torch import nn

from ..model import GPTConfig, TinyGPT, lm_loss

TIED = "wte.weight"


def split_layers(n_layer: int, pieces: int) -> list[tuple[int, int]]:
    """[start, end) of each piece's blocks: as even as possible, the earlier pieces one more.

    More pieces than layers is a ValueError: every virtual stage needs at least one block.
    """
    if pieces > n_layer:
        raise ValueError(f"more pipeline pieces than layers: p x v = {pieces} pieces for "
                         f"n_layer={n_layer} (each virtual stage needs at least one layer)")
    base, extra = divmod(n_layer, pieces)
    bounds, start = [], 0
    for i in range(pieces):
        end = start + base + (i < extra)
        bounds.append((start, end))
        start = end
    return bounds


class StageChunk(nn.Module):
    """Virtual stage ``u`` of ``n_virtual``: ids -> hidden (first), hidden -> hidden, hidden ->
    logits (last; the loss when targets are given). Shares ``model``'s parameters."""

    def __init__(self, model: TinyGPT, u: int, n_virtual: int):
        super().__init__()
        start, end = split_layers(model.config.n_layer, n_virtual)[u]
        self.u, self.first, self.last = u, u == 0, u == n_virtual - 1
        self.layers = (start, end)
        self.blocks = nn.ModuleList(model.blocks[start:end])
        self.wte = model.wte if self.first or (self.last and model.config.tie_embeddings) else None
        self.wpe = model.wpe if self.first else None
        self.drop = model.drop if self.first else None
        self.ln_f = model.ln_f if self.last else None
        self.lm_head = model.lm_head if self.last else None

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if self.first:  # (b, s) ids -> (b, s, h)
            pos = torch.arange(x.shape[1], device=x.device)
            x = self.drop(self.wte(x) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)  # (b, s, h) -> (b, s, h)
        if not self.last:
            return x
        logits = self.lm_head(self.ln_f(x))  # (b, s, h) @ (h, V) -> (b, s, V)
        return logits if targets is None else lm_loss(logits, targets)


def owned_params(model: TinyGPT, chunks: list[StageChunk]) -> dict[str, nn.Parameter]:
    """The model's parameters (by name, a tied weight once) that these chunks use."""
    mine = {id(p) for c in chunks for p in c.parameters()}
    return {name: p for name, p in model.named_parameters() if id(p) in mine}


def sync_tied_grads(comm, model: TinyGPT, p: int) -> None:
    """Sum the tied embedding's gradient between the ranks of the first and the last piece
    (rank 0 and rank p - 1): the serial model's gradient is the sum of both uses."""
    if not model.config.tie_embeddings or p == 1 or comm.rank not in (0, p - 1):
        return
    grad = model.wte.weight.grad
    grad = torch.zeros_like(model.wte.weight) if grad is None else grad
    peer = p - 1 if comm.rank == 0 else 0
    comm.send(grad.contiguous(), peer)
    other = comm.recv(peer)
    model.wte.weight.grad = grad + other


def build_chunks(config: GPTConfig, p: int, v: int, rank: int) -> tuple[TinyGPT, list[StageChunk]]:
    """The whole model (same seed on every rank) and this rank's v chunks, chunk c = virtual
    stage c * p + rank."""
    model = TinyGPT(config)
    split_layers(config.n_layer, p * v)  # the rule, before any piece is built
    return model, [StageChunk(model, c * p + rank, p * v) for c in range(v)]
