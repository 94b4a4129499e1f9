"""A rank's part of the sequence under context parallelism: the positions of the naive split
(rank r: the r-th of cp contiguous blocks, as DeepSpeed-Ulysses holds it) or of the load-balanced
causal split (rank r: chunks r and 2 cp - 1 - r of 2 cp, Megatron-Core and Llama 3 Section
3.3.2), from the one definition in ``parlab.costmodel.pricing.context_parallel.rank_positions``."""

from __future__ import annotations

import torch

from parlab.costmodel.pricing.context_parallel import rank_positions


def shard_sequence(x: torch.Tensor, rank: int, cp: int, balanced: bool = True, dim: int = -2) -> torch.Tensor:
    """Rank ``rank``'s positions of ``x`` along ``dim`` (the sequence, s long): s / cp of them,
    in order; a copy: (..., s, d) -> (..., s / cp, d) for dim -2."""
    index = torch.tensor(rank_positions(x.shape[dim], rank, cp, balanced), device=x.device)
    return x.index_select(dim, index)


def unshard_sequence(parts: list[torch.Tensor], balanced: bool = True, dim: int = -2) -> torch.Tensor:
    """The whole sequence from every rank's part (``parts[r]`` is rank r's), the inverse of
    ``shard_sequence``: (..., s / cp, d) x cp -> (..., s, d) for dim -2. The parts must be
    non-empty in number and share one shape (a ValueError otherwise)."""
    if not isinstance(parts, (list, tuple)) or not parts:
        raise ValueError(f"unshard_sequence needs every rank's part, a list of one tensor per rank "
                         f"(cp >= 1), got {parts!r}")
    if not all(isinstance(p, torch.Tensor) for p in parts):
        raise TypeError(f"unshard_sequence: the parts must be torch tensors, got "
                        f"{', '.join(type(p).__name__ for p in parts)}")
    shapes = [tuple(p.shape) for p in parts]
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"unshard_sequence: every rank holds s / cp positions, so the parts must "
                         f"share one shape; got {', '.join(map(str, shapes))}")
    cp = len(parts)
    s = parts[0].shape[dim] * cp
    order = [p for r in range(cp) for p in rank_positions(s, r, cp, balanced)]
    whole = torch.cat(parts, dim=dim)  # positions in ``order``
    inverse = torch.empty(s, dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(s)
    return whole.index_select(dim, inverse.to(whole.device))
