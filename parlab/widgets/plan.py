"""Chapter 10's dashboards: one full plan (memory and step time, term by term, with formulas and
sources) and the advisor (every valid plan of a cluster, fastest first)."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import CLUSTERS, DTYPES, GPUS, LINKS, OFFLOADS, RECOMPUTE, SCHEDULES
from parlab.costmodel.estimate import Estimate, Term
from parlab.costmodel.search import SearchResult
from parlab.tables import human_bytes, human_seconds

from .base import Dashboard, html_table, model_box, new_figure

GPU_COUNTS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
SAME = "(cluster's)"




def _cluster(kind: str, n_gpus: int, gpu: str, intra: str, inter: str):
    from parlab.costmodel import make_cluster

    pick = {k: (None if v == SAME else v) for k, v in (("gpu", gpu), ("intra", intra), ("inter", inter))}
    return make_cluster(kind, n_gpus, **pick)


def _cluster_controls(model: str, gpus: int, overrides: tuple[str, ...]) -> dict[str, widgets.ValueWidget]:
    """Model, cluster kind, the overridable parts of the cluster, and the GPU count."""
    labels = {"gpu": ("GPU", GPUS), "intra": ("intra-node link", LINKS), "inter": ("inter-node link", LINKS)}
    controls: dict[str, widgets.ValueWidget] = {
        "model": model_box(model),
        "cluster": widgets.Dropdown(options=list(CLUSTERS), value="dgx-a100", description="cluster")}
    for name in overrides:
        label, presets = labels[name]
        controls[name] = widgets.Dropdown(options=[SAME, *presets], value=SAME, description=label)
    controls["gpus"] = widgets.Dropdown(options=GPU_COUNTS, value=gpus, description="GPUs")
    return controls


def _terms_table(terms: list[Term], unit) -> str:
    rows = [[t.name, unit(t.value), t.formula, t.source] for t in terms]
    return html_table(rows, ["term", "value", "formula", "source"])


class PlanDashboard(Dashboard):
    """Model, GPU, cluster and links, GPU count, dp/tp/pp, ZeRO, micro-batch, schedule, recompute,
    SP, offload, dtype -> memory of the most loaded GPU and the step time, term by term."""

    title = "A full training plan: memory per GPU and time per step, term by term"

    def make_controls(self):
        dd = widgets.Dropdown
        return {
            **_cluster_controls("gpt3-175b", 1024, ("gpu", "intra", "inter")),
            "dp": dd(options=[("auto: GPUs / (tp x pp)", 0)] + [(str(n), n) for n in GPU_COUNTS],
                     value=0, description="dp"),
            "tp": dd(options=[1, 2, 4, 8, 16, 32], value=8, description="tp"),
            "pp": dd(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="pp"),
            "zero": dd(options=[0, 1, 2, 3], value=1, description="ZeRO stage"),
            "micro_batch": dd(options=[1, 2, 4, 8, 16, 32], value=1, description="micro-batch"),
            "global_batch": widgets.BoundedIntText(value=1536, min=1, max=10**7, description="global batch"),
            "schedule": dd(options=list(SCHEDULES), value="1f1b", description="schedule"),
            "chunks": dd(options=[2, 3, 4, 6, 8], value=2, description="chunks v (interl.)"),
            "recompute": dd(options=list(RECOMPUTE), value="selective", description="recompute"),
            "sequence_parallel": widgets.Checkbox(value=True, description="sequence parallel"),
            "offload": dd(options=list(OFFLOADS), value="none", description="offload"),
            "dtype": dd(options=list(DTYPES), value="bf16", description="dtype"),
        }

    def compute(self, model, cluster, gpu, intra, inter, gpus, dp, tp, pp, zero, micro_batch, global_batch,
                schedule, chunks, recompute, sequence_parallel, offload, dtype) -> Estimate:
        from parlab.costmodel import Plan, estimate

        if not dp:
            if gpus % (tp * pp):
                raise ValueError(f"tp x pp = {tp} x {pp} = {tp * pp} does not divide {gpus} GPUs, so no "
                                 f"whole data-parallel size exists")
            dp = gpus // (tp * pp)
        if pp == 1:  # no pipeline: the schedule does not matter
            schedule = "1f1b"
        plan = Plan(dp=dp, tp=tp, pp=pp, zero=zero, micro_batch=micro_batch, global_batch=global_batch,
                    schedule=schedule, chunks=chunks if schedule == "interleaved" else 1, recompute=recompute,
                    sequence_parallel=sequence_parallel, offload=offload, dtype=dtype)
        return estimate(model, _cluster(cluster, gpus, gpu, intra, inter), plan)

    def html(self, est: Estimate) -> str:
        head = (f"<p><b>{html_lib.escape(est.model.name)}</b> on {html_lib.escape(est.cluster.describe())}<br>"
                f"plan: <code>{html_lib.escape(est.plan.describe())}</code><br>"
                + html_lib.escape(est.summary()).replace("\n", "<br>") + "</p>")
        memory = _terms_table(est.memory_breakdown(), human_bytes)
        time = _terms_table(est.time_breakdown(), human_seconds)
        return (head + f"<p><b>memory, {html_lib.escape(est.rank_label)}</b></p>" + memory
                + "<p><b>step time (last pipeline stage)</b></p>" + time)

    def figure(self, est: Estimate):
        from parlab.viz.costmodel import plan_figure

        return plan_figure(est)


class SearchDashboard(Dashboard):
    """Model, cluster, GPU count, global batch -> every valid plan that fits, fastest first."""

    title = "The advisor: every valid plan of a cluster, fastest first"

    def make_controls(self):
        dd = widgets.Dropdown
        return {
            **_cluster_controls("llama-65b", 64, ("inter",)),
            "global_batch": widgets.BoundedIntText(value=512, min=1, max=10**7, description="global batch"),
            "offload": widgets.Checkbox(value=False, description="allow offload"),
            "dtype": dd(options=list(DTYPES), value="bf16", description="dtype"),
            "top": dd(options=[5, 10, 20], value=10, description="plans shown"),
        }

    def compute(self, model, cluster, inter, gpus, global_batch, offload, dtype, top) -> tuple[SearchResult, int]:
        from parlab.costmodel import search

        offloads = list(OFFLOADS) if offload else ["none"]
        result = search(model, _cluster(cluster, gpus, SAME, SAME, inter), global_batch, offload=offloads,
                        dtype=dtype)
        result.best()  # raises (shown in the dashboard) when nothing fits
        return result, top

    def html(self, result: tuple[SearchResult, int]) -> str:
        res, top = result
        best = res.best()
        head = (f"<p>{res.tried} plans tried, {res.valid} valid, {res.fitting} fit in memory. Fastest: "
                f"<code>{html_lib.escape(best.plan.describe())}</code></p>")
        return head + html_table(res.rows(top), res.HEADERS)

    def figure(self, result: tuple[SearchResult, int]):
        from parlab.viz.costmodel import plot_search

        fig = new_figure(6.0, 3.0, left=0.14, bottom=0.16)
        plot_search(fig.add_subplot(), result[0].ranked)
        return fig
