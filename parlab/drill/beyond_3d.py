"""Drill cards beyond the guide (chapter 13): context parallelism (ring attention, Ulysses), expert
parallelism (the all-to-all, the capacity factor) and DualPipe. Each draws its parameters from a
seeded RNG and computes its answer with parlab (``costmodel.context_parallel``,
``costmodel.expert_parallel``, the ``schedules`` simulator), never from a typed number. They sit
beside the guide's bank, not in it (``BEYOND``; ``Quiz(bank=BEYOND)``), their nearest guide question
being 1.16 ("besides 3D parallelism, how else can you train at scale?")."""

from __future__ import annotations

from parlab.costmodel import get_model
from parlab.costmodel.pricing.context_parallel import (
    check_ulysses,
    ring_attention_bytes,
    ulysses_bytes,
)
from parlab.costmodel.pricing.expert_parallel import all_to_all_bytes_per_layer
from parlab.costmodel.specs.moe import MoESpec, expert_capacity
from parlab.schedules import one_f_one_b, simulate
from parlab.schedules.dualpipe import dualpipe

from .questions import Numeric, Posed

#: dense models with multi-head attention (their K/V heads are their heads) for the CP cards
CP_MODELS = ("llama-7b", "llama-13b", "gpt3-13b")


def ring_kv_bytes(rng) -> Posed:
    name = rng.choice(CP_MODELS)
    m = get_model(name)
    s, cp, b = rng.choice((32768, 65536, 131072)), rng.choice((2, 4, 8, 16)), rng.choice((1, 2))
    sent = ring_attention_bytes(b, s, m.hidden, cp, m.heads)
    return Posed(f"Ring attention for {name} (hidden {m.hidden:,}) over cp = {cp} GPUs, sequences of {s:,} "
                 f"tokens, micro-batch {b}, bf16: how many MB does each rank send in one layer's forward pass?",
                 sent.forward,
                 f"parlab ring_attention_bytes: (cp - 1) sends of one K/V block, 2 b (s/cp) h x 2 B = "
                 f"{cp - 1} x {sent.forward / (cp - 1) / 1e6:,.4g} MB = {sent.forward / 1e6:,.4g} MB "
                 f"(the backward sends {sent.backward / 1e6:,.4g} MB: the blocks again and dK, dV home).",
                 {"model": name, "seq_len": s, "cp": cp, "micro_batch": b})


def ulysses_sent(rng) -> Posed:
    name = rng.choice(CP_MODELS)
    m = get_model(name)
    s, b = rng.choice((32768, 65536)), 1
    cp = rng.choice([d for d in (2, 4, 8) if m.heads % d == 0])
    check_ulysses(m.heads, cp)
    sent = ulysses_bytes(b, s, m.hidden, cp, m.heads)
    return Posed(f"DeepSpeed-Ulysses for {name} (hidden {m.hidden:,}, {m.heads} heads) over cp = {cp} GPUs, "
                 f"one sequence of {s:,} tokens, bf16: how many MB does each rank send in one layer's "
                 "forward all-to-alls (Q, K, V in, the output back)?", sent.forward,
                 f"parlab ulysses_bytes: (cp - 1)/cp of b (s/cp) (2h + 2h) x 2 B = {sent.forward / 1e6:,.4g} MB; "
                 f"it shrinks as 1/cp, while a ring's grows toward 2 b s h x 2 B, but cp can be at most the "
                 f"{m.heads} heads.", {"model": name, "seq_len": s, "cp": cp})


