"""Chapter 02's dashboard: message size, ranks, bandwidth, latency, algorithm -> time, and why.

Every number comes from ``parlab.costmodel.pricing.alphabeta`` (Thakur et al. 2005's cost expressions,
Sanders et al. 2009 for the double binary tree); the dashboard only reads the knobs and shows
which term dominates and which algorithm wins. The algorithm menu offers what the chosen
collective has, from the cost model's one table (``alphabeta.ALGORITHMS``).
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets

from parlab.costmodel import alphabeta
from parlab.tables import human_ibytes, human_seconds
from parlab.viz.figures import new_figure
from parlab.viz.html import html_table

from .base import Dashboard

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
SIZES = [(human_ibytes(2**k), 2**k) for k in range(6, 33)]
RANKS = [2**k for k in range(1, 11)]
BEST = "best"


def algorithm_options(op: str) -> tuple[str, ...]:
    """The algorithm menu for collective ``op``: 'best' and every algorithm the model has for it."""
    return (BEST, *alphabeta.algorithms_of(op))


@dataclass(frozen=True)
class CommTimes:
    """Every algorithm of one collective at one size, fastest first; and, for each algorithm
    that takes fewer steps than the ring, the size below which it beats the ring."""

    op: str
    ranks: int
    nbytes: float
    alpha: float
    bandwidth: float
    chosen: alphabeta.CommTime
    all: list[alphabeta.CommTime]
    crossovers: dict[str, float | None]


def comm_times(op: str, size: float, ranks: int, bandwidth_gb: float, latency_us: float,
               algorithm: str) -> CommTimes:
    """The dashboard's computation: alpha-beta times of every algorithm of ``op``."""
    alpha, bw = latency_us * 1e-6, bandwidth_gb * 1e9
    every = alphabeta.compare(op, ranks, size, alpha, bw)
    chosen = every[0] if algorithm == BEST else alphabeta.time(op, algorithm, ranks, size, alpha, bw)
    names = alphabeta.algorithms_of(op)
    ring_steps = alphabeta.shape(op, "ring", ranks, 1.0)[0] if "ring" in names else 0
    cross = {a: alphabeta.crossover(op, a, "ring", ranks, alpha, bw) for a in names
             if "ring" in names and a != "ring" and a not in alphabeta.ONE_HOST_ONLY
             and alphabeta.shape(op, a, ranks, 1.0)[0] < ring_steps}
    return CommTimes(op, ranks, size, alpha, bw, chosen, every, cross)


class CommTimeDashboard(Dashboard):
    """Message size, ranks, link bandwidth and latency, algorithm -> modelled time by term."""

    title = "When latency dominates, when bandwidth does: collectives in the alpha-beta model"

    def make_controls(self):
        return {
            "op": widgets.Dropdown(options=list(OPS), value="all_reduce", description="collective"),
            "size": widgets.SelectionSlider(options=SIZES, value=2**20, description="message"),
            "ranks": widgets.SelectionSlider(options=RANKS, value=8, description="ranks"),
            "bandwidth_gb": widgets.FloatLogSlider(value=25, base=10, min=-1, max=3, step=0.1,
                                                   description="bandwidth GB/s", readout_format=".3g"),
            "latency_us": widgets.FloatLogSlider(value=5, base=10, min=-1, max=3, step=0.1,
                                                 description="latency µs", readout_format=".3g"),
            "algorithm": widgets.Dropdown(options=algorithm_options("all_reduce"), value=BEST,
                                          description="algorithm"),
        }

    # the algorithm menu follows the collective: changed before each recompute, silently
    _syncing = False

    def _on_change(self, change: dict) -> None:
        if not self._syncing:
            super()._on_change(change)

    def update(self) -> None:
        op, algo = self.controls["op"], self.controls["algorithm"]
        options = algorithm_options(op.value)
        if tuple(algo.options) != options:
            keep = algo.value if algo.value in options else BEST
            self._syncing = True
            try:
                algo.options = options
                algo.value = keep
            finally:
                self._syncing = False
        super().update()

    def compute(self, op, size, ranks, bandwidth_gb, latency_us, algorithm) -> CommTimes:
        return comm_times(op, size, ranks, bandwidth_gb, latency_us, algorithm)

    def html(self, r: CommTimes) -> str:
        rows = [[t.algorithm, t.steps, human_seconds(t.latency), t.volume / r.nbytes,
                 human_seconds(t.transfer), human_seconds(t.seconds), t.bound] for t in r.all]
        table = html_table(rows, ["algorithm", "steps", "latency term", "bytes per rank / message",
                                  "bandwidth term", "total", "dominated by"],
                           {"steps": ",.0f", "bytes per rank / message": ".2f"})
        c = r.chosen
        lines = [f"<b>{c.algorithm}</b>: {human_seconds(c.seconds)}, {c.bound}-bound "
                 f"({human_seconds(c.latency)} of latency, {human_seconds(c.transfer)} moving bytes). "
                 f"Fastest here: <b>{r.all[0].algorithm}</b>."]
        for name, size in r.crossovers.items():
            if size is None:
                lines.append(f"{name} beats the ring at every size on {r.ranks} ranks: fewer steps, "
                             "no more bytes.")
            elif size > 0:
                lines.append(f"{name} beats the ring below {human_ibytes(size)} on {r.ranks} ranks "
                             f"(fewer steps; the ring moves fewer bytes above).")
        return "<p>" + "<br>".join(lines) + "</p>" + table

    def summary(self, r: CommTimes) -> str:
        c = r.chosen
        return (f"{r.op} of {human_ibytes(r.nbytes)} on {r.ranks} ranks: {c.algorithm} "
                f"{human_seconds(c.seconds)} ({c.bound}-bound); fastest: {r.all[0].algorithm}")

    def figure(self, r: CommTimes):
        from parlab.viz.comm import plot_time_vs_size

        fig = new_figure(5.6, 2.7, left=0.12, right=0.98, bottom=0.17, top=0.9)
        plot_time_vs_size(fig.add_subplot(), r.op, r.ranks, r.alpha, r.bandwidth, r.nbytes, r.chosen.algorithm)
        return fig
