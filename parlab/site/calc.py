"""The site's four calculators: their controls as data, and one function each from the controls'
values (strings, as an HTML form gives them) to the rows a page shows and an SVG figure.

The numbers come from the course's engines only: ``parlab.costmodel.estimate`` (memory and step
time), ``parlab.schedules.simulate`` (the pipeline Gantt) and ``parlab.layout.Grid`` (who talks to
whom). This module runs natively and in the reader's browser (Pyodide, ``static/calc.js`` calls
``run``), so it imports nothing beyond the standard library and those pure-Python packages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from parlab.costmodel import (
    CLUSTERS,
    DTYPES,
    LINKS,
    MODELS,
    OFFLOADS,
    RECOMPUTE,
    Plan,
    estimate,
    get_model,
    make_cluster,
)
from parlab.costmodel import SCHEDULES as PLAN_SCHEDULES
from parlab.layout import ORDER, Grid
from parlab.schedules import SCHEDULE_LABELS, Costs, make_schedule, simulate

from . import figures

SAME = "(cluster's)"
ON_OFF = ("off", "on")
DEGREES = tuple(str(2**k) for k in range(7))  # 1 ... 64
DP_DEGREES = tuple(str(2**k) for k in range(11))  # 1 ... 1024


@dataclass(frozen=True)
class Control:
    """One HTML input: a ``<select>`` of ``options`` (read as an int when ``integer``), or a
    number box (``options`` empty) holding an integer in ``low..high``."""

    name: str
    label: str
    default: str
    options: tuple[str, ...] = ()
    low: int = 1
    high: int = 1 << 20
    integer: bool = False


@dataclass(frozen=True)
class Row:
    """One shown number: ``key`` (stable, what a test reads), its label, its text, and the exact
    value it shows (``raw``: the float or Fraction as text)."""

    key: str
    label: str
    shown: str
    raw: str


@dataclass(frozen=True)
class Calculator:
    """A page section: its controls, the chapter (number) that explains it, and its function."""

    name: str
    title: str
    chapter: str
    blurb: str
    controls: tuple[Control, ...]
    compute: Callable[[dict[str, str]], tuple[list[Row], str]]


# -- how numbers are shown (one format per kind of quantity) -------------------------------------
def gigabytes(x: float) -> str:
    return f"{x / 1e9:,.2f} GB"


def seconds(x: float) -> str:
    return f"{x:,.3f} s" if x >= 1 else f"{x * 1e3:,.1f} ms"


def percent(x: float) -> str:
    return f"{x:.1%}"


def count(x: float) -> str:
    return f"{x:,.0f}"


def fraction(x: Fraction) -> str:
    return f"{x} = {float(x):.3f}" if x.denominator != 1 else f"{x}"


def ranks(group: tuple[int, ...] | list[int]) -> str:
    return ", ".join(map(str, group))


def _int(values: dict[str, str], control: Control) -> int:
    text = values.get(control.name, control.default).strip()
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{control.label} must be a whole number, got {text!r}") from None
    if not control.options and not control.low <= n <= control.high:
        raise ValueError(f"{control.label} must be in {control.low}..{control.high}, got {n}")
    return n


def _pick(values: dict[str, str], control: Control) -> str:
    value = values.get(control.name, control.default)
    if value not in control.options:
        raise ValueError(f"{control.label} must be one of {', '.join(control.options)}, got {value!r}")
    return value


def read(calc: Calculator, values: dict[str, str]) -> dict[str, str | int]:
    """The controls' values, checked: a select's choice as text, a number box's as an int."""
    return {c.name: (_int(values, c) if not c.options else int(_pick(values, c)) if c.integer else _pick(values, c))
            for c in calc.controls}


