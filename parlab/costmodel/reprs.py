"""Short ``repr`` and ``_repr_html_`` for the cost model's public result types.

A ``search(...)`` result holds thousands of ``Estimate``s, each with its model, cluster, plan,
assumptions and term breakdowns: the dataclass repr of one ran to 5.9 million characters, which
a notebook cell or a REPL line ending with it printed whole (issue 20). Here every result type
prints one summary line (its class, what it is of, its key figures), and the collections of
plans their top ``TOP`` plans on the lines below; ``_repr_html_`` draws those plans as a table
in a notebook. The fields themselves are unchanged (``dataclasses.fields``, ``.ranked``, ...).

``install()`` (run by ``parlab.costmodel`` on import) sets these methods on the classes that
``result_types()`` lists, so the classes keep one job (the model) and the presentation lives
here; tests/test_costmodel_reprs.py fails if a public result type is missing from the list.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable

TOP = 3  # plans listed under a search's or an advice's summary line
HTML_TOP = 10  # plans in their notebook table
MAX_VALUE = 48  # characters of one field's value in a generic summary
MAX_REPR = 600  # no summary line is longer (a field list is cut with '...')


def label(value: object) -> str:
    """A value in a few words: a model by name, a plan by ``describe()``, an estimate by its
    plan and step time, a list by its length and kind, a number to 4 digits."""
    from parlab.costmodel.plan.estimate import Estimate
    from parlab.costmodel.plan.spec import Plan
    from parlab.costmodel.specs.cluster import Cluster
    from parlab.costmodel.specs.models import ModelSpec
    from parlab.tables import human_bytes, human_seconds

    if isinstance(value, Estimate):
        return (f"<{value.plan.describe()}: {human_seconds(value.step_time)}, "
                f"{human_bytes(value.memory_total)}>")
    if isinstance(value, Plan):
        return f"<{value.describe()}>"
    if isinstance(value, ModelSpec):
        return value.name
    if isinstance(value, Cluster):
        return f"<{value.n_gpus:,} x {value.gpu.name}>"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and len(value) > 3:
        kinds = {type(v).__name__ for v in value}
        return f"[{len(value)} {kinds.pop() if len(kinds) == 1 else 'items'}]"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(label(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict) and len(value) > 4:
        return f"{{{len(value)} entries}}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"<{type(value).__name__}>"
    text = repr(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def summary_repr(obj: object) -> str:
    """'ClassName(field=value, ...)' with each value's ``label``, at most ``MAX_REPR`` chars."""
    parts = [f"{f.name}={label(getattr(obj, f.name))}" for f in dataclasses.fields(obj) if f.repr]
    text = f"{type(obj).__name__}({', '.join(parts)})"
    return text if len(text) <= MAX_REPR else text[: MAX_REPR - 4] + "...)"


def _plans(estimates: list) -> list[str]:
    return [f"  {i + 1}. {label(e)[1:-1]}" for i, e in enumerate(estimates[:TOP])]


def estimate_repr(est) -> str:
    from parlab.tables import human_bytes, human_seconds

    return (f"Estimate({est.model.name} on {label(est.cluster)[1:-1]}, {est.plan.describe()}: "
            f"memory {human_bytes(est.memory_total)} of {human_bytes(est.memory_capacity)} "
            f"({'fits' if est.fits else 'does NOT fit'}), step {human_seconds(est.step_time)}, "
            f"MFU {est.mfu:.1%}; .explain() for every term)")


def search_repr(result) -> str:
    head = f"SearchResult({result.counts()}" + (f"; {result.reason}" if result.reason else "")
    if not result.ranked:
        return head + ")"
    return "\n".join([head + f"; the fastest {min(TOP, len(result.ranked))}, of .ranked:",
                      *_plans(result.ranked)]) + ")"


