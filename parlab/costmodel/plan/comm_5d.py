"""The step-time terms of the 4th and 5th dimensions on one GPU and one micro-batch: the context-
parallel attention traffic (ring attention's K/V blocks, hidden behind each block's attention, or
Ulysses' all-to-alls: the bytes are ``context_parallel``'s) and an MoE model's expert-parallel
all-to-alls (``expert_parallel``'s collectives), priced on the CP and EP groups' links.

Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers", Sec. 3; Megatron-
Core's cp_comm_type "p2p"): in each of cp - 1 steps a rank sends its current K/V block to the next
rank while it computes attention against the block it holds, so a step costs max(send, compute);
the backward pass sends K/V and their gradients (twice the bytes) beside twice the compute.
Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses", Sec. 3.1): an all-to-all of Q, K, V from
sequence- to head-sharded before attention and one of the output back, in the forward and again
in the backward; nothing overlaps them. All-gather attention (Dubey et al. 2024, "The Llama 3
Herd of Models", Sec. 3.3.2; Megatron-Core's cp_comm_type "all_gather", TransformerEngine's
``AttnFuncWithCPAndKVAllGather``): an all-gather of K, V before attention, and in the backward the
gather again and a reduce-scatter of dK, dV; all exposed, as TransformerEngine runs them
(``context_parallel.allgather_cost``).
"""

from __future__ import annotations

from functools import lru_cache

from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.attention_terms import kv_heads_per_rank
from parlab.costmodel.pricing.collectives import GroupLink
from parlab.costmodel.pricing.context_parallel import (
    LayerBytes,
    allgather_bytes,
    allgather_cost,
    ring_attention_bytes,
    ring_overlap,
    ulysses_bytes,
)
from parlab.costmodel.pricing.expert_parallel.layer import (
    all_to_all_bytes_per_layer,
    ep_layer_collectives,
)
from parlab.costmodel.specs.assumptions import Assumptions
from parlab.costmodel.specs.models import ModelSpec
from parlab.costmodel.specs.moe import MoESpec


def cp_widths(model: ModelSpec, tp: int) -> tuple[int, int, int]:
    """(width of Q, query heads, K/V heads) of one TP rank, what the CP formulas take as
    (hidden, n_head, n_kv_head): a d / t, a / t and g / t (one K/V head when g < t, Megatron-Core:
    ``attention_terms.kv_heads_per_rank``). The K/V blocks are then g d / t wide, so grouped-query
    attention makes every CP method cheaper (Dubey et al. 2024, Sec. 3.3.2)."""
    return model.q_width // tp, model.heads // tp, kv_heads_per_rank(model, tp)


def cp_layer_bytes(model: ModelSpec, plan: Plan, bytes_per_element: int = 2) -> LayerBytes:
    """Bytes one CP rank sends in one layer for one micro-batch, on its TP shard (``cp_widths``):
    ``context_parallel.ring_attention_bytes``, ``ulysses_bytes`` or ``allgather_bytes``."""
    width, heads, kv_heads = cp_widths(model, plan.tp)
    args = (plan.micro_batch, model.seq_len, width, plan.cp, heads, kv_heads, bytes_per_element)
    if plan.cp_impl == "ring":
        return ring_attention_bytes(*args)
    if plan.cp_impl == "all-gather":
        return allgather_bytes(*args)
    return ulysses_bytes(*args)


