"""The numbers of the Chinese spoken answers, computed by parlab (one function per guide section).

``values(section)`` returns the placeholders of ``answers.SPOKEN[section]`` already formatted as
strings. Each function calls the same parlab functions as the English chapter answering the
section (its imports are those of the chapter), so both languages change together when the model
changes. Everything here is cheap (no launch, no search): a chapter renders its answer instantly.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from parlab import derivations as d
from parlab.costmodel import (
    GPUS,
    SECONDS_PER_YEAR,
    GiB,
    alphabeta,
    get_link,
    get_model,
    get_precision,
    implied_utilisation,
    largest_model,
    model_state_memory,
    train_flops_6nd,
    training_seconds,
)
from parlab.costmodel.walls import compute_wall, largest_trainable, memory_wall
from parlab.guide import CLAIMS

#: BLOOM 176B's layout (BigScience 2022, the bloom-book; chapter 08 section 6 prices the same Plan)
BLOOM_LAYOUT = {"dp": 8, "tp": 4, "pp": 12}


def _idle(p: int, m: int, schedule: str = "gpipe", v: int = 2) -> float:
    """The share of the makespan a stage idles, from the schedule simulator ((p-1)/(m+p-1) for GPipe)."""
    from parlab.schedules import make_schedule, simulate

    return float(simulate(make_schedule(schedule, p, m, v)).bubble_fraction)


def _mtnlg() -> dict[str, str]:
    from parlab.costmodel.mtnlg import mtnlg_plan

    plan = mtnlg_plan()
    return {"tp": str(plan.tp), "pp": str(plan.pp), "dp": str(plan.dp), "replica": _f(plan.tp * plan.pp),
            "gpus": _f(plan.n_gpus)}

GB = 1e9


def _f(x: float, digits: int = 0) -> str:
    """A number with thousands separators and ``digits`` decimals: '2,800', '27.7'."""
    return f"{x:,.{digits}f}"


def _pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def _s(x: float) -> str:
    """Three significant digits, no thousands separator for small values: '0.452', '15.6'."""
    return f"{x:,.3g}" if abs(x) >= 1000 else f"{x:.3g}"


def _gb(nbytes: float, digits: int = 0) -> str:
    return _f(nbytes / GB, digits)


def _gib(nbytes: float) -> str:
    """'80 GiB': a card's memory as its datasheet's binary size."""
    return f"{nbytes / GiB:,.0f} GiB"


def _link_gbps(name: str) -> str:
    """A link's one-way bandwidth in GB/s."""
    return _s(get_link(name).bandwidth / GB)


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
    from parlab.costmodel.ring_vs_tree import ring_tree_crossover

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
    from parlab.costmodel.data_parallel import ddp_step

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
    return {"bpp": _f(w.total / n, 1), "total_gb": _gb(w.total), "bpp_full": _f(full.total / n, 1),
            "guide_gb": _f(rule * n / GB), "model_b": _f(n / 1e9, 2), "states_bpp": _f(model_state_memory(1, "mixed", "adam").total),
            "seq": _f(w.model.seq_len), "mb": "1"}


def s_1_11() -> dict[str, str]:
    from parlab.costmodel.data_parallel import scaling_crossover, speedup

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


def s_1_15() -> dict[str, str]:
    from parlab.costmodel.tensor_parallel import colossal_table

    one, two = colossal_table("1d", 16), colossal_table("2d", 16)
    return {"p": "16", "bw_1d": _s(one["bandwidth"]), "bw_2d": _s(two["bandwidth"]),
            "lat_1d": _f(one["latency"]), "lat_2d": _f(two["latency"]), "act_2d": _s(two["activations"])}


@cache
def _zero_example() -> dict[int, float]:
    from parlab.costmodel.validation import zero_paper_example

    return zero_paper_example()


