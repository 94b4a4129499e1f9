"""Context parallelism per transformer layer: ring attention and DeepSpeed-Ulysses beside Megatron
sequence parallelism: what each splits, the bytes each rank sends, the attention work each rank
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
=============  ==================================  =============================================

h_kv = h a_kv / a. The backward sends the same again for Megatron-SP (the collectives swap) and
Ulysses (dO in, dQ, dK, dV out: the same four all-to-alls reversed), and for ring attention the K,
V blocks once more (d-1 sends) plus the gradients dK, dV travelling with them back to their owner
(d sends: after the last step a block's dK, dV is one hop short of home). Sources:

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

from parlab.costmodel.pricing.memory import RECOMPUTE, activation_bytes_per_layer
from parlab.costmodel.specs._check import boolean, canonical, non_negative, positive
from parlab.costmodel.specs.models import ModelSpec

METHODS = ("megatron-sp", "ulysses", "ring")
LABELS = {"megatron-sp": "Megatron sequence parallelism", "ulysses": "DeepSpeed-Ulysses",
          "ring": "ring attention"}
SPLITS = {"megatron-sp": "weights over TP; LayerNorm/dropout activations along the sequence",
          "ulysses": "sequence outside attention; heads inside it",
          "ring": "sequence everywhere; K/V blocks go round the ring"}
COLLECTIVES = {"megatron-sp": "all-gather + reduce-scatter", "ulysses": "all-to-all",
               "ring": "point-to-point (ring)"}
LIMITS = {"megatron-sp": "degree <= heads (it is TP); inside one node (4 collectives per layer)",
          "ulysses": "degree must divide the (key/value) heads",
          "ring": "latency-bound when a block's attention is shorter than its K/V transfer"}


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


def _heads(n_head: int, n_kv_head: int | None) -> tuple[int, int]:
    a = positive("n_head", n_head, integer=True)
    a_kv = a if n_kv_head is None else positive("n_kv_head", n_kv_head, integer=True)
    if a % a_kv:
        raise ValueError(f"n_kv_head={a_kv} must divide n_head={a} (each key/value head serves "
                         f"n_head/n_kv_head query heads)")
    return a, a_kv


def _shape(b: int, s: int, h: int, d: int, dtype_bytes: float) -> None:
    for name, v in (("micro_batch", b), ("seq_len", s), ("hidden", h), ("degree", d)):
        positive(name, v, integer=True)
    positive("dtype_bytes", dtype_bytes)


def check_ulysses(n_head: int, cp: int, n_kv_head: int | None = None) -> None:
    """DeepSpeed-Ulysses gives each of the cp ranks whole heads: cp must divide the heads (and the
    key/value heads). A ValueError naming the rule and the values otherwise."""
    a, a_kv = _heads(n_head, n_kv_head)
    positive("cp", cp, integer=True)
    for name, n in (("n_head", a), ("n_kv_head", a_kv)):
        if n % cp:
            raise ValueError(f"DeepSpeed-Ulysses needs {name} % cp == 0 (each rank attends with "
                             f"whole heads after the all-to-all): {name}={n}, cp={cp}")


def check_ring(seq_len: int, cp: int, balanced: bool = True) -> None:
    """Ring attention splits s into cp blocks (2 cp chunks when ``balanced``): they must divide it."""
    positive("seq_len", seq_len, integer=True)
    positive("cp", cp, integer=True)
    chunks = 2 * cp if balanced else cp
    if seq_len % chunks:
        raise ValueError(f"ring attention needs seq_len % {'2*cp' if balanced else 'cp'} == 0 (the "
                         f"sequence is cut into {chunks} equal chunks): seq_len={seq_len}, cp={cp}")


def kv_block_bytes(micro_batch: int, seq_len: int, hidden: int, cp: int, n_head: int = 1,
                   n_kv_head: int | None = None, dtype_bytes: float = 2) -> float:
    """K and V of one rank's block of the sequence: 2 b (s/cp) h_kv B, h_kv = h a_kv / a."""
    _shape(micro_batch, seq_len, hidden, cp, dtype_bytes)
    a, a_kv = _heads(n_head, n_kv_head)
    return 2 * micro_batch * seq_len / cp * hidden * a_kv / a * dtype_bytes


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
    """``method``'s bytes per rank for one layer of ``model`` (``METHODS``)."""
    method = canonical("method", method, METHODS)
    b, s, h, a = micro_batch, model.seq_len, model.hidden, model.heads
    if method == "ring":
        return ring_attention_bytes(b, s, h, degree, a, dtype_bytes=dtype_bytes)
    if method == "ulysses":
        return ulysses_bytes(b, s, h, degree, a, dtype_bytes=dtype_bytes)
    return megatron_sp_bytes(b, s, h, degree, dtype_bytes)


