"""Tensor parallelism per layer (parlab.costmodel.pricing.tensor_parallel): Megatron 1D's collectives
equal step_time's TP term, and Colossal-AI's 2D / 2.5D / 3D reproduce the efficiency table of
Colossal-AI's documentation (docs/source/en/features/*_tensor_parallel.md), by hand."""

from __future__ import annotations

import pytest

from parlab.costmodel import DEFAULT, Plan, alphabeta, get_model, make_cluster, step_time
from parlab.costmodel.pricing.memory import activation_bytes_per_layer
from parlab.costmodel.pricing.params import layer_params_per_gpu
from parlab.costmodel.pricing.tensor_parallel import (
    Collective,
    colossal_table,
    compare_modes,
    layer_collectives,
    layer_cost,
    layer_matrix_params,
    linear_volume,
    tp_grid,
    tp_layer_collectives,
)

GPT3 = get_model("gpt3-175b")


def test_megatron_layer_is_two_all_reduces_forward_and_two_backward():
    b, s, h, t = 2, 2048, 12288, 8
    assert tp_layer_collectives(b, s, h, t) == (
        Collective("forward", "all_reduce", 2, b * s * h, t, "g after attention and MLP"),
        Collective("backward", "all_reduce", 2, b * s * h, t, "f before attention and MLP"))
    sp = tp_layer_collectives(b, s, h, t, sequence_parallel=True)
    assert [(c.phase, c.op, c.count, c.elements) for c in sp] == [
        (ph, op, 2, b * s * h) for ph in ("forward", "backward") for op in ("all_gather", "reduce_scatter")]
    full = tp_layer_collectives(b, s, h, t, recompute="full")
    assert [c.phase for c in full] == ["forward", "backward", "recompute"]
    assert tp_layer_collectives(b, s, h, 1) == ()


def test_sequence_parallel_moves_the_same_ring_bytes_as_the_all_reduce():
    """Korthikanti et al. 2022, Section 4.2.2: all-gather + reduce-scatter = one all-reduce."""
    vol = {sp: sum(c.count * alphabeta.shape(c.op, "ring", c.ranks, c.elements)[1]
                   for c in tp_layer_collectives(1, 2048, 12288, 8, sp)) for sp in (False, True)}
    assert vol[True] == pytest.approx(vol[False]) == 4 * 2 * 7 / 8 * 2048 * 12288


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("recompute", ["none", "full"])
@pytest.mark.parametrize("t", [2, 8])
def test_one_formula_with_step_time(sp, recompute, t):
    """step_time's TP term per micro-batch = L x the sum of tp_layer_collectives' times."""
    model, b = get_model("gpt3-13b"), 2
    cluster = make_cluster("dgx-a100", t)
    plan = Plan(tp=t, micro_batch=b, global_batch=b, sequence_parallel=sp, recompute=recompute)
    f = step_time(model, cluster, plan, DEFAULT).facts
    link = cluster.intra
    cost = layer_cost("1d-sp" if sp else "1d", model, b, t, recompute=recompute)
    per_layer = cost.comm_seconds(link.achievable, link.latency)
    assert f["t_tp_mb"] == pytest.approx(f["L"] * per_layer * (1 - DEFAULT.tp_overlap))
    assert f["n_tp"] // f["L"] == sum(c.count for c in tp_layer_collectives(
        b, model.seq_len, model.hidden, t, False, recompute))


@pytest.mark.parametrize("mode, p, d, table", [
    # hand-computed from the docs' Efficiency tables (bandwidth, latency)
    ("1d", 8, 1, (2 * 7 / 8, 14)),          # 2(P-1)/P, 2(P-1)
    ("2d", 4, 1, (6 * 1 / 2, 6)),           # 6(q-1)/q, q = 2
    ("2d", 16, 1, (6 * 3 / 4, 18)),         # q = 4
    ("2.5d", 8, 2, (3 * 1 * 3 / 4, 6)),     # 3(q-1)(d+1)/(dq), q = 2, d = 2
    ("2.5d", 32, 2, (3 * 3 * 3 / 8, 18)),   # q = 4, d = 2
    ("3d", 8, 1, (6 * 1 / 8, 6)),           # 6(q-1)/q^3, q = 2
    ("3d", 27, 1, (6 * 2 / 27, 12)),        # q = 3
])
def test_colossal_table_and_our_collectives_reproduce_it(mode, p, d, table):
    got = colossal_table(mode, p, d)
    assert (got["bandwidth"], got["latency"]) == pytest.approx(table)
    n = 240  # an N x N matrix times an N x N matrix, as the table assumes
    assert linear_volume(mode, n, n, n, p, d, broadcast="naive") / n**2 == pytest.approx(table[0])


