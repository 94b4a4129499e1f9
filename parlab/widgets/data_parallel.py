"""Chapter 03's dashboard: model size, GPUs, link, bucket size and micro-batch -> memory per GPU
and step time of DDP with and without overlap, from ``parlab.costmodel.plan.data_parallel``."""

from __future__ import annotations

import html as html_lib

import ipywidgets as widgets

from parlab.costmodel import GPUS
from parlab.costmodel.plan.data_parallel import DDPStep, bucket_sweep, ddp_step
from parlab.tables import human_bytes, human_seconds
from parlab.viz.html import html_table

from .base import Dashboard, model_box

LINKS = ("nvlink3-a100", "pcie4", "ib-hdr", "100gbe", "25gbe", "10gbe")
GPU_COUNTS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
BUCKETS_MB = (0.25, 1, 5, 25, 100, 400, 1600)


class DataParallelDashboard(Dashboard):
    """Model, GPUs, link, bucket size, micro-batch, GPU -> one DDP step."""

    title = "Data parallelism: step time and memory per GPU"

    def make_controls(self):
        return {
            "model": model_box("1.5B"),
            "gpus": widgets.SelectionSlider(options=list(GPU_COUNTS), value=64, description="GPUs"),
            "link": widgets.Dropdown(options=list(LINKS), value="ib-hdr", description="link"),
            "bucket_mb": widgets.SelectionSlider(options=list(BUCKETS_MB), value=25,
                                                 description="bucket (MiB)"),
            "micro_batch": widgets.IntSlider(value=4, min=1, max=32, description="micro-batch"),
            "gpu": widgets.Dropdown(options=list(GPUS), value="a100-80gb", description="GPU"),
        }

    def compute(self, model, gpus, link, bucket_mb, micro_batch, gpu):
        kw = {"gpu": gpu, "micro_batch": micro_batch}
        on = ddp_step(model, gpus, link, bucket_mb=bucket_mb, **kw)
        off = ddp_step(model, gpus, link, bucket_mb=bucket_mb, overlap=False, **kw)
        sweep = bucket_sweep(model, gpus, link, BUCKETS_MB, **kw)
        return {"model": model, "on": on, "off": off, "sweep": sweep, "bucket_mb": bucket_mb,
                "memory_gpu": GPUS[gpu].memory_bytes}

    def html(self, r) -> str:
        on, off = r["on"], r["off"]
        rows = [[name, s.compute_s * 1e3, s.comm_s * 1e3, s.exposed_s * 1e3, s.step_s * 1e3]
                for name, s in (("overlap (DDP)", on), ("all-reduce after backward", off))]
        table = html_table(rows, ["schedule", "compute (ms)", "all-reduce (ms)", "exposed (ms)",
                                  "step (ms)"],
                           {"compute (ms)": ",.1f", "all-reduce (ms)": ",.1f", "exposed (ms)": ",.1f",
                            "step (ms)": ",.1f"})
        fits = on.memory_bytes <= r["memory_gpu"]
        head = (f"<p><b>{html_lib.escape(str(r['model']))}</b> on {on.gpus} GPUs: {on.buckets} "
                f"buckets; {100 * on.hidden_fraction:.0f}% of the all-reduce hides behind backward. "
                f"Memory per GPU (a full replica): <b>{human_bytes(on.memory_bytes)}</b> "
                f"{'fits' if fits else '<b>does not fit</b>'} in {human_bytes(r['memory_gpu'])}.</p>")
        return head + table

    def summary(self, r) -> str:
        on, off = r["on"], r["off"]
        return (f"{on.gpus} GPUs, {on.buckets} buckets: step {human_seconds(on.step_s)} with overlap, "
                f"{human_seconds(off.step_s)} without; memory/GPU {human_bytes(on.memory_bytes)}")

    def figure(self, r):
        from parlab.viz.data_parallel import step_terms_figure

        sweep: list[DDPStep] = r["sweep"]
        rows = [(name, s.compute_s, s.hidden_s, s.exposed_s)
                for name, s in (("overlap", r["on"]), ("no overlap", r["off"]))]
        return step_terms_figure(rows, r["bucket_mb"], (BUCKETS_MB, [s.step_s for s in sweep]))
