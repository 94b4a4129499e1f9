"""Chapter 11's dashboard: model, GPU and answer length -> the decode model's answer time, term by
term, beside guide 4.1's ChatGLM-6B measurements (the efficiency and per-token overhead fitted to
them, ``costmodel.inference.fit_decode``)."""

from __future__ import annotations

import html as html_lib
from dataclasses import dataclass

import ipywidgets as widgets

from parlab.costmodel.pricing.inference import DecodeFit, Generation, fit_decode
from parlab.course.guide_tables import chatglm_inference, measured_pairs
from parlab.viz.html import html_table
from parlab.viz.inference import answer_figure

from .base import Dashboard, model_box

GPU_CHOICES = ("v100", "a100", "a800", "h100", "h200")
GUIDE_GPUS = ("a800", "v100")
LENGTHS = list(range(50, 651, 50))


@dataclass(frozen=True)
class AnswerResult:
    fit: DecodeFit
    gen: Generation
    gpu: str
    chars: int
    guide_model: bool  # the chosen model is the one guide 4.1 measured


class InferenceDashboard(Dashboard):
    """Answer time of one request at batch 1: prefill, weights and KV cache read per token, and the
    fixed overhead per token, with the bandwidth efficiency and overhead fitted to guide 4.1."""

    title = "Inference latency: one answer, token by token"

    def make_controls(self):
        return {
            "model": model_box("chatglm-6b"),
            "gpu": widgets.Dropdown(options=list(GPU_CHOICES), value="a800", description="GPU"),
            "answer_chars": widgets.IntSlider(value=300, min=50, max=600, step=10, description="answer (chars)"),
            "chars_per_token": widgets.FloatSlider(value=1.5, min=1.0, max=2.5, step=0.1,
                                                   description="chars / token"),
        }

    def compute(self, model, gpu, answer_chars, chars_per_token) -> AnswerResult:
        fit = fit_decode(measured_pairs(), "chatglm-6b", chars_per_token)
        gen = fit.predict(gpu, answer_chars, model)
        return AnswerResult(fit, gen, gpu, answer_chars, gen.model.name == fit.model.name)

    def html(self, r: AnswerResult) -> str:
        g, f = r.gen, r.fit
        rows = [[name, seconds] for name, seconds in g.terms().items()]
        rows.append(["total", g.total_s])
        terms = html_table(rows, ["term", "seconds"], {"seconds": ",.3f"}, highlight_last=True)
        facts = [["tokens generated", g.new_tokens], ["ms per token", g.per_token_s * 1e3],
                 ["tokens per second", g.tokens_per_s],
                 ["fitted bandwidth efficiency", f.bandwidth_efficiency],
                 ["fitted overhead (ms / token)", f.overhead_s * 1e3]]
        fact_table = html_table(facts, ["", "value"], {"value": ",.2f"})
        head = (f"<p><b>{html_lib.escape(g.model.name)}</b> on <b>{html_lib.escape(g.gpu.name)}</b>, "
                f"an answer of {r.chars} characters = {g.new_tokens} tokens at {f.chars_per_token:g} "
                f"characters per token: <b>{g.total_s:.2f} s</b></p>")
        note = ("" if r.guide_model else
                '<p style="color:#555;font-size:90%">guide 4.1 measured ChatGLM-6B only: its points are '
                "not shown; this model is priced with the same fitted efficiency and overhead</p>")
        return (head + '<div style="display:flex;gap:24px;align-items:flex-start">' + terms + fact_table
                + "</div>" + note)

    def figure(self, r: AnswerResult):
        gpus = list(dict.fromkeys([r.gpu, *GUIDE_GPUS]))
        modelled = {g: r.fit.curve(g, LENGTHS, r.gen.model) for g in gpus}
        measured = ({g: [(row.answer_chars, row.seconds) for row in chatglm_inference(g)] for g in GUIDE_GPUS}
                    if r.guide_model else {})
        return answer_figure(measured, modelled, (r.chars, r.gen.total_s), r.gen.terms())

    def summary(self, r: AnswerResult) -> str:
        return (f"{r.gen.model.name} on {r.gen.gpu.name}: {r.chars} characters = {r.gen.new_tokens} tokens "
                f"in {r.gen.total_s:.2f} s ({r.gen.per_token_s * 1e3:.1f} ms/token)")