# ------------------------------------------------------------------ the causal split and its work
def rank_chunks(rank: int, cp: int, balanced: bool = True) -> tuple[int, ...]:
    """The sequence chunks rank ``rank`` holds: (rank,) of cp chunks (naive), or (rank,
    2 cp - 1 - rank) of 2 cp chunks (balanced: Megatron-Core, Llama 3 Section 3.3.2)."""
    positive("cp", cp, integer=True)
    boolean("balanced", balanced)
    if not 0 <= non_negative("rank", rank, integer=True) < cp:
        raise ValueError(f"rank must be in 0..{cp - 1} (cp={cp}), got {rank}")
    return (rank, 2 * cp - 1 - rank) if balanced else (rank,)


def rank_positions(seq_len: int, rank: int, cp: int, balanced: bool = True) -> list[int]:
    """The token positions rank ``rank`` holds, in order (its chunks side by side)."""
    check_ring(seq_len, cp, balanced)
    c = seq_len // (2 * cp if balanced else cp)
    return [k * c + t for k in rank_chunks(rank, cp, balanced) for t in range(c)]


def causal_pairs(q_chunks: tuple[int, ...], k_chunks: tuple[int, ...]) -> list[tuple[int, int, bool]]:
    """(i, j, diagonal) for each query chunk i and key chunk j a causal mask does not blank out
    entirely (chunk j <= chunk i), with ``diagonal`` where the mask cuts through the block: the
    blocks ring attention computes, in the order of ``q_chunks`` then ``k_chunks``."""
    return [(qi, kj, q == k) for qi, q in enumerate(q_chunks) for kj, k in enumerate(k_chunks) if k <= q]


def causal_work(seq_len: int, cp: int, balanced: bool = True) -> tuple[int, ...]:
    """Per rank, the attention scores (query, key pairs) it computes under a causal mask over the
    whole ring: each block (``causal_pairs``) of c x c scores, c = s / (number of chunks), the
    fully masked ones skipped. Naive: rank i computes (i+1) (s/cp)^2; balanced: (2 cp + 1) c^2
    on every rank."""
    check_ring(seq_len, cp, balanced)
    c = seq_len // (2 * cp if balanced else cp)
    mine = [rank_chunks(r, cp, balanced) for r in range(cp)]
    return tuple(sum(len(causal_pairs(mine[r], mine[j])) for j in range(cp)) * c * c
                 for r in range(cp))


def imbalance(work: tuple[float, ...]) -> float:
    """max / mean of the per-rank work (1.0: balanced): the slowest rank sets the step."""
    return max(work) / (sum(work) / len(work)) if sum(work) else 1.0


# ------------------------------------------------------------------ memory and overlap
def activation_bytes_per_gpu(method: str, model: ModelSpec, micro_batch: int, degree: int,
                             recompute: str = "none") -> float:
    """One layer's activation bytes per GPU (Korthikanti et al. 2022, Table 2) under ``method`` at
    ``degree``: every term is per token and each rank's attention scores are its s/d queries
    against all s keys, so all three methods divide the layer's activations by d (Megatron-SP as
    ``activation_bytes_per_layer(tp=d, sequence_parallel=True)``, the same count)."""
    method = canonical("method", method, METHODS)
    positive("degree", degree, integer=True)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    if method == "megatron-sp":
        return activation_bytes_per_layer(model, micro_batch, degree, True, recompute)
    if method == "ulysses":
        check_ulysses(model.heads, degree)
    return activation_bytes_per_layer(model, micro_batch, 1, False, recompute) / degree


def ring_step_flops(micro_batch: int, seq_len: int, hidden: int, cp: int) -> float:
    """FLOPs of one ring step's forward attention on one rank: its s/cp queries against one block
    of s/cp keys, Q K^T then P V, 2 b (s/cp)^2 h each (a causal mask halves the diagonal step)."""
    _shape(micro_batch, seq_len, hidden, cp, 1)
    n = seq_len / cp
    return 4 * micro_batch * n * n * hidden


@dataclass(frozen=True)
class RingOverlap:
    """One forward ring step: the block's attention (``compute_s``) beside the K, V transfer
    (``comm_s`` = alpha + bytes / bandwidth); ``exposed_s`` the transfer not hidden behind it."""

    compute_s: float
    comm_s: float

    @property
    def exposed_s(self) -> float:
        return max(0.0, self.comm_s - self.compute_s)

    @property
    def hidden(self) -> bool:
        return self.comm_s <= self.compute_s


def ring_overlap(micro_batch: int, seq_len: int, hidden: int, cp: int, flops_per_s: float,
                 alpha: float, bandwidth: float, n_head: int = 1, n_kv_head: int | None = None,
                 dtype_bytes: float = 2) -> RingOverlap:
    """Whether a ring step's K, V transfer hides behind its attention (Liu et al. 2023, Section 3.1:
    the block must be large enough that compute >= communication). Compute grows as (s/cp)^2, the
    transfer as s/cp, so small blocks (short sequences, large cp) leave the latency exposed."""
    positive("flops_per_s", flops_per_s)
    non_negative("alpha", alpha)
    positive("bandwidth", bandwidth)
    kv = kv_block_bytes(micro_batch, seq_len, hidden, cp, n_head, n_kv_head, dtype_bytes)
    compute = ring_step_flops(micro_batch, seq_len, hidden, cp) / flops_per_s
    return RingOverlap(compute, 0.0 if cp == 1 else alpha + kv / bandwidth)


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
