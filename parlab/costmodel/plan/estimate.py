"""``estimate(model, cluster, plan)``: memory per GPU and step time of a plan, term by term, with
the formula and the source of every term (``Estimate.explain``)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.fp8 import matmul_formula
from parlab.costmodel.plan.memory.stage import StageMemory, most_loaded_stage
from parlab.costmodel.plan.memory.zero import DeepSpeedStage3, zero3_gathered_params
from parlab.costmodel.plan.spec import Plan, check_plan
from parlab.costmodel.plan.step_time import CP_TERM, EP_TERM, StepTime, step_time
from parlab.costmodel.plan.validated_range import outside_validated_range
from parlab.costmodel.pricing.attention_terms import describe as describe_attention
from parlab.costmodel.pricing.layer_flops import step_flops
from parlab.costmodel.pricing.memory import get_precision
from parlab.costmodel.pricing.params import stage_layers
from parlab.costmodel.pricing.pipeline_split import (
    layout_text,
    stage_index,
    stage_loads,
)
from parlab.costmodel.specs._check import instance
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import Cluster
from parlab.costmodel.specs.fp8 import get_fp8_recipe
from parlab.costmodel.specs.models import ModelSpec
from parlab.layout import rank_of
from parlab.tables import human_bytes, human_count, human_rate, human_seconds, plural

ZERO_SRC = "Rajbhandari et al. 2020 (ZeRO), Fig. 1 / Sec. 5"
TABLE2_SRC = "Korthikanti et al. 2022, Table 2 and Sec. 4.2.3"
EQ3_SRC = "Narayanan et al. 2021, Eq. 3 / Sec. 5.1"
RING_SRC = "Thakur et al. 2005; nccl-tests PERFORMANCE.md"
GRAD_SRC = "DeepSpeed stage_1_and_2.py / stage3.py fp32 gradient partition; Megatron-LM main_grad"
RING_ATTENTION_SRC = "Liu et al. 2023 (Ring Attention), Sec. 3; Megatron-Core cp_comm_type p2p"
ULYSSES_SRC = "Jacobs et al. 2023 (DeepSpeed-Ulysses), Sec. 3.1"
ALLGATHER_SRC = ("Dubey et al. 2024 (Llama 3), Sec. 3.3.2; Megatron-Core cp_comm_type all_gather "
                 "(TransformerEngine AttnFuncWithCPAndKVAllGather)")
EP_SRC = "Lepikhin et al. 2020 (GShard), Sec. 3.2; Megatron-Core MoEAlltoAllTokenDispatcher"


@dataclass(frozen=True)
class Term:
    """One line of a breakdown: its value (bytes or seconds), how it is computed, and from where."""

    name: str
    value: float
    formula: str
    source: str


@dataclass(frozen=True)
class Estimate:
    """The cost of running ``plan`` for ``model`` on ``cluster``: see ``explain()``."""

    model: ModelSpec
    cluster: Cluster
    plan: Plan
    assumptions: Assumptions
    stage: StageMemory  # the most loaded stage's GPU
    time: StepTime

    # -- memory ------------------------------------------------------------------------------
    @property
    def memory_total(self) -> float:
        return self.stage.total

    @property
    def memory_capacity(self) -> float:
        return self.cluster.gpu.memory_bytes

    @property
    def fits(self) -> bool:
        return self.memory_total <= self.memory_capacity

    @property
    def rank(self) -> int:
        """Global rank of the most loaded GPU (Megatron order: tp fastest, then dp, then pp)."""
        pp_rank = stage_index(self.stage.stage, self.plan.pp)
        return rank_of(0, 0, pp_rank, self.plan.tp, self.plan.dp, 0, self.plan.cp)

    @property
    def rank_label(self) -> str:
        if self.plan.pp == 1:
            return "rank 0 (every rank holds the same)"
        st = self.stage.stage
        name = f"{st} pipeline stage" if isinstance(st, str) else f"pipeline stage {st}, the first of the fullest"
        return (f"rank {self.rank} ({name}; its "
                f"{plural(self.plan.tp * self.plan.dp * self.plan.cp, 'rank')} hold the same)")

    def memory_terms(self) -> dict[str, float]:
        st = self.stage
        return {"parameters": st.weights, "gradients": st.grads + st.step_extra, "optimizer states": st.optimizer,
                "activations": st.activations.total, "buffers + fragmentation (allowance)": st.buffers}

    # -- time and throughput -------------------------------------------------------------------
    @property
    def step_time(self) -> float:
        return self.time.total

    def time_terms(self) -> dict[str, float]:
        return self.time.terms()

    @property
    def flops(self) -> tuple[float, float]:
        """(model FLOPs, hardware FLOPs) of one step."""
        return step_flops(self.model, self.plan.batch, self.plan.recompute, self.plan.recompute_modules)

    @property
    def tokens_per_step(self) -> int:
        return self.plan.batch * self.model.seq_len

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time

    @property
    def model_tflops_per_gpu(self) -> float:
        """Model FLOPs (no recomputation) per second per GPU, in TFLOP/s."""
        return self.flops[0] / (self.step_time * self.plan.n_gpus) / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        """FLOPs actually executed (with recomputation) per second per GPU, in TFLOP/s: the number
        Megatron-LM 2021 reports (Eq. 3)."""
        return self.flops[1] / (self.step_time * self.plan.n_gpus) / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOP/s per GPU / peak (Chowdhery et al. 2022, App. B).

        PaLM's convention: the model FLOPs leave out recomputation, and for an MoE model the
        padded capacity slots and the tokens a capacity factor c < 1 drops (``step_flops``);
        what the GPUs execute is ``hardware_tflops_per_gpu`` (HFU)."""
        return self.model_tflops_per_gpu * 1e12 / self.time.facts["peak"]

    @property
    def outside_validated(self) -> tuple[str, ...]:
        """Why this estimate is an extrapolation, one reason each (empty: inside the range the
        published runs cover, ``specs.calibration``): GPU, MFU, links."""
        return outside_validated_range(self.cluster, self.mfu)

    def time_to_train(self, tokens: float) -> float:
        """Seconds to train on ``tokens`` tokens at this step time."""
        return tokens / self.tokens_per_s

    # -- explanation ---------------------------------------------------------------------------
    def memory_breakdown(self) -> list[Term]:
        st, p, m = self.stage, self.plan, self.model
        prec = get_precision(p.precision)
        act = st.activations
        z = p.zero
        dp = f"dp {p.dp}" if p.cp == 1 else f"dp x cp {p.dp * p.cp}"
        if st.params > st.params - self._experts() > 0:  # an MoE model: its experts shard over edp
            dp += f" (its {human_count(self._experts())} routed-expert params, E/ep = "
            dp += f"{plural(m.moe.num_experts // p.ep, 'expert')} per GPU, over edp {p.edp})" if m.moe else ")"
        shard = {0: "", 1: "", 2: "", 3: f" / {dp}"}
        ends = {"first": "embedding inputs", "last": "output layer + fp32 logits"}.get(st.stage, "no embedding or output")
        if p.pp == 1:
            ends = "embedding inputs + output layer + fp32 logits"
        where = ("" if p.offload == "none" else f" (offloaded to CPU with the fp32 gradients: "
                                                  f"{human_bytes(st.cpu)})")
        layout = p.layout(m)
        layers = plural(stage_layers(m, p.pp, layout, st.stage), "layer") + (
            f" of {m.layers}" if p.pp > 1 else "") + (f", split {layout_text(layout)}" if len(set(layout)) > 1 else "")
        ds = DeepSpeedStage3.for_model(m)
        held = {"fsdp": "FSDP: the unit in use and the prefetched next one",
                "deepspeed": "DeepSpeed stage 3: the module in use and what stage3_prefetch_bucket_size "
                             f"{ds.prefetch_bucket_size:.3g} fetches ahead, at most "
                             f"stage3_max_live_parameters {ds.max_live_parameters:.3g} before it stops"}
        zero3 = (f" + {human_count(zero3_gathered_params(m, p.tp, p.zero3_impl))} gathered ({held[p.zero3_impl]})"
                 if z == 3 else "")
        return [
            Term("parameters", st.weights,
                 f"{human_count(st.params)} params ({layers} / tp {p.tp}"
                 + (" + embeddings" if isinstance(st.stage, str) else "")
                 + (f"; of them {human_count(self._experts())} in {plural(m.moe.num_experts // p.ep, 'routed expert')}"
                    f" of {m.moe.num_experts} per MoE layer (E / ep {p.ep})" if m.moe else "")
                 + f") x {prec.weight} B{shard[z]}{zero3}"
                 + (f" + {human_bytes(st.fp8_weights)} FP8 copies and scales ({p.fp8_recipe})" if p.fp8_recipe else ""),
                 "Shoeybi et al. 2019 Sec. 3; " + ZERO_SRC
                 + ("; Lepikhin et al. 2020 (GShard), Sec. 3.2" if m.moe else "")),
            Term("gradients", st.grads + st.step_extra, self._gradient_formula(), ZERO_SRC + "; " + GRAD_SRC),
            Term("optimizer states", st.optimizer,
                 f"{human_count(st.params)} x {prec.master + 2 * prec.state} B (fp32 master + Adam m, v)"
                 + (f" / {dp}" if z >= 1 else "") + where, ZERO_SRC + "; Ren et al. 2021 (offload)"),
            Term("activations", act.total,
                 f"{plural(act.in_flight, 'micro-batch')} in flight x {plural(stage_layers(m, p.pp, layout, st.stage), 'layer')} x "
                 f"{human_bytes(act.per_layer, 'MB')} (s b h (...) for recompute={p.describe_recompute()}, tp={p.tp}, "
                 f"SP={'on' if p.sequence_parallel else 'off'}"
                 + (f", / cp {p.cp}: s/cp = {m.seq_len // p.cp:,} tokens per rank" if p.cp > 1 else "")
                 + (f", MoE layers: {m.moe.top_k} of {m.moe.num_experts} experts per token" if m.moe else "")
                 + f") + {human_bytes(act.ends, 'MB')} {ends}"
                 + (f" + {human_bytes(act.working, 'MB')} working set of the recomputed layer" if act.working else ""),
                 TABLE2_SRC + f" ({p.schedule})"),
            Term("buffers + fragmentation (allowance)", st.buffers,
                 f"{human_bytes(self.assumptions.runtime_bytes)} runtime (CUDA context, NCCL, buckets) + "
                 f"{self.assumptions.fragmentation:.0%} of the terms above", "assumption (parlab Assumptions)"),
        ]

    def _pace_name(self) -> str:
        """'last stage', or with an uneven split whose last stage is lighter 'most loaded stage (rank i)'."""
        pace, p = self.time.facts["pace"], self.plan.pp
        return "last stage" if pace == p - 1 or p == 1 else f"most loaded stage (pipeline rank {pace})"

    def _bubble_formula(self) -> str:
        """The bubble term's formula: (p-1)/v for an even split, the uneven split's own otherwise."""
        f, p, v = self.time.facts, self.plan, self.plan.chunks
        loads = stage_loads(f["layout"], p.embedding_as_layer, p.loss_as_layer)
        if len(set(loads)) == 1:
            return (f"(p-1)/v = {p.pp - 1}/{v} micro-batch times x {human_seconds(f['per_mb'])}; "
                    f"bubble fraction (p-1)/(v m) = {f['bubble_frac']:.3f}")
        return (f"(sum of stage loads - max) / max / v = ({sum(loads)} - {max(loads)}) / {max(loads)} / {v} "
                f"micro-batch times x {human_seconds(f['per_mb'])} (uneven split {layout_text(f['layout'])}); "
                f"bubble fraction {f['bubble_frac']:.3f}")

    def _experts(self) -> float:
        """Routed-expert parameters of the most loaded GPU (0 for a dense model)."""
        from parlab.costmodel.pricing.moe_layer import stage_param_split

        return stage_param_split(self.model, self.plan.tp, self.plan.pp, self.stage.stage, self.plan.ep,
                                 self.plan.layout(self.model))[1]

    def _gradient_formula(self) -> str:
        st, p = self.stage, self.plan
        prec = get_precision(p.precision)
        dp = f"dp {p.dp}" if p.cp == 1 else f"dp x cp {p.dp * p.cp}"
        if p.offload != "none" and p.zero >= 2:
            held = "0 (ZeRO-Offload: each micro-batch's shard goes to the CPU)"
        else:
            held = f"{human_count(st.params)} x {prec.grad} B" + (f" / {dp}" if p.zero >= 2 else "")
        if p.dtype != "fp32":
            held += (" (fp32 gradients: what Megatron-LM and DeepSpeed keep with bf16; fp32_grads=False or "
                     "dtype 'mixed' for 16-bit ones)" if p.fp32_grads else
                     " (16-bit gradients" + (": what fp16 training keeps)" if p.dtype == "fp16" else
                                            ", asked for: Megatron-LM and DeepSpeed keep fp32 ones with bf16)"))
        if not st.step_grads:
            return held
        return (f"{held} + the optimizer step's fp32 copy, 4 B x {human_count(st.step_grads / 4)} = "
                f"{human_bytes(st.step_grads)}, held after the activations are freed: adds "
                f"max(0, copy - activations) = {human_bytes(st.step_extra)}")

    def time_breakdown(self) -> list[Term]:
        f, p, a, tm = self.time.facts, self.plan, self.assumptions, self.time
        m, v = p.m, p.chunks
        gpu = self.cluster.gpu
        rec = {"full": " (fwd, recompute, bwd = 4 passes)", "selective": " (+ attention scores recomputed)",
               "none": " (fwd + bwd = 3 passes)",
               "modules": f" (+ {', '.join(p.recompute_modules)} recomputed)"}[p.recompute]
        terms = [
            Term("compute: matmuls", tm.matmul, matmul_formula(f, a, p, rec, self._pace_name()),
                 EQ3_SRC + (f"; {get_fp8_recipe(p.fp8_recipe).source}" if p.fp8_recipe else "")),
            Term("compute: elementwise", tm.elementwise,
                 f"m {m} x {human_bytes(f['traffic_mb'])} moved by LayerNorm/softmax/dropout/GeLU / "
                 f"({gpu.hbm_bytes_per_s / 1e9:,.0f} GB/s HBM x {a.hbm_efficiency:g})",
                 "roofline (Williams et al. 2009) over " + TABLE2_SRC.split(" and")[0]),
            Term("TP communication", tm.tp_comm,
                 f"m {m} x {f['n_tp']} collectives x {human_seconds(f['t_tp_one'])} "
                 f"({'all-gather + reduce-scatter' if p.sequence_parallel else 'all-reduce'} of "
                 f"{human_bytes(f['msg'], 'MB')} over {plural(p.tp, 'GPU')}, {f['where']['tp']}, "
                 f"{human_rate(f['bw']['tp'])})" if p.tp > 1 else "none (tp = 1)",
                 "Shoeybi et al. 2019 Fig. 4; " + RING_SRC),
            Term("PP communication", tm.pp_comm,
                 (f"m {m} x 2 x {plural(v, 'chunk')} x {human_seconds(f['t_p2p'])} (send "
                  f"{human_bytes(f['msg'] / p.tp, 'MB')} over {f['where']['pp']}"
                  + (", then all-gather in the TP group)" if p.tp > 1 else ")") if p.pp > 1 else "none (pp = 1)"),
                 "Narayanan et al. 2021 Sec. 4.1 (scatter/gather)"),
            *self._terms_5d(),
            Term("pipeline bubble", tm.bubble,
                 (self._bubble_formula() if p.pp > 1 else "none (pp = 1)"),
                 "Huang et al. 2019 (GPipe); Narayanan et al. 2021 Sec. 2.2"),
            Term("DP/ZeRO communication (exposed)", tm.dp_comm,
                 (f"{f['dp_ops']} over {'dp' if p.cp == 1 else 'dp x cp'}={p.dp * p.cp} ({f['where']['dp']}, "
                  f"{human_rate(f['bw']['dp'])}): "
                  f"{human_seconds(f['dp_total'])} in all, {human_seconds(f['dp_hidden'])} hidden behind compute"
                  if p.dp * p.cp > 1 else "none (dp = 1)"),
                 ZERO_SRC + "; Li et al. 2020 (DDP overlap); " + RING_SRC),
            Term("optimizer step", tm.optimizer,
                 (f"{human_count(f['shard'])} params x {a.optimizer_traffic:g} B / HBM" if p.offload == "none"
                  else f"{human_count(f['shard'])} params / {a.cpu_adam_params_per_s:.3g} params/s on the CPU"),
                 "memory-bound Adam; Ren et al. 2021 (CPU-Adam)"),
            Term("offload transfers", tm.offload,
                 f"gradients down, weights up over {self.cluster.host.name}" if p.offload != "none" else "no offload",
                 "Ren et al. 2021 (ZeRO-Offload); Rajbhandari et al. 2021 (ZeRO-Infinity)"),
        ]
        return terms

    def _terms_5d(self) -> list[Term]:
        """The CP and EP lines of the step time, where the plan has cp or ep > 1."""
        f, p, tm, m = self.time.facts, self.plan, self.time, self.plan.m
        out = []
        if p.cp > 1 and p.cp_impl == "ring":
            out.append(Term(CP_TERM, tm.cp_comm,
                            f"m {m} x {plural(f['L'], 'layer')} x {p.cp - 1} ring steps x (fwd + 2 x bwd) "
                            f"max(0, send {human_bytes(f['cp_bytes'].forward / (p.cp - 1), 'MB')} K/V block "
                            f"({human_seconds(f['t_cp_send'])}, {f['where']['cp']}) - attention of one block "
                            f"({human_seconds(f['t_cp_block'])})) + the last dK/dV hop", RING_ATTENTION_SRC))
        elif p.cp > 1 and p.cp_impl == "all-gather":
            out.append(Term(CP_TERM, tm.cp_comm,
                            f"m {m} x {plural(f['L'], 'layer')} x (all-gather of K, V: "
                            f"{human_bytes(f['cp_bytes'].forward, 'MB')} sent, {human_seconds(f['t_cp_send'])} "
                            f"beside {human_seconds(f['t_cp_block'])} of attention; fwd, again in bwd, + the "
                            f"dK/dV reduce-scatter) over cp={p.cp} ({f['where']['cp']}), not hidden",
                            ALLGATHER_SRC))
        elif p.cp > 1:
            out.append(Term(CP_TERM, tm.cp_comm,
                            f"m {m} x {plural(f['L'], 'layer')} x (fwd + bwd) x all-to-alls of Q, K, V and "
                            f"the output ({human_bytes(f['cp_bytes'].forward, 'MB')} sent) over cp={p.cp} "
                            f"({f['where']['cp']}): {human_seconds(f['t_cp_send'])} per pass, not hidden",
                            ULYSSES_SRC))
        if p.ep > 1:
            moe = self.model.moe
            assert moe is not None
            out.append(Term(EP_TERM, tm.ep_comm,
                            f"m {m} x {plural(f['moe_layers'], 'MoE layer')} x {human_seconds(f['t_ep_layer'])} "
                            f"(dispatch + combine, fwd + "
                            f"bwd: {human_bytes(f['ep_bytes_layer'], 'MB')} sent per layer for "
                            f"{f['ep_tokens']:,} tokens, top-{moe.top_k} of {moe.num_experts} experts, over ep={p.ep}, "
                            f"{f['where']['ep']}), not hidden", EP_SRC))
        return out

    def summary(self) -> str:
        """Three lines: memory and fit, step time, throughput."""
        return (f"memory per GPU {human_bytes(self.memory_total)} of {human_bytes(self.memory_capacity)} "
                f"({'fits' if self.fits else 'does NOT fit'}; {self.rank_label})\n"
                f"step time {human_seconds(self.step_time)} for {plural(self.plan.batch, 'sequence')} of "
                f"{plural(self.model.seq_len, 'token')}\nMFU {self.mfu:.1%}, {self.model_tflops_per_gpu:.1f} model TFLOP/s per GPU"
                + (f" ({self.hardware_tflops_per_gpu:.1f} with recomputation)" if self.plan.recompute != "none" else "")
                + f", {self.tokens_per_s:,.0f} tokens/s")

    def explain(self) -> str:
        """Every term with its value, formula and source, then the assumptions."""
        attention = describe_attention(self.model)  # e.g. 'GQA 8 KV heads of 32'
        lines = [f"model: {self.model.name} ({human_count(self.model.num_params())} parameters"
                 + (f"; attention: {attention})" if attention else ")"),
                 f"cluster: {self.cluster.describe()}", f"plan: {self.plan.describe()}", "",
                 f"memory per GPU, most loaded: {self.rank_label}"]
        lines += _render(self.memory_breakdown(), human_bytes)
        lines.append(f"  {'total':<36} {human_bytes(self.memory_total):>10}   of "
                     f"{human_bytes(self.memory_capacity)}: {'fits' if self.fits else 'does NOT fit'}")
        lines += ["", f"step time (the critical, {self._pace_name()})"]
        lines += _render(self.time_breakdown(), human_seconds)
        lines.append(f"  {'total':<36} {human_seconds(self.step_time):>10}")
        said = [d for d in self.assumptions.describe() if self.plan.dtype == "fp8" or not d.startswith("fp8_")]
        lines += ["", self.summary()]
        if self.outside_validated:
            lines.append("outside the validated range: " + "; ".join(self.outside_validated))
        lines += ["", "assumptions: " + ", ".join(said)]
        return "\n".join(lines)


