"""Chapter 03's dashboard recomputes from the DDP cost model and turns bad input into a message."""

from __future__ import annotations

import pytest

from parlab.costmodel.plan.data_parallel import ddp_step, exposed_communication, scaling_crossover
from parlab.widgets.data_parallel import DataParallelDashboard


@pytest.fixture(scope="module")
def dash():
    return DataParallelDashboard()


def test_initial_state_shows_both_schedules_and_memory(dash):
    assert dash.last_error is None and dash.png
    out = dash.output.value
    assert "overlap (DDP)" in out and "all-reduce after backward" in out
    on = ddp_step("1.5B", 64, "ib-hdr", micro_batch=4)
    assert f"{on.step_s * 1e3:,.1f}" in out and f"{on.buckets} buckets" in out
    assert dash.plain_text().splitlines()[-1].startswith("64 GPUs, ")


def test_moving_link_and_bucket_updates_the_numbers(dash):
    dash.controls["link"].value = "10gbe"
    dash.controls["bucket_mb"].value = 1600
    want = ddp_step("1.5B", 64, "10gbe", micro_batch=4, bucket_mb=1600)
    assert f"{want.step_s * 1e3:,.1f}" in dash.output.value
    dash.controls["link"].value = "ib-hdr"
    dash.controls["bucket_mb"].value = 25


def test_bad_model_clears_the_result_and_names_the_rule(dash):
    dash.controls["model"].value = "no-such-model"
    assert dash.last_error and "model" in dash.last_error
    assert dash.png == b"" and "no result" in dash.output.value
    dash.controls["model"].value = "1.5B"
    assert dash.last_error is None and dash.png


def test_overlap_hides_what_fits_behind_backward():
    # two buckets of 1 s each behind a 4 s backward: the second starts at 4 s, ends at 5 s
    assert exposed_communication(4.0, [1.0, 1.0]) == pytest.approx(1.0)
    assert exposed_communication(4.0, [0.5] * 4) == pytest.approx(0.5)
    assert exposed_communication(1.0, [3.0]) == pytest.approx(3.0)  # one bucket: nothing hides
    on = ddp_step("1.5B", 64, "ib-hdr", micro_batch=4)
    off = ddp_step("1.5B", 64, "ib-hdr", micro_batch=4, overlap=False)
    assert off.exposed_s == off.comm_s and on.exposed_s < on.comm_s
    assert on.step_s == pytest.approx(on.compute_s + on.exposed_s)


def test_accumulation_sends_once_per_step():
    one = ddp_step("1.5B", 64, "ib-hdr", micro_batch=4, accumulation=1)
    four = ddp_step("1.5B", 64, "ib-hdr", micro_batch=4, accumulation=4)
    assert four.comm_s == one.comm_s and four.compute_s == pytest.approx(4 * one.compute_s)
    assert four.step_s / 4 < one.step_s


def test_crossover_comes_sooner_on_slower_links():
    fast, slow = scaling_crossover("1.5B", "ib-hdr", 512), scaling_crossover("1.5B", "10gbe", 512)
    assert slow < fast
    step = ddp_step("1.5B", fast, "ib-hdr", micro_batch=512 // fast)
    half = ddp_step("1.5B", fast // 2, "ib-hdr", micro_batch=1024 // fast)
    assert step.comm_s > step.backward_s and half.comm_s <= half.backward_s


@pytest.mark.parametrize("arg", ["gpus", "micro_batch", "bucket_mb", "accumulation"])
def test_bad_numbers_name_the_argument(arg):
    with pytest.raises(ValueError, match=arg):
        ddp_step("1.5B", **{"gpus": 8, "link": "ib-hdr", arg: 0})
