"""The numbers of the 中文口述版, guide sections 1.1-1.14 (see ``parlab.zh.numbers``)."""

from __future__ import annotations

from parlab.costmodel import (
    GPUS,
    SECONDS_PER_YEAR,
    alphabeta,
    get_link,
    get_model,
    implied_utilisation,
    largest_model,
    model_state_memory,
    train_flops_6nd,
    training_seconds,
)
from parlab.costmodel.answers.walls import compute_wall, largest_trainable, memory_wall
from parlab.course import derivations as d
from parlab.course.guide import CLAIMS

from .numbers_common import GB, _f, _gb, _gib, _idle, _link_gbps, _mtnlg, _pct, _s


# -- part 1 ---------------------------------------------------------------------------------------
def s_1_1() -> dict[str, str]:
    fp32 = model_state_memory(175e9, "fp32", "adam")
    mixed = model_state_memory(1, "mixed", "adam")
    gpt3 = get_model("gpt3-175b")
    flops = train_flops_6nd(gpt3.num_params(), 300e9)
    quoted = CLAIMS["gpt3-years-a100"].value * SECONDS_PER_YEAR  # Narayanan et al.'s figure is for a V100
    u_v100 = implied_utilisation(flops, quoted, 1, "v100-32gb")
    a100_years = training_seconds(flops, 1, "a100-80gb", u_v100) / SECONDS_PER_YEAR
    days = compute_wall("gpt3-175b", tokens=300e9, gpu="a100-80gb", n_gpus=1024, utilisation=0.5).days
    return {"fp32_gb": _gb(fp32.total), "bpp": _f(mixed.total), "a100_mem": _gib(GPUS["a100-80gb"].memory_bytes),
            "flops": f"{flops:.2g}".replace("e+", "e"), "guide_years": _f(CLAIMS["gpt3-years-a100"].value), "u_v100": _pct(u_v100, 1),
            "a100_years": _f(a100_years), "gpus": "1,024", "days": _f(days, 1)}


def s_1_2() -> dict[str, str]:
    link = get_link("ib-hdr")
    t = alphabeta.time("p2p", "direct", 2, 1e9, link.latency, link.bandwidth)
    return {"alpha_us": _s(link.latency * 1e6), "bw": _link_gbps("ib-hdr"), "ms": _f(t.seconds * 1e3)}


def s_1_3() -> dict[str, str]:
    from parlab.costmodel.pricing.ring_vs_tree import ring_tree_crossover

    p = 8
    steps, volume, _ = alphabeta.shape("all_reduce", "ring", p, 1.0)
    link = get_link("ib-hdr")
    ring = alphabeta.time("all_reduce", "ring", p, 1e9, link.latency, link.bandwidth).seconds
    naive = alphabeta.time("all_reduce", "naive", p, 1e9, link.latency, link.bandwidth).seconds
    cross = ring_tree_crossover(64, "ib-hdr")
    return {"p": str(p), "steps": _f(steps), "volume": _s(volume), "naive_x": _s(naive / ring),
            "cross_mb": _f(cross.bytes / 1e6) if cross.bytes else "∞", "ranks_tree": "64"}


def s_1_4() -> dict[str, str]:
    n = get_model("llama-7b").num_params()
    p = 8
    _, volume, _ = alphabeta.shape("all_reduce", "ring", p, 2.0 * n)
    return {"p": str(p), "grad_gb": _gb(2 * n, 1), "sent_gb": _gb(volume, 1),
            "bpp": _f(model_state_memory(1, "mixed", "adam").total)}


def s_1_5() -> dict[str, str]:
    from parlab.costmodel.plan.data_parallel import ddp_step

    fast = ddp_step("llama-7b", 8, "ib-hdr")
    slow = ddp_step("llama-7b", 8, "10gbe")
    return {"n": "8", "buckets": _f(fast.buckets),
            "hidden_ib": _pct(fast.hidden_fraction), "hidden_eth": _pct(slow.hidden_fraction)}


def s_1_6() -> dict[str, str]:
    p, m, v = 4, 8, 2
    return {"p": str(p), "m": str(m), "v": str(v), "bubble": _pct(_idle(p, m), 1),
            "bubble_v": _pct(_idle(p, m, "interleaved", v), 1), "in_flight": str(min(p, m))}


