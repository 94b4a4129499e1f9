"""Time of one training step under a plan, term by term: compute (matmuls at an achievable FLOP/s,
elementwise kernels at an achievable HBM bandwidth), TP collectives, pipeline sends, the
pipeline bubble, data-parallel / ZeRO traffic (with overlap), the optimizer step and offload, and
with cp or ep > 1 the context-parallel attention traffic and the MoE all-to-alls
(``comm_5d``)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.comm_5d import cp_micro_batch_time, ep_micro_batch_time
from parlab.costmodel.plan.fp8 import fp8_matmuls, zero3_fp8_gather_bytes
from parlab.costmodel.plan.layout_comm import layout_links, tp_layer_time
from parlab.costmodel.plan.memory.activations import _layer_kinds
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.plan.stage_work import (
    mean_layer_activations,
    pacing_stage,
    param_stages,
    stage_layer_flops,
)
from parlab.costmodel.pricing.attention_terms import score_flops
from parlab.costmodel.pricing.collectives import ring_time
from parlab.costmodel.pricing.layer_flops import (
    layer_forward_flops,
    logit_forward_flops,
    recompute_module_flops,
)
from parlab.costmodel.pricing.memory import attention_score_bytes, get_precision
from parlab.costmodel.pricing.moe_layer import stage_layer_kinds, stage_param_split
from parlab.costmodel.pricing.params import stage_params
from parlab.costmodel.pricing.pipeline_split import bubble_stage_times, stage_loads
from parlab.costmodel.specs.assumptions import Assumptions
from parlab.costmodel.specs.cluster import Cluster
from parlab.costmodel.specs.models import ModelSpec
from parlab.tables import plural


@dataclass(frozen=True)
class StepTime:
    """Seconds of one step on the critical (last) pipeline stage, by term, and the intermediate
    quantities behind them (``facts``, which ``Estimate.explain`` prints)."""

    matmul: float
    elementwise: float
    tp_comm: float
    pp_comm: float
    bubble: float
    dp_comm: float  # the exposed part
    optimizer: float
    offload: float
    facts: dict
    cp_comm: float = 0.0  # the exposed part of the context-parallel attention traffic
    ep_comm: float = 0.0  # the MoE layers' all-to-alls

    @property
    def compute(self) -> float:
        return self.matmul + self.elementwise

    @property
    def total(self) -> float:
        return (self.matmul + self.elementwise + self.tp_comm + self.pp_comm + self.bubble + self.dp_comm
                + self.optimizer + self.offload + self.cp_comm + self.ep_comm)

    def terms(self) -> dict[str, float]:
        """Seconds by term; the CP and EP terms only where the plan has cp or ep > 1."""
        out = {"compute: matmuls": self.matmul, "compute: elementwise": self.elementwise,
               "TP communication": self.tp_comm, "PP communication": self.pp_comm}
        if self.facts.get("cp", 1) > 1:
            out[CP_TERM] = self.cp_comm
        if self.facts.get("ep", 1) > 1:
            out[EP_TERM] = self.ep_comm
        return {**out, "pipeline bubble": self.bubble, "DP/ZeRO communication (exposed)": self.dp_comm,
                "optimizer step": self.optimizer, "offload transfers": self.offload}


CP_TERM = "CP communication (exposed)"
EP_TERM = "EP all-to-all"


def zero3_exposed(ag: float, rs: float, fwd: float, groups: int, backward_passes: int, a: Assumptions) -> float:
    """Seconds of one micro-batch's ZeRO-3 traffic that compute does not hide.

    DeepSpeed's stage 3 fetches module by module (``partitioned_param_coordinator.py``) and FSDP unit
    by unit, each gather prefetched one group ahead; so a group's gather can hide only behind the
    compute of the group before it, not behind the step's compute as a whole. In the forward pass
    the first gather waits and every other one exposes max(0, ag - fwd); in the backward pass a
    group's compute (``backward_passes`` forward times: 2 for the backward, 3 with the full
    recompute that runs just before it) hides the next gather and the previous group's
    reduce-scatter, the last of which waits. Two gathers per micro-batch, not three: the
    backward's gather also serves the recompute (FSDP's pre-backward all-gather runs before the
    recomputed forward; DeepSpeed keeps a parameter that is used again within
    ``stage3_max_reuse_distance``). ``ag`` and ``rs`` are one group's collectives, ``fwd`` one
    group's forward compute. While a collective runs beside compute, only ``a.zero3_overlap`` of
    the overlapped time is hidden (the NCCL kernels take SMs and HBM bandwidth from the matmuls).
    """
    eta = a.zero3_overlap
    forward = ag + (groups - 1) * (ag - eta * min(ag, fwd))
    backward = ag + rs + (groups - 1) * (ag + rs - eta * min(ag + rs, backward_passes * fwd))
    return forward + backward


def zero3_bandwidth(cluster: Cluster, ring: float, crosses_nodes: bool) -> float:
    """Bytes/s one GPU's ZeRO-3 collectives get: the DP group's ring bandwidth (``ring``,
    ``collectives.group_link``), and across nodes never more than one port of the inter-node link
    (``LinkSpec.achievable``: 22.5 GB/s for a 200 Gb/s HDR port), however many ports the node
    has for its ring to leave on at once (8 on a DGX A100, where ``group_link`` gives a ring of 8
    ranks per node 180 GB/s). On a node with one port (``pcie-10gbe``) both are that port.

    Why: the published ZeRO-3 runs (Narayanan et al. 2021, Table 2: GPT-3 175B and 530B, 384 to
    2,240 A100s, ``validation.megatron_zero3``) take the same step time as the GPU count doubles
    at a fixed batch (66.7 s at 768 and 1,536 GPUs; 180 s and 184 s for 530B at 1,120 and 2,240),
    the signature of a step bound by per-GPU traffic (3 Psi elements per micro-batch whatever the
    GPU count) at a per-GPU rate: 1.05 TB per GPU in 66.7 s is 15.7 GB/s, 70% of one HDR port and
    9% of the 8-port ring rate. The mechanism the model takes from DeepSpeed's stage 3: one
    all-gather per module over all ranks, one module in flight at a time
    (``stage3_prefetch_bucket_size``, DeepSpeed's default 5e7 parameters or chapter 11's 0.9 h^2 =
    1.4e8 for GPT-3, is smaller than one GPT-3 linear module of 1.5e8-6e8); at 1,536 ranks each
    rank's piece of a 1.2 GB module is 0.8 MB, split over NCCL's channels into ~100 KB per ring
    step, far below the sizes at which nccl-tests reach the multi-port bus bandwidth. The ring's
    (n - 1) alpha per collective comes on top (``step_time``).
    """
    return min(ring, cluster.inter.achievable) if crosses_nodes else ring


def zero_stage_reduces_fp32(plan: Plan) -> bool:
    """Whether the plan's gradient reduction moves fp32: with fp32 gradients and ZeRO-0/1
    (Megatron-LM's DDP reduces its fp32 main_grad buffer), not with ZeRO-2/3 (DeepSpeed reduces in
    the 16-bit communication_data_type and accumulates into its fp32 partition)."""
    return plan.fp32_grads and plan.zero <= 1


def step_time(model: ModelSpec, cluster: Cluster, plan: Plan, a: Assumptions) -> StepTime:
    """Seconds of one training step (see the module docstring and ``Estimate.explain``)."""
    s, b, h, t, p, v, m = model.seq_len, plan.micro_batch, model.hidden, plan.tp, plan.pp, plan.chunks, plan.m
    cp, ep = plan.cp, plan.ep
    prec = get_precision(plan.precision)
    full, selective = plan.recompute == "full", plan.recompute == "selective"
    layout = plan.layout(model)
    pace = pacing_stage(model, plan, layout)
    f: dict = {"L": layout[pace], "passes": 4 if full else 3, "cp": cp, "ep": ep, "layout": layout,
               "pace": pace}
    L, passes, logits = f["L"], f["passes"], 3 * (pace == p - 1)

    # compute of one micro-batch on the pacing stage (the last, which also runs the logits, unless
    # an uneven split makes another slower); with cp the rank's s / cp tokens (its queries against
    # all s keys: every term / cp)
    if model.moe is None and cp == 1:  # the 3D count, as it always was
        flops = passes * L * layer_forward_flops(model, b, t) + logits * logit_forward_flops(model, b, t)
    else:
        flops = passes * stage_layer_flops(model, plan, pace) + logits * logit_forward_flops(model, b, t) / cp
    scores_fwd = score_flops(model, b)  # 4bs^2h for multi-head attention (attention_terms)
    if selective:
        flops += L * scores_fwd / t / cp
    modules = plan.recompute_modules
    if modules:  # module-level recompute: each module's forward again (``recompute_module_flops``)
        kinds = _layer_kinds(model, plan, pace)
        flops += sum(k * recompute_module_flops(model, modules, b, t, cp, moe) for k, moe in kinds if k)
        f["recomputed"] = mean_layer_activations(model, plan, pace) - mean_layer_activations(
            model, plan, pace, "modules")
    if model.flash_attention:  # FlashAttention's backward recomputes Q K^T (Dao et al. 2022, Sec. 3.1)
        flops += L * (scores_fwd // 2 if type(scores_fwd) is int else scores_fwd / 2) / t / cp
    f["peak"] = cluster.gpu.peak_flops("fp32" if plan.dtype == "fp32" else "half")
    f["flops_mb"], f["t_mm_mb"] = flops, flops / (f["peak"] * a.matmul_efficiency)
    if plan.dtype == "fp8":  # the linear layers' GEMMs at the FP8 peak, the rest as before
        fp8_matmuls(model, cluster, plan, a, f, stage_layer_flops(model, plan, pace))
    f["stored"] = mean_layer_activations(model, plan, pace)
    scores = attention_score_bytes(model, b, t) / cp  # the score bytes that selective recompute redoes
    f["traffic_mb"] = a.elementwise_traffic * L * (f["stored"] * (1 + 2 + full) + (scores if selective else 0)
                                                    + f.get("recomputed", 0.0))
    f["t_el_mb"] = f["traffic_mb"] / (cluster.gpu.hbm_bytes_per_s * a.hbm_efficiency)

    # tensor parallel: 2 all-reduces in the forward, 2 in the backward, 2 more when recomputing
    spans, links = layout_links(cluster, t, plan.dp, p, cp, ep)
    f["where"] = {d: links[d].where if spans[d].size > 1 else "-" for d in links}
    f["bw"] = {d: links[d].bandwidth for d in links}

    bpe = 4 if plan.dtype == "fp32" else 2
    s_cp = s // cp  # the tokens of one CP rank
    f["msg"] = bpe * s_cp * b * h
    again = 0.0
    if {"mlp", "moe"} & set(modules):  # the MLP's forward collective again (Megatron: inside the checkpoint)
        again = sum(k for k, moe in _layer_kinds(model, plan, pace)
                    if ("mlp" in modules and moe is not True) or ("moe" in modules and moe is not False and model.moe)) / L
    per_layer, n_tp = tp_layer_time(b, s_cp, h, t, plan.sequence_parallel, "none" if modules else plan.recompute,
                                    links["tp"], bpe, again)
    f["n_tp"] = L * n_tp
    f["t_tp_one"] = L * per_layer / f["n_tp"] if f["n_tp"] else 0.0
    f["t_tp_mb"] = L * per_layer * (1 - a.tp_overlap)

    # pipeline: per chunk and micro-batch one activation forward, one gradient backward; with
    # tp > 1 each TP rank sends 1/t of it and the TP group all-gathers (Narayanan 2021, Sec. 4.1)
    f["t_p2p"] = (links["pp"].time("p2p", f["msg"] / t, 2) + links["tp"].time("all_gather", f["msg"], t)
                  if p > 1 else 0.0)
    f["t_pp_mb"] = 2 * v * f["t_p2p"] * (1 - a.pp_overlap)
    # context parallelism (K/V around the ring, or Ulysses' all-to-alls) and the MoE all-to-alls
    f["t_cp_mb"] = cp_micro_batch_time(model, plan, L, links["cp"], f["peak"], a, f) if cp > 1 else 0.0
    f["t_ep_mb"] = 0.0
    if ep > 1:
        f["moe_layers"] = stage_layer_kinds(model, p, pace, layout)[1]
        f["t_ep_mb"] = ep_micro_batch_time(model, plan, f["moe_layers"], links["ep"], f)
    per_mb = f["t_mm_mb"] + f["t_el_mb"] + f["t_tp_mb"] + f["t_pp_mb"] + f["t_cp_mb"] + f["t_ep_mb"]
    # the bubble: the other stages' time for one micro-batch (Narayanan et al. 2021, Sec. 2.2:
    # (p - 1) / v of the pacing stage's for an even split; ``pipeline_split.bubble_stage_times``)
    loads = stage_loads(layout, plan.embedding_as_layer, plan.loss_as_layer)
    units = (p - 1) / v if len(set(loads)) == 1 else bubble_stage_times(loads, v)
    f["per_mb"], f["bubble_frac"] = per_mb, (p - 1) / (v * m) if len(set(loads)) == 1 else units / m

    # data parallel / ZeRO over the DP group (dp x cp ranks: CP ranks reduce their gradients
    # together); an MoE model's routed experts over their expert-DP group (dp x cp / ep ranks)
    if model.moe is None:
        split = (max(stage_params(model, t, p, i, layout) for i in param_stages(layout)), 0.0)
    else:
        split = max((stage_param_split(model, t, p, i, ep, layout) for i in param_stages(layout)), key=sum)
    P = sum(split)
    dp, zero, dl = plan.dp * cp, plan.zero, links["dp"]
    reducers = [(split[0], dp, dl)] + ([(split[1], plan.edp, links.get("edp", dl))] if split[1] else [])
    f["P"], f["grad_bytes"], f["weight_bytes"] = P, P * prec.grad, P * prec.weight
    # gradients cross the network in fp32 only where the framework reduces its fp32 buffer:
    # Megatron-LM's DDP all-reduces main_grad (grad_reduce_in_fp32, on with bf16); DeepSpeed's
    # ZeRO-2/3 reduce-scatter in communication_data_type, the model's 16-bit dtype by default
    grad_bpp = prec.grad if zero_stage_reduces_fp32(plan) else prec.weight
    f["grad_comm_bytes"] = f["grad_bytes"] if zero_stage_reduces_fp32(plan) else P * prec.weight
    compute_mb = f["t_mm_mb"] + f["t_el_mb"]
    f["hide"] = compute_mb * (passes - 1) / passes if a.dp_overlap else 0.0  # backward of a micro-batch
    if dp == 1:
        f["dp_ops"], comm, exposed = "none (dp = 1)", 0.0, 0.0
    elif zero <= 1:  # one all-reduce (ZeRO-1: reduce-scatter + all-gather, the same volume)
        f["dp_ops"] = "1 all-reduce of the gradients per step" + (" (+1 of the experts' over edp)"
                                                                  if len(reducers) > 1 else "")
        comm = (dl.time("all_reduce", f["grad_comm_bytes"], dp) if len(reducers) == 1 else
                sum(link.time("all_reduce", n * grad_bpp, k) for n, k, link in reducers))
        exposed = max(0.0, comm - f["hide"])
    elif zero == 2:  # reduce-scatter on every micro-batch, all-gather the updated weights once
        f["dp_ops"] = "1 reduce-scatter of the gradients per micro-batch + 1 all-gather of the weights"
        if len(reducers) == 1:
            rs, ag = dl.time("reduce_scatter", f["grad_comm_bytes"], dp), dl.time("all_gather", f["weight_bytes"], dp)
        else:
            rs = sum(link.time("reduce_scatter", n * grad_bpp, k) for n, k, link in reducers)
            ag = sum(link.time("all_gather", n * prec.weight, k) for n, k, link in reducers)
        comm, exposed = m * rs + ag, m * max(0.0, rs - f["hide"]) + ag
    else:  # ZeRO-3: parameter group by parameter group (see zero3_exposed)
        groups_per_layer = {"deepspeed": 4, "fsdp": 1}[plan.zero3_impl]  # linear modules / one unit
        G = L * groups_per_layer
        f["zero3_groups"], f["zero3_gathers"] = G, 2
        bw = zero3_bandwidth(cluster, dl.bandwidth, spans["dp"].crosses_nodes)
        f["bw"]["dp"] = bw
        gathered = f["weight_bytes"] if plan.dtype != "fp8" else zero3_fp8_gather_bytes(model, plan, P)
        ag = ring_time("all_gather", gathered / G, dp, bw, dl.latency)
        rs = ring_time("reduce_scatter", f["grad_comm_bytes"] / G, dp, bw, dl.latency)
        f["zero3_latency"] = 3 * G * (dp - 1) * dl.latency  # ring: (dp - 1) alpha each
        impl = {"deepspeed": "DeepSpeed stage 3: one parameter group per linear module",
                "fsdp": "FSDP: one unit per block"}[plan.zero3_impl]
        f["dp_ops"] = (f"2 all-gathers of the weights (forward; backward, which also serves a recompute) + "
                       f"1 reduce-scatter of the gradients per micro-batch, each as "
                       f"{plural(G, 'collective')} ({impl}) at most one port's bandwidth"
                       + ("; the linear weights gathered in FP8" if gathered < f["weight_bytes"] else ""))
        comm = m * G * (2 * ag + rs)
        exposed = (m * zero3_exposed(ag, rs, compute_mb / passes / G, G, passes - 1, a) if a.dp_overlap
                   else comm)
        f["hide"] = compute_mb if a.dp_overlap else 0.0
    f["dp_total"], f["dp_hidden"] = comm, comm - exposed

    # the optimizer step on this GPU's shard (HBM-bound, or on the CPU), and offload transfers
    f["shard"] = shard = (P / (dp if zero >= 1 else 1) if len(reducers) == 1 else
                          sum(n / (k if zero >= 1 else 1) for n, k, _ in reducers))
    opt = shard * a.optimizer_traffic / (cluster.gpu.hbm_bytes_per_s * a.hbm_efficiency)
    offload = 0.0
    if plan.offload != "none":
        opt = shard / a.cpu_adam_params_per_s
        # gradients down (from ZeRO-2 on every micro-batch's shard: they accumulate on the host),
        # updated 16-bit weights up (Ren et al. 2021, Sec. 4.1)
        # (from ZeRO-2 the 16-bit gradients go down and the host accumulates them in fp32)
        down = m * prec.weight if zero >= 2 else prec.grad
        offload = shard * (down + prec.weight) / cluster.host.achievable
        if plan.offload == "optimizer+params":
            offload += m * 2 * shard * prec.weight / cluster.host.achievable  # the 2 gathers' fetches
    return StepTime(m * f["t_mm_mb"], m * f["t_el_mb"], m * f["t_tp_mb"], m * f["t_pp_mb"],
                    units * per_mb, exposed, opt, offload, f, m * f["t_cp_mb"], m * f["t_ep_mb"])
