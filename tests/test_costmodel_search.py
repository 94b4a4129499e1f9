"""The advisor: every valid plan enumerated, the ones that fit ranked by step time."""

import pytest

from parlab.costmodel import (
    Plan,
    candidate_plans,
    estimate,
    factorizations,
    get_model,
    make_cluster,
    search,
)
from parlab.costmodel.answers.scenarios import (
    comm_time_vs_bandwidth,
    memory_vs_dp,
    step_vs_inter_link,
    zero3_vs_3d,
)


def test_factorizations_cover_every_dp_tp_pp_triple():
    triples = list(factorizations(1024))
    assert len(triples) == len(set(triples)) == 66  # C(12, 2) for 2^10
    assert all(dp * tp * pp == 1024 for dp, tp, pp in triples)


def test_candidates_skip_duplicates_and_break_no_rule():
    m = get_model("gpt3-13b")
    plans = list(candidate_plans(m, 16, 64))
    assert len(plans) == len(set(plans))
    assert not [p for p in plans if p.dp == 1 and p.zero > 0]
    assert not [p for p in plans if p.tp == 1 and p.sequence_parallel]
    assert all(m.heads % p.tp == 0 and p.batch == 64 for p in plans)


@pytest.fixture(scope="module")
def result():
    return search("llama-13b", make_cluster("dgx-a100", 64), 256)


def test_search_ranks_fitting_plans_by_step_time(result):
    times = [e.step_time for e in result.ranked]
    assert times == sorted(times) and result.fitting == len(result.ranked) > 0
    assert all(e.fits for e in result.ranked)
    assert result.tried >= result.valid >= result.fitting


def test_search_results_equal_a_direct_estimate(result):
    best = result.best()
    again = estimate(best.model, best.cluster, best.plan)
    assert again.step_time == best.step_time and again.memory_total == best.memory_total


def test_search_rows_and_narrowing_choices(result):
    assert len(result.rows(3)) == 3 and result.rows(3)[0][0] == 1
    only = search("llama-13b", make_cluster("dgx-a100", 64), 256, zero_stages=(0,), recompute=("full",),
                  micro_batches=(1,))
    assert {e.plan.zero for e in only.ranked} == {0} and {e.plan.micro_batch for e in only.ranked} == {1}


def test_nothing_fits_says_what_to_change():
    tiny = search("gpt3-175b", make_cluster("dgx-a100", 8), 8, recompute=("none",))
    with pytest.raises(ValueError, match="no valid plan fits in memory"):
        tiny.best()


def test_unknown_offload_choice_is_named():
    with pytest.raises(ValueError, match="unknown offload 'disk'"):
        search("llama-7b", make_cluster("dgx-a100", 8), 8, offload=("disk",))


# -- chapter series ------------------------------------------------------------------------------
def test_memory_per_gpu_falls_with_dp_only_for_what_zero_shards():
    dps = [1, 8, 64]
    series = memory_vs_dp("llama-7b", dps)
    z0 = [e.memory_total for e in series[0]]
    z3 = [e.memory_total for e in series[3]]
    assert z0[0] == pytest.approx(z0[-1])  # plain DP: every GPU holds everything
    assert z3[-1] < z3[1] < z3[0]
    assert all(series[z][-1].memory_total >= series[z + 1][-1].memory_total for z in range(3))


def test_zero3_vs_3d_points_hold_the_best_of_each_family():
    points = zero3_vs_3d("gpt3-13b", [16, 32], 256)
    for p in points:
        assert p.zero3.plan.zero == 3 and p.zero3.plan.tp == p.zero3.plan.pp == 1
        assert p.three_d.plan.zero <= 1


def test_comm_time_falls_inversely_with_bandwidth():
    slow, fast = comm_time_vs_bandwidth(13e9, 4, [64, 800], latency_us=0)
    assert slow / fast == pytest.approx(800 / 64)


def test_the_same_plan_on_a_slower_network_takes_longer():
    plan = Plan(dp=8, tp=8, global_batch=64)
    fast, slow = step_vs_inter_link("llama-13b", plan, ["ib-ndr", "10gbe"])
    assert slow.step_time > fast.step_time
