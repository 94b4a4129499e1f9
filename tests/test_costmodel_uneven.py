"""Uneven pipeline stages in the cost model: Megatron-Core's split rules (first/last stage layers,
the embedding and the loss counted as layers), the bubble of an uneven split against the
schedule simulator, the most-loaded stage's memory, and even splits priced as before."""

from dataclasses import replace
from fractions import Fraction

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.costmodel.plan.memory.stage import stage_memory
from parlab.costmodel.pricing.pipeline_split import bubble_stage_times, layout_text, pipeline_layout
from parlab.costmodel.specs.assumptions import DEFAULT
from parlab.schedules.simulate import Costs, simulate
from parlab.schedules.synchronous import interleaved_1f1b, one_f_one_b

GPT3 = get_model("gpt3-175b")
#: Llama 3 405B's depth (126 layers, Dubey et al. 2024, Table 3) on GPT-3's width
DEEP = replace(GPT3, name="126-layer", layers=126)
LLAMA3_LAYOUT = (7,) + (8,) * 14 + (7,)


def test_126_layers_on_pp16_split_as_llama3_did():
    assert pipeline_layout(126, 16) == LLAMA3_LAYOUT  # the balanced default: one fewer on each end
    assert pipeline_layout(126, 16, 1, embedding=True, loss=True) == LLAMA3_LAYOUT  # 128 slots / 16
    assert pipeline_layout(126, 16, 4, embedding=True, loss=True) == LLAMA3_LAYOUT
    assert pipeline_layout(126, 16, 2) == (6,) + (8,) * 15  # end stages a multiple of v = 2
    assert layout_text(LLAMA3_LAYOUT) == "7 + 14 x 8 + 7"


def test_first_and_last_stage_layers_follow_megatron_rules():
    assert pipeline_layout(126, 16, 1, 6, 8) == (6,) + (8,) * 14 + (8,)
    assert pipeline_layout(96, 8) == (12,) * 8  # even where they divide
    assert pipeline_layout(126, 16, 1, 6) == (6,) + (8,) * 15
    with pytest.raises(ValueError, match="121 layers left by first/last stage layers \\(5, None\\) of 126 must "
                                         "split evenly over the 15 other stages"):
        pipeline_layout(126, 16, 1, 5)
    with pytest.raises(ValueError, match="first_stage_layers=7 must be divisible by the chunks per rank v=2"):
        pipeline_layout(126, 16, 2, 7, 7)
    with pytest.raises(ValueError, match="needs layers \\+ 2 = 128 divisible by pp x chunks = 16 x 16 = 256"):
        pipeline_layout(126, 16, 16, embedding=True, loss=True)


def test_plan_refuses_mixed_or_meaningless_split_knobs_in_one_line():
    with pytest.raises(ValueError, match="cannot be combined with embedding_as_layer"):
        Plan(pp=16, first_stage_layers=7, loss_as_layer=True)
    with pytest.raises(ValueError, match="they need pp >= 2, got pp=1"):
        Plan(first_stage_layers=7)
    with pytest.raises(ValueError, match="first_stage_layers must be"):
        Plan(pp=2, first_stage_layers=0)
    with pytest.raises(TypeError, match="loss_as_layer must be True or False"):
        Plan(pp=2, loss_as_layer="yes")


def test_a_126_layer_model_prices_on_pp16_with_interleaving():
    """Refused before ("layers not divisible by pp x chunks"): now the Llama 3 split."""
    plan = Plan(dp=2, tp=8, pp=16, schedule="interleaved", chunks=2, micro_batches=32, sequence_parallel=True,
                recompute="selective", embedding_as_layer=True, loss_as_layer=True)
    est = estimate(DEEP, make_cluster("dgx-a100", 256), plan)
    assert est.time.facts["layout"] == LLAMA3_LAYOUT
    assert est.time.facts["L"] == 8 and est.time.facts["pace"] == 1  # a full middle stage sets the pace
    # every stage does 8 layers' work: the even bubble (p - 1) / v of the pacing stage's time
    assert est.time.bubble == pytest.approx(15 / 2 * est.time.facts["per_mb"])
    assert "split 7 + 14 x 8 + 7" in est.explain()
    default = estimate(DEEP, make_cluster("dgx-a100", 256), plan.with_(embedding_as_layer=False, loss_as_layer=False))
    assert default.time.facts["layout"] == (6,) + (8,) * 15


@pytest.mark.parametrize("loads", [(7, 8, 8, 8), (3, 8, 8, 8), (8, 3, 8, 8), (7, 8, 7, 8), (8, 7, 7, 8),
                                   (7, 8, 8, 7), (5, 8, 8, 3), (8, 8, 8, 3)])
