"""One GPU's memory per phase, and the walk from 16 B/param to the estimate's total (issue 19, items
5 and 9): the phases regroup the estimate's terms, the larger is its total, and recomputation moves
the forward/backward phase."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster, model_state_memory
from parlab.costmodel.answers.phases import (
    TERMS,
    one_gpu_fit,
    one_gpu_walk,
    step_phases,
    term_labels,
)
from parlab.costmodel.answers.walls import memory_wall

LLAMA = get_model("llama-7b")
ONE = make_cluster("dgx-a100", 1)


@pytest.mark.parametrize("plan", [Plan(), Plan(micro_batch=3), Plan(recompute="full"), Plan(fp32_grads=True),
                                  Plan(dtype="fp32"), Plan(zero=2, offload="optimizer")],
                         ids=lambda p: p.describe())
def test_the_larger_phase_is_the_estimate_s_total(plan):
    est = estimate(LLAMA, ONE, plan)
    ph = step_phases(est)
    assert ph.total == pytest.approx(est.memory_total, rel=1e-12)
    assert tuple(ph.forward_backward.terms) == TERMS == tuple(term_labels(est))
    assert ph.forward_backward.terms["fp32 gradient copy"] == 0 == ph.optimizer_step.terms["activations"]


def test_recompute_lowers_the_forward_backward_phase_and_the_step_sets_llama_s_peak():
    # issue 19 item 9: the 16-bit-gradient plan's total is the same under every policy, because
    # the optimizer step's fp32 copy (4 B/param) is larger than the activations of micro-batch 3
    by = {r: step_phases(estimate(LLAMA, ONE, Plan(micro_batch=3, recompute=r, fp32_grads=False)))
          for r in ("none", "selective", "full")}
    fb = {r: p.forward_backward.total for r, p in by.items()}
    assert fb["full"] < fb["selective"] <= fb["none"] and fb["none"] - fb["full"] > 20e9
    assert all(p.peak is p.optimizer_step for p in by.values())
    assert "optimizer step sets the peak" in by["full"].why()
    # with fp32 gradients there is no copy: the forward/backward pass sets the peak, recompute lowers it
    fp32 = {r: step_phases(estimate(LLAMA, ONE, Plan(micro_batch=3, recompute=r, fp32_grads=True)))
            for r in ("none", "full")}
    assert all(p.peak is p.forward_backward for p in fp32.values())
    assert fp32["full"].total < fp32["none"].total - 20e9
    assert "recomputation lowers the total" in fp32["none"].why()


@pytest.mark.parametrize("fp32_grads", [False, True])
def test_the_walk_goes_from_the_zero_paper_to_the_estimate_term_by_term(fp32_grads):
    rows = one_gpu_walk("llama-7b", fp32_grads=fp32_grads)
    assert [r.term for r in rows][:2] == ["model states", "activations"]
    # ch00/01: 16 B/param; ch01's memory wall: + activations; ch06/09/11: the estimate
    assert rows[0].total == model_state_memory(LLAMA.num_params(), "mixed", "adam").total
    assert rows[1].total == pytest.approx(memory_wall("llama-7b", "mixed", "adam", 1, "none").total, rel=1e-12)
    want = estimate(LLAMA, ONE, Plan(fp32_grads=fp32_grads)).memory_total
    assert rows[-1].total == pytest.approx(want, rel=1e-12)
    assert sum(r.added for r in rows) == pytest.approx(want, rel=1e-12)
    added = {r.term: r.added for r in rows}
    if fp32_grads:
        assert added["fp32 gradients"] == pytest.approx(2 * LLAMA.num_params())
        assert added["optimizer step"] == 0
    else:
        assert added["gradients"] == 0 and added["optimizer step"] > 0


def test_the_walk_refuses_what_is_not_one_unsharded_gpu():
    with pytest.raises(ValueError, match="one GPU without offload"):
        one_gpu_walk("llama-7b", dp=2)


@pytest.mark.parametrize("gpu, recompute", [("a100-80gb", "none"), ("h200", "full"), ("v100-32gb", "full")])
def test_one_gpu_fit_is_the_walk_s_total_against_the_card(gpu, recompute):
    fit = one_gpu_fit("llama-7b", gpu, 1, recompute)
    cluster = make_cluster("dgx-a100", 1, gpu=gpu)
    est = estimate(LLAMA, cluster, Plan(recompute=recompute, dtype=fit.dtype))
    assert fit.total == pytest.approx(est.memory_total, rel=1e-12) and fit.capacity == cluster.gpu.memory_bytes
    assert fit.fits == est.fits and fit.fp32_grads == est.plan.fp32_grads
    assert fit.dtype == ("fp16" if gpu == "v100-32gb" else "bf16")  # V100 has no bf16 tensor cores
    assert fit.added("model states") == fit.walk[0].added and fit.added("no such row") == 0
    # more than chapter 01's memory wall (states + activations): the gradients, step, runtime, allocator
    assert fit.total > memory_wall("llama-7b", "mixed", "adam", 1, recompute).total
