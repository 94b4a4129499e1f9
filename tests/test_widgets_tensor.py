"""Chapter 05's dashboard recomputes from the cost model and turns bad input into a message."""

from __future__ import annotations

import pytest

from parlab.costmodel.pricing.tensor_parallel import compare_on_link
from parlab.widgets.tensor import TensorParallelDashboard


@pytest.fixture(scope="module")
def dash():
    return TensorParallelDashboard()


def test_initial_state_shows_every_mode_that_fits(dash):
    assert dash.last_error is None and dash.png
    out = dash.output.value
    for label in ("Megatron 1D", "Megatron 1D + SP", "2.5D (Tesseract)", "3D"):
        assert label in out
    assert "not a square" in out  # 2D does not fit 8 GPUs
    assert dash.plain_text().splitlines()[-1].startswith("p=8, per layer comm")


def test_moving_the_link_and_degree_updates_the_numbers(dash):
    want = compare_on_link("gpt3-175b", 8, 8, "pcie4", "a100-80gb", 2)
    dash.controls["link"].value = "pcie4"
    assert f"{want[0].comm_s * 1e3:,.2f}" in dash.output.value
    dash.controls["p"].value = 16
    assert "2D (Optimus, SUMMA)" in dash.output.value and "not a cube" in dash.output.value
    dash.controls["p"].value = 8
    dash.controls["link"].value = "nvlink3-a100"


def test_bad_input_clears_the_result_and_names_the_rule(dash):
    dash.controls["model"].value = "no-such-model"
    assert dash.last_error and "model" in dash.last_error
    assert dash.png == b"" and "no result" in dash.output.value
    dash.controls["model"].value = "gpt3-175b"
    assert dash.last_error is None and dash.png


def test_a_micro_batch_the_grid_cannot_split_is_reported_per_mode(dash):
    dash.controls["micro_batch"].value = 1
    assert "micro_batch=1 must be divisible by 4" in dash.output.value  # 3D splits the batch q^2 ways
    assert "Megatron 1D" in dash.output.value and dash.last_error is None
    dash.controls["micro_batch"].value = 8
