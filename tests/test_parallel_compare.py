"""DP, TP and PP side by side (parlab.parallel.compare): on 4 local ranks, one step of the same
TinyGPT under each strategy computes the same loss, and what each rank holds and sends equals the
cost model's prediction byte for byte; the guide 1.8 ranking of memory and traffic comes out."""

import pytest

from parlab.comm import World
from parlab.parallel.compare import (
    STATE_TERMS,
    STRATEGIES,
    CompareSetting,
    agree,
    check_strategy,
    measure_all,
    model_state_rows,
    real_model_rows,
    same_loss,
    summary_rows,
)
from parlab.parallel.model import GPTConfig, TinyGPT, count_params

SETTING = CompareSetting(config=GPTConfig(n_layer=4, hidden=32, n_head=4, seq_len=16), steps=1)


@pytest.fixture(scope="module")
def per_rank():
    with World(4, backend="local", timeout=60) as world:
        yield world.run(measure_all, SETTING)


def test_the_three_strategies_train_the_same_step(per_rank):
    assert same_loss(per_rank, atol=1e-4)


def test_measured_bytes_equal_the_cost_model_s_for_every_rank(per_rank):
    rows = model_state_rows(per_rank, SETTING)
    assert {r[0] for r in rows} == set(STRATEGIES) and {r[1] for r in rows} == {0, 1, 2, 3}
    assert {r[2] for r in rows} >= set(STATE_TERMS) | {"all_reduce bytes sent", "p2p bytes sent"}
    bad = [r for r in rows if r[3] != round(r[4])]
    assert agree(rows) and not bad, bad


def test_the_guide_s_ranking_memory_tp_and_pp_below_dp_traffic_pp_lowest(per_rank):
    n = count_params(TinyGPT(SETTING.config))
    dp, tp, pp = summary_rows(per_rank, n)
    assert dp[1] == 16 * n and dp[2] == 1.0  # a full copy: weights, grads, Adam m and v in fp32
    assert tp[1] < dp[1] / 2 and pp[1] < dp[1] / 2
    assert pp[6] < dp[6] < tp[6]  # bytes sent per step: PP < DP < TP (guide 1.8's communication)
    assert tp[4] > dp[4] == 1  # TP: many collectives per step; DP (one bucket): one
    assert (dp[7], tp[7], pp[7]) == ("all_reduce", "all_reduce", "p2p")


def test_on_a_real_model_dp_does_not_fit_and_tp_pays_on_a_slow_link():
    nvlink = {r[0]: r for r in real_model_rows("llama-7b", "dgx-a100", 8)}
    pcie = {r[0]: r for r in real_model_rows("llama-7b", "pcie-10gbe", 8)}
    assert nvlink["data parallel"][2] == "no" and nvlink["tensor parallel"][2] == "yes"
    assert pcie["tensor parallel"][4] < nvlink["tensor parallel"][4] / 2  # MFU
    assert pcie["pipeline parallel"][4] > 0.9 * nvlink["pipeline parallel"][4]


def test_bad_settings_name_the_rule():
    with pytest.raises(ValueError, match="unknown strategy 'ep'"):
        check_strategy("ep")
    with pytest.raises(ValueError, match="micro_batches must be a positive integer"):
        CompareSetting(micro_batches=0)