# -- memory and step time: parlab.costmodel.estimate ---------------------------------------------
def plan_of(v: dict) -> tuple[object, object, Plan]:
    """(model, cluster, plan) of a memory or step-time calculator's checked values."""
    model = get_model(v["model"]).with_(seq_len=v["seq_len"])
    overrides = {k: (None if v.get(k, SAME) == SAME else v[k]) for k in ("intra", "inter")}
    cluster = make_cluster(v["cluster"], v["dp"] * v["tp"] * v["pp"], **overrides)
    plan = Plan(dp=v["dp"], tp=v["tp"], pp=v["pp"], zero=v["zero"], micro_batch=v["micro_batch"],
                micro_batches=v["micro_batches"], schedule=v.get("schedule", "1f1b"),
                chunks=v.get("chunks", 1) if v.get("schedule") == "interleaved" else 1,
                recompute=v["recompute"], sequence_parallel=v["sp"] == "on", offload=v["offload"],
                dtype=v["dtype"])
    return model, cluster, plan


def _memory(values: dict[str, str]) -> tuple[list[Row], str]:
    est = estimate(*plan_of(read(MEMORY, values)))
    terms = est.memory_terms()
    rows = [Row(k, k, gigabytes(x), repr(x)) for k, x in terms.items()]
    rows += [Row("total", "total per GPU", gigabytes(est.memory_total), repr(est.memory_total)),
             Row("capacity", f"{est.cluster.gpu.name} memory", gigabytes(est.memory_capacity),
                 repr(est.memory_capacity)),
             Row("fits", "fits", "yes" if est.fits else "no", repr(est.fits)),
             Row("rank", "most loaded GPU", est.rank_label, str(est.rank))]
    return rows, figures.memory_bar(terms, est.memory_capacity, gigabytes)


def _step(values: dict[str, str]) -> tuple[list[Row], str]:
    est = estimate(*plan_of(read(STEP, values)))
    terms = est.time_terms()
    rows = [Row(k, k, seconds(x), repr(x)) for k, x in terms.items()]
    rows += [Row("step", "step time", seconds(est.step_time), repr(est.step_time)),
             Row("mfu", "MFU", percent(est.mfu), repr(est.mfu)),
             Row("tokens", "tokens / s", count(est.tokens_per_s), repr(est.tokens_per_s)),
             Row("memory", "memory per GPU", gigabytes(est.memory_total), repr(est.memory_total)),
             Row("fits", "fits", "yes" if est.fits else "no", repr(est.fits))]
    return rows, figures.time_bar(terms, seconds)


# -- the pipeline Gantt: parlab.schedules ----------------------------------------------------------
def _pipeline(values: dict[str, str]) -> tuple[list[Row], str]:
    v = read(PIPELINE, values)
    schedule = make_schedule(v["schedule"], v["p"], v["m"], v["v"])
    timeline = simulate(schedule, Costs(f=v["f"], b=v["b"], w=v["w"]))
    peaks = timeline.peak_in_flight
    rows = [Row("makespan", "makespan (time units)", fraction(Fraction(timeline.makespan)), str(timeline.makespan)),
            Row("bubble", "bubble fraction", fraction(Fraction(timeline.bubble_fraction)),
                str(timeline.bubble_fraction)),
            Row("peak", "peak activations per stage (micro-batches)", ", ".join(map(str, peaks)),
                ", ".join(map(str, peaks)))]
    return rows, figures.gantt(timeline, SCHEDULE_LABELS[v["schedule"]])


# -- the rank grid: parlab.layout ---------------------------------------------------------------
def _grid(values: dict[str, str]) -> tuple[list[Row], str]:
    v = read(GRID, values)
    grid = Grid(dp=v["dp"], tp=v["tp"], pp=v["pp"])
    rank, per_node = v["rank"], v["gpus_per_node"]
    if rank >= grid.world:
        raise ValueError(f"rank must be below the world size dp x tp x pp = {grid.world}, got {rank}")
    c = grid.coords(rank)
    prev, nxt = grid.pipeline_neighbours(rank)
    rows = [Row("world", "world size", str(grid.world), str(grid.world)),
            Row("coords", "coordinates (tp, dp, pp)", f"{c.tp}, {c.dp}, {c.pp}", f"{c.tp},{c.dp},{c.pp}")]
    for dim in ORDER:
        group = grid.group(dim, rank)
        rows.append(Row(f"{dim}_group", f"its {dim.upper()} group", ranks(group), ranks(group)))
    for dim in ORDER:
        span = grid.span(dim, per_node)
        rows.append(Row(f"{dim}_nodes", f"nodes one {dim.upper()} group spans", str(span.nodes), str(span.nodes)))
    rows.append(Row("neighbours", "previous / next pipeline stage",
                    f"{'-' if prev is None else prev} / {'-' if nxt is None else nxt}", f"{prev},{nxt}"))
    return rows, figures.rank_grid(grid, rank, per_node)