def _render(terms: list[Term], unit) -> list[str]:
    out = []
    for term in terms:
        out.append(f"  {term.name:<36} {unit(term.value):>10}   = {term.formula}")
        out.append(f"  {'':<36} {'':>10}     [{term.source}]")
    return out


def estimate(model: str | ModelSpec, cluster: Cluster, plan: Plan,
             assumptions: Assumptions = DEFAULT) -> Estimate:
    """Memory per GPU (most loaded rank) and step time of ``plan`` for ``model`` on ``cluster``.

    Raises ValueError naming the broken rule if the plan cannot run (``check_plan``).
    """
    model = get_model(model)
    _check_inputs(cluster, plan, assumptions)
    check_plan(model, cluster, plan)
    loaded = most_loaded_stage(model, plan, assumptions)
    return Estimate(model, cluster, plan, assumptions, loaded, step_time(model, cluster, plan, assumptions))


def _check_inputs(cluster: Cluster, plan: Plan | None, assumptions: Assumptions) -> None:
    """TypeErrors naming the argument: a cluster is built with its GPU count, never a bare name."""
    if isinstance(cluster, str):
        raise TypeError(f"cluster must be a Cluster, got the name {cluster!r}: build one with its GPU count, "
                        f"make_cluster({cluster!r}, n_gpus)")
    instance("cluster", cluster, Cluster, "make_cluster('dgx-a100', n_gpus)")
    if plan is not None:
        instance("plan", plan, Plan, "Plan(dp=..., tp=..., pp=...)")
    instance("assumptions", assumptions, Assumptions, "DEFAULT.with_(...)")
