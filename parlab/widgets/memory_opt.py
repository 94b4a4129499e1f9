"""Chapter 09's dashboard: model, sequence length, micro-batch, recompute, offload, precision ->
one GPU's memory by term (the cost model), beside the other recompute policies."""

from __future__ import annotations

import html as html_lib
from dataclasses import dataclass, replace

import ipywidgets as widgets

from parlab.costmodel import (
    GPUS,
    OFFLOADS,
    RECOMPUTE,
    Estimate,
    Plan,
    estimate,
    get_model,
    make_cluster,
)
from parlab.tables import human_bytes
from parlab.viz.figures import new_figure
from parlab.viz.html import html_table

from .base import Dashboard, model_box

DTYPES = ("bf16", "fp16", "mixed-fp32-grad", "fp32")
ATTENTION = ("preset", "eager (scores stored)", "flash")
SEQ_LENS = [2**k for k in range(8, 16)]
GPU_COUNTS = [2**k for k in range(11)]


@dataclass(frozen=True)
class MemoryOptions:
    """The chosen plan's estimate and the same plan under every recompute policy."""

    chosen: Estimate
    by_recompute: dict[str, Estimate]


def memory_options(model: str, seq_len: int, micro_batch: int, recompute: str, offload: str, dtype: str,
                   zero: int, gpus: int, gpu: str = "a100-80gb", attention: str = "preset") -> MemoryOptions:
    """``estimate`` of a data-parallel plan on ``gpus`` GPUs of a DGX-like cluster for each
    recompute policy; ``attention`` keeps the model preset's choice or forces eager / flash."""
    spec = replace(get_model(model), seq_len=seq_len)
    if attention != "preset":
        spec = replace(spec, flash_attention=attention == "flash")
    cluster = make_cluster("dgx-a100", gpus, gpu=gpu)
    plan = Plan(dp=gpus, zero=zero, micro_batch=micro_batch, offload=offload, dtype=dtype, recompute=recompute)
    by = {r: estimate(spec, cluster, plan.with_(recompute=r)) for r in RECOMPUTE}
    return MemoryOptions(by[plan.recompute], by)


class MemoryOptDashboard(Dashboard):
    """Recomputation, offload and precision -> activation and total memory per GPU by term."""

    title = "Memory savers: recomputation, offload, precision (one GPU's bytes by term)"
    control_columns = 3
    control_width = 300

    def make_controls(self):
        return {
            "model": model_box("llama-7b"),
            "seq_len": widgets.SelectionSlider(options=SEQ_LENS, value=2048, description="sequence"),
            "micro_batch": widgets.IntSlider(value=1, min=1, max=16, description="micro-batch"),
            "recompute": widgets.Dropdown(options=list(RECOMPUTE), value="none", description="recompute"),
            "offload": widgets.Dropdown(options=list(OFFLOADS), value="none", description="offload"),
            "dtype": widgets.Dropdown(options=list(DTYPES), value="bf16", description="precision"),
            "zero": widgets.Dropdown(options=[0, 1, 2, 3], value=0, description="ZeRO stage"),
            "gpus": widgets.SelectionSlider(options=GPU_COUNTS, value=1, description="GPUs (DP)"),
            "gpu": widgets.Dropdown(options=list(GPUS), value="a100-80gb", description="GPU"),
            "attention": widgets.Dropdown(options=list(ATTENTION), value="preset", description="attention"),
        }

    def compute(self, **values) -> MemoryOptions:
        return memory_options(**values)

    def html(self, r: MemoryOptions) -> str:
        est = r.chosen
        rows = [[name, v / 1e9] for name, v in est.memory_terms().items()]
        rows.append(["total on the GPU", est.memory_total / 1e9])
        terms = html_table(rows, ["term", "GB per GPU"], {"GB per GPU": ",.2f"}, highlight_last=True)
        side = [[f"recompute {p}", e.stage.activations.per_layer / 1e6, e.memory_total / 1e9,
                 e.step_time, "yes" if e.fits else "no"] for p, e in r.by_recompute.items()]
        side_table = html_table(side, ["policy", "MB / layer", "total GB", "step s", "fits?"],
                                {"MB / layer": ",.1f", "total GB": ",.1f", "step s": ",.3f"})
        t = est.time_terms()
        extra = (f"<p>offloaded to the CPU: <b>{human_bytes(est.stage.cpu)}</b>; PCIe transfers "
                 f"{t['offload transfers']:.3f} s, CPU optimizer step {t['optimizer step']:.3f} s per step</p>"
                 if est.plan.offload != "none" else "")
        head = (f"<p><b>{html_lib.escape(est.model.name)}</b>, {html_lib.escape(est.plan.describe())}: "
                f"<b>{human_bytes(est.memory_total)}</b> on the most loaded GPU "
                f"({'fits' if est.fits else 'does not fit'} {est.cluster.gpu.name})</p>")
        return (head + extra + '<div style="display:flex;gap:24px;align-items:flex-start">' + terms
                + side_table + "</div>")

    def figure(self, r: MemoryOptions):
        from parlab.viz.memory_opt import plot_memory_by_recompute

        fig = new_figure(8.5, 2.4, left=0.12, right=0.64, bottom=0.2, top=0.95)
        plot_memory_by_recompute(fig.add_subplot(), r.by_recompute, r.chosen.plan.recompute)
        return fig

    def summary(self, r: MemoryOptions) -> str:
        est = r.chosen
        return (f"{est.model.name}, {est.plan.describe()}: {human_bytes(est.memory_total)} per GPU, "
                f"activations {human_bytes(est.memory_terms()['activations'])}")
