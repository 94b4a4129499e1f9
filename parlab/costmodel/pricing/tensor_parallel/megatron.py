"""Megatron 1D tensor parallelism of one transformer layer: its weight matrices and the
collectives each GPU runs (Shoeybi et al. 2019, "Megatron-LM", Section 3, Figure 3), with
sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", Section 4.2.2) and full recomputation.

A ring of p GPUs; per layer 2 all-reduces of n h forward (``g`` after attention and after the
MLP) and 2 backward (``f``); with sequence parallelism an all-gather + a reduce-scatter in place
of each; full recomputation repeats the 2 forward ones.
"""

from __future__ import annotations

from parlab.costmodel.pricing.layer_collective import Collective
from parlab.costmodel.pricing.memory import RECOMPUTE
from parlab.costmodel.specs._check import boolean, canonical, positive
from parlab.costmodel.specs.models import ModelSpec


def layer_linears(model: ModelSpec) -> list[tuple[str, int, int]]:
    """(name, in, out) of a layer's weight matrices (Shoeybi et al. 2019, Section 3; a gated MLP
    has two h -> f matrices, counted as one h -> 2f). QKV is h -> a d + 2 g d and the output
    a d -> h (3h and h for multi-head attention; grouped-query attention, Ainslie et al. 2023); an
    exact ``attention_params`` count (latent attention) is laid out as one h -> n / h - h matrix
    and the output h -> h (the same number of weights, to within h)."""
    h, f, q = model.hidden, model.ffn, model.q_width
    n_in = 2 if model.gated_mlp else 1
    qkv = model.attention_params // h - q if model.attention_params else q + 2 * model.kv_width
    return [("QKV", h, qkv), ("attention out", q, h), ("MLP in", h, n_in * f), ("MLP out", f, h)]


def layer_matrix_params(model: ModelSpec) -> int:
    """Elements of a layer's weight matrices: 4h^2 + (n+1) h f (QKV 3h^2, output h^2, MLP; with
    grouped-query attention ``layer_linears``' widths), 12h^2 for GPT (Narayanan et al. 2021, Section 5.1); biases and LayerNorms are the rest."""
    return sum(k * m for _, k, m in layer_linears(model))


def tp_layer_collectives(micro_batch: int, seq_len: int, hidden: int, tp: int,
                         sequence_parallel: bool = False, recompute: str = "none") -> tuple[Collective, ...]:
    """Megatron 1D's collectives of one transformer layer on one micro-batch (Shoeybi et al.
    2019, Section 3: ``g`` all-reduces b s h after attention and after the MLP in the forward,
    ``f`` before each in the backward). With ``sequence_parallel`` each all-reduce becomes an
    all-gather (output b s h) and a reduce-scatter (input b s h), the same ring bytes (Korthikanti
    et al. 2022, Section 4.2.2). Full recomputation runs the forward's 2 again; selective
    recomputation only redoes attention scores, no communication. Empty for tp = 1."""
    for name, v in (("micro_batch", micro_batch), ("seq_len", seq_len), ("hidden", hidden), ("tp", tp)):
        positive(name, v, integer=True)
    boolean("sequence_parallel", sequence_parallel)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    if tp == 1:
        return ()
    n = micro_batch * seq_len * hidden
    phases = ["forward", "backward"] + (["recompute"] if recompute == "full" else [])
    if sequence_parallel:
        return tuple(Collective(ph, op, 2, n, tp, what) for ph in phases for op, what in
                     (("all_gather", "SP: into attention and MLP"),
                      ("reduce_scatter", "SP: out of attention and MLP")))
    what = {"backward": "f before attention and MLP"}
    return tuple(Collective(ph, "all_reduce", 2, n, tp, what.get(ph, "g after attention and MLP"))
                 for ph in phases)
