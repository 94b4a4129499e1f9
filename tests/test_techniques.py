"""Chapter 10's technique table (guide 1.20) is computed: each row's knob is a Plan field,
priced on its example (content review E7: CP had "none (not modelled)", and there was no EP row)."""

import dataclasses
import json
from pathlib import Path

import pytest

from parlab.costmodel.answers.techniques import TECHNIQUES, pays_with, technique_table
from parlab.costmodel.plan.spec import Plan

FIELDS = {f.name for f in dataclasses.fields(Plan)}


def _fell(before_after: str) -> bool:
    before, after = (float(x.replace(",", "")) for x in before_after.split(" -> "))
    return after < before


@pytest.mark.parametrize("t", TECHNIQUES, ids=lambda t: t.name)
def test_each_row_names_real_plan_knobs_and_turns_one(t):
    knobs = {k.split("=")[0].strip() for k in t.knob.split(",")}
    assert knobs <= FIELDS, knobs - FIELDS
    turned = {f for f in FIELDS if getattr(t.base, f) != getattr(t.plan, f)} - {"micro_batches"}
    assert turned & knobs, (t.name, turned)


def test_context_and_expert_parallelism_are_rows_priced_with_their_own_traffic():
    rows = {r[0]: r for r in technique_table()[0]}
    cp = rows["context parallelism (ring, all-gather, Ulysses)"]
    ep = rows["expert parallelism"]
    assert cp[1] == "cp, cp_impl" and _fell(cp[4]) and cp[6].startswith("CP communication")
    assert ep[1] == "ep" and _fell(ep[4]) and ep[6].startswith("EP all-to-all")


def test_memory_savers_save_memory_and_pay_in_a_term_that_grows():
    rows = {r[0]: r for r in technique_table()[0]}
    for name in ("ZeRO-1/2 (sharded optimizer, gradients)", "ZeRO-3 / FSDP", "tensor parallelism",
                 "pipeline parallelism", "recomputation", "offload"):
        assert _fell(rows[name][4]), name
        assert rows[name][6] != "—", name
    assert rows["offload"][6].startswith("optimizer step")
    assert rows["recomputation"][6].startswith("compute: matmuls")


def test_pays_with_is_a_dash_when_nothing_grows():
    t = TECHNIQUES[0]
    before, _ = t.estimates()
    assert pays_with(before, before) == "—"


def test_chapter_10_computes_the_table_instead_of_typing_it():
    nb = json.loads((Path(__file__).parents[1] / "course" / "10_choosing_a_strategy.ipynb").read_text())
    text = "".join("".join(c["source"]) for c in nb["cells"])
    assert "technique_table()" in text and "not modelled" not in text