@pytest.mark.parametrize("v", [1, 2])
def test_closed_form_bubble_against_the_simulator(loads, v):
    """(sum t_i - t_max) / v: exact where the last stage is a slowest one, an upper bound where a
    faster stage follows the slowest (``bubble_stage_times``)."""
    p, m = len(loads), 2 * len(loads)
    f = [Fraction(x) for x in loads]
    schedule = one_f_one_b(p, m) if v == 1 else interleaved_1f1b(p, m, v)
    makespan = simulate(schedule, Costs(f=f, b=[2 * x for x in f], w=[0] * p)).makespan
    bubble = (makespan - m * 3 * max(f)) / (3 * max(f))
    closed = bubble_stage_times(loads, v)
    if loads[-1] == max(loads):
        assert bubble == pytest.approx(closed)
    else:
        assert 0 < bubble < closed


def test_the_default_split_without_interleaving_is_floor_or_ceil_with_light_ends():
    assert pipeline_layout(30, 4) == (7, 8, 8, 7)
    assert pipeline_layout(61, 16) == (3, 3) + (4,) * 13 + (3,)  # DeepSeek-V3's depth on pp = 16
    assert pipeline_layout(96, 64) == (1,) * 16 + (2,) * 32 + (1,) * 16


def test_most_loaded_stage_can_be_the_first_of_the_fullest_middle_ones():
    """96 layers on pp = 64: rank 16 is the first with 2 layers, and holds 48 micro-batches in flight."""
    plan = Plan(dp=1, tp=1, pp=64, micro_batches=64)
    est = estimate(GPT3, make_cluster("dgx-a100", 64), plan)
    assert est.stage.stage == 16 and est.stage.activations.in_flight == 48
    assert est.memory_total == stage_memory(GPT3, plan, 16, DEFAULT).total


def test_most_loaded_stage_can_be_a_middle_one():
    """With a light first stage the second holds more layers and p - 1 micro-batches: its memory is the peak."""
    plan = Plan(dp=1, tp=8, pp=8, micro_batches=8, first_stage_layers=2, last_stage_layers=4)
    assert plan.layout(GPT3) == (2,) + (15,) * 6 + (4,)
    est = estimate(GPT3, make_cluster("dgx-a100", 64), plan)
    assert est.stage.stage == 1 and est.rank == 8  # pp rank 1 (tp fastest)
    assert est.memory_total == stage_memory(GPT3, plan, 1, DEFAULT).total
    assert est.stage.activations.in_flight == 7
    assert est.memory_total > stage_memory(GPT3, plan, "first", DEFAULT).total


@pytest.mark.parametrize("schedule, chunks", [("1f1b", 1), ("interleaved", 2), ("gpipe", 1)])
def test_even_splits_price_as_before(schedule, chunks):
    """Spelling out the even split (first = last = l / pp) changes nothing; the bubble is (p - 1) / v."""
    plan = Plan(dp=2, tp=8, pp=8, micro_batches=16, schedule=schedule, chunks=chunks)
    even = estimate(GPT3, make_cluster("dgx-a100", 128), plan)
    spelled = estimate(GPT3, make_cluster("dgx-a100", 128), plan.with_(first_stage_layers=12, last_stage_layers=12))
    assert (spelled.step_time, spelled.memory_total) == (even.step_time, even.memory_total)
    assert even.time.bubble == 7 / chunks * even.time.facts["per_mb"]
    assert "split" not in even.explain()


def test_search_tries_uneven_interleaved_splits_only_where_no_even_one_exists():
    from parlab.costmodel.search.ranking import _schedules

    def chunks(layers, pp):
        return [v for s, v in _schedules(pp, 2 * pp, layers, ("interleaved",), (2, 4))]

    assert chunks(96, 16) == [2]  # 96 / (16 x 2) divides: no uneven split tried beside it
    assert chunks(126, 16) == [2]  # none divides: the uneven 6 + 15 x 8 (v = 2); v = 4 has none
    assert chunks(96, 32) == []  # no split of 96 over 32 x 2 keeps every rank under 4 layers


def test_the_pacing_stage_is_the_slowest_one():
    """7 + 14 x 8 + 7: a full middle stage (8 layers) is slower than the last (7 layers + logits)
    at GPT-3's width, so the step is priced on 8 layers without the logits; with a 200k
    vocabulary the logits make the lighter last stage of 7 + 8 + 8 + 7 the slower."""
    from parlab.costmodel.pricing.layer_flops import logit_forward_flops

    plan = Plan(dp=2, tp=8, pp=16, micro_batches=32)
    deep = estimate(DEEP, make_cluster("dgx-a100", 256), plan).time.facts
    even = estimate(replace(GPT3, layers=128), make_cluster("dgx-a100", 256), plan).time.facts  # 8 per stage
    assert deep["pace"] == 1 and deep["L"] == 8
    assert deep["flops_mb"] == pytest.approx(even["flops_mb"] - 3 * logit_forward_flops(GPT3, 1, 8))
    wide_vocab = replace(get_model("gpt3-6.7b"), name="30-layer", layers=30, vocab=200_000)
    small = estimate(wide_vocab, make_cluster("dgx-a100", 4), Plan(pp=4, micro_batches=8)).time.facts
    assert small["layout"] == (7, 8, 8, 7) and small["pace"] == 3 and small["L"] == 7
