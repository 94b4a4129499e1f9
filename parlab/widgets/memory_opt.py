"""Chapter 09's dashboard: model, sequence length, micro-batch, recompute, offload, precision ->
one GPU's memory by term in each phase of the step (forward/backward against the optimizer step,
``parlab.costmodel.answers.phases``), which phase sets the peak, beside the other recompute policies."""

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
from parlab.costmodel.answers.phases import (
    FORWARD_BACKWARD,
    OPTIMIZER_STEP,
    TERMS,
    StepPhases,
    step_phases,
    term_labels,
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
    """The chosen plan's estimate and the same plan under every recompute policy, each with its
    two phases (``StepPhases``)."""

    chosen: Estimate
    by_recompute: dict[str, Estimate]

    @property
    def phases(self) -> dict[str, StepPhases]:
        return {r: step_phases(e) for r, e in self.by_recompute.items()}


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
        ph = step_phases(est)
        labels = term_labels(est)
        fb, step = ph.forward_backward.terms, ph.optimizer_step.terms
        rows = [[name, fb[name] / 1e9, step[name] / 1e9] for name in TERMS]
        rows.append([f"total (peak: the {ph.peak.name} phase)", ph.forward_backward.total / 1e9,
                     ph.optimizer_step.total / 1e9])
        terms = html_table(rows, ["term", f"{FORWARD_BACKWARD} (GB)", f"{OPTIMIZER_STEP} (GB)"],
                           {f"{FORWARD_BACKWARD} (GB)": ",.2f", f"{OPTIMIZER_STEP} (GB)": ",.2f"},
                           highlight_last=True)
        # what each term is, one click away: the tables stay narrow enough to sit side by side
        terms += ("<details><summary>what each term is</summary><ul>" + "".join(
            f"<li><b>{html_lib.escape(n)}</b>: {html_lib.escape(labels[n])}</li>" for n in TERMS)
            + "</ul></details>")
        side = []
        for p, phases in r.phases.items():
            e = phases.estimate
            side.append([p, phases.forward_backward.total / 1e9, phases.optimizer_step.total / 1e9,
                         e.memory_total / 1e9, phases.peak.name, e.step_time, "yes" if e.fits else "no"])
        side_table = html_table(side, ["recompute", "fwd/bwd GB", "step GB", "peak GB", "set by", "step s", "fits?"],
                                {"fwd/bwd GB": ",.1f", "step GB": ",.1f", "peak GB": ",.1f", "step s": ",.3f"})
        t = est.time_terms()
        extra = (f"<p>offloaded to the CPU: <b>{human_bytes(est.stage.cpu)}</b>; PCIe transfers "
                 f"{t['offload transfers']:.3f} s, CPU optimizer step {t['optimizer step']:.3f} s per step</p>"
                 if est.plan.offload != "none" else "")
        head = (f"<p><b>{html_lib.escape(est.model.name)}</b>, {html_lib.escape(est.plan.describe())}: "
                f"<b>{human_bytes(est.memory_total)}</b> on the most loaded GPU "
                f"({'fits' if est.fits else 'does not fit'} {est.cluster.gpu.name}). "
                f"{html_lib.escape(ph.why())}</p>")
        # the figure shows every recompute policy's two phases: their table stays one click away,
        # so that the dashboard fits one screen
        return (head + extra + terms + "<details><summary>each recompute policy, as a table</summary>"
                + side_table + "</details>")

    def figure(self, r: MemoryOptions):
        from parlab.viz.memory_opt import plot_phases_by_recompute

        fig = new_figure(8.5, 2.4, left=0.2, right=0.7, bottom=0.19, top=0.96)
        plot_phases_by_recompute(fig.add_subplot(), r.phases, r.chosen.plan.recompute)
        return fig

    def summary(self, r: MemoryOptions) -> str:
        est = r.chosen
        ph = step_phases(est)
        return (f"{est.model.name}, {est.plan.describe()}: {human_bytes(est.memory_total)} per GPU "
                f"(peak: {ph.peak.name}); forward/backward {human_bytes(ph.forward_backward.total)}, "
                f"activations {human_bytes(est.memory_terms()['activations'])}")
