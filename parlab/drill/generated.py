"""Numeric drill questions with random parameters: each draws its parameters from a seeded RNG and
computes its answer by calling parlab (the cost model, the alpha-beta collectives, the pipeline
simulator), never from a typed number. ``Card.params`` records the parameters so a test can call
the same function and compare."""

from __future__ import annotations

from parlab.costmodel import (
    GPUS,
    Plan,
    activation_bytes_per_layer,
    alphabeta,
    bytes_per_param,
    comm_time_vs_bandwidth,
    estimate,
    gbit_per_s,
    get_gpu,
    get_link,
    get_model,
    largest_model,
    make_cluster,
    model_state_memory,
    train_flops_6nd,
    zero3_traffic_per_step,
    zero_model_states,
)
from parlab.costmodel.answers.walls import compute_wall, memory_wall
from parlab.layout import rank_of
from parlab.schedules import make_schedule, naive, one_f_one_b, peak_activations, simulate
from parlab.tables import human_count

from .questions import Named, Numeric, Posed

SIZES = (1.3e9, 2.7e9, 6.7e9, 7e9, 13e9, 30e9, 65e9, 70e9, 175e9)


def _b(n: float) -> str:
    return f"{n / 1e9:g}B"


# -- memory --------------------------------------------------------------------------------------
def states_mixed_adam(rng) -> Posed:
    n = rng.choice(SIZES)
    s = model_state_memory(n, "mixed", "adam")
    return Posed(f"How many GB of model states does a {_b(n)}-parameter model need for mixed-precision "
                 "training with Adam (fp16 weights and gradients, fp32 master weights and moments)?",
                 s.total, f"parlab model_state_memory: (2 + 2 + 4 + 8) = {s.bytes_per_param:g} B/param x "
                 f"{n:.3g} = {s.total / 1e9:,.4g} GB.", {"n_params": n})


#: what each dtype and optimizer of the memory questions means, spelled out in the prompt (an 'sgd'
#: without the words would leave the learner to guess whether it keeps a momentum buffer)
DTYPE_WORDS = {"fp32": "fp32 throughout", "mixed": "mixed precision with 16-bit gradients (fp32 master weights)",
               "mixed-fp32-grad": "mixed precision with fp32 gradients (fp32 master weights)",
               "bf16": "pure bf16 (no fp32 master copy)", "fp16": "fp16 weights only"}
OPTIMIZER_WORDS = {"adam": "Adam (momentum and variance)", "momentum": "SGD with momentum (one state)",
                   "sgd": "plain SGD, no momentum (no optimizer state)", "none": "no optimizer"}


def bytes_per_param_q(rng) -> Posed:
    dtype = rng.choice(("fp32", "mixed", "mixed-fp32-grad", "bf16"))
    optimizer = rng.choice(("adam", "momentum", "sgd"))
    b = bytes_per_param(dtype, optimizer)
    one = model_state_memory(1, dtype, optimizer)
    return Posed(f"Bytes of model states per parameter with dtype '{dtype}' ({DTYPE_WORDS[dtype]}) and "
                 f"optimizer '{optimizer}' ({OPTIMIZER_WORDS[optimizer]})?",
                 b, f"parlab model_state_memory: weights {one.weights:g} + gradients {one.grads:g} + "
                 f"master weights {one.master:g} + optimizer states {one.optimizer_states:g} = {b:g} "
                 "bytes per parameter.", {"dtype": dtype, "optimizer": optimizer})


def zero_stage_memory(rng) -> Posed:
    n, dp, stage = rng.choice(SIZES), rng.choice((2, 4, 8, 16, 32, 64, 128)), rng.randrange(4)
    s = zero_model_states(n, dp, stage)
    return Posed(f"{_b(n)} parameters, mixed-precision Adam, ZeRO stage {stage} over {dp} data-parallel "
                 "GPUs: how many GB of model states does each GPU hold?", s.total,
                 f"parlab zero_model_states: weights {s.weights / 1e9:.4g} + gradients {s.grads / 1e9:.4g} "
                 f"+ master {s.master / 1e9:.4g} + Adam {s.optimizer_states / 1e9:.4g} = "
                 f"{s.total / 1e9:.4g} GB (stage 1 shards the optimizer states, 2 the gradients, 3 the "
                 "weights).", {"n_params": n, "dp": dp, "stage": stage})


