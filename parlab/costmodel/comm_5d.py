"""The step-time terms of the 4th and 5th dimensions on one GPU and one micro-batch: the context-
parallel attention traffic (ring attention's K/V blocks, hidden behind each block's attention, or
Ulysses' all-to-alls) and an MoE model's expert-parallel all-to-alls (``expert_parallel``'s
collectives, priced on the EP group's link).

Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers", Sec. 3; Megatron-
Core's cp_comm_type "p2p"): in each of cp - 1 steps a rank sends its current K/V block to the next
rank while it computes attention against the block it holds, so a step costs max(send, compute);
the backward pass sends K/V and their gradients (twice the bytes) beside twice the compute.
Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses", Sec. 3.1): an all-to-all of Q, K, V from
sequence- to head-sharded before attention and one of the output back, in the forward and again
in the backward; nothing overlaps them.
"""

from __future__ import annotations

from .assumptions import Assumptions
from .collectives import GroupLink
from .models import ModelSpec
from .plan import Plan


def cp_layer_bytes(model: ModelSpec, plan: Plan, bytes_per_element: int = 2) -> dict[str, float]:
    """Bytes one CP rank sends in one layer's forward pass, per micro-batch (the backward sends
    twice that for the ring, the same for Ulysses). Ring: cp - 1 K/V blocks of 2 b (s/cp) d_kv / t
    elements (d_kv = kv_heads x d: grouped-query attention sends less). Ulysses: the all-to-alls of
    Q, K, V (b (s/cp) (h + 2 d_kv) / t elements) and of the output (b (s/cp) h / t), each keeping
    1 / cp on the rank."""
    cp, t, b = plan.cp, plan.tp, plan.micro_batch
    if cp == 1:
        return {"block": 0.0, "steps": 0, "sent": 0.0}
    s_cp, h, kv = model.seq_len / cp, model.hidden, model.kv_hidden
    if plan.cp_impl == "ring":
        block = 2 * b * s_cp * kv / t * bytes_per_element
        return {"block": block, "steps": cp - 1, "sent": (cp - 1) * block}
    qkv = b * s_cp * (h + 2 * kv) / t * bytes_per_element
    out = b * s_cp * h / t * bytes_per_element
    return {"qkv": qkv, "out": out, "steps": 2, "sent": (qkv + out) * (cp - 1) / cp}


def cp_micro_batch_time(model: ModelSpec, plan: Plan, layers: int, link: GroupLink, peak: float,
                        a: Assumptions, facts: dict) -> float:
    """Exposed seconds of the CP traffic of ``layers`` layers for one micro-batch (forward,
    backward, and the forward again with full recompute). Ring: per step max(0, send - compute)
    exposed, with compute the attention of one (s/cp) x (s/cp) block pair, 4 b (s/cp)^2 h / t
    FLOPs (Narayanan et al. 2021, Sec. 5.1) at the matmul efficiency. Ulysses: every all-to-all
    exposed."""
    cp, t, b = plan.cp, plan.tp, plan.micro_batch
    bpe = 4 if plan.dtype == "fp32" else 2
    sent = cp_layer_bytes(model, plan, bpe)
    facts["cp_bytes"] = sent
    if cp == 1:
        facts["t_cp_send"] = facts["t_cp_block"] = 0.0
        return 0.0
    forward_passes = 2 if plan.recompute == "full" else 1
    if plan.cp_impl == "ring":
        send = link.time("p2p", sent["block"], 2)
        block = 4 * b * (model.seq_len / cp) ** 2 * model.hidden / t / (peak * a.matmul_efficiency)
        facts["t_cp_send"], facts["t_cp_block"] = send, block
        per_layer = (cp - 1) * (forward_passes * max(0.0, send - block) + max(0.0, 2 * send - 2 * block))
        return layers * per_layer
    a2a = link.time("all_to_all", sent["qkv"], cp) + link.time("all_to_all", sent["out"], cp)
    facts["t_cp_send"], facts["t_cp_block"] = a2a, 0.0
    return layers * (forward_passes + 1) * a2a


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
    from .expert_parallel import all_to_all_bytes_per_layer, ep_layer_collectives

    bpe = 4 if plan.dtype == "fp32" else 2
    tokens = max(1, plan.micro_batch * model.seq_len // (plan.cp * plan.tp))
    colls = ep_layer_collectives(tokens, model.hidden, model.moe, plan.ep, plan.recompute)
    facts["ep_tokens"] = tokens
    facts["ep_bytes_layer"] = all_to_all_bytes_per_layer(tokens, model.hidden, model.moe, plan.ep, bpe,
                                                         plan.recompute)
    per_layer = sum(c.count * link.time("all_to_all", c.elements * bpe, c.ranks) for c in colls)
    facts["t_ep_layer"] = per_layer
    return moe_layers * per_layer
