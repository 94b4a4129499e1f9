"""Chapter 08's dashboard: a 3D (DP x TP x PP) layout of a real model on a real cluster -> where
each group's traffic runs, the memory of the most loaded GPU and the step time, term by term.

It is ``PlanDashboard``'s estimate with the three degrees, the micro-batch count and the two
links as the knobs, and one more table: which link each group's collectives use (``layout``'s
span of the group on nodes, ``collectives.group_link``) and what that group's traffic costs."""

from __future__ import annotations

import ipywidgets as widgets

from parlab.costmodel import RECOMPUTE, SCHEDULES
from parlab.costmodel.plan.estimate import Estimate
from parlab.viz.html import html_table

from .plan import SAME, PlanDashboard, _cluster, _cluster_controls

#: (group, its label, the step-time term its traffic is priced in)
GROUPS = (("tp", "TP", "TP communication"), ("pp", "PP", "PP communication"),
          ("dp", "DP", "DP/ZeRO communication (exposed)"))


def _sends(est: Estimate, dim: str) -> str:
    """What a group sends in one step, in the cost model's own counts."""
    facts = est.time.facts
    if dim == "tp":
        return f"{facts['n_tp']} all-reduces per micro-batch"
    if dim == "pp":
        return "activations forward, gradients back, per micro-batch"
    return facts["dp_ops"]


def group_rows(est: Estimate) -> list[list[object]]:
    """One row per parallel dimension: its degree, the link its collectives run on (from the
    estimate's facts), the link's achievable bandwidth, and the step-time term of its traffic."""
    facts, terms = est.time.facts, est.time_terms()
    rows = []
    for dim, label, term in GROUPS:
        size = getattr(est.plan, dim)
        where = facts["where"][dim]
        rows.append([label, size, _sends(est, dim) if size > 1 else "nothing (size 1)",
                     where if size > 1 else "-", facts["bw"][dim] / 1e9 if size > 1 else None,
                     terms[term]])
    return rows


class ThreeDDashboard(PlanDashboard):
    """Model, cluster and its two links, GPUs, dp / tp / pp, micro-batches per step, micro-batch,
    schedule, recompute, ZeRO -> where each group runs, memory per GPU and step time by term.

    A ``PlanDashboard`` (its table of terms and its figure) with the knobs of a 3D layout: the
    degrees given explicitly (so dp x tp x pp must equal the GPUs) and m instead of the batch."""

    title = "3D parallelism: a DP x TP x PP layout of a real model, priced term by term"
    control_columns, control_width = 3, 300

    def make_controls(self):
        dd, num = widgets.Dropdown, widgets.BoundedIntText
        controls = _cluster_controls("mt-nlg-530b", 1024, ("intra", "inter"))  # gpus replaced below
        controls["gpus"] = num(value=2240, min=1, max=10**6, description="GPUs")
        return {
            **controls,
            "dp": num(value=8, min=1, max=10**6, description="dp"),
            "tp": dd(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="tp"),
            "pp": num(value=35, min=1, max=10**4, description="pp"),
            "micro_batches": num(value=240, min=1, max=10**6, description="micro-batches m"),
            "micro_batch": dd(options=[1, 2, 4, 8, 16], value=1, description="micro-batch size"),
            "schedule": dd(options=list(SCHEDULES), value="1f1b", description="schedule"),
            "chunks": dd(options=[2, 3, 4, 5, 6, 7, 8], value=3, description="chunks v (interl.)"),
            "recompute": dd(options=list(RECOMPUTE), value="full", description="recompute"),
            "zero": dd(options=[0, 1, 2, 3], value=1, description="ZeRO stage"),
        }

    def inactive(self, pp, schedule, **_):
        off = [] if schedule == "interleaved" else ["chunks"]
        return off + (["schedule", "chunks"] if pp == 1 else [])

    def compute(self, model, cluster, intra, inter, gpus, dp, tp, pp, micro_batches, micro_batch, schedule,
                chunks, recompute, zero) -> Estimate:
        from parlab.costmodel import Plan, estimate

        if pp == 1:  # no pipeline: the schedule does not matter
            schedule = "1f1b"
        plan = Plan(dp=dp, tp=tp, pp=pp, zero=zero, micro_batch=micro_batch, micro_batches=micro_batches,
                    schedule=schedule, chunks=chunks if schedule == "interleaved" else 1, recompute=recompute)
        return estimate(model, _cluster(cluster, gpus, SAME, intra, inter), plan)

    def html(self, est: Estimate) -> str:
        """PlanDashboard's head and terms, then the global batch and where each group runs."""
        p = est.plan
        groups = html_table(group_rows(est), ["group", "size", "sends", "runs on", "GB/s per GPU", "step term (s)"],
                            [",d", None, None, None, ",.1f", ",.3f"])
        return (super().html(est) + f"<p>global batch dp x micro-batch x m = {p.dp} x {p.micro_batch} x "
                f"{p.m} = {p.batch:,}; <b>where each group's traffic runs</b></p>" + groups)

    def summary(self, est: Estimate) -> str:
        return (f"{est.model.name}, dp={est.plan.dp} tp={est.plan.tp} pp={est.plan.pp}: "
                f"{est.memory_total / 1e9:,.1f} GB per GPU, step {est.step_time:,.3g} s, MFU {est.mfu:.1%}")