def gpus_to_hold(rng) -> Posed:
    model = rng.choice(("gpt3-13b", "llama-13b", "llama-65b", "gpt3-175b", "bloom-176b"))
    gpu = rng.choice(("a100-40gb", "a100-80gb", "h100-sxm", "h200"))
    wall = memory_wall(model, "mixed", "adam", 1, "full")
    fit = wall.fit(gpu)
    return Posed(f"{model} with mixed-precision Adam, micro-batch 1 and full recompute: if its model "
                 f"states are split evenly over GPUs (ZeRO-3 style) and each GPU keeps its own "
                 f"activations, how many {gpu} GPUs ({get_gpu(gpu).memory_bytes / 1e9:.3g} GB) are "
                 "needed at least?", fit.min_gpus,
                 f"parlab memory_wall: {wall.states.total / 1e9:,.4g} GB of states over the room left "
                 f"after {wall.activations / 1e9:.3g} GB of activations per GPU -> {fit.min_gpus} GPUs.",
                 {"model": model, "gpu": gpu})


def largest_on_gpu(rng) -> Posed:
    gpu = rng.choice(tuple(GPUS))
    dtype, optimizer = rng.choice((("mixed", "adam"), ("fp16", "none"), ("mixed", "sgd"), ("fp32", "adam")))
    cap = get_gpu(gpu).memory_bytes
    n = largest_model(cap, dtype, optimizer)
    what = "inference (weights only)" if optimizer == "none" else f"training with {OPTIMIZER_WORDS[optimizer]}"
    return Posed(f"How many parameters fit in one {gpu} ({cap:,.0f} bytes) for {what} in '{dtype}' "
                 f"({DTYPE_WORDS[dtype]}), "
                 "counting model states only?", n,
                 f"parlab largest_model: {cap:.4g} / {bytes_per_param(dtype, optimizer):g} B/param = "
                 f"{n / 1e9:.4g}B. Datasheet 'GB' are often GiB: the '80GB' A100 holds "
                 f"{get_gpu('a100-80gb').memory_bytes:.4g} bytes.",
                 {"gpu": gpu, "dtype": dtype, "optimizer": optimizer})


def activations_per_layer(rng) -> Posed:
    model = rng.choice(("gpt3-6.7b", "gpt3-13b", "gpt3-175b"))
    b, tp = rng.choice((1, 2, 4)), rng.choice((1, 2, 4, 8))
    recompute = rng.choice(("none", "selective", "full"))
    sp = tp > 1 and rng.random() < 0.5
    spec = get_model(model)
    a = activation_bytes_per_layer(spec, b, tp, sp, recompute)
    return Posed(f"{model} (s={spec.seq_len}, h={spec.hidden}, a={spec.heads}), micro-batch {b}, tp={tp}"
                 f"{' with sequence parallelism' if sp else ''}, recompute '{recompute}': how many MB of "
                 "activations does one layer keep for the backward pass, per GPU?", a,
                 f"parlab activation_bytes_per_layer (Korthikanti et al. 2022, Table 2): {a / 1e6:,.4g} MB.",
                 {"model": model, "micro_batch": b, "tp": tp, "sequence_parallel": sp, "recompute": recompute})


# -- compute ------------------------------------------------------------------------------------------
def flops_6nd(rng) -> Posed:
    n, tokens = rng.choice(SIZES), rng.choice((300e9, 1e12, 1.4e12, 2e12))
    c = train_flops_6nd(n, tokens)
    return Posed(f"Training FLOPs of a {_b(n)}-parameter model on {human_count(tokens)} tokens, by "
                 "C = 6ND?", c,
                 f"parlab train_flops_6nd: 6 x {n:.3g} x {tokens:.3g} = {c:.4g} FLOPs.",
                 {"n_params": n, "tokens": tokens})


