"""Chapter 05's dashboard: tensor-parallel degree, link, model and micro-batch -> per-layer
communication time and memory per GPU of Megatron 1D (with and without sequence parallelism)
and Colossal-AI's 2D, 2.5D and 3D, from ``parlab.costmodel.pricing.tensor_parallel.compare_on_link``."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import GPUS
from parlab.costmodel.pricing.tensor_parallel import ModeOnLink, compare_on_link
from parlab.tables import human_bytes, human_seconds
from parlab.viz.html import html_table

from .base import Dashboard, model_box

LINKS = ("nvlink3-a100", "nvlink4-h100", "pcie4", "ib-hdr", "100gbe", "10gbe")
DEGREES = (2, 4, 8, 16, 27, 32, 64)


class TensorParallelDashboard(Dashboard):
    """GPUs in the TP group, link, model, micro-batch, 2.5D depth -> each mode's layer."""

    title = "Tensor parallelism: per-layer communication and memory per GPU, 1D to 3D"

    def make_controls(self):
        return {
            "model": model_box("gpt3-175b"),
            "p": widgets.SelectionSlider(options=list(DEGREES), value=8, description="GPUs (TP)"),
            "link": widgets.Dropdown(options=list(LINKS), value="nvlink3-a100", description="link"),
            "micro_batch": widgets.IntSlider(value=8, min=1, max=64, description="micro-batch"),
            "depth": widgets.Dropdown(options=[1, 2, 4, 8], value=2, description="2.5D depth d"),
            "gpu": widgets.Dropdown(options=list(GPUS), value="a100-80gb", description="GPU"),
        }

    def compute(self, model, p, link, micro_batch, depth, gpu) -> list[ModeOnLink]:
        return compare_on_link(model, micro_batch, p, link, gpu, depth)

    def html(self, rows: list[ModeOnLink]) -> str:
        fits = [r for r in rows if r.cost is not None]
        table = html_table(
            [[r.label, r.cost.grid.shape, r.cost.calls, r.cost.volume / 1e6, r.comm_s * 1e3,
              r.compute_s * 1e3, 100 * r.busy, r.states_bytes / 1e9, r.activation_bytes / 1e9]
             for r in fits],
            ["mode", "grid", "collectives / layer", "MB sent / GPU", "comm (ms)", "matmuls (ms)",
             "computing (%)", "model states (GB)", "activations (GB)"],
            {"MB sent / GPU": ",.1f", "comm (ms)": ",.2f", "matmuls (ms)": ",.2f", "computing (%)": ".0f",
             "model states (GB)": ",.1f", "activations (GB)": ",.1f"})
        skipped = "".join(  # a reason that names its mode already is not prefixed twice
            f"<li>{html_lib.escape(r.reason if r.reason.startswith(r.label) else f'{r.label}: {r.reason}')}</li>"
            for r in rows if r.cost is None)
        best = min(fits, key=lambda r: r.comm_s)
        model = fits[0].cost.model
        head = (f"<p><b>{html_lib.escape(model.name)}</b>, one layer, micro-batch "
                f"{fits[0].cost.micro_batch}: least communication <b>{html_lib.escape(best.label)}</b> "
                f"({human_seconds(best.comm_s)} per layer); memory for all {model.layers} layers "
                f"(16-bit weights, mixed-precision Adam states, one micro-batch of activations)</p>")
        return head + table + (f"<ul style='color:#555'>{skipped}</ul>" if skipped else "")

    def summary(self, rows: list[ModeOnLink]) -> str:
        fits = [r for r in rows if r.cost is not None]
        parts = [f"{r.mode} {human_seconds(r.comm_s)} + "
                 f"{human_bytes(r.states_bytes + r.activation_bytes)}" for r in fits]
        return f"p={fits[0].cost.grid.p}, per layer comm + memory/GPU: " + "; ".join(parts)

    def figure(self, rows: list[ModeOnLink]):
        from parlab.viz.tensor import modes_figure

        return modes_figure(rows)