def ep_all_to_all(rng) -> Posed:
    experts, k = rng.choice(((8, 2), (64, 6), (256, 8)))
    h, tokens, ep = rng.choice((4096, 7168)), rng.choice((2048, 4096, 8192)), rng.choice((4, 8, 16))
    ep = min(ep, experts)
    moe = MoESpec(num_experts=experts, top_k=k, expert_ffn=2048)
    sent = all_to_all_bytes_per_layer(tokens, h, moe, ep)
    return Posed(f"A dropless MoE layer with {experts} experts, top-k routing with k = {k}, hidden {h:,}, over "
                 f"ep = {ep} GPUs: "
                 f"each rank holds {tokens:,} tokens. With uniform routing and bf16, how many MB does a rank "
                 "send in the layer's all-to-alls (dispatch and combine, forward and backward)?", sent,
                 f"parlab all_to_all_bytes_per_layer: 4 all-to-alls x (ep - 1)/ep x T k h x 2 B = "
                 f"{sent / 1e6:,.4g} MB: every token goes to {k} experts and comes back, twice.",
                 {"experts": experts, "top_k": k, "hidden": h, "tokens": tokens, "ep": ep})


def capacity(rng) -> Posed:
    experts, k = rng.choice(((8, 2), (16, 1), (64, 2), (128, 1)))
    tokens, c = rng.choice((1024, 2048, 4096)), rng.choice((1.0, 1.25, 1.5, 2.0))
    moe = MoESpec(num_experts=experts, top_k=k, expert_ffn=1024, capacity_factor=c)
    slots = expert_capacity(tokens, moe)
    return Posed(f"An MoE layer with {experts} experts, top-k routing with k = {k} and capacity factor {c:g} "
                 f"sees {tokens:,} tokens: "
                 "how many token slots does each expert have before tokens are dropped?", slots,
                 f"parlab expert_capacity (Switch Transformer, Eq. 3): ceil(c T k / E) = "
                 f"ceil({c:g} x {tokens:,} x {k} / {experts}) = {slots:,}; tokens routed beyond it are dropped "
                 "(they skip the experts through the residual), slots left over are padding.",
                 {"experts": experts, "top_k": k, "tokens": tokens, "capacity_factor": c})


def dualpipe_bubble(rng) -> Posed:
    p = rng.choice((4, 8))
    m = rng.choice((2 * p, 4 * p))
    dual, ofob = simulate(dualpipe(p, m)).bubble_fraction, simulate(one_f_one_b(p, m)).bubble_fraction
    return Posed(f"DualPipe on p = {p} ranks with m = {m} micro-batches (m/2 from each end), every forward, "
                 "input-gradient and weight-gradient chunk taking the same time: what fraction of the "
                 "GPU-time is idle?", dual,
                 f"parlab schedules.simulate(dualpipe(p, m)): {dual}; 1F1B on the same p and m idles "
                 f"{ofob} (its (p - 1)/(m + p - 1)), DualPipe holds p + 1 = {p + 1} micro-batches of "
                 "activations and two copies of its stages' weights.", {"p": p, "m": m})


QUESTIONS = [
    Numeric("gen-ring-kv", "1.16", "context parallel", ring_kv_bytes, "bytes", "MB", 0.02, beyond=True,
            why="Ring attention passes each rank's K/V block around the ring: cp - 1 sends per layer, "
                "each hidden behind one block's attention when the block is large enough (Liu et al. 2023)."),
    Numeric("gen-ulysses", "1.16", "context parallel", ulysses_sent, "bytes", "MB", 0.02, beyond=True,
            why="Ulysses turns sequence shards into head shards and back with four all-to-alls per layer "
                "(Jacobs et al. 2023)."),
    Numeric("gen-ep-all-to-all", "1.16", "expert parallel", ep_all_to_all, "bytes", "MB", 0.02, beyond=True,
            why="Expert parallelism moves tokens, not weights: dispatch and combine all-to-alls in each "
                "MoE layer (GShard, Lepikhin et al. 2020)."),
    Numeric("gen-capacity", "1.16", "expert parallel", capacity, "count", "", 0.0, beyond=True,
            why="A fixed capacity per expert keeps the all-to-all buffers static (Fedus et al. 2022)."),
    Numeric("gen-dualpipe", "1.16", "pipeline", dualpipe_bubble, "fraction", "", 0.01, beyond=True,
            why="DualPipe feeds micro-batches from both ends and overlaps a forward with a backward chunk "
                "(DeepSeek-V3, Sec. 3.2.1)."),
]
BEYOND = tuple(QUESTIONS)