def days_on_n_gpus(rng) -> Posed:
    model = rng.choice(("llama-7b", "llama-13b", "llama-65b", "gpt3-175b"))
    tokens = rng.choice((300e9, 1e12, 1.4e12))
    gpu, n = rng.choice(("a100-80gb", "h100-sxm")), rng.choice((64, 256, 1024, 2048))
    mfu = rng.choice((0.3, 0.4, 0.5))
    w = compute_wall(model, tokens, gpu, n, mfu)
    return Posed(f"{model} on {human_count(tokens)} tokens with {n} {gpu} GPUs at {mfu:.0%} of the bf16 peak, "
                 "assuming perfect scaling: how many days?", w.seconds,
                 f"parlab compute_wall: {w.flops:.3g} FLOPs / ({n} x {w.gpu.half_flops / 1e12:g} TFLOP/s x "
                 f"{mfu}) = {w.days:,.4g} days.",
                 {"model": model, "tokens": tokens, "gpu": gpu, "n_gpus": n, "utilisation": mfu})


# -- communication ----------------------------------------------------------------------------------
def _link_case(rng) -> dict:
    return {"ranks": rng.choice((2, 4, 8, 16, 32, 64)), "nbytes": rng.choice((64e3, 1e6, 16e6, 256e6, 1e9)),
            "alpha": rng.choice((2e-6, 5e-6, 10e-6, 30e-6)), "bandwidth": rng.choice((1.25e9, 12.5e9, 25e9, 240e9))}


def ring_allreduce_time(rng) -> Posed:
    c = _link_case(rng)
    t = alphabeta.time("all_reduce", "ring", c["ranks"], c["nbytes"], c["alpha"], c["bandwidth"])
    return Posed(f"Ring all-reduce of {c['nbytes']:,.0f} bytes among {c['ranks']} ranks, alpha = "
                 f"{c['alpha'] * 1e6:g} µs per message, {c['bandwidth'] / 1e9:g} GB/s per link: how many "
                 "ms by the alpha-beta model (no reduction cost)?", t.seconds,
                 f"parlab alphabeta: 2(p-1) alpha + 2(p-1)/p n/B: {t.explain()}", c)


def latency_or_bandwidth(rng) -> Posed:
    c = _link_case(rng)
    t = alphabeta.time("all_reduce", "ring", c["ranks"], c["nbytes"], c["alpha"], c["bandwidth"])
    return Posed(f"A ring all-reduce of {c['nbytes']:,.0f} bytes among {c['ranks']} ranks, alpha = "
                 f"{c['alpha'] * 1e6:g} µs, {c['bandwidth'] / 1e9:g} GB/s: is it latency-bound or "
                 "bandwidth-bound (which term is larger)?", t.bound,
                 f"latency {t.latency * 1e6:,.4g} µs vs transfer {t.transfer * 1e6:,.4g} µs. Small "
                 "messages are latency-bound: the reason for gradient buckets.", c)


def bus_bandwidth_q(rng) -> Posed:
    n, nbytes = rng.choice((4, 8, 16, 64)), rng.choice((256e6, 1e9, 4e9))
    seconds = rng.choice((0.005, 0.01, 0.05, 0.2))
    bw = alphabeta.bus_bandwidth("all_reduce", n, nbytes, seconds)
    return Posed(f"nccl-tests measures an all-reduce of {nbytes:,.0f} bytes on {n} GPUs in {seconds * 1e3:g} ms. "
                 "What bus bandwidth does it report, in GB/s?", bw,
                 f"parlab bus_bandwidth: S / t x 2(n-1)/n = {bw / 1e9:,.4g} GB/s.",
                 {"ranks": n, "nbytes": nbytes, "seconds": seconds})


def gbit_to_bytes(rng) -> Posed:
    g = rng.choice((10, 25, 64, 100, 200, 400, 800))
    bw = gbit_per_s(g)
    return Posed(f"A network link of {g} Gb/s: how many GB/s is that, one direction?", bw,
                 f"parlab gbit_per_s: {g} / 8 = {bw / 1e9:g} GB/s.", {"gbit": g})


def tp_message(rng) -> Posed:
    model, b, tp = rng.choice(("gpt3-6.7b", "gpt3-13b", "llama-7b")), rng.choice((1, 2, 4)), rng.choice((2, 4, 8))
    est = estimate(model, make_cluster("dgx-a100", tp), Plan(tp=tp, micro_batch=b, dtype="bf16"))
    spec, msg = est.model, est.time.facts["msg"]
    return Posed(f"{model} (s={spec.seq_len}, h={spec.hidden}), micro-batch {b}, bf16, tp={tp}: how many MB "
                 "does each tensor-parallel all-reduce of an attention or MLP block's output carry?", msg,
                 f"parlab step_time: the (s, b, h) activation in 2 bytes = {msg / 1e6:,.4g} MB, whatever "
                 "the TP degree.", {"model": model, "micro_batch": b, "tp": tp})