def _plan_controls(step: bool) -> tuple[Control, ...]:
    schedule = (Control("schedule", "schedule", "1f1b", PLAN_SCHEDULES),
                Control("chunks", "chunks v (interleaved)", "2", ("2", "3", "4", "6", "8"), integer=True)) if step else ()
    links = (Control("intra", "intra-node link", SAME, (SAME, *LINKS)),
             Control("inter", "inter-node link", SAME, (SAME, *LINKS))) if step else ()
    return (Control("model", "model", "gpt3-175b", tuple(MODELS)),
            Control("cluster", "cluster", "dgx-a100", tuple(CLUSTERS)), *links,
            Control("dp", "dp", "16", DP_DEGREES, integer=True), Control("tp", "tp", "8", DEGREES, integer=True),
            Control("pp", "pp", "8", DEGREES, integer=True),
            Control("zero", "ZeRO stage", "1", ("0", "1", "2", "3"), integer=True),
            Control("dtype", "dtype", "bf16", DTYPES),
            Control("offload", "offload", "none", OFFLOADS),
            Control("recompute", "recompute", "selective", RECOMPUTE),
            Control("sp", "sequence parallel", "on", ON_OFF),
            Control("seq_len", "sequence length", "2048", high=1 << 20),
            Control("micro_batch", "micro-batch", "1", high=4096),
            Control("micro_batches", "micro-batches per step m", "96", high=1 << 16), *schedule)


MEMORY = Calculator(
    "memory", "Memory per GPU", "09",
    "Model states, activations and allowances of the most loaded GPU of a plan, term by term "
    "(1F1B schedule: the step-time calculator below takes any schedule).",
    _plan_controls(step=False), _memory)
STEP = Calculator(
    "step", "Step time and MFU", "10",
    "The step time of a plan on a cluster, term by term: compute, TP/PP/DP traffic, bubble, optimizer.",
    _plan_controls(step=True), _step)
PIPELINE = Calculator(
    "pipeline", "Pipeline schedule (Gantt)", "04",
    "Every forward (F), backward (B) and weight-gradient (W) op of a schedule on p stages, simulated.",
    (Control("schedule", "schedule", "1f1b", tuple(SCHEDULE_LABELS)),
     Control("p", "stages p", "4", high=16), Control("m", "micro-batches m", "8", high=64),
     Control("v", "chunks v (interleaved)", "2", high=8),
     Control("f", "forward cost F", "1", high=9), Control("b", "backward cost B", "1", high=9),
     Control("w", "weight-gradient cost W", "1", high=9)), _pipeline)
GRID = Calculator(
    "grid", "Rank grid: who talks to whom", "08",
    "Megatron-LM's rank order (tp fastest, then dp, then pp): one rank's TP, DP and PP groups and the nodes they span.",
    (Control("dp", "dp", "2", high=64), Control("tp", "tp", "4", high=64), Control("pp", "pp", "4", high=64),
     Control("gpus_per_node", "GPUs per node", "8", high=64), Control("rank", "rank", "13", low=0, high=1 << 18)),
    _grid)
CALCULATORS: dict[str, Calculator] = {c.name: c for c in (MEMORY, STEP, PIPELINE, GRID)}


def compute(name: str, values: dict[str, str]) -> dict:
    """``{"rows": [...], "svg": "<svg ...>"}``, or ``{"error": "one line naming the value and the
    rule"}`` when the inputs make no valid plan."""
    if name not in CALCULATORS:
        raise ValueError(f"calculator must be one of {', '.join(CALCULATORS)}, got {name!r}")
    try:
        rows, svg = CALCULATORS[name].compute(values)
    except ValueError as err:
        return {"error": str(err)}
    return {"rows": [r.__dict__ for r in rows], "svg": svg}


def run(name: str, values_json: str) -> str:
    """``compute`` with JSON in and out: what the page's JavaScript calls through Pyodide."""
    return json.dumps(compute(name, json.loads(values_json)))
