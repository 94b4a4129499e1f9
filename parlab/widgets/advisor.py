"""Chapter 10's advisor dashboard: model, cluster, GPU count and global batch -> the fastest plan
and why, in plain words, beside the guide's rule for the same setting (guide 3.3-3.5), from
``parlab.costmodel.search.advisor``."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import CLUSTERS, LINKS
from parlab.costmodel.search.advisor import (
    SCENARIO_CHOICES,
    Scenario,
    Verdict,
    layout,
    scenario_verdict,
)
from parlab.tables import plural
from parlab.viz.html import html_table

from .base import Dashboard, model_box

GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
SAME = "(cluster's)"


class AdvisorDashboard(Dashboard):
    """Model, cluster kind, inter-node link, GPUs, global batch -> the advice and the guide's rule."""

    title = "The advisor: the fastest plan, why, and what the guide would do"

    def make_controls(self):
        return {
            "model": model_box("llama-7b"),
            "cluster": widgets.Dropdown(options=list(CLUSTERS), value="pcie-10gbe", description="cluster"),
            "inter": widgets.Dropdown(options=[SAME, *LINKS], value=SAME, description="inter-node link"),
            "gpus": widgets.Dropdown(options=list(GPU_COUNTS), value=8, description="GPUs"),
            "global_batch": widgets.BoundedIntText(value=64, min=1, max=10**6, description="global batch"),
        }

    def inactive(self, gpus, cluster, **_):
        return ("inter",) if gpus <= CLUSTERS[cluster][1] else ()

    def compute(self, model, cluster, inter, gpus, global_batch) -> Verdict:
        return scenario_verdict(Scenario(model, cluster, gpus, global_batch, None if inter == SAME else inter))

    def html(self, v: Verdict) -> str:
        a, best = v.advice, v.advice.best
        verdict = f"{v.outcome}: {v.why()}"  # a margin inside the model's band is a tie
        color = {"agrees": "#2b8a3e", "tie": "#e67700", "differs": "#c92a2a"}[v.outcome]
        head = (f"<p><b>{html_lib.escape(a.model.name)}</b> on {html_lib.escape(a.cluster.describe())}, "
                f"global batch {a.global_batch:,}<br>fastest: <code>{html_lib.escape(best.plan.describe())}</code>"
                f"<br>guide {v.rule.section} ({html_lib.escape(v.rule.situation)}): "
                f"<b>{html_lib.escape(v.rule.says)}</b> - <span style='color:{color}'>{html_lib.escape(verdict)}"
                f"</span></p>")
        reasons = "<ul>" + "".join(f"<li>{html_lib.escape(r)}</li>" for r in a.reasons()) + "</ul>"
        rows = [[layout(e.plan), e.plan.describe(), e.step_time, e.memory_total / 1e9,
                 "yes" if v.rule.accepts(e.plan) else ""] for e in a.by_layout()[:6]]
        table = html_table(rows, ["layout", "its fastest plan", "step (s)", "memory (GB)", "guide allows"],
                           {"step (s)": ",.2f", "memory (GB)": ",.1f"})
        mbs = ", ".join(map(str, SCENARIO_CHOICES["micro_batches"]))
        note = f"<p style='color:#555'>micro-batches searched: {mbs} sequences</p>"
        # the figure shows the same layouts as bars: the table stays one click away (one screen)
        return (head + reasons + "<details><summary>each layout's fastest plan, as a table</summary>"
                + table + note + "</details>")

    def figure(self, v: Verdict):
        from parlab.viz.advisor import advice_figure

        return advice_figure(v.advice, v)

    def summary(self, v: Verdict) -> str:
        best = v.advice.best
        return (f"{v.advice.model.name}, {plural(v.advice.cluster.n_gpus, 'GPU')}: {layout(best.plan)}; guide "
                f"{v.rule.section} ({v.rule.says}) {v.outcome}")
