"""Chapter 02's dashboard: message size, ranks, bandwidth, latency, algorithm -> time, and why.

Every number comes from ``parlab.costmodel.alphabeta`` (Thakur et al. 2005's cost expressions); the
dashboard only reads the knobs and shows which term dominates and which algorithm wins.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets

from parlab.costmodel import alphabeta
from parlab.tables import human_ibytes, human_seconds

from .base import Dashboard, html_table, new_figure

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
SIZES = [(human_ibytes(2**k), 2**k) for k in range(6, 33)]
RANKS = [2**k for k in range(1, 11)]


@dataclass(frozen=True)
class CommTimes:
    """Every algorithm of one collective at one size, fastest first; and where tree and ring tie."""

    op: str
    ranks: int
    nbytes: float
    alpha: float
    bandwidth: float
    chosen: alphabeta.CommTime
    all: list[alphabeta.CommTime]
    crossover: float | None


def comm_times(op: str, size: float, ranks: int, bandwidth_gb: float, latency_us: float,
               algorithm: str) -> CommTimes:
    """The dashboard's computation: alpha-beta times of every algorithm of ``op``."""
    alpha, bw = latency_us * 1e-6, bandwidth_gb * 1e9
    every = alphabeta.compare(op, ranks, size, alpha, bw)
    chosen = every[0] if algorithm == "best" else alphabeta.time(op, algorithm, ranks, size, alpha, bw)
    names = alphabeta.ALGORITHMS[op]
    cross = alphabeta.crossover(op, "tree", "ring", ranks, alpha, bw) if {"tree", "ring"} <= set(names) else None
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
                                                 description="latency us", readout_format=".3g"),
            "algorithm": widgets.Dropdown(options=["best", "ring", "tree", "naive"], value="best",
                                          description="algorithm"),
        }

    def compute(self, op, size, ranks, bandwidth_gb, latency_us, algorithm) -> CommTimes:
        return comm_times(op, size, ranks, bandwidth_gb, latency_us, algorithm)

    def html(self, r: CommTimes) -> str:
        rows = [[t.algorithm, f"{t.steps:g}", human_seconds(t.latency), f"{t.volume / r.nbytes:.2f} x",
                 human_seconds(t.transfer), human_seconds(t.seconds), t.bound]
                for t in r.all]
        table = html_table(rows, ["algorithm", "steps", "latency term", "bytes sent / message",
                                  "bandwidth term", "total", "dominated by"])
        c = r.chosen
        lines = [f"<b>{c.algorithm}</b>: {human_seconds(c.seconds)}, {c.bound}-bound "
                 f"({human_seconds(c.latency)} of latency, {human_seconds(c.transfer)} moving bytes). "
                 f"Fastest here: <b>{r.all[0].algorithm}</b>."]
        if r.crossover is not None:
            lines.append(f"Tree beats ring below {human_ibytes(r.crossover)} on {r.ranks} ranks: the ring "
                         f"takes {2 * (r.ranks - 1)} steps but sends each byte only "
                         f"{2 * (r.ranks - 1) / r.ranks:.2f} times; the tree takes log2 steps but "
                         f"sends the whole message in each.")
        return "<p>" + "<br>".join(lines) + "</p>" + table

    def figure(self, r: CommTimes):
        from parlab.viz.comm import plot_time_vs_size

        fig = new_figure(6.2, 3.0, left=0.12, bottom=0.16)
        plot_time_vs_size(fig.add_subplot(), r.op, r.ranks, r.alpha, r.bandwidth, r.nbytes, r.chosen.algorithm)
        return fig
