"""Drill cards on what 2024-2026's models changed (issue 30): grouped-query attention (the K/V
cache and the parameters kv_heads < heads saves), FP8 training (which GEMMs run in FP8, the memory
its weight copies add) and uneven pipeline stages (Llama 3 405B's 126 layers on pp = 16). Each
draws its parameters from a seeded RNG and computes its answer with parlab
(``pricing.inference.kv_cache_bytes_per_token``, ``estimate`` of an FP8 plan,
``pricing.pipeline_split.pipeline_layout``), never from a typed number. They sit in the guide's
bank under the guide question each extends: 4.1 (inference), 1.21 (mixed precision), 1.6
(pipeline parallelism)."""

from __future__ import annotations

from parlab.costmodel.plan.estimate import estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.inference import kv_cache_bytes_per_token
from parlab.costmodel.pricing.pipeline_split import pipeline_layout
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.fp8 import DEFAULT_FP8_RECIPE

from .questions import Numeric, Posed

#: dense grouped-query-attention presets (kv_heads < heads) for the GQA card
GQA_MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "mistral-7b", "qwen3-32b")
#: dense presets the FP8 card prices (multi-head attention: ``estimate`` prices them on every branch)
FP8_MODELS = ("llama-7b", "llama-13b", "llama-65b")
#: presets whose layers + 2 (the embedding and the loss as layers) divide by pp = 4, 8 and 16
UNEVEN = ("llama-3.1-405b", "qwen3-235b-a22b")


def gqa_kv_cache(rng) -> Posed:
    name = rng.choice(GQA_MODELS)
    m = get_model(name)
    tokens = rng.choice((8192, 32768, 131072))
    gqa = kv_cache_bytes_per_token(m, m.kv_heads, 2) * tokens
    mha = kv_cache_bytes_per_token(m, m.heads, 2) * tokens
    saved = m.with_(kv_heads=m.heads).num_params() - m.num_params()
    return Posed(f"{name} has {m.layers} layers, {m.heads} query heads and {m.kv_heads} K/V heads of dimension "
                 f"{m.head_dim}. How many GB of bf16 K/V cache does one sequence of {tokens:,} tokens need?", gqa,
                 f"parlab kv_cache_bytes_per_token: 2 (K, V) x {m.layers} layers x {m.kv_heads} K/V heads x "
                 f"{m.head_dim} x 2 B = {gqa / tokens / 1e3:,.4g} KB per token, x {tokens:,} = {gqa / 1e9:,.4g} GB; "
                 f"with a K/V head per query head it would be {mha / 1e9:,.4g} GB ({m.heads // m.kv_heads}x), and "
                 f"the K/V projections would hold {saved / 1e9:,.4g}B parameters more.",
                 {"model": name, "tokens": tokens})


def fp8_weight_memory(rng) -> Posed:
    name = rng.choice(FP8_MODELS)
    tp = rng.choice((2, 4, 8))
    m, cluster = get_model(name), make_cluster("dgx-h100", tp)
    bf16 = estimate(m, cluster, Plan(tp=tp, recompute="full"))
    fp8 = estimate(m, cluster, Plan(tp=tp, recompute="full", dtype="fp8"))
    added = fp8.memory_terms()["parameters"] - bf16.memory_terms()["parameters"]
    return Posed(f"{name} on {tp} H100s with tp = {tp}, trained in FP8 with TransformerEngine's default "
                 f"recipe ({DEFAULT_FP8_RECIPE}) instead of bf16: how many GB do the FP8 weights add per GPU?", added,
                 f"parlab estimate, Plan(dtype='fp8') against bf16: each linear weight of the layers (QKV, "
                 f"attention output, the MLP's) keeps an FP8 copy and its transpose, 2 x 1 B per parameter, "
                 f"beside its bf16 weight, plus per-tensor scales and amax histories: {added / 1e9:,.4g} GB per GPU. "
                 f"Those GEMMs run at the FP8 peak (step {bf16.step_time * 1e3:,.4g} -> {fp8.step_time * 1e3:,.4g} ms); "
                 "the embedding, the output layer, attention's softmax, the norms, the fp32 master weights, "
                 "the fp32 gradients and Adam stay as in bf16 training.",
                 {"model": name, "tp": tp})


def uneven_first_stage(rng) -> Posed:
    name, pp = rng.choice(UNEVEN), rng.choice((4, 8, 16))
    m = get_model(name)
    layout = pipeline_layout(m.layers, pp, embedding=True, loss=True)
    return Posed(f"{name} has {m.layers} transformer layers, split over pp = {pp} pipeline stages with the "
                 "embedding and the loss each counted as one layer (Megatron-Core's "
                 "account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split): how many "
                 "transformer layers does the first stage build?", layout[0],
                 f"parlab pipeline_layout: ({m.layers} + 2) / {pp} = {(m.layers + 2) // pp} layer slots per "
                 f"stage; the first gives one to the embedding and the last one to the loss: {layout[0]} "
                 f"on the first stage, {layout[1]} on each middle one, {layout[-1]} on the last.",
                 {"model": name, "pp": pp})


QUESTIONS = [
    Numeric("gen-gqa-kv-cache", "4.1", "inference", gqa_kv_cache, "bytes", "GB", 0.02,
            why="Grouped-query attention shares each K/V head among several query heads, so the K/V "
                "cache and the K/V projections shrink by heads / kv_heads (Ainslie et al. 2023)."),
    Numeric("gen-fp8-weights", "1.21", "memory optimizations", fp8_weight_memory, "bytes", "GB", 0.02,
            why="FP8 training runs the linear layers' GEMMs in FP8 and keeps the master weights, "
                "gradients and optimizer in higher precision (TransformerEngine; DeepSeek-V3, Sec. 3.3)."),
    Numeric("gen-uneven-stages", "1.6", "pipeline", uneven_first_stage, "count", "", 0.0,
            why="When layers do not divide evenly, the end stages take fewer layers: they also hold the "
                "embedding and the loss (Llama 3, Dubey et al. 2024, Sec. 3.3.2)."),
]
