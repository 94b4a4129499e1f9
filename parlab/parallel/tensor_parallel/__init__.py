"""Megatron tensor parallelism (guide 1.7, 1.15; chapter 05): each layer's weights split over the
TP ranks, the activations combined by the f / g operators; sequence parallelism beside it.

    algebra.py         column- / row-parallel Y = XA on plain arrays, forward and backward
    mappings.py        f / g and the other region operators (Megatron's mappings.py)
    layers.py          ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding,
                       sequence-parallel gradient sums
    cross_entropy.py   the vocabulary-parallel cross-entropy (no gathered logits)
    transformer.py     ParallelAttention, ParallelMLP, ParallelBlock, TensorParallelGPT
    split_backward.py  B and W of a zero-bubble split backward that communicate once
"""

from .algebra import (
    column_parallel_backward,
    column_parallel_forward,
    row_parallel_backward,
    row_parallel_forward,
    shard,
)
from .cross_entropy import vocab_parallel_cross_entropy
from .layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    allreduce_sequence_parallel_grads,
)
from .mappings import (
    copy_to_tensor_model_parallel_region,
    f,
    g,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from .transformer import (
    ParallelAttention,
    ParallelBlock,
    ParallelMLP,
    TensorParallelGPT,
    load_serial,
    shard_tensors,
)

__all__ = [
    "column_parallel_backward", "column_parallel_forward", "row_parallel_backward",
    "row_parallel_forward", "shard",
    "copy_to_tensor_model_parallel_region", "f", "g", "gather_from_sequence_parallel_region",
    "gather_from_tensor_model_parallel_region", "reduce_from_tensor_model_parallel_region",
    "reduce_scatter_to_sequence_parallel_region", "scatter_to_tensor_model_parallel_region",
    "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
    "allreduce_sequence_parallel_grads", "vocab_parallel_cross_entropy",
    "ParallelAttention", "ParallelBlock", "ParallelMLP", "TensorParallelGPT", "load_serial",
    "shard_tensors",
]