def tp_layer_volume(rng) -> Posed:
    model, b, tp = rng.choice(("gpt3-6.7b", "gpt3-13b", "llama-7b")), rng.choice((1, 2, 4)), rng.choice((2, 4, 8))
    recompute = rng.choice(("none", "full"))
    est = estimate(model, make_cluster("dgx-a100", tp), Plan(tp=tp, micro_batch=b, dtype="bf16",
                                                            recompute=recompute))
    f = est.time.facts
    per_layer = f["n_tp"] / f["L"]
    sent = per_layer * alphabeta.shape("all_reduce", "ring", tp, f["msg"])[1]
    return Posed(f"{model}, micro-batch {b}, bf16, tp={tp}, recompute '{recompute}': how many MB does one "
                 "TP rank send per transformer layer per micro-batch (forward + backward, ring all-reduces)?",
                 sent, f"parlab: {per_layer:g} all-reduces per layer (2 forward, 2 backward, 2 more when "
                 f"recomputing) x 2(t-1)/t x {f['msg'] / 1e6:,.4g} MB = {sent / 1e6:,.4g} MB.",
                 {"model": model, "micro_batch": b, "tp": tp, "recompute": recompute})


def zero3_traffic(rng) -> Posed:
    n, dp = rng.choice(SIZES), rng.choice((8, 16, 32, 64))
    recompute = rng.choice(("none", "full"))
    bytes_ = zero3_traffic_per_step(n, dp, "bf16", 1, recompute)
    return Posed(f"ZeRO-3, {_b(n)} parameters in bf16, {dp} GPUs, one micro-batch, recompute '{recompute}': "
                 "how many GB does each GPU send per step?", bytes_,
                 f"parlab zero3_traffic_per_step: (2 weight gathers + 1 gradient reduce-scatter) x 2 B x Psi "
                 f"x (n-1)/n = {bytes_ / 1e9:,.4g} GB"
                 + (". Full recompute adds no third gather: the backward's gather serves the recomputed "
                    "forward (DeepSpeed keeps the parameters within stage3_max_reuse_distance; FSDP gathers "
                    "before the recompute)." if recompute == "full" else "."),
                 {"n_params": n, "dp": dp, "recompute": recompute})


def zero3_seconds(rng) -> Posed:
    n, dp, link = rng.choice(SIZES[:7]), rng.choice((8, 16, 32)), rng.choice(("10gbe", "25gbe", "100gbe"))
    bytes_ = zero3_traffic_per_step(n, dp)
    rate = get_link(link).bandwidth
    return Posed(f"ZeRO-3 with {_b(n)} bf16 parameters on {dp} GPUs: at the line rate of {link} "
                 f"({rate / 1e9:g} GB/s), how many seconds of communication per step (no recompute, one "
                 "micro-batch, nothing overlapped)?", bytes_ / rate,
                 f"parlab: {bytes_ / 1e9:,.4g} GB / {rate / 1e9:g} GB/s = {bytes_ / rate:,.4g} s.",
                 {"n_params": n, "dp": dp, "link": link})


def multinode_allreduce(rng) -> Posed:
    n, nodes, gbit = rng.choice(SIZES[:6]), rng.choice((2, 4, 8)), rng.choice((64, 100, 200, 400, 800))
    latency_us, efficiency = rng.choice((5.0, 10.0, 30.0)), rng.choice((0.8, 0.9))
    grads = model_state_memory(n, "mixed", "adam").grads
    t = comm_time_vs_bandwidth(grads, nodes, [gbit], latency_us=latency_us, efficiency=efficiency)[0]
    return Posed(f"Data parallelism over {nodes} machines joined by {gbit} Gb/s ({efficiency:.0%} of line "
                 f"rate achieved, {latency_us:g} µs latency): how many seconds does one ring all-reduce "
                 f"of the 16-bit gradients of a {_b(n)} model take?", t,
                 f"parlab comm_time_vs_bandwidth: 2(n-1) alpha + 2(n-1)/n x {grads / 1e9:.4g} GB / "
                 f"({gbit} Gb/s x {efficiency:g}) = {t:,.4g} s.",
                 {"n_params": n, "nodes": nodes, "gbit": gbit, "latency_us": latency_us,
                  "efficiency": efficiency})