def s_1_16() -> dict[str, str]:
    z = _zero_example()
    from parlab.costmodel.scenarios import zero3_traffic_per_step

    ddp = alphabeta.shape("all_reduce", "ring", 64, 2.0)[1]  # bytes per parameter, 16-bit gradients
    return {"b": "7.5", "n": "64", "z0": _f(z[0]), "z1": _f(z[1], 1), "z2": _f(z[2], 1), "z3": _f(z[3], 1),
            "z3_x": _s(zero3_traffic_per_step(1.0, 64) / ddp)}


def s_1_17() -> dict[str, str]:
    from parlab.costmodel.scenarios import zero3_traffic_per_step

    gpt3 = get_model("gpt3-175b")
    n_gpus, batch = 1024, 1536
    psi = gpt3.num_params()
    traffic = zero3_traffic_per_step(psi, n_gpus)
    flops = train_flops_6nd(psi, batch * gpt3.seq_len) / n_gpus
    compute_s = flops / (GPUS["a100-80gb"].peak_flops("half") * 0.5)
    comm_s = traffic / get_link("ib-hdr").achievable
    return {"gpus": _f(n_gpus), "batch": _f(batch), "per_gpu": _s(batch / n_gpus), "traffic_gb": _gb(traffic),
            "compute_s": _s(compute_s), "comm_s": _s(comm_s)}


def s_1_18() -> dict[str, str]:
    nv, pcie, eth = get_link("nvlink3-a100"), get_link("pcie4"), get_link("10gbe")
    return {"nvlink": _s(nv.bandwidth / GB), "pcie": _s(pcie.bandwidth / GB), "eth": _s(eth.bandwidth / GB),
            "ratio": _f(nv.bandwidth / pcie.bandwidth)}


@cache
def _guide_1_19():
    from parlab.costmodel.scenarios import guide_1_19

    return guide_1_19()


def s_1_19() -> dict[str, str]:
    g = _guide_1_19()
    return {"elem_bytes": _f(get_precision("mixed").weight), "guide_g": _f(g.guide_elements / 1e9), "guide_s": _f(g.guide_seconds), "real_gb": _gb(g.bytes_fp16),
            "real_s": _f(g.seconds_line_rate), "step_s": _f(g.estimate.step_time), "ratio": _f(g.bytes_fp16 / g.guide_elements)}


def s_1_20() -> dict[str, str]:
    p, m = 4, 16
    return {"p": str(p), "m": str(m), "bubble": _pct(_idle(p, m), 1),
            "bubble_v": _pct(_idle(p, m, "interleaved"), 1)}


def s_1_21() -> dict[str, str]:
    from parlab.parallel.precision import float_format

    f16, b16 = float_format("float16"), float_format("bfloat16")
    gpt3 = get_model("gpt3-175b")
    per = d.activation_terms(gpt3).total
    return {"fp16_max": _f(f16.max), "fp16_frac": str(f16.mantissa_bits), "bf16_frac": str(b16.mantissa_bits),
            "act_ratio": _f(per / (2 * gpt3.seq_len * gpt3.hidden)), "offload_bpp": _f(_offloaded_bytes_per_param()),
            "guide_fp16": _f(CLAIMS["fp16-max"].value),
            "flops_x": _s(4 / 3)}


def _offloaded_bytes_per_param() -> float:
    """ZeRO-Offload's bytes per parameter on the CPU: fp32 master weights, Adam's moments and the
    fp32 gradients (Ren et al. 2021, Sec. 4.1)."""
    mixed, fp32 = model_state_memory(1, "mixed", "adam"), model_state_memory(1, "fp32", "adam")
    return mixed.master + mixed.optimizer_states + fp32.grads


def s_1_22() -> dict[str, str]:
    from parlab.costmodel.frameworks import FRAMEWORKS

    return {"count": str(len(FRAMEWORKS))}


# -- part 2 ---------------------------------------------------------------------------------------
def s_2_1() -> dict[str, str]:
    nv = get_link("nvlink3-a100")
    return {"bidir": _f(2 * nv.bandwidth / GB), "oneway": _f(nv.bandwidth / GB), "achievable": _f(nv.achievable / GB),
            **_mtnlg()}