def cp_micro_batch_time(model: ModelSpec, plan: Plan, layers: int, link: GroupLink, peak: float,
                        a: Assumptions, facts: dict) -> float:
    """Exposed seconds of the CP traffic of ``layers`` layers for one micro-batch (forward,
    backward, and the forward again with full recompute). Ring: each of the cp - 1 forward steps
    exposes ``context_parallel.ring_overlap``'s max(0, send - attention of the block) at the
    matmul efficiency; a backward step sends K, V and dK, dV beside twice the compute, and the
    last dK, dV hop home is exposed. Ulysses: its four all-to-alls per pass (Q, K, V in, O out),
    each (cp - 1) alpha + (cp - 1)/cp of its buffer / B, none hidden. All-gather: the K, V gather
    of each forward (``context_parallel.allgather_cost``), and in the backward the gather again
    and the dK, dV reduce-scatter, none hidden.

    A sliding window (Mistral, GPT-OSS) would let ring attention skip the blocks wholly outside
    every query's window (a rank needs only the ceil(w / (s / cp)) blocks before its own); the
    model sends all cp - 1, so for windowed layers this term is an upper bound (and the attention
    it hides behind, ``ring_step_flops``, counts whole blocks as well)."""
    cp, b = plan.cp, plan.micro_batch
    width, heads, kv_heads = cp_widths(model, plan.tp)
    bpe = 4 if plan.dtype == "fp32" else 2
    sent = cp_layer_bytes(model, plan, bpe)
    facts["cp_bytes"] = sent
    forward_passes = 2 if plan.recompute == "full" else 1
    if plan.cp_impl == "ring":
        step = ring_overlap(b, model.seq_len, width, cp, peak * a.matmul_efficiency, link.latency,
                            link.bandwidth, heads, kv_heads, bpe)
        facts["t_cp_send"], facts["t_cp_block"] = step.comm_s, step.compute_s
        backward = (cp - 1) * max(0.0, 2 * step.comm_s - 2 * step.compute_s) + step.comm_s
        return layers * (forward_passes * (cp - 1) * step.exposed_s + backward)
    if plan.cp_impl == "all-gather":
        gather = allgather_cost(b, model.seq_len, width, cp, peak * a.matmul_efficiency, link.latency,
                                link.bandwidth, heads, kv_heads, bpe)
        whole = sent.forward * cp / (cp - 1)  # dK, dV of the whole sequence, as K, V (gradients at bpe)
        scatter = link.time("reduce_scatter", whole, cp)
        facts["t_cp_send"], facts["t_cp_block"] = gather.comm_s, gather.compute_s
        return layers * ((forward_passes + 1) * gather.exposed_s + scatter)
    buffer = sent.forward / 4 * cp / (cp - 1)  # one of the four all-to-alls' input, on average
    facts["t_cp_send"], facts["t_cp_block"] = 4 * link.time("all_to_all", buffer, cp), 0.0
    return layers * (forward_passes + 1) * facts["t_cp_send"]


def ep_micro_batch_time(model: ModelSpec, plan: Plan, moe_layers: int, link: GroupLink, facts: dict) -> float:
    """Seconds of the all-to-alls of ``moe_layers`` MoE layers for one micro-batch: each layer's
    ``expert_parallel.ep_layer_collectives`` (dispatch and combine, forward and backward, again
    when recomputed) for the T = b s / (cp t) tokens of the rank (Megatron-Core needs sequence
    parallelism with TP, so TP ranks dispatch disjoint tokens), on the EP group's link as a
    pairwise exchange. Nothing hides them here (Megatron-Core's 1F1B runs them on the critical
    path; DualPipe overlaps them with another micro-batch's compute)."""
    if plan.ep == 1 or model.moe is None or not moe_layers:
        facts["ep_bytes_layer"] = 0.0
        return 0.0
    bpe = 4 if plan.dtype == "fp32" else 2
    tokens = max(1, plan.micro_batch * model.seq_len // (plan.cp * plan.tp))
    # recomputing the MoE module (Megatron-Core recompute_modules "moe") dispatches and combines again
    recompute = ("full" if "moe" in plan.recompute_modules else "none") if plan.recompute == "modules" else plan.recompute
    facts["ep_tokens"] = tokens
    facts["ep_bytes_layer"], facts["t_ep_layer"] = _ep_layer(tokens, model.hidden, model.moe, plan.ep, bpe,
                                                             recompute, link)
    return moe_layers * facts["t_ep_layer"]


@lru_cache(maxsize=4096)
def _ep_layer(tokens: int, hidden: int, moe: MoESpec, ep: int, bpe: int, recompute: str,
              link: GroupLink) -> tuple[float, float]:
    """(bytes sent, seconds) of one MoE layer's all-to-alls for one micro-batch (memoised: the
    same few per layout and micro-batch size in a search). Pure in its arguments, all of them
    the key: it reads no plan or model, only what ``ep_micro_batch_time`` derives from them."""
    colls = ep_layer_collectives(tokens, hidden, moe, ep, recompute)
    sent = all_to_all_bytes_per_layer(tokens, hidden, moe, ep, bpe, recompute)
    return sent, sum(c.count * link.time("all_to_all", c.elements * bpe, c.ranks) for c in colls)
