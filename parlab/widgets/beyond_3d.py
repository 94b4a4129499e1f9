"""Chapter 13's dashboard: sequence length, cp (ring or Ulysses), ep, the number of experts and
top-k -> memory per GPU and step time of a 5D plan, term by term, from ``parlab.costmodel.estimate``
(the CP and EP terms included)."""

from __future__ import annotations

import html as html_lib
from dataclasses import replace

import ipywidgets as widgets

from parlab.costmodel import RECOMPUTE
from parlab.costmodel.plan.estimate import Estimate
from parlab.costmodel.plan.spec import CP_IMPLS
from parlab.tables import human_bytes, human_seconds

from .base import Dashboard, model_box
from .plan import _terms_table

MODEL = "(model's)"
GPU_COUNTS = (8, 16, 32, 64, 128, 256, 512, 1024)
SEQ_LENS = (4096, 8192, 16384, 32768, 65536, 131072)
#: micro-batches per step of every plan the dashboard prices (a fixed share of the bubble-free step)
MICRO_BATCHES = 8


class FiveDDashboard(Dashboard):
    """Model, GPUs (DGX H100 nodes), sequence length, tp, cp and its method, ep, experts, top-k,
    recompute -> one GPU's memory by term and the step time (dp = GPUs / (tp cp), pp = 1, ZeRO-1,
    micro-batch 1, 8 micro-batches per step, SP with tp > 1). Experts and top-k override an MoE
    model's own (a what-if: more experts, more parameters); they and ep do nothing for a dense one."""

    title = "Long context and mixture of experts: memory per GPU and time per step"
    control_columns, control_width = 3, 300

    def make_controls(self):
        dd = widgets.Dropdown
        return {
            "model": model_box("mixtral-8x7b"),
            "gpus": dd(options=list(GPU_COUNTS), value=64, description="GPUs (H100)"),
            "seq_len": dd(options=[(f"{s // 1024}K", s) for s in SEQ_LENS], value=32768, description="sequence"),
            "tp": dd(options=[1, 2, 4, 8], value=2, description="tp"),
            "cp": dd(options=[1, 2, 4, 8, 16, 32], value=4, description="cp"),
            "cp_impl": dd(options=list(CP_IMPLS), value="ring", description="cp method"),
            "ep": dd(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="ep"),
            "experts": dd(options=[MODEL, 8, 16, 32, 64, 128, 256], value=MODEL, description="experts E"),
            "top_k": dd(options=[MODEL, 1, 2, 4, 8], value=MODEL, description="top-k"),
            "recompute": dd(options=list(RECOMPUTE), value="selective", description="recompute"),
        }

    def inactive(self, model, cp, **_):
        from parlab.costmodel import get_model

        try:
            dense = get_model(model).moe is None
        except ValueError:
            dense = False
        return (("ep", "experts", "top_k") if dense else ()) + (("cp_impl",) if cp == 1 else ())

    def compute(self, model, gpus, seq_len, tp, cp, cp_impl, ep, experts, top_k, recompute) -> Estimate:
        from parlab.costmodel import Plan, estimate, get_model, make_cluster

        spec = get_model(model).with_(seq_len=seq_len)
        if spec.moe is not None:
            spec = spec.with_(moe=replace(spec.moe, num_experts=spec.moe.num_experts if experts == MODEL else experts,
                                          top_k=spec.moe.top_k if top_k == MODEL else top_k))
        else:
            ep = 1
        if gpus % (tp * cp):
            raise ValueError(f"tp x cp = {tp} x {cp} = {tp * cp} does not divide {gpus} GPUs, so no whole "
                             f"data-parallel size exists")
        plan = Plan(dp=gpus // (tp * cp), tp=tp, cp=cp, cp_impl=cp_impl, ep=ep, sequence_parallel=tp > 1, zero=1,
                    micro_batches=MICRO_BATCHES, recompute=recompute)
        return estimate(spec, make_cluster("dgx-h100", gpus), plan)

    def html(self, est: Estimate) -> str:
        m = est.model
        what = (f"{m.moe.num_experts} experts, top-{m.moe.top_k}: {m.active_params() / 1e9:,.1f}B of "
                f"{m.num_params() / 1e9:,.1f}B parameters per token" if m.moe else "dense")
        head = (f"<p><b>{html_lib.escape(m.name)}</b> ({html_lib.escape(what)}), sequences of {m.seq_len:,} tokens, "
                f"on {html_lib.escape(est.cluster.describe())}<br>plan: <code>{html_lib.escape(est.plan.describe())}"
                "</code><br>" + html_lib.escape(est.summary()).replace("\n", "<br>") + "</p>")
        memory = _terms_table(est.memory_breakdown(), "GB", 1e9, ",.2f")
        time = _terms_table(est.time_breakdown(), "ms", 1e-3, ",.1f")
        return (head + '<details class="parlab-terms"><summary>term by term, with formulas and sources'
                "</summary><p><b>memory per GPU</b></p>" + memory + "<p><b>step time</b></p>" + time + "</details>")

    def figure(self, est: Estimate):
        from parlab.viz.costmodel import plan_figure

        return plan_figure(est)

    def summary(self, est: Estimate) -> str:
        return (f"{est.model.name} {est.model.seq_len // 1024}K: {est.plan.describe()} -> "
                f"{human_bytes(est.memory_total)} per GPU, step {human_seconds(est.step_time)}")