def s_2_2() -> dict[str, str]:
    b = BLOOM_LAYOUT
    return {**{k: str(v) for k, v in b.items()}, "gpus": _f(b["dp"] * b["tp"] * b["pp"])}


def s_2_3() -> dict[str, str]:
    return {k: str(v) for k, v in BLOOM_LAYOUT.items()}


# -- part 3 ---------------------------------------------------------------------------------------
def s_3_3() -> dict[str, str]:
    w = memory_wall("llama-7b", "mixed", "adam", micro_batch=1, recompute="full")
    n = w.model.num_params()
    return {"card_mem": _gib(GPUS["a100-80gb"].memory_bytes), "full_gb": _gb(w.total), "weights_gb": _gb(2 * n), "offload_gb": _gb(16 * n)}


def s_3_4() -> dict[str, str]:
    return {"nvlink": _link_gbps("nvlink3-a100"), "pcie": _link_gbps("pcie4")}


def s_3_5() -> dict[str, str]:
    return {"ib": _link_gbps("ib-hdr"), "eth": _link_gbps("10gbe"),
            "ratio": _f(get_link("ib-hdr").bandwidth / get_link("10gbe").bandwidth)}


# -- part 4 ---------------------------------------------------------------------------------------
def s_4_1() -> dict[str, str]:
    from parlab.costmodel.inference import fit_decode, gpu_gap, weight_bytes
    from parlab.guide_tables import line_fit, measured_pairs

    fit = fit_decode(measured_pairs())
    gap = gpu_gap(fit, 1000)
    slower = line_fit("v100").slope / line_fit("a800").slope - 1  # chapter 11: the slopes of the guide's rows
    return {"batch": "1", "weights_gb": _gb(weight_bytes("chatglm-6b")), "time_x": _pct(slower),
            "bw_x": _f(gap.bandwidth_ratio, 1), "overhead": _pct(gap.overhead_share)}


def s_4_2() -> dict[str, str]:
    return {}


def s_4_4() -> dict[str, str]:
    from parlab.costmodel.scenarios import comm_time_vs_bandwidth

    n = get_model("llama-7b").num_params()
    rows = comm_time_vs_bandwidth(2 * n, 2, [64, 800])
    return {"grad_gb": _gb(2 * n, 1), "slow": "64", "fast": "800",
            "s_slow": _s(rows[0]), "s_fast": _s(rows[1])}


def _none() -> dict[str, str]:
    return {}


VALUES: dict[str, Callable[[], dict[str, str]]] = {
    "1.1": s_1_1, "1.2": s_1_2, "1.3": s_1_3, "1.4": s_1_4, "1.5": s_1_5, "1.6": s_1_6, "1.7": s_1_7,
    "1.8": s_1_8, "1.9": s_1_9, "1.10": s_1_10, "1.11": s_1_11, "1.12": s_1_12, "1.13": s_1_13,
    "1.14": s_1_14, "1.15": s_1_15, "1.16": s_1_16, "1.17": s_1_17, "1.18": s_1_18, "1.19": s_1_19,
    "1.20": s_1_20, "1.21": s_1_21, "1.22": s_1_22, "2.1": s_2_1, "2.2": s_2_2, "2.3": s_2_3,
    "3.1": _none, "3.2": _none, "3.3": s_3_3, "3.4": s_3_4, "3.5": s_3_5,
    "4.1": s_4_1, "4.2": s_4_2, "4.3": _none, "4.4": s_4_4, "4.5": _none,
}


def values(section: str) -> dict[str, str]:
    """The formatted numbers of guide ``section``'s spoken answer."""
    if section not in VALUES:
        raise ValueError(f"no Chinese spoken answer for guide section {section!r}; known: {', '.join(VALUES)}")
    return VALUES[section]()