def s_1_7() -> dict[str, str]:
    gpt3 = get_model("gpt3-175b")
    t = 8
    sent = d.tp_bytes_per_layer(1, gpt3.seq_len, gpt3.hidden, t)
    nvlink, pcie = get_link("nvlink3-a100"), get_link("pcie4")
    return {"t": str(t), "mb_layer": _f(sent.total / 1e6), "ms_nvlink": _s(sent.total / nvlink.achievable * 1e3),
            "ms_pcie": _s(sent.total / pcie.achievable * 1e3)}


def s_1_8() -> dict[str, str]:
    n = get_model("llama-7b").num_params()
    p, m = 8, 8
    states = model_state_memory(n, "mixed", "adam").total
    return {"p": str(p), "dp_gb": _gb(states), "split_gb": _gb(states / p, 1), "m": str(m),
            "bubble": _pct(_idle(p, m))}


def s_1_9() -> dict[str, str]:
    from parlab.layout import Grid

    g = Grid(dp=2, tp=4, pp=4)
    r = 13
    fmt = lambda ranks: "、".join(map(str, ranks))  # noqa: E731
    return {"world": str(g.world), "dp": str(g.dp), "tp": str(g.tp), "pp": str(g.pp), "rank": str(r), "tp_group": fmt(g.group("tp", r)),
            "pp_group": fmt(g.group("pp", r)), "dp_group": fmt(g.group("dp", r))}


def s_1_10() -> dict[str, str]:
    w = memory_wall("llama-7b", "mixed", "adam", micro_batch=1, recompute="none")
    full = memory_wall("llama-7b", "mixed", "adam", micro_batch=1, recompute="full")
    n = w.model.num_params()
    rule = CLAIMS["finetune-bytes-per-param"].value
    over = w.estimate_total / (rule * n) - 1  # the full one-GPU estimate against the guide's 20n GB
    bound = "可以当上限用" if over <= 0 else f"但不是上限：成本模型的完整估计还要多 {over:.0%}"
    return {"bound": bound, "bpp": _f(w.total / n, 1), "total_gb": _gb(w.total), "estimate_gb": _gb(w.estimate_total),
            "bpp_full": _f(full.total / n, 1),
            "guide_gb": _f(rule * n / GB), "model_b": _f(n / 1e9, 2), "states_bpp": _f(model_state_memory(1, "mixed", "adam").total),
            "seq": _f(w.model.seq_len), "mb": "1"}


def s_1_11() -> dict[str, str]:
    from parlab.costmodel.plan.data_parallel import scaling_crossover, speedup

    batch = 256
    return {"n": "8", "batch": str(batch), "speed_ib": _f(speedup("llama-7b", 8, "ib-hdr", batch), 1),
            "speed_eth": _f(speedup("llama-7b", 8, "10gbe", batch), 1),
            "cross": str(scaling_crossover("llama-7b", "ib-hdr", batch) or "—")}


def s_1_12() -> dict[str, str]:
    n = get_model("llama-13b").num_params()
    p = 8
    return {"states_gb": _gb(model_state_memory(n, "mixed", "adam").total), "card_gb": "80",
            "p": str(p), "busy": _pct(1 - _idle(p, 1), 1), "m": "32", "bubble": _pct(_idle(p, 32), 1)}


def s_1_13() -> dict[str, str]:
    p, m = 4, 16
    return {"p": str(p), "busy": _pct(1 - _idle(p, 1)), "m": str(m), "bubble": _pct(_idle(p, m), 1)}


def s_1_14() -> dict[str, str]:
    none = largest_trainable("a100-80gb", "mixed", "adam", micro_batch=1, recompute="none")
    return {"card": "80 GB", "bpp": _f(model_state_memory(1, "mixed", "adam").total), "infer_b": _f(largest_model(80e9, "fp16", "none") / 1e9), "train_b": _f(largest_model(80e9) / 1e9),
            "real_b": _f(none.model.num_params() / 1e9, 1), **_mtnlg()}