def test_1d_is_megatron_and_the_2_5d_with_depth_one_is_2d():
    for b in (1, 4):
        assert layer_collectives("1d", GPT3, b, 8) == tp_layer_collectives(b, 2048, 12288, 8)
    two = layer_cost("2d", GPT3, 4, 16)
    flat = layer_cost("2.5d", GPT3, 4, 16, depth=1)
    assert (two.volume, two.calls, two.params, two.activations) == (
        flat.volume, flat.calls, flat.params, flat.activations)


def test_summa_counts_by_hand():
    """2D, q = 2, one GPT-3 layer (h = 12288, f = 4h), b = 2, s = 2048: per linear q broadcasts of
    X blocks and of A blocks forward; backward q broadcasts of each and q reduces of each."""
    cost = layer_cost("2d", GPT3, 2, 4)
    assert cost.calls == 4 * 6 * 2  # 4 linears x 6 loops x q steps
    n, h = 2 * 2048, 12288
    x_blocks = 3 * 2 * (n * h + n * h + n * h + n * 4 * h) / 4  # 3 loops x q x block of X, per linear
    a_blocks = 3 * 2 * layer_matrix_params(GPT3) / 4
    assert cost.volume == pytest.approx(2 * (x_blocks + a_blocks))  # pipelined chain: the block once


def test_3d_counts_by_hand():
    cost = layer_cost("3d", GPT3, 4, 8)  # q = 2, b divisible by q^2
    n, h = 4 * 2048, 12288
    # per linear: all-gather X (nk/q^2 out), A (km/q^2), reduce-scatter Y (nm/q^2); backward the same
    per = sum(2 * (1 / 2) * (n * k + k * m + n * m) / 4 for k, m in ((h, 3 * h), (h, h), (h, 4 * h), (4 * h, h)))
    assert cost.volume == pytest.approx(2 * per)
    assert cost.calls == 24 and cost.steps == 24


def test_memory_per_gpu():
    one = layer_cost("1d", GPT3, 1, 8)
    assert one.params == layer_params_per_gpu(GPT3, 8)
    assert one.activations == activation_bytes_per_layer(GPT3, 1, 8)
    full = activation_bytes_per_layer(GPT3, 4, 1)
    assert layer_cost("2d", GPT3, 4, 4).activations == pytest.approx(full / 4)
    assert layer_cost("2.5d", GPT3, 4, 8, depth=2).activations == pytest.approx(full / 8)
    sbh = 2048 * 4 * 12288
    assert layer_cost("3d", GPT3, 4, 8).activations == pytest.approx(14 * sbh / 4 + (full - 14 * sbh) / 8)
    mats = layer_matrix_params(GPT3)
    assert mats == 12 * 12288**2
    assert layer_cost("3d", GPT3, 4, 8).params == pytest.approx(
        mats / 8 + (GPT3.params_per_layer() - mats) / 2)
    assert layer_cost("2.5d", GPT3, 4, 8, depth=2).params == pytest.approx(
        mats / 4 + (GPT3.params_per_layer() - mats) / 2)  # a copy per depth layer


def test_2_5d_sums_weight_gradients_over_depth_once_per_step():
    cost = layer_cost("2.5d", GPT3, 4, 8, depth=2)
    step = [c for c in cost.collectives if c.phase == "step"]
    assert len(step) == 4 and all(c.op == "all_reduce" and c.ranks == 2 for c in step)
    assert cost.step_volume == pytest.approx(2 * layer_matrix_params(GPT3) / 4 * 2 * (1 / 2))


def test_every_mode_computes_a_p_th_of_the_layer():
    flops = {m: c.flops for m, c in compare_modes(GPT3, 16, 64, depth=4).items()}
    assert len(set(flops.values())) == 1


@pytest.mark.parametrize("mode, p, d, b, message", [
    ("2d", 8, 1, 4, r"needs a q x q grid: p=8 is not a square"),
    ("3d", 16, 1, 4, r"needs a q x q x q cube: p=16 is not a cube"),
    ("2.5d", 8, 4, 8, r"p = d q\^2: p=8, depth d=4 leaves p/d=2, not a square"),
    ("2d", 4, 1, 1, r"splits the micro-batch 2 ways: micro_batch=1 must be divisible by 2"),
    ("3d", 8, 1, 2, r"micro_batch=2 must be divisible by 4"),
    ("1d", 0, 1, 1, r"p \(GPUs in the tensor-parallel group\)"),
    ("4d", 8, 1, 1, r"mode"),
])
def test_bad_input_names_the_rule(mode, p, d, b, message):
    with pytest.raises(ValueError, match=message):
        layer_cost(mode, GPT3, b, p, depth=d)


def test_compare_modes_reports_grids_that_do_not_fit():
    got = compare_modes(GPT3, 16, 8, depth=2)
    assert isinstance(got["2d"], str) and "not a square" in got["2d"]
    assert got["3d"].grid.dims == (2, 2, 2) and got["2.5d"].grid.dims == (2, 2, 2)
    assert tp_grid("2.5d", 8, 2).shape == "2 x 2 x 2"
    with pytest.raises(ValueError, match="model"):
        compare_modes("no-such-model", 1, 8)