# -- pipeline -----------------------------------------------------------------------------------------
def bubble(rng) -> Posed:
    name, p, m = rng.choice(("gpipe", "1f1b")), rng.randrange(2, 9), rng.randrange(1, 17)
    tl = simulate(make_schedule(name, p, m))
    return Posed(f"{name.upper() if name == '1f1b' else 'GPipe'} with p = {p} stages and m = {m} "
                 "micro-batches, equal stage costs (backward = 2 x forward): what fraction of the "
                 "stage-time is bubble? (A fraction such as 3/11 or 0.27.)", tl.bubble_fraction,
                 f"parlab schedules.simulate: (p-1)/(m+p-1) = {tl.bubble_fraction}.",
                 {"schedule": name, "p": p, "m": m})


def interleaved_bubble(rng) -> Posed:
    p, v = rng.choice((2, 4)), rng.choice((2, 3))
    m = p * rng.randrange(1, 4)
    tl = simulate(make_schedule("interleaved", p, m, v))
    return Posed(f"Interleaved 1F1B (Megatron-LM, PipeDream-Flush with v = {v} model chunks per stage), "
                 f"p = {p}, m = {m}, equal costs: what fraction of the stage-time is bubble?",
                 tl.bubble_fraction,
                 f"parlab schedules.simulate: (p-1)/(v m + p - 1) = {tl.bubble_fraction}; v chunks cut the "
                 "bubble time by v at the price of v times more sends.", {"p": p, "m": m, "v": v})


def naive_bubble(rng) -> Posed:
    p = rng.randrange(2, 9)
    tl = simulate(naive(p))
    return Posed(f"Layers split over {p} GPUs with one batch in flight (accelerate's device_map): what "
                 "fraction of the GPU-time is idle?", tl.bubble_fraction,
                 f"parlab schedules.simulate(naive(p)): (p-1)/p = {tl.bubble_fraction}.", {"p": p})


def peak_in_flight(rng) -> Posed:
    p, m = rng.randrange(2, 9), rng.randrange(1, 17)
    stage = rng.randrange(p)
    peak = peak_activations(one_f_one_b(p, m))[stage]
    return Posed(f"1F1B with p = {p} stages and m = {m} micro-batches: at most how many micro-batches of "
                 f"activations does stage {stage} (0 = first) hold at once?", peak,
                 f"parlab peak_activations: min(p - stage, m) = {peak} (GPipe would hold all {m}).",
                 {"p": p, "m": m, "stage": stage})


# -- 3D ----------------------------------------------------------------------------------------------------
def mtnlg_nodes(rng) -> Posed:
    dp = rng.choice((8, 10, 12))
    plan = Plan(dp=dp, tp=8, pp=35)
    nodes = make_cluster("dgx-a100", plan.n_gpus).nodes
    return Posed(f"MT-NLG's layout (tp = 8 inside a DGX A100 node, pp = 35) with {dp}-way data "
                 "parallelism: how many 8-GPU nodes?", nodes,
                 f"parlab Plan(dp={dp}, tp=8, pp=35).n_gpus = {plan.n_gpus} GPUs = {nodes} nodes.", {"dp": dp})


def global_rank(rng) -> Posed:
    tp, dp, pp = rng.choice((2, 4, 8)), rng.choice((1, 2, 4)), rng.choice((2, 4))
    t, d, s = rng.randrange(tp), rng.randrange(dp), rng.randrange(pp)
    r = rank_of(t, d, s, tp, dp)
    return Posed(f"3D grid tp={tp}, dp={dp}, pp={pp} in Megatron's order (tp fastest, then dp, then pp): "
                 f"what is the global rank of tp_rank {t}, dp_rank {d}, pp_rank {s}?", r,
                 f"parlab rank_of: pp_rank x tp x dp + dp_rank x tp + tp_rank = {r}.",
                 {"tp": tp, "dp": dp, "pp": pp, "tp_rank": t, "dp_rank": d, "pp_rank": s})


