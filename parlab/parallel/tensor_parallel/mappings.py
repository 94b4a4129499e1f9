"""Megatron-LM's communication operators for tensor parallelism, in torch autograd: f and g, the
gather / scatter pair, and sequence parallelism's all-gather / reduce-scatter, on any communicator.

Shoeybi et al. 2019 (Megatron-LM), Section 3 and Figure 3: an MLP is a column-parallel linear
(``f`` before it: identity forward, all-reduce backward) then a row-parallel one (``g`` after
it: all-reduce forward, identity backward); attention splits its heads the same way. So a
transformer layer does 2 all-reduces of b*s*h in the forward and 2 in the backward. Sequence
parallelism (Korthikanti et al. 2022, Section 4.2.2, Figure 5) keeps LayerNorm and dropout's
activations split along the sequence: ``g`` becomes a reduce-scatter and ``f`` an all-gather
(the same bytes on a ring), and the backward swaps them. Shapes: b batch, s sequence, h hidden,
t = tp (the communicator's world_size). The operator names are Megatron's
(megatron/core/tensor_parallel/mappings.py); ``f`` and ``g`` are the paper's. The layers built
on them are in ``layers``.
"""

from __future__ import annotations

import torch

from .algebra import all_gather_along, all_reduce, reduce_scatter_along, shard
from .split_backward import communicated

SEQ_DIM = 1  # activations are (b, s, h): sequence parallelism splits dim 1


def tp_degree(comm) -> int:
    """The tensor-parallel degree t of ``comm`` (its world_size); TypeError if not a communicator."""
    if not all(hasattr(comm, a) for a in ("rank", "world_size", "all_reduce", "all_gather")):
        raise TypeError(f"comm must be a parlab communicator (the TP group's), got "
                        f"{type(comm).__name__}")
    return comm.world_size


def check_divides(comm, **sizes: int) -> int:
    """t, if t divides every size (name=value), else ValueError naming the rule and values."""
    t = tp_degree(comm)
    for name, n in sizes.items():
        if n % t:
            raise ValueError(f"the tensor-parallel degree tp={t} (the communicator's world_size) "
                             f"must divide {name}={n}: each TP rank holds {name}/tp of it")
    return t


# ---------------------------------------------------------------------------- f, g and friends
class _CopyToModelParallelRegion(torch.autograd.Function):
    """f: identity forward, all-reduce backward (the input of a column-parallel layer)."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x

    @staticmethod
    def backward(ctx, grad):
        return communicated(ctx, lambda: all_reduce(ctx.comm, grad)), None


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """g: all-reduce forward, identity backward (the output of a row-parallel layer)."""

    @staticmethod
    def forward(ctx, x, comm):
        return all_reduce(comm, x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherFromModelParallelRegion(torch.autograd.Function):
    """All-gather along the last dim forward, keep this rank's block backward."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return all_gather_along(comm, x, -1)

    @staticmethod
    def backward(ctx, grad):
        return shard(grad, ctx.comm.rank, ctx.comm.world_size, -1).contiguous(), None


class _ScatterToModelParallelRegion(torch.autograd.Function):
    """Keep this rank's block of the last dim forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return shard(x, comm.rank, comm.world_size, -1).contiguous()

    @staticmethod
    def backward(ctx, grad):
        return communicated(ctx, lambda: all_gather_along(ctx.comm, grad, -1)), None


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """All-gather along the sequence forward, reduce-scatter backward (SP's f)."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return all_gather_along(comm, x, SEQ_DIM)

    @staticmethod
    def backward(ctx, grad):
        return communicated(ctx, lambda: reduce_scatter_along(ctx.comm, grad, SEQ_DIM)), None


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """Reduce-scatter along the sequence forward, all-gather backward (SP's g)."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return reduce_scatter_along(comm, x, SEQ_DIM)

    @staticmethod
    def backward(ctx, grad):
        return communicated(ctx, lambda: all_gather_along(ctx.comm, grad, SEQ_DIM)), None


def copy_to_tensor_model_parallel_region(x: torch.Tensor, comm) -> torch.Tensor:
    return _CopyToModelParallelRegion.apply(x, comm)


def reduce_from_tensor_model_parallel_region(x: torch.Tensor, comm) -> torch.Tensor:
    return _ReduceFromModelParallelRegion.apply(x, comm)


def gather_from_tensor_model_parallel_region(x: torch.Tensor, comm) -> torch.Tensor:
    return _GatherFromModelParallelRegion.apply(x, comm)


def scatter_to_tensor_model_parallel_region(x: torch.Tensor, comm) -> torch.Tensor:
    return _ScatterToModelParallelRegion.apply(x, comm)


def gather_from_sequence_parallel_region(x: torch.Tensor, comm) -> torch.Tensor:
    return _GatherFromSequenceParallelRegion.apply(x, comm)


def reduce_scatter_to_sequence_parallel_region(x: torch.Tensor, comm) -> torch.Tensor:
    return _ReduceScatterToSequenceParallelRegion.apply(x, comm)


f = copy_to_tensor_model_parallel_region  # the paper's names (Shoeybi et al. 2019, Figure 3)
g = reduce_from_tensor_model_parallel_region
