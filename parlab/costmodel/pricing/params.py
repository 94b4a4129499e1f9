"""Parameters one GPU holds under tensor and pipeline parallelism, before ZeRO: one layer's
Megatron-LM split (Shoeybi et al. 2019, Section 3) and a pipeline stage's layers and ends (the
vocabulary-parallel embedding and output layer)."""

from __future__ import annotations

import math

from parlab.costmodel.pricing.attention_terms import attention_param_split
from parlab.costmodel.pricing.pipeline_split import stage_index
from parlab.costmodel.specs.models import ModelSpec


def layer_params_per_gpu(model: ModelSpec, tp: int = 1) -> float:
    """Parameters of one transformer layer held by one of ``tp`` tensor-parallel ranks.

    Megatron-LM (Shoeybi et al. 2019, Section 3) splits the QKV and MLP-in matrices by columns
    (their biases too) and the attention-output and MLP-out matrices by rows; the row-parallel
    biases and the LayerNorms are replicated. With tp = 1 this is ``ModelSpec.params_per_layer``.
    The attention's part is ``attention_terms.attention_param_split`` (grouped-query attention,
    any head dimension, Q/K/V biases, sinks and QK-norm; with kv_heads < tp Megatron-Core still
    splits the K/V weights evenly and replicates only their activations).
    """
    h, f = model.hidden, model.ffn
    n_in = 2 if model.gated_mlp else 1
    attention, replicated = attention_param_split(model)  # (h, a d + 2 g d) QKV, (a d, h) out [+ biases]
    split = attention + (n_in + 1) * h * f  # (h, f) in [x2 gated], (f, h) out
    replicated += model.norm_params_per_layer()  # two norms (four with sandwich norms)
    if model.bias:
        split += n_in * f  # column-parallel MLP biases
        replicated += h  # row-parallel MLP-out bias
    return split / tp + replicated


def stage_layers(model: ModelSpec, pp: int, layout: tuple[int, ...] | None = None,
                 stage: str | int | None = None) -> int:
    """Layers on one pipeline rank: the given ``stage`` ('first', 'last' or a rank) of
    ``layout`` (``pipeline_split.pipeline_layout``: a plan's split), or its most loaded rank when
    ``stage`` is None. Without a layout, the most loaded rank of the split ceil(l / pp)."""
    if layout is None:
        return math.ceil(model.layers / pp)
    return max(layout) if stage is None else layout[stage_index(stage, pp)]


def stage_params(model: ModelSpec, tp: int, pp: int, stage: str | int,
                 layout: tuple[int, ...] | None = None) -> float:
    """Parameters one GPU of the 'first', 'last' (or i-th) pipeline stage holds (before ZeRO).

    Its layers (``stage_layers`` of ``layout``; ceil(l/pp) without one; ``layer_params_per_gpu``), plus on the first stage the vocabulary-
    parallel input embedding V h / t (Megatron-LM splits it over TP) and the position table, and
    on the last stage the output layer V h / t (a copy of the tied embedding when pp > 1) and the
    final norm. With pp = 1 one stage holds both ends.
    """
    h, V = model.hidden, model.vocab
    norm = 2 * h if model.bias else h
    n = stage_layers(model, pp, layout, stage if layout else None) * layer_params_per_gpu(model, tp)
    embedding = V * h / tp + (model.seq_len * h if model.learned_pos else 0) + (norm if model.embedding_norm else 0)
    output = norm + (V * h / tp if (pp > 1 or not model.tied_embeddings) else 0)
    if stage == "first" or stage == 0 or pp == 1:
        n += embedding
    if stage == "last" or stage == pp - 1 or pp == 1:
        n += output
    return n
