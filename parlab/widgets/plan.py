"""Chapter 10's dashboards: one full plan (memory and step time, term by term, with formulas and
sources) and the advisor (every valid plan of a cluster, fastest first)."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import CLUSTERS, DTYPES, GPUS, LINKS, OFFLOADS, RECOMPUTE, SCHEDULES
from parlab.costmodel.plan.estimate import Estimate, Term
from parlab.costmodel.search.ranking import SearchResult
from parlab.viz.figures import new_figure
from parlab.viz.html import html_table

from .base import Dashboard, model_box

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


def _terms_table(terms: list[Term], header: str, scale: float, fmt: str) -> str:
    """Terms as numbers (``value / scale`` under ``header``, one format), formulas left-aligned."""
    rows = [[t.name, t.value / scale, t.formula, t.source] for t in terms]
    return html_table(rows, ["term", header, "formula", "source"], {header: fmt})


class PlanDashboard(Dashboard):
    """Model, GPU, cluster and links, GPU count, dp/tp/pp, ZeRO, micro-batch, schedule, recompute,
    SP, offload, dtype -> memory of the most loaded GPU and the step time, term by term."""

    title = "A full training plan: memory per GPU and time per step, term by term"
    control_columns, control_width = 3, 300

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
        memory = _terms_table(est.memory_breakdown(), "GB", 1e9, ",.2f")
        time = _terms_table(est.time_breakdown(), "ms", 1e-3, ",.1f")
        return (head + '<details class="parlab-terms"><summary>term by term, with formulas and sources'
                "</summary>" + f"<p><b>memory, {html_lib.escape(est.rank_label)}</b></p>" + memory
                + "<p><b>step time (last pipeline stage)</b></p>" + time + "</details>")

    def figure(self, est: Estimate):
        from parlab.viz.costmodel import plan_figure

        return plan_figure(est)

    def summary(self, est: Estimate) -> str:
        return (f"{est.model.name}, {est.plan.describe()}: {est.memory_total / 1e9:,.1f} GB per GPU, "
                f"step {est.step_time:,.3g} s, MFU {est.mfu:.1%}")


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
        if result.valid and not result.ranked:  # advise with the knobs this dashboard has
            knobs = ["more GPUs", "a smaller model"] + ([] if offload else ["'allow offload'"])
            raise ValueError(f"no valid plan fits in memory, with every recomputation and micro-batch "
                             f"size already tried: choose {', '.join(knobs[:-1])} or {knobs[-1]}")
        result.best()  # raises (shown in the dashboard) when no plan is valid at all
        return result, top

    def html(self, result: tuple[SearchResult, int]) -> str:
        res, top = result
        best = res.best()
        head = (f"<p>{html_lib.escape(res.counts())}. Fastest: "
                f"<code>{html_lib.escape(best.plan.describe())}</code></p>")
        rows = [[i + 1, e.plan.describe(), e.memory_total / 1e9, e.step_time, e.mfu, e.tokens_per_s]
                for i, e in enumerate(res.ranked[:top])]
        return head + html_table(rows, ["#", "plan", "memory (GB)", "step (s)", "MFU", "tokens/s"],
                                 [",d", None, ",.1f", ",.3f", ".1%", ",.0f"])

    def figure(self, result: tuple[SearchResult, int]):
        from parlab.viz.costmodel import plot_search

        fig = new_figure(7.5, 2.6, left=0.12, right=0.77, bottom=0.18)  # the dashboard in one screen
        plot_search(fig.add_subplot(), result[0].ranked)
        return fig

    def summary(self, result: tuple[SearchResult, int]) -> str:
        best = result[0].best()
        return f"fastest of {result[0].fitting:,} fitting plans: {best.plan.describe()}"
