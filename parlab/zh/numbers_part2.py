"""The numbers of the 中文口述版, guide sections 1.15-4.5 (see ``parlab.zh.numbers``)."""

from __future__ import annotations

from functools import cache

from parlab.costmodel import (
    GPUS,
    alphabeta,
    get_link,
    get_model,
    get_precision,
    model_state_memory,
    train_flops_6nd,
)
from parlab.course import derivations as d
from parlab.course.guide import CLAIMS

from .numbers_common import BLOOM_LAYOUT, GB, _f, _gb, _gib, _idle, _link_gbps, _mtnlg, _pct, _s


def s_1_15() -> dict[str, str]:
    from parlab.costmodel.pricing.tensor_parallel import colossal_table

    one, two = colossal_table("1d", 16), colossal_table("2d", 16)
    return {"p": "16", "bw_1d": _s(one["bandwidth"]), "bw_2d": _s(two["bandwidth"]),
            "lat_1d": _f(one["latency"]), "lat_2d": _f(two["latency"]), "act_2d": _s(two["activations"])}


@cache
def _zero_example() -> dict[int, float]:
    from parlab.costmodel.answers.validation import zero_paper_example

    return zero_paper_example()


def s_1_16() -> dict[str, str]:
    z = _zero_example()
    from parlab.costmodel.answers.scenarios import zero3_traffic_per_step

    ddp = alphabeta.shape("all_reduce", "ring", 64, 2.0)[1]  # bytes per parameter, 16-bit gradients
    return {"b": "7.5", "n": "64", "z0": _f(z[0]), "z1": _f(z[1], 1), "z2": _f(z[2], 1), "z3": _f(z[3], 1),
            "z3_x": _s(zero3_traffic_per_step(1.0, 64) / ddp)}


def s_1_17() -> dict[str, str]:
    from parlab.costmodel.answers.scenarios import zero3_traffic_per_step

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
    from parlab.costmodel.answers.scenarios import guide_1_19

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
    from parlab.costmodel.answers.frameworks import FRAMEWORKS

    runs = _runs()
    mega, opt = runs["Megatron-LM"], runs["PyTorch FSDP + Megatron TP (Metaseq)"]
    return {"count": str(len(FRAMEWORKS)), "mega_gpus": _f(mega.count), "mega_tflops": _f(mega.figure),
            "opt_tflops": _f(opt.figure)}


def _runs() -> dict:
    """The published run of each stack (chapter 10's table, ``costmodel.stacks``), first per stack."""
    from parlab.costmodel.answers.stacks import stack_runs

    out: dict = {}
    for r in stack_runs():
        out.setdefault(r.stack, r)
    return out


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
def s_3_2() -> dict[str, str]:
    runs = _runs()
    palm, llama = runs["JAX / XLA on TPU (Pathways)"], runs["PyTorch in-house 4D (Meta)"]
    from parlab.costmodel.answers.stacks import stack_runs

    bloom = next(r for r in stack_runs() if r.run.startswith("BLOOM"))
    return {"palm_chips": _f(palm.count), "palm_mfu": f"{palm.figure:g}%", "llama_gpus": _f(llama.count),
            "llama_tflops": _f(llama.figure), "bloom_tflops": _f(bloom.figure)}


def s_3_3() -> dict[str, str]:
    from parlab.costmodel.answers.single_gpu import one_gpu_levers

    full, int8, lora, qlora, offload = one_gpu_levers("llama-7b")[1:]
    return {"card_mem": _gib(GPUS["a100-80gb"].memory_bytes), "full_gb": _gb(full.total), "int8_gb": _gb(int8.total),
            "lora_m": _f(lora.trainable / 1e6), "lora_gb": _gb(lora.total), "qlora_gb": _gb(qlora.total),
            "offload_gb": _gb(offload.total)}


def s_3_4() -> dict[str, str]:
    return {"nvlink": _link_gbps("nvlink3-a100"), "pcie": _link_gbps("pcie4")}


def s_3_5() -> dict[str, str]:
    return {"ib": _link_gbps("ib-hdr"), "eth": _link_gbps("10gbe"),
            "ratio": _f(get_link("ib-hdr").bandwidth / get_link("10gbe").bandwidth)}


# -- part 4 ---------------------------------------------------------------------------------------
def s_4_1() -> dict[str, str]:
    from parlab.costmodel.pricing.inference import fit_decode, gpu_gap, weight_bytes
    from parlab.course.guide_tables import line_fit, measured_pairs

    fit = fit_decode(measured_pairs())
    gap = gpu_gap(fit, 1000)
    slower = line_fit("v100").slope / line_fit("a800").slope - 1  # chapter 11: the slopes of the guide's rows
    return {"batch": "1", "weights_gb": _gb(weight_bytes("chatglm-6b")), "time_x": _pct(slower),
            "bw_x": _f(gap.bandwidth_ratio, 1), "overhead": _pct(gap.overhead_share)}


def s_4_2() -> dict[str, str]:
    return {}


def s_4_4() -> dict[str, str]:
    from parlab.costmodel.answers.scenarios import comm_time_vs_bandwidth

    n = get_model("llama-7b").num_params()
    rows = comm_time_vs_bandwidth(2 * n, 2, [64, 800])
    return {"grad_gb": _gb(2 * n, 1), "slow": "64", "fast": "800",
            "s_slow": _s(rows[0]), "s_fast": _s(rows[1])}


def _none() -> dict[str, str]:
    return {}


