"""Chapter 07's dashboard: model size, GPUs, cluster and link, ZeRO stage, offload -> memory per GPU
by term and step time of pure ZeRO data parallelism (dp = GPUs), every stage side by side, from
``parlab.costmodel.estimate``."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import CLUSTERS, LINKS, OFFLOADS, RECOMPUTE
from parlab.costmodel.plan.estimate import Estimate
from parlab.tables import human_bytes, human_seconds
from parlab.viz.html import html_table

from .base import Dashboard, model_box
from .plan import SAME, _cluster, _terms_table

GPU_COUNTS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
STAGES = (0, 1, 2, 3)


class ZeroDashboard(Dashboard):
    """Model, cluster, inter-node link, GPUs, ZeRO stage, offload, micro-batch, recompute -> one
    GPU's memory by term and the step time of ZeRO data parallelism over all GPUs (tp = pp = 1),
    the chosen stage term by term and all four stages in the figure."""

    title = "ZeRO: memory per GPU and step time, stage by stage"
    control_columns, control_width = 3, 300

    def make_controls(self):
        dd = widgets.Dropdown
        return {
            "model": model_box("llama-65b"),
            "cluster": dd(options=list(CLUSTERS), value="dgx-a100", description="cluster"),
            "link": dd(options=[SAME, *LINKS], value=SAME, description="inter-node link"),
            "gpus": dd(options=list(GPU_COUNTS), value=64, description="GPUs (= dp)"),
            "zero": dd(options=list(STAGES), value=3, description="ZeRO stage"),
            "offload": dd(options=list(OFFLOADS), value="none", description="offload"),
            "micro_batch": dd(options=[1, 2, 4, 8, 16], value=1, description="micro-batch"),
            "recompute": dd(options=list(RECOMPUTE), value="full", description="recompute"),
        }

    def compute(self, model, cluster, link, gpus, zero, offload, micro_batch, recompute) -> dict:
        from parlab.costmodel import Plan, estimate

        machines = _cluster(cluster, gpus, SAME, SAME, link)
        stages: dict[int, Estimate | str] = {}
        for s in STAGES:
            try:
                plan = Plan(dp=gpus, zero=s, micro_batch=micro_batch, recompute=recompute, offload=offload)
                stages[s] = estimate(model, machines, plan)
            except ValueError as err:
                if s == zero:
                    raise
                stages[s] = str(err)
        return {"stages": stages, "zero": zero}

    def html(self, r: dict) -> str:
        est: Estimate = r["stages"][r["zero"]]
        head = (f"<p><b>{html_lib.escape(est.model.name)}</b> on {html_lib.escape(est.cluster.describe())}<br>"
                f"plan: <code>{html_lib.escape(est.plan.describe())}</code><br>"
                + html_lib.escape(est.summary()).replace("\n", "<br>") + "</p>")
        rows = []
        for s, e in r["stages"].items():
            if isinstance(e, str):
                rows.append([f"ZeRO-{s}", "not valid", "", "", "", e])
            else:
                rows.append([f"ZeRO-{s}", human_bytes(e.memory_total), "yes" if e.fits else "no",
                             human_bytes(e.stage.cpu), human_seconds(e.step_time),
                             human_seconds(e.time.dp_comm) + " exposed"])
        stages = html_table(rows, ["stage", "memory per GPU", "fits?", "on the CPU", "step", "ZeRO communication"],
                            highlight_last=False)
        memory = _terms_table(est.memory_breakdown(), "GB", 1e9, ",.2f")
        time = _terms_table(est.time_breakdown(), "ms", 1e-3, ",.1f")
        return (head + stages + f'<details class="parlab-terms"><summary>ZeRO-{r["zero"]} term by term, with '
                "formulas and sources</summary><p><b>memory per GPU</b></p>" + memory
                + "<p><b>step time</b></p>" + time + "</details>")

    def figure(self, r: dict):
        from parlab.viz.zero import stages_figure

        return stages_figure(r["stages"], r["zero"])

    def summary(self, r: dict) -> str:
        est: Estimate = r["stages"][r["zero"]]
        return (f"{est.model.name}, {est.plan.describe()}: {human_bytes(est.memory_total)} per GPU "
                f"({'fits' if est.fits else 'does not fit'}), step {human_seconds(est.step_time)}")