def advice_repr(advice) -> str:
    head = (f"Advice({advice.model.name} on {label(advice.cluster)[1:-1]}, global batch "
            f"{advice.global_batch:,}: {advice.result.counts()}"
            + ("; only with CPU offload" if advice.offload_needed else ""))
    if not advice.result.ranked:
        return head + ")"
    return "\n".join([head + "; fastest first (.reasons() says why):",
                      *_plans(advice.result.ranked)]) + ")"


def plans_html(estimates: list, caption: str) -> str:
    """The fastest ``HTML_TOP`` plans as an HTML table (plan, memory, step time, MFU)."""
    from parlab.tables import human_bytes, human_seconds

    rows = "".join(
        f"<tr><td>{i + 1}</td><td style='text-align:left'>{html.escape(e.plan.describe())}</td>"
        f"<td>{human_bytes(e.memory_total)}</td><td>{human_seconds(e.step_time)}</td>"
        f"<td>{e.mfu:.1%}</td></tr>" for i, e in enumerate(estimates[:HTML_TOP]))
    return (f"<table><caption style='text-align:left'>{html.escape(caption)}</caption>"
            f"<tr><th>#</th><th>plan</th><th>memory per GPU</th><th>step</th><th>MFU</th></tr>"
            f"{rows}</table>")


def search_html(result) -> str:
    return plans_html(result.ranked, f"SearchResult: {result.counts()}")


def advice_html(advice) -> str:
    return plans_html(advice.result.ranked, advice_repr(advice).splitlines()[0])


def estimate_html(est) -> str:
    from parlab.tables import human_bytes, human_seconds

    terms = [(t.name, human_bytes(t.value)) for t in est.memory_breakdown()] + \
        [(t.name, human_seconds(t.value)) for t in est.time_breakdown()]
    rows = "".join(f"<tr><td style='text-align:left'>{html.escape(n)}</td><td>{v}</td></tr>"
                   for n, v in terms)
    return (f"<table><caption style='text-align:left'>{html.escape(estimate_repr(est))}</caption>"
            f"<tr><th>term</th><th>value</th></tr>{rows}</table>")


def result_types() -> dict[type, tuple[Callable, Callable | None]]:
    """Each public result type and its (repr, html) functions."""
    from parlab.costmodel.answers.scenarios import (
        Guide119,
        ScalingPoint,
        TPWithoutNVLink,
        Zero3Ranking,
    )
    from parlab.costmodel.answers.single_gpu import Lever
    from parlab.costmodel.answers.validation import BloomRow, ErrorSummary, MegatronRow, Zero3Row
    from parlab.costmodel.answers.walls import ComputeWall, GPUFit, MemoryWall
    from parlab.costmodel.plan.estimate import Estimate
    from parlab.costmodel.plan.memory.activations import StageActivations
    from parlab.costmodel.plan.memory.stage import StageMemory
    from parlab.costmodel.plan.memory.zero_compare import Zero3VsZero2
    from parlab.costmodel.plan.step_time import StepTime
    from parlab.costmodel.pricing.inference import DecodeFit, Generation, GPUGap
    from parlab.costmodel.pricing.memory import ModelStateMemory
    from parlab.costmodel.search.advisor import Advice, GuideRule, Verdict
    from parlab.costmodel.search.ranking import SearchResult

    special = {Estimate: (estimate_repr, estimate_html), SearchResult: (search_repr, search_html),
               Advice: (advice_repr, advice_html)}
    generic = [Verdict, GuideRule, StepTime, StageMemory, StageActivations, Zero3VsZero2,
               ModelStateMemory, ScalingPoint, Guide119, TPWithoutNVLink, Zero3Ranking, MegatronRow,
               BloomRow, Zero3Row, ErrorSummary, Generation, DecodeFit, GPUGap, GPUFit, MemoryWall,
               ComputeWall, Lever]
    return special | {cls: (summary_repr, None) for cls in generic}


def install() -> None:
    """Set ``__repr__`` (and ``_repr_html_`` where a table helps) on every result type."""
    for cls, (text, table) in result_types().items():
        cls.__repr__ = text
        if table is not None:
            cls._repr_html_ = table
