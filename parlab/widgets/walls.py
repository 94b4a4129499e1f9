"""Chapter 01's dashboards: the memory wall (size -> bytes -> which GPUs) and the compute wall
(GPUs x utilisation -> training days)."""

from __future__ import annotations

import ipywidgets as widgets

from parlab.costmodel import GPUS, OPTIMIZERS, PRECISIONS, RECOMPUTE, get_precision
from parlab.costmodel.walls import ComputeWall, MemoryWall, compute_wall, memory_wall
from parlab.tables import human_bytes, human_count, human_seconds

from .base import Dashboard, html_table, model_box, new_figure


class MemoryWallDashboard(Dashboard):
    """Model size, dtype, optimizer, micro-batch, recompute -> bytes per term and which GPUs hold it."""

    title = "The memory wall: what it takes to train a model on one GPU"

    def make_controls(self):
        return {
            "model": model_box("llama-7b"),
            "dtype": widgets.Dropdown(options=list(PRECISIONS), value="mixed", description="dtype"),
            "optimizer": widgets.Dropdown(options=list(OPTIMIZERS), value="adam", description="optimizer"),
            "micro_batch": widgets.IntSlider(value=1, min=1, max=32, description="micro-batch"),
            "recompute": widgets.Dropdown(options=list(RECOMPUTE), value="none", description="recompute"),
        }

    def compute(self, model, dtype, optimizer, micro_batch, recompute) -> MemoryWall:
        return memory_wall(model, dtype, optimizer, micro_batch, recompute)

    def html(self, w: MemoryWall) -> str:
        n = w.states.n_params
        rows = [[name, f"{v / n:.2f}", human_bytes(v)] for name, v in w.terms().items()]
        rows.append(["total", f"{w.total / n:.2f}", human_bytes(w.total)])
        terms = html_table(rows, ["term", "bytes / param", "memory"], highlight_last=True)
        fits = [[f.gpu.name, human_bytes(f.gpu.memory_bytes), "yes" if f.fits_one else "no",
                 "activations alone overflow" if f.min_gpus is None else f.min_gpus]
                for f in w.fits()]
        fit_table = html_table(fits, ["GPU", "holds", "fits on one?", "min GPUs, states sharded"])
        head = (f"<p><b>{w.model.name}</b>: {human_count(n)} parameters, seq {w.model.seq_len}, "
                f"micro-batch {w.micro_batch}, recompute {w.recompute}</p>")
        return head + '<div style="display:flex;gap:24px">' + terms + fit_table + "</div>"

    def figure(self, w: MemoryWall):
        from parlab.viz.walls import plot_memory_wall

        fig = new_figure(8, 2.6, left=0.26, right=0.8, bottom=0.2)
        plot_memory_wall(fig.add_subplot(), w)
        return fig


GPU_COUNTS = [2**k for k in range(15)]


class ComputeWallDashboard(Dashboard):
    """Model, tokens, GPU, GPU count, utilisation -> training FLOPs and days (perfect scaling)."""

    title = "The compute wall: how long training takes"

    def make_controls(self):
        return {
            "model": model_box("gpt3-175b"),
            "tokens_b": widgets.FloatLogSlider(value=300, base=10, min=0, max=5, step=0.05,
                                               description="tokens (B)", readout_format=",.0f"),
            "gpu": widgets.Dropdown(options=list(GPUS), value="a100-80gb", description="GPU"),
            "n_gpus": widgets.SelectionSlider(options=GPU_COUNTS, value=1024, description="GPUs"),
            "utilisation": widgets.FloatSlider(value=0.5, min=0.05, max=1.0, step=0.01,
                                               description="utilisation", readout_format=".0%"),
            "dtype": widgets.Dropdown(options=["mixed", "fp32"], value="mixed", description="dtype"),
        }

    def compute(self, model, tokens_b, gpu, n_gpus, utilisation, dtype) -> ComputeWall:
        return compute_wall(model, tokens_b * 1e9, gpu, n_gpus, utilisation, dtype)

    def html(self, w: ComputeWall) -> str:
        rows = [["parameters N", human_count(w.model.num_params())],
                ["tokens D", human_count(w.tokens)],
                ["training FLOPs 6ND", f"{w.flops:.3g}"],
                [f"peak of one {w.gpu.name} ({w.dtype})",
                 f"{w.gpu.peak_flops(get_precision(w.dtype).compute_dtype) / 1e12:,.1f} TFLOP/s"],
                ["time on 1 GPU", human_seconds(w.seconds_one_gpu)],
                [f"time on {w.n_gpus:,} GPUs", human_seconds(w.seconds)]]
        return html_table(rows, ["quantity", "value"], highlight_last=True)

    def figure(self, w: ComputeWall):
        from parlab.viz.walls import plot_compute_wall

        fig = new_figure(6, 3.4, left=0.12, bottom=0.14)
        plot_compute_wall(fig.add_subplot(), w)
        return fig
