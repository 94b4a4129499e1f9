"""The drill and the chapters give the same number to the same question (issue 19).

Each pair names a drill card, the chapter that answers the same question, the parlab call that
chapter's code makes (checked to be still in the chapter: a pair cannot keep testing a call the
chapter dropped) and that call written out for the card's drawn parameters. For every seed whose
parameters fall in the chapter's setting (``when``), the card's answer equals the chapter's figure;
where the card's text prints a figure the chapter prints (``shown``), it prints the chapter's value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import pytest

from parlab.costmodel import (
    bloom_table,
    get_gpu,
    get_model,
    guide_1_19,
    largest_model,
    model_state_memory,
    one_gpu_levers,
    zero_paper_example,
)
from parlab.costmodel.answers.phases import one_gpu_walk
from parlab.costmodel.answers.scenarios import comm_time_vs_bandwidth
from parlab.costmodel.answers.walls import compute_wall, memory_wall
from parlab.course import COURSE_DIR
from parlab.course import derivations as d
from parlab.course.guide_tables import line_fit
from parlab.drill import get
from parlab.schedules import make_schedule, naive, peak_activations, simulate

SEEDS = 40  # seeds per card: enough to draw every model, GPU and recompute setting the chapters price


@dataclass(frozen=True)
class Pair:
    """A drill card and the chapter that answers its question: ``calls`` are in the chapter's code,
    ``figure(params)`` is the chapter's number for the card's parameters."""

    card: str
    chapter: str  # notebook file name prefix, "09"
    calls: tuple[str, ...]
    figure: Callable[[dict], object]
    when: Callable[[dict], bool] = lambda p: True
    shown: Callable[[dict], str] | None = None  # text the card must print, from the chapter's figure
    seeds: int = SEEDS  # fewer for the pipeline cards, whose every pose runs the simulator


def _yes(fits: bool) -> str:
    return "yes" if fits else "no"


def _walk_total(p: dict) -> float:
    # chapter 09: walk = one_gpu_walk("llama-7b"); walk[-1].total is the estimate (every term)
    dtype = "bf16" if get_gpu(p["gpu"]).bf16 else "fp16"  # what the card's prompt states
    return one_gpu_walk(p["model"], 1, p["recompute"], p["gpu"], dtype=dtype)[-1].total


def _lever(p: dict):
    # chapter 10, guide 3.3: one_gpu_levers(model), row 0 the plain fine-tune, row 1 + full recomputation
    return one_gpu_levers(p["model"])[0 if p["recompute"] == "none" else 1]


def _share(idle_over_work: float) -> float:
    """Chapter 14's (p-1)/(vm) is idle time over useful time; the drill and chapter 04 ask for the
    idle share of the whole step: x / (1 + x)."""
    return idle_over_work / (1 + idle_over_work)


def _tp_layer(p: dict) -> float:
    spec = get_model(p["model"])
    return d.tp_bytes_per_layer(p["micro_batch"], spec.seq_len, spec.hidden, p["tp"]).total


PAIRS = (
    # -- does full training fit on one GPU: the one-GPU walk (09), its levers table (10) --------------
    Pair("fits-one-gpu", "09", ("one_gpu_walk(",),
         lambda p: _yes(_walk_total(p) <= get_gpu(p["gpu"]).memory_bytes),
         shown=lambda p: f"= {_walk_total(p) / 1e9:.4g} GB"),
    Pair("fits-one-gpu", "10", ("one_gpu_levers(",), lambda p: _yes(_lever(p).fits),
         when=lambda p: p["gpu"] == "a100-80gb", shown=lambda p: f"= {_lever(p).total / 1e9:.4g} GB"),
    # -- LLaMA-7B's model states: chapters 00, 01 and the walk's first row -----------------------------
    Pair("llama7b-choice", "09", ("one_gpu_walk(",), lambda p: None,
         shown=lambda p: f"{one_gpu_walk('llama-7b')[0].total / 1e9:.1f} GB of model states"),
    Pair("llama7b-choice", "00", ("model_state_memory(",), lambda p: None,
         shown=lambda p: f"{model_state_memory(get_model('llama-7b').num_params(), 'mixed', 'adam').total / 1e9:.1f} GB"),
    Pair("80gb-train", "01", ("largest_model(capacity, \"mixed\", \"adam\")",),
         lambda p: largest_model(80e9, "mixed", "adam")),
    Pair("gpt3-years", "01", ("compute_wall(\"gpt3-175b\", tokens=300e9, gpu=\"a100-80gb\"",),
         lambda p: compute_wall("gpt3-175b", tokens=300e9, gpu="a100-80gb", n_gpus=1, utilisation=0.5).seconds),
    Pair("gen-gpus-to-hold", "01", ("MemoryWallDashboard()",),
         lambda p: memory_wall(p["model"], "mixed", "adam", 1, "full").fit(p["gpu"]).min_gpus),
    # -- ZeRO's model states: the derivation (14) and the paper's example (07) ------------------------
    Pair("gen-zero-stage", "14", ("d.zero_states(",), lambda p: d.zero_states(p["n_params"], p["dp"], p["stage"]).total),
    Pair("stage3-saving", "14", ("d.zero_states(",),
         lambda p: d.zero_states(p["n_params"], p["dp"], 2).total - d.zero_states(p["n_params"], p["dp"], 3).total),
    Pair("zero3-paper", "07", ("zero_paper_example()",), lambda p: zero_paper_example()[3] * 1e9),
    Pair("zero3-paper", "14", ("d.zero_states(7.5e9, 64, stage)",), lambda p: d.zero_states(7.5e9, 64, 3).total),
    # -- ZeRO-3's traffic: guide 1.19 as chapter 07 prices it ---------------------------------------------
    Pair("guide-1-19-bytes", "07", ("guide_1_19(get_model(\"llama-65b\"), nodes=2)",),
         lambda p: guide_1_19(get_model("llama-65b"), nodes=2).bytes_fp16),
    # -- tensor parallelism's bytes and activations: the derivations (14) ----------------------------------
    Pair("gen-tp-layer", "14", ("d.tp_bytes_per_layer(",), _tp_layer, when=lambda p: p["recompute"] == "none"),
    Pair("gen-activations", "14", ("d.activation_terms(",),
         lambda p: d.activation_terms(p["model"], p["micro_batch"]).total,
         when=lambda p: p["tp"] == 1 and p["recompute"] == "none" and not p["sequence_parallel"]),
    # -- the pipeline bubble: the simulator (04), the closed form (14) ------------------------------------
    Pair("gen-bubble", "04", ("simulate(make_schedule(",),
         lambda p: simulate(make_schedule(p["schedule"], p["p"], p["m"])).bubble_fraction, seeds=8),
    Pair("gen-bubble", "14", ("d.bubble_fraction(",), lambda p: _share(d.bubble_fraction(p["p"], p["m"])), seeds=8),
    Pair("gen-interleaved", "04", ("make_schedule(name, p, m, v=2)",),
         lambda p: simulate(make_schedule("interleaved", p["p"], p["m"], v=p["v"])).bubble_fraction, seeds=6),
    Pair("gen-interleaved", "14", ("d.bubble_fraction(",),
         lambda p: _share(d.bubble_fraction(p["p"], p["m"], p["v"])), seeds=6),
    Pair("gen-naive-bubble", "04", ("simulate(naive(p))",), lambda p: simulate(naive(p["p"])).bubble_fraction,
         seeds=8),
    Pair("gen-in-flight", "04", ("peak_activations(",),
         lambda p: peak_activations(make_schedule("1f1b", p["p"], p["m"]))[p["stage"]]),
    # -- the network: gradients over the guide's links (10), the memory-bandwidth gap (11), BLOOM (10) ----
    Pair("gen-multinode", "10", ("comm_time_vs_bandwidth(grads,",),
         lambda p: comm_time_vs_bandwidth(2 * p["n_params"], p["nodes"], [p["gbit"]], latency_us=p["latency_us"],
                                          efficiency=p["efficiency"])[0]),
    Pair("hbm-a800-v100", "11", ("lines['v100'].slope / lines['a800'].slope - 1",), lambda p: None,
         shown=lambda p: f"V100 only {line_fit('v100').slope / line_fit('a800').slope - 1:.0%} slower"),
    Pair("bloom-160-memory", "10", ("bloom_table()",),
         lambda p: next(r for r in bloom_table() if r.dp == 2).measured_gb * 1e9),
)


@cache
def posed(key: str, seed: int):
    return get(key).pose(seed)


@cache
def chapter_code(prefix: str) -> str:
    (path,) = COURSE_DIR.glob(f"{prefix}_*.ipynb")
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _ids(pair: Pair) -> str:
    return f"{pair.card}@{pair.chapter}"


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_the_chapter_still_makes_the_call(pair):
    code = chapter_code(pair.chapter)
    for call in pair.calls:
        assert call in code, f"chapter {pair.chapter} no longer calls {call!r}: re-pair {pair.card}"


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_the_card_gives_the_chapters_number(pair):
    matched = 0
    for seed in range(pair.seeds if get(pair.card).generated else 1):
        card = posed(pair.card, seed)
        if not pair.when(card.params):
            continue
        matched += 1
        expected = pair.figure(card.params)
        if expected is not None:
            if isinstance(expected, (str, Fraction, int)):
                assert card.answer == expected, (pair.card, seed, card.params)
            else:
                assert card.answer == pytest.approx(expected, rel=1e-12), (pair.card, seed, card.params)
        if pair.shown is not None:
            text = f"{card.prompt}\n{card.explanation}"
            assert pair.shown(card.params) in text, (pair.card, seed, pair.shown(card.params), text)
    assert matched, f"no seed of {pair.card} poses chapter {pair.chapter}'s setting"
