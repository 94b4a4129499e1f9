"""Context parallelism per transformer layer: ring attention, all-gather attention and DeepSpeed-
Ulysses beside Megatron sequence parallelism: what each splits, the bytes each rank sends, the attention work each rank
does under a causal mask, and the activation memory per GPU (pure Python: no numpy, no torch).

A layer sees b sequences of s tokens, hidden h, a heads (a_kv key/value heads: a for multi-head
attention), B bytes per element, split over d GPUs (d = cp; d = tp for Megatron-SP):

=============  ==================================  =============================================
method         splits                              sends per rank, one layer, forward
=============  ==================================  =============================================
megatron-sp    the weights (TP), and LayerNorm /   2 all-gathers (out b s h) + 2 reduce-scatters
               dropout activations along s         (in b s h): 4 (d-1)/d b s h B
ulysses        s outside attention, the heads      all-to-all Q, K, V in and O out:
               inside it (a % d == 0)              (d-1)/d^2 b s (2 h + 2 h_kv) B
ring           s everywhere; K, V go round a       d-1 sends of one rank's K, V block:
               ring of d ranks                     (d-1) 2 b (s/d) h_kv B
all-gather     s everywhere; K, V of the whole     one all-gather of K, V: (d-1)/d of the
               sequence gathered before attention  sequence's K, V, (d-1)/d 2 b s h_kv B
=============  ==================================  =============================================

h_kv = h a_kv / a. The backward sends the same again for Megatron-SP (the collectives swap) and
Ulysses (dO in, dQ, dK, dV out: the same four all-to-alls reversed), and for ring attention the K,
V blocks once more (d-1 sends) plus the gradients dK, dV travelling with them back to their owner
(d sends: after the last step a block's dK, dV is one hop short of home); all-gather attention
gathers K, V again and reduce-scatters dK, dV, (d-1)/d 2 b s h_kv B each. Sources:

- Megatron-SP: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", Section 4.2.2 (all-gather + reduce-scatter in place of TP's all-reduce); its
  collectives are ``tensor_parallel.tp_layer_collectives``' "1d-sp", priced the same way here.
- Ulysses: Jacobs et al. 2023, "DeepSpeed Ulysses: System Optimizations for Enabling Training of
  Extreme Long Sequence Transformer Models", Section 3.1-3.2 (four all-to-alls per layer, each
  rank's share (d-1)/d of its b s h / d block: "4 N h / P" per link); the head count bounds d.
- Ring attention: Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers for
  Near-Infinite Context", Section 3 (K, V blocks passed round a ring, each step's transfer
  overlapped with the block's attention, blockwise softmax as FlashAttention: Dao et al. 2022,
  Section 3.1); the backward as ring-flash-attention and Megatron-Core's context parallelism
  (transformer_engine's ``AttnFuncWithCPAndKVP2P``) run it.
- All-gather attention: Dubey et al. 2024, "The Llama 3 Herd of Models", Section 3.3.2 (Llama 3's
  production CP: K and V all-gathered in the CP group, then each rank's queries attend to them,
  with the load-balanced split below); the passes as Megatron-Core's cp_comm_type "all_gather"
  runs them (TransformerEngine's ``AttnFuncWithCPAndKVAllGather``, transformer_engine/pytorch/
  attention/dot_product_attention/context_parallel.py: the forward gathers K and V and keeps only
  the rank's own, the backward gathers them again and reduce-scatters dK, dV). With grouped-query
  attention K, V are a_kv / a of Q's width, which is why Llama 3 chose it (``allgather_bytes``).
- Load-balanced causal split: with a causal mask a naive split gives rank i (i+1) blocks of work
  (the last rank d times the first's); cutting s into 2d chunks and giving rank i chunks i and
  2d-1-i gives every rank the same (Megatron-Core's context parallelism; Dubey et al. 2024, "The
  Llama 3 Herd of Models", Section 3.3.2). ``rank_chunks`` is that split, used by the runtime
  (``parlab.parallel.context_parallel``) and by ``causal_work`` here.

Activation memory: every term of Korthikanti et al.'s Table 2 (``memory.activation_bytes_per_layer``)
is per token, and the attention scores each rank keeps are its s/d queries against all s keys, so
all three divide one layer's activations by d. What differs is the rest: Megatron-SP also splits
the weights (it is TP, d <= heads, usually inside one node), CP keeps them whole (its ranks
average their gradients like data parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing.cp_overlap import (  # noqa: F401 - re-exported
    GatherCost,
    RingOverlap,
    allgather_cost,
    ring_overlap,
    ring_step_flops,
)
from parlab.costmodel.pricing.cp_split import (  # noqa: F401 - re-exported: the split lives below
    _heads,
    _shape,
    causal_pairs,
    causal_work,
    check_ring,
    check_ulysses,
    gathered_kv_bytes,
    imbalance,
    kv_block_bytes,
    rank_chunks,
    rank_positions,
)
from parlab.costmodel.pricing.memory import RECOMPUTE, activation_bytes_per_layer
from parlab.costmodel.specs._check import boolean, canonical, positive
from parlab.costmodel.specs.models import ModelSpec

METHODS = ("megatron-sp", "ulysses", "ring", "all-gather")
LABELS = {"megatron-sp": "Megatron sequence parallelism", "ulysses": "DeepSpeed-Ulysses",
          "ring": "ring attention", "all-gather": "all-gather attention (Llama 3)"}
SPLITS = {"megatron-sp": "weights over TP; LayerNorm/dropout activations along the sequence",
          "ulysses": "sequence outside attention; heads inside it",
          "ring": "sequence everywhere; K/V blocks go round the ring",
          "all-gather": "sequence everywhere; the whole sequence's K/V gathered for attention"}
COLLECTIVES = {"megatron-sp": "all-gather + reduce-scatter", "ulysses": "all-to-all",
               "ring": "point-to-point (ring)", "all-gather": "all-gather (K, V) + reduce-scatter (dK, dV)"}
LIMITS = {"megatron-sp": "degree <= heads (it is TP); inside one node (4 collectives per layer)",
          "ulysses": "degree must divide the (key/value) heads",
          "ring": "latency-bound when a block's attention is shorter than its K/V transfer",
          "all-gather": "the gather is not overlapped; each rank holds the whole sequence's K/V while it attends"}


@dataclass(frozen=True)
class LayerBytes:
    """Bytes one rank sends in one transformer layer for one micro-batch (``forward``,
    ``backward``) with ``method`` at ``degree``, in ``messages_*`` messages (``collective``)."""

    method: str
    degree: int
    collective: str
    forward: float
    backward: float
    messages_forward: int
    messages_backward: int

    @property
    def total(self) -> float:
        return self.forward + self.backward


def ring_attention_bytes(micro_batch: int, seq_len: int, hidden: int, cp: int, n_head: int = 1,
                         n_kv_head: int | None = None, dtype_bytes: float = 2,
                         grad_bytes: float | None = None) -> LayerBytes:
    """Ring attention (Liu et al. 2023, Section 3): forward (cp-1) sends of a K, V block; backward
    the K, V blocks again (cp-1 sends) and the dK, dV accumulators beside them, which need cp sends
    to get back to their owner (``grad_bytes`` per element: the gradients' precision, default B).
    One message per send (K and V travel in one buffer, as do dK and dV)."""
    kv = kv_block_bytes(micro_batch, seq_len, hidden, cp, n_head, n_kv_head, dtype_bytes)
    dkv = kv if grad_bytes is None else kv / dtype_bytes * positive("grad_bytes", grad_bytes)
    if cp == 1:
        return LayerBytes("ring", 1, COLLECTIVES["ring"], 0.0, 0.0, 0, 0)
    return LayerBytes("ring", cp, COLLECTIVES["ring"], (cp - 1) * kv, (cp - 1) * kv + cp * dkv,
                      cp - 1, 2 * cp - 1)


def ulysses_bytes(micro_batch: int, seq_len: int, hidden: int, cp: int, n_head: int,
                  n_kv_head: int | None = None, dtype_bytes: float = 2) -> LayerBytes:
    """DeepSpeed-Ulysses (Jacobs et al. 2023, Section 3.1): the forward all-to-alls Q, K, V from
    sequence- to head-sharded and the output O back; a pairwise all-to-all sends (cp-1)/cp of the
    rank's b (s/cp) h block (``alphabeta.traffic``); the backward the same four reversed."""
    _shape(micro_batch, seq_len, hidden, cp, dtype_bytes)
    check_ulysses(n_head, cp, n_kv_head)
    a, a_kv = _heads(n_head, n_kv_head)
    block = micro_batch * seq_len / cp * dtype_bytes * (cp - 1) / cp
    per_pass = block * (2 * hidden + 2 * hidden * a_kv / a)
    msgs = 4 * (cp - 1)
    return LayerBytes("ulysses", cp, COLLECTIVES["ulysses"], per_pass, per_pass, msgs, msgs)


def allgather_bytes(micro_batch: int, seq_len: int, hidden: int, cp: int, n_head: int = 1,
                    n_kv_head: int | None = None, dtype_bytes: float = 2, grad_bytes: float | None = None,
                    regather: bool = True) -> LayerBytes:
    """All-gather attention (Dubey et al. 2024, Section 3.3.2; Megatron-Core's cp_comm_type
    "all_gather", TransformerEngine's ``AttnFuncWithCPAndKVAllGather``): the forward all-gathers
    K and V over the cp ranks, a ring sending (cp-1) of the rank's K, V blocks, (cp-1)/cp of the
    whole sequence's 2 b s h_kv B (``alphabeta.traffic``); the backward gathers them again
    (``regather``, as TransformerEngine does to keep only the rank's own K, V between the passes;
    False: the gathered K, V were kept, ``gathered_kv_bytes``) and reduce-scatters dK, dV, the
    same (cp-1)/cp of the sequence's (``grad_bytes`` per element, default B). K and V travel in
    one buffer, as do dK and dV: cp-1 messages per collective (TransformerEngine gathers K and V
    in two calls, the same bytes in twice the messages)."""
    kv = kv_block_bytes(micro_batch, seq_len, hidden, cp, n_head, n_kv_head, dtype_bytes)
    dkv = kv if grad_bytes is None else kv / dtype_bytes * positive("grad_bytes", grad_bytes)
    again = boolean("regather", regather)
    if cp == 1:
        return LayerBytes("all-gather", 1, COLLECTIVES["all-gather"], 0.0, 0.0, 0, 0)
    return LayerBytes("all-gather", cp, COLLECTIVES["all-gather"], (cp - 1) * kv,
                      (cp - 1) * (dkv + kv * again), cp - 1, (cp - 1) * (1 + again))


def megatron_sp_bytes(micro_batch: int, seq_len: int, hidden: int, tp: int,
                      dtype_bytes: float = 2) -> LayerBytes:
    """Megatron sequence parallelism (Korthikanti et al. 2022, Section 4.2.2): the collectives of
    ``tensor_parallel.tp_layer_collectives(..., sequence_parallel=True)``, each a ring sending
    (tp-1)/tp of its b s h buffer per rank (``alphabeta.traffic``)."""
    from parlab.costmodel.pricing import alphabeta
    from parlab.costmodel.pricing.tensor_parallel.megatron import tp_layer_collectives

    _shape(micro_batch, seq_len, hidden, tp, dtype_bytes)
    sent = {"forward": 0.0, "backward": 0.0}
    msgs = {"forward": 0, "backward": 0}
    for c in tp_layer_collectives(micro_batch, seq_len, hidden, tp, sequence_parallel=True):
        sent[c.phase] += c.count * alphabeta.traffic(c.op, "ring", c.ranks, c.elements * dtype_bytes)[0]
        msgs[c.phase] += c.count * (c.ranks - 1)
    return LayerBytes("megatron-sp", tp, COLLECTIVES["megatron-sp"], sent["forward"],
                      sent["backward"], msgs["forward"], msgs["backward"])


def layer_bytes(method: str, model: ModelSpec, micro_batch: int, degree: int,
                dtype_bytes: float = 2) -> LayerBytes:
    """``method``'s bytes per rank for one layer of ``model`` (``METHODS``), with the model's
    key/value heads (``kv_heads``; all heads: multi-head attention) and head dimension (Q of
    a d, K and V of g d: ``ModelSpec.q_width``/``kv_width``)."""
    method = canonical("method", method, METHODS)
    b, s, h, a = micro_batch, model.seq_len, model.q_width, model.heads  # K/V: h a_kv / a = g d wide
    a_kv = model.kv_heads or a
    if method == "ring":
        return ring_attention_bytes(b, s, h, degree, a, a_kv, dtype_bytes=dtype_bytes)
    if method == "ulysses":
        return ulysses_bytes(b, s, h, degree, a, a_kv, dtype_bytes=dtype_bytes)
    if method == "all-gather":
        return allgather_bytes(b, s, h, degree, a, a_kv, dtype_bytes=dtype_bytes)
    return megatron_sp_bytes(b, s, model.hidden, degree, dtype_bytes)


# ------------------------------------------------------------------ memory (overlap: cp_overlap)
def activation_bytes_per_gpu(method: str, model: ModelSpec, micro_batch: int, degree: int,
                             recompute: str = "none", regather: bool = True) -> float:
    """One layer's activation bytes per GPU (Korthikanti et al. 2022, Table 2) under ``method`` at
    ``degree``: every term is per token and each rank's attention scores are its s/d queries
    against all s keys, so every method divides the layer's activations by d (Megatron-SP as
    ``activation_bytes_per_layer(tp=d, sequence_parallel=True)``, the same count). All-gather
    attention that keeps the gathered K, V for its backward (``regather=False``) also holds the
    other d-1 ranks' K, V, (d-1)/d of ``gathered_kv_bytes`` (a recomputed layer keeps none);
    gathering them again, as TransformerEngine does, it keeps what ring attention keeps."""
    method = canonical("method", method, METHODS)
    positive("degree", degree, integer=True)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    if method == "megatron-sp":
        return activation_bytes_per_layer(model, micro_batch, degree, True, recompute)
    if method == "ulysses":
        check_ulysses(model.heads, degree, model.kv_heads or model.heads)
    kept = activation_bytes_per_layer(model, micro_batch, 1, False, recompute) / degree
    if method == "all-gather" and not boolean("regather", regather) and recompute != "full":
        others = gathered_kv_bytes(micro_batch, model.seq_len, model.q_width, model.heads,
                                   model.kv_heads or model.heads)
        kept += others * (degree - 1) / degree
    return kept


def comparison_rows(model: ModelSpec, micro_batch: int, degree: int,
                    dtype_bytes: float = 2) -> tuple[list[list[object]], list[str]]:
    """(rows, headers): per method what it splits, its collective, MB sent per rank per layer
    (forward + backward), activation MB per GPU per layer, and where it breaks; a method that
    cannot run at ``degree`` says why in the bytes column."""
    rows = []
    for m in METHODS:
        try:
            sent = f"{layer_bytes(m, model, micro_batch, degree, dtype_bytes).total / 1e6:,.1f}"
            act = f"{activation_bytes_per_gpu(m, model, micro_batch, degree) / 1e6:,.1f}"
        except ValueError as e:
            sent, act = str(e), ""
        rows.append([LABELS[m], SPLITS[m], COLLECTIVES[m], sent, act, LIMITS[m]])
    return rows, ["method", "splits", "communicates", "MB sent / rank / layer", "activation MB / GPU / layer",
                  "breaks when"]
