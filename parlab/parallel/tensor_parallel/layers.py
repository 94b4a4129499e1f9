"""Megatron-LM's tensor-parallel layers in torch: column- and row-parallel linear layers and the
vocabulary-parallel embedding (Shoeybi et al. 2019, Section 3, Eq. 3), built on the operators of
``mappings``, on any communicator (every layer takes the TP group's communicator).

Shapes: b batch, s sequence, h hidden, t = tp (the communicator's world_size). The layer names are
Megatron's (megatron/core/tensor_parallel/layers.py). The full model (``TensorParallelGPT``)
lives in ``transformer``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .algebra import all_reduce, shard
from .mappings import (
    check_divides,
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
    tp_degree,
)


def _master_weight(out_features: int, in_features: int, seed: int) -> torch.Tensor:
    """The full (out, in) weight every rank draws the same way before keeping its block
    (Megatron's _initialize_affine_weight_cpu): N(0, 0.02) from a seeded generator."""
    g_ = torch.Generator().manual_seed(seed)
    return torch.empty(out_features, in_features).normal_(0.0, 0.02, generator=g_)


def _mark(p: nn.Parameter, partition_dim: int | None, stride: int = 1,
          sequence_parallel: bool = False) -> nn.Parameter:
    """Megatron's parameter attributes: which dim is split over the TP ranks (None: replicated),
    in how many interleaved groups (``stride``: 3 for fused q|k|v), and whether its gradient is
    partial per rank because it acts on a sequence shard (then it must be all-reduced)."""
    p.partition_dim, p.partition_stride, p.sequence_parallel = partition_dim, stride, sequence_parallel
    return p


class ColumnParallelLinear(nn.Module):
    """Y = X A + b with A's output columns split: rank i computes Y_i = X A_i + b_i
    (Shoeybi et al. 2019, Eq. 3). ``gather_output`` all-gathers the full Y; otherwise Y_i feeds
    a RowParallelLinear. With ``sequence_parallel`` the input is a sequence shard, all-gathered
    first (and the input gradient reduce-scattered). ``stride`` = 3 keeps q | k | v blocks."""

    def __init__(self, in_features: int, out_features: int, comm, gather_output: bool = False,
                 bias: bool = True, sequence_parallel: bool = False, stride: int = 1, seed: int = 0):
        super().__init__()
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
            raise ValueError(f"stride must be an integer >= 1 (the groups side by side in the output "
                             f"columns: 3 for fused q | k | v), got {stride!r}")
        if out_features % stride:
            raise ValueError(f"out_features={out_features} must be a multiple of stride={stride}")
        name = "out_features / stride" if stride > 1 else "out_features"
        t = check_divides(comm, **{name: out_features // stride})
        self.comm, self.gather_output, self.sequence_parallel = comm, gather_output, sequence_parallel
        self.in_features, self.out_features = in_features, out_features
        full = _master_weight(out_features, in_features, seed)
        self.weight = _mark(nn.Parameter(shard_strided(full, comm.rank, t, 0, stride).clone()), 0, stride)
        self.bias = _mark(nn.Parameter(torch.zeros(out_features // t)), 0, stride) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sequence_parallel:
            x = gather_from_sequence_parallel_region(x, self.comm)  # (b, s/t, h) -> (b, s, h)
        else:
            x = copy_to_tensor_model_parallel_region(x, self.comm)  # f
        y = F.linear(x, self.weight, self.bias)  # (b, s, h) @ (h, n/t) -> (b, s, n/t)
        return gather_from_tensor_model_parallel_region(y, self.comm) if self.gather_output else y


class RowParallelLinear(nn.Module):
    """Y = X A + b with A's input rows split: rank i computes X_i A_i, the ranks sum them
    (``g``, or a reduce-scatter along the sequence with ``sequence_parallel``), then add b
    (Shoeybi et al. 2019, Eq. 2). ``input_is_parallel=False`` splits a full X first."""

    def __init__(self, in_features: int, out_features: int, comm, input_is_parallel: bool = True,
                 bias: bool = True, sequence_parallel: bool = False, seed: int = 0):
        super().__init__()
        t = check_divides(comm, in_features=in_features)
        if sequence_parallel and not input_is_parallel:
            raise ValueError("RowParallelLinear(sequence_parallel=True) needs input_is_parallel=True: "
                             "its input is the column-parallel output, split along the hidden dim")
        self.comm, self.input_is_parallel = comm, input_is_parallel
        self.sequence_parallel = sequence_parallel
        self.in_features, self.out_features = in_features, out_features
        full = _master_weight(out_features, in_features, seed)
        self.weight = _mark(nn.Parameter(shard(full, comm.rank, t, 1).clone()), 1)
        self.bias = (_mark(nn.Parameter(torch.zeros(out_features)), None,
                           sequence_parallel=sequence_parallel) if bias else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = scatter_to_tensor_model_parallel_region(x, self.comm)  # (b, s, n) -> (b, s, n/t)
        y = F.linear(x, self.weight)  # (b, s, n/t) @ (n/t, h) -> (b, s, h): rank i's term
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel_region(y, self.comm)  # -> (b, s/t, h)
        else:
            y = reduce_from_tensor_model_parallel_region(y, self.comm)  # g
        return y if self.bias is None else y + self.bias


class VocabParallelEmbedding(nn.Module):
    """A token embedding whose vocabulary rows are split: rank i holds ids
    [i V/t, (i+1) V/t), looks up those it owns, writes zeros for the rest, and the ranks sum
    (``g``; a reduce-scatter along the sequence with ``sequence_parallel``) (Megatron-LM,
    megatron/core/tensor_parallel/layers.py)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, comm,
                 sequence_parallel: bool = False, seed: int = 0):
        super().__init__()
        t = check_divides(comm, num_embeddings=num_embeddings)
        self.comm, self.sequence_parallel = comm, sequence_parallel
        self.num_embeddings = num_embeddings
        per_rank = num_embeddings // t
        self.vocab_start, self.vocab_end = comm.rank * per_rank, (comm.rank + 1) * per_rank
        full = _master_weight(num_embeddings, embedding_dim, seed)
        self.weight = _mark(nn.Parameter(shard(full, comm.rank, t, 0).clone()), 0)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        check_ids(idx, self.num_embeddings)  # on every rank, before the all-reduce
        foreign = (idx < self.vocab_start) | (idx >= self.vocab_end)  # ids another rank owns
        local = (idx - self.vocab_start).masked_fill(foreign, 0)
        part = F.embedding(local, self.weight).masked_fill(foreign.unsqueeze(-1), 0.0)  # (b, s, h)
        if self.sequence_parallel:
            return reduce_scatter_to_sequence_parallel_region(part, self.comm)  # (b, s/t, h)
        return reduce_from_tensor_model_parallel_region(part, self.comm)


def check_ids(idx: torch.Tensor, vocab: int, what: str = "token ids") -> None:
    """Token ids must be integers in [0, vocab), as ``nn.Embedding`` requires: IndexError naming
    the first id out of range (no rank owns it; masked, it would embed as a zero vector)."""
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise TypeError(f"{what} must be an integer tensor, got {idx.dtype}")
    bad = (idx < 0) | (idx >= vocab)
    if bool(bad.any()):
        raise IndexError(f"{what}: id {int(idx[bad][0])} is out of range: ids must be in "
                         f"[0, {vocab}) (the vocabulary size)")


def shard_strided(full: torch.Tensor, rank: int, world: int, dim: int, stride: int = 1) -> torch.Tensor:
    """Rank ``rank``'s block of ``full`` along ``dim`` when the dim holds ``stride`` groups side
    by side (q | k | v) and each group is split: the rank's block of every group, concatenated."""
    if stride == 1:
        return shard(full, rank, world, dim)
    groups = full.chunk(stride, dim)
    return torch.cat([shard(grp, rank, world, dim) for grp in groups], dim)


def allreduce_sequence_parallel_grads(model: nn.Module, comm) -> None:
    """Sum, over the TP group, the gradients of replicated parameters that act on a sequence
    shard (LayerNorms, row-parallel biases, position embeddings under SP): each rank saw only
    its part of the sequence (Megatron-LM, finalize_model_grads). One all-reduce of one buffer."""
    grads = [p.grad for p in model.parameters()
             if getattr(p, "sequence_parallel", False) and p.grad is not None]
    if not grads or tp_degree(comm) == 1:
        return
    total = all_reduce(comm, torch.cat([gr.reshape(-1) for gr in grads]))
    offset = 0
    for gr in grads:
        gr.copy_(total[offset:offset + gr.numel()].view_as(gr))
        offset += gr.numel()