QUESTIONS = [
    Numeric("gen-states", "1.1", "memory", states_mixed_adam, "bytes", "GB", 0.02,
            why="Model states of mixed-precision Adam are 16 bytes per parameter (ZeRO paper, Sec. 3.1)."),
    Numeric("gen-6nd", "1.1", "compute", flops_6nd, "count", "", 0.02,
            why="Forward 2ND + backward 4ND (Kaplan et al. 2020)."),
    Numeric("gen-bytes-per-param", "1.10", "memory", bytes_per_param_q, "bytes/param", "bytes/param", 0.0,
            why="Weights + gradients + master copy + optimizer states per parameter."),
    Numeric("gen-days", "1.11", "compute", days_on_n_gpus, "seconds", "days", 0.02,
            why="Data parallelism divides the compute wall by N at best."),
    Numeric("gen-ring-time", "1.3", "communication", ring_allreduce_time, "seconds", "ms", 0.02,
            why="Hockney's alpha-beta model with the ring's step and byte counts (Thakur et al. 2005)."),
    Numeric("gen-busbw", "1.3", "communication", bus_bandwidth_q, "rate", "GB/s", 0.02,
            why="Bus bandwidth makes all-reduce speeds comparable with link speeds (nccl-tests)."),
    Named("gen-bound", "1.5", "communication", options=("latency", "bandwidth"), make=latency_or_bandwidth,
          why="alpha x steps against bytes / bandwidth."),
    Numeric("gen-bubble", "1.6", "pipeline", bubble, "fraction", "", 0.01,
            why="Fill and drain idle p-1 of m+p-1 slots (Huang et al. 2019; Narayanan et al. 2021)."),
    Numeric("gen-in-flight", "1.6", "pipeline", peak_in_flight, "count", "", 0.0,
            why="1F1B bounds the activations in flight by the pipeline depth."),
    Numeric("gen-tp-message", "1.7", "tensor parallel", tp_message, "bytes", "MB", 0.02,
            why="Megatron's g (and f in backward) all-reduce the block's (s, b, h) output."),
    Numeric("gen-tp-layer", "1.8", "tensor parallel", tp_layer_volume, "bytes", "MB", 0.02,
            why="TP's traffic scales with activations and recurs in every layer."),
    Numeric("gen-rank", "1.9", "3d parallel", global_rank, "count", "", 0.0,
            why="The rank grid that both the cost model and the runtime use (parlab.costmodel.specs.cluster)."),
    Numeric("gen-naive-bubble", "1.12", "pipeline", naive_bubble, "fraction", "", 0.01,
            why="A plain layer split keeps one GPU of p busy."),
    Numeric("gen-gpus-to-hold", "1.12", "memory", gpus_to_hold, "count", "", 0.0,
            why="Model states shard; activations per GPU do not."),
    Numeric("gen-largest", "1.14", "memory", largest_on_gpu, "count", "", 0.02,
            why="Capacity / bytes per parameter."),
    Numeric("gen-zero-stage", "1.16", "zero", zero_stage_memory, "bytes", "GB", 0.02,
            why="ZeRO stages 1-3 (Rajbhandari et al. 2020, Fig. 1)."),
    Numeric("gen-zero3-traffic", "1.19", "zero", zero3_traffic, "bytes", "GB", 0.02,
            why="ZeRO-3 gathers the weights for the forward and the backward (which also serves a recompute)."),
    Numeric("gen-zero3-seconds", "1.19", "network", zero3_seconds, "seconds", "s", 0.02,
            why="Traffic / line rate, the guide's own estimate done in bytes."),
    Numeric("gen-gbit", "1.18", "network", gbit_to_bytes, "rate", "GB/s", 0.01,
            why="Networks count bits; 8 bits per byte."),
    Numeric("gen-interleaved", "1.20", "pipeline", interleaved_bubble, "fraction", "", 0.01,
            why="Interleaving virtual stages shrinks the bubble (Narayanan et al. 2021, Sec. 2.2.2)."),
    Numeric("gen-activations", "1.21", "memory optimizations", activations_per_layer, "bytes", "MB", 0.02,
            why="Selective recompute drops the attention-score term; full recompute keeps only the input."),
    Numeric("gen-mtnlg-nodes", "2.1", "3d parallel", mtnlg_nodes, "count", "", 0.0,
            why="GPUs = dp x tp x pp; nodes = GPUs / 8."),
    Numeric("gen-multinode", "4.4", "network", multinode_allreduce, "seconds", "s", 0.02,
            why="The gradient all-reduce across machines at the guide's 64 vs 800 Gb/s."),
]
