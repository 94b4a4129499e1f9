"""Chapter 01's dashboards: the memory wall (size -> bytes -> which GPUs) and the compute wall
(GPUs x utilisation -> training days)."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import GPUS, OPTIMIZERS, PRECISIONS, RECOMPUTE
from parlab.costmodel.answers.walls import (
    WALL_GPUS,
    ComputeWall,
    MemoryWall,
    compute_wall,
    memory_wall,
)
from parlab.tables import human_bytes, human_count
from parlab.viz.figures import new_figure
from parlab.viz.html import html_table
from parlab.viz.walls import days_label, is_inference

from .base import Dashboard, model_box


class MemoryWallDashboard(Dashboard):
    """Model size, dtype, optimizer, micro-batch, recompute -> bytes per term and which GPUs hold it.

    The optimizer ``none`` means inference: weights only, so the micro-batch and recomputation
    knobs (which size the activations kept for the backward pass) are disabled."""

    title = "The memory wall: what a model needs on one GPU"

    def make_controls(self):
        return {
            "model": model_box("llama-7b"),
            "dtype": widgets.Dropdown(options=list(PRECISIONS), value="mixed", description="dtype"),
            "optimizer": widgets.Dropdown(options=list(OPTIMIZERS), value="adam", description="optimizer"),
            "micro_batch": widgets.IntSlider(value=1, min=1, max=32, description="micro-batch"),
            "recompute": widgets.Dropdown(options=list(RECOMPUTE), value="none", description="recompute"),
        }

    def inactive(self, optimizer, **_):
        return ("micro_batch", "recompute") if optimizer == "none" else ()

    def compute(self, model, dtype, optimizer, micro_batch, recompute) -> MemoryWall:
        return memory_wall(model, dtype, optimizer, micro_batch, recompute)

    def html(self, w: MemoryWall) -> str:
        n = w.states.n_params
        rows = [[name, v / n, v / 1e9] for name, v in w.terms().items()]
        rows.append(["total", w.total / n, w.total / 1e9])
        terms = html_table(rows, ["term", "bytes / param", "memory (GB)"],
                           {"bytes / param": ",.2f", "memory (GB)": ",.1f"}, highlight_last=True)
        fits = [[f.gpu.name, f.gpu.memory_bytes / 1e9, "yes" if f.fits_one else "no",
                 "—" if f.min_gpus is None else f.min_gpus] for f in w.fits()]
        fit_table = html_table(fits, ["GPU", "holds (GB)", "fits on one? (every term)", "min GPUs, states sharded"],
                               {"holds (GB)": ",.1f"})
        if is_inference(w):
            job = "inference: weights only (no gradients, optimizer states or stored activations)"
        else:
            mb = f"{w.micro_batch} micro-batch" if w.micro_batch == 1 else f"micro-batch {w.micro_batch}"
            job = f"training, seq {w.model.seq_len}, {mb}, recompute {w.recompute}"
        head = (f"<p><b>{html_lib.escape(w.model.name)}</b>: {human_count(n)} parameters, "
                f"{html_lib.escape(job)}: <b>{human_bytes(w.total)}</b>{html_lib.escape(in_all(w))}</p>")
        note = ('<p style="color:#555;font-size:90%">—: the activations alone overflow one card</p>'
                if any(f.min_gpus is None for f in w.fits()) else "")
        return (head + '<div style="display:flex;gap:24px;align-items:flex-start">' + terms
                + "<div>" + fit_table + note + "</div></div>")

    def figure(self, w: MemoryWall):
        from parlab.viz.walls import plot_memory_wall

        fig = new_figure(8, 2.6, left=0.2, right=0.76, bottom=0.19, top=0.89)
        plot_memory_wall(fig.add_subplot(), w)
        return fig

    def summary(self, w: MemoryWall) -> str:
        fit = [f.gpu.name for f in w.fits() if f.fits_one]
        job = "inference" if is_inference(w) else "training"
        fits = (f"fits one {', '.join(fit)}" if fit
                else f"fits none of the GPUs shown ({WALL_GPUS[0]} to {WALL_GPUS[-1]})")
        return f"{w.model.name}, {job}: {human_bytes(w.total)}{in_all(w) or ' on one GPU'}; {fits}"


def in_all(w: MemoryWall) -> str:
    """The wall's total is states + activations; where the cost model prices the job, also the
    estimate's total, every term counted (``MemoryWall.estimate_total``), which the fit uses."""
    full = w.estimate_total
    if full is None:
        return ""
    return (f" of states + activations, {human_bytes(full)} in all (+ runtime buffers, fragmentation and, "
            "with 16-bit gradients, the step's fp32 gradient copy: chapter 09's estimate)")


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
        gpus = "1 GPU" if w.n_gpus == 1 else f"{w.n_gpus:,} GPUs"
        peak = w.peak_flops
        rows = [["parameters N", human_count(w.model.num_params())],
                ["tokens D", human_count(w.tokens)],
                ["training FLOPs 6ND", f"{w.flops:.3g}"],
                [f"peak of one {w.gpu.name} ({w.dtype})", f"{peak / 1e12:,.1f} TFLOP/s"],
                ["time on 1 GPU", days_label(w.days_one_gpu)],
                [f"time on {gpus}", days_label(w.days)]]
        return html_table(rows, ["quantity", "value"], highlight_last=True)

    def figure(self, w: ComputeWall):
        from parlab.viz.walls import plot_compute_wall

        fig = new_figure(6, 3.2, left=0.12, bottom=0.15, top=0.9)
        plot_compute_wall(fig.add_subplot(), w)
        return fig

    def summary(self, w: ComputeWall) -> str:
        return (f"{w.model.name} on {human_count(w.tokens)} tokens, {w.n_gpus:,} x {w.gpu.name} at "
                f"{w.utilisation:.0%} of peak: {days_label(w.days)}")
