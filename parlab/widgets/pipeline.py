"""Chapter 04's dashboard: stages, micro-batches, schedule, chunks v and relative costs -> the
simulated Gantt chart, the bubble and the activations each stage holds; and, for a real model,
the cost model's pipeline terms (``real_model_pipeline``).

Every number comes from ``parlab.schedules`` (``make_schedule``, ``simulate``) or
``parlab.costmodel.estimate``; the dashboard reads knobs and draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets

from parlab.schedules import (
    SCHEDULE_LABELS,
    SCHEDULES,
    Costs,
    Schedule,
    Timeline,
    make_schedule,
    simulate,
)
from parlab.tables import human_ibytes
from parlab.viz.gantt import gantt_figure
from parlab.viz.html import html_table

from .base import Dashboard

UNIT = "time (one forward = 1)"


@dataclass(frozen=True)
class PipelineView:
    """One dashboard state: the schedule, its simulated timeline, and the costs used."""

    schedule: Schedule
    timeline: Timeline
    costs: Costs


def pipeline_view(schedule: str, stages: int, micro_batches: int, chunks: int, backward: float,
                  weight_share: float, p2p: float) -> PipelineView:
    """Simulate ``schedule`` with a forward of 1, a whole backward of ``backward`` (its
    ``weight_share`` is the weight-gradient part W, split off by zero-bubble schedules) and a
    P2P transfer of ``p2p``, all relative to one forward."""
    sched = make_schedule(schedule, stages, micro_batches, chunks)
    costs = Costs(f=1, b=backward * (1 - weight_share), w=backward * weight_share, p2p=p2p)
    return PipelineView(sched, simulate(sched, costs), costs)


def _fmt(x) -> str:
    """A Fraction or float as a short decimal."""
    return f"{float(x):.3g}"


class PipelineDashboard(Dashboard):
    """Schedule, stages p, micro-batches m, chunks v, backward and P2P costs -> Gantt, bubble,
    peak activations per stage."""

    title = "Pipeline schedules: who waits, and how many micro-batches each stage holds"
    control_columns, control_width = 3, 300

    def make_controls(self):
        slider = widgets.IntSlider
        return {
            "schedule": widgets.Dropdown(options=[(SCHEDULE_LABELS[k], k) for k in SCHEDULES],
                                         value="1f1b", description="schedule"),
            "stages": slider(value=4, min=1, max=8, description="stages p"),
            "micro_batches": slider(value=8, min=1, max=32, description="micro-batches m"),
            "chunks": slider(value=2, min=2, max=4, description="chunks v (interl.)"),
            "backward": widgets.FloatSlider(value=2.0, min=0.5, max=4.0, step=0.25,
                                            description="backward / fwd"),
            "weight_share": widgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05,
                                                description="W share (ZB)"),
            "p2p": widgets.FloatSlider(value=0.0, min=0.0, max=1.0, step=0.05,
                                       description="P2P / fwd"),
        }

    def inactive(self, schedule, **_):
        off = []
        if schedule != "interleaved":
            off.append("chunks")
        if schedule != "zb-h1":
            off.append("weight_share")
        if schedule == "naive":
            off.append("micro_batches")
        return off

    def compute(self, **values) -> PipelineView:
        return pipeline_view(**values)

    def html(self, r: PipelineView) -> str:
        tl, sched = r.timeline, r.schedule
        peaks = tl.peak_in_flight
        rows = [[f"stage {s}", float(tl.busy[s]), float(tl.idle[s]), _fmt(peaks[s])]
                for s in range(sched.p)]
        head = (f"<p><b>{sched.name}</b>, p={sched.p}, m={sched.m}: bubble "
                f"<b>{float(tl.bubble_fraction):.1%}</b> of stage time, makespan "
                f"{float(tl.makespan):.3g}; stage 0 holds up to <b>{_fmt(peaks[0])}</b> "
                f"micro-batches of activations.</p>")
        table = html_table(rows, ["stage", "busy", "idle", "peak activations (micro-batches)"],
                           {"busy": ".2f", "idle": ".2f"})
        # one click away: at p = 8 its 9 rows above the 8-stage Gantt made the dashboard 850 px
        return (head + '<details class="parlab-terms"><summary>each stage: busy, idle, peak '
                "activations</summary>" + table + "</details>")

    def figure(self, r: PipelineView):
        return gantt_figure(r.timeline, unit=UNIT)

    def summary(self, r: PipelineView) -> str:
        tl = r.timeline
        return (f"{r.schedule.name}, p={r.schedule.p}, m={r.schedule.m}: bubble "
                f"{float(tl.bubble_fraction):.1%}, peak activations per stage "
                f"{', '.join(_fmt(k) for k in tl.peak_in_flight)} micro-batches")


@dataclass(frozen=True)
class RealPipeline:
    """The cost model's pipeline terms for one model and plan (``parlab.costmodel.estimate``)."""

    model: str
    schedule: str
    p: int
    m: int
    v: int
    bubble_frac: float  # bubble time / ideal compute time, (p-1)/(v m)
    bubble_s: float  # seconds of bubble per step
    step_s: float
    in_flight: float  # micro-batches the most loaded stage holds
    activation_bytes: float  # that stage's activations
    p2p_bytes: float  # one activation message, s b h x bytes per element


def real_model_pipeline(model: str, schedule: str, p: int, m: int, v: int = 1, tp: int = 8,
                        micro_batch: int = 1, cluster: str = "dgx-a100") -> RealPipeline:
    """``estimate`` for ``model`` on tp x p GPUs of ``cluster`` with pipeline ``schedule``: its
    bubble, the in-flight micro-batches and activation bytes of the most loaded stage."""
    from parlab.costmodel import Plan, estimate, make_cluster

    plan = Plan(tp=tp, pp=p, micro_batch=micro_batch, micro_batches=m, schedule=schedule,
                chunks=v, recompute="selective", sequence_parallel=tp > 1)
    est = estimate(model, make_cluster(cluster, tp * p), plan)
    acts = est.stage.activations
    return RealPipeline(model, schedule, p, m, v, est.time.facts["bubble_frac"], est.time.bubble,
                        est.step_time, acts.in_flight, acts.total, est.time.facts["msg"])


def real_rows(rows: list[RealPipeline]) -> tuple[list[list], list[str], dict]:
    """Table rows, headers and formats for ``show_table``."""
    table = [[r.schedule, r.p, r.m, r.v, 100 * r.bubble_frac, r.bubble_s * 1e3, r.step_s * 1e3,
              r.in_flight, human_ibytes(r.activation_bytes),
              human_ibytes(r.p2p_bytes)] for r in rows]
    headers = ["schedule", "p", "m", "v", "bubble (%)", "bubble (ms)", "step (ms)", "in flight (mb)",
               "activations", "P2P msg"]
    return table, headers, {"bubble (%)": ".1f", "bubble (ms)": ".0f", "step (ms)": ".0f",
                            "in flight (mb)": ".3g"}
