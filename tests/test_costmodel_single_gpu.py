"""Guide 3.3's cheaper levers on one GPU (``costmodel.single_gpu``): each row's bytes follow from the
cost model's own terms, and the quantization and LoRA counts are the papers'."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.costmodel.answers.single_gpu import (
    int8_adam_state_bytes,
    lora_params,
    nf4_bytes,
    one_gpu_levers,
)
from parlab.costmodel.specs.models import ModelSpec


def test_nf4_with_double_quantization_costs_the_papers_0_127_bits_of_constants():
    # Dettmers et al. 2023, Sec. 3: 32/64 = 0.5 bits of constants, 8/64 + 32/(64 x 256) = 0.127 with DQ
    assert nf4_bytes(double_quant=False) * 8 == pytest.approx(4.5)
    assert nf4_bytes() * 8 - 4 == pytest.approx(0.127, abs=5e-4)


def test_8bit_adam_keeps_two_bytes_per_parameter_plus_one_fp32_per_block():
    assert int8_adam_state_bytes() == pytest.approx(2 + 8 / 2048)
    assert int8_adam_state_bytes(block=1) == 10  # one fp32 constant per value: worse than fp32 moments


def test_lora_adds_r_times_d_in_plus_d_out_per_adapted_matrix():
    tiny = ModelSpec("tiny", layers=2, hidden=8, heads=2, seq_len=4, vocab=16, ffn_hidden=24, gated_mlp=True)
    # q, k, v, o: 4 x r (8 + 8); gate, up, down: 3 x r (8 + 24); two layers
    assert lora_params(tiny, rank=2, targets="attention") == 2 * 4 * 2 * 16
    assert lora_params(tiny, rank=2) == 2 * (4 * 2 * 16 + 3 * 2 * 32)
    with pytest.raises(ValueError, match="targets must be 'attention' or 'all', got 'mlp'"):
        lora_params(tiny, targets="mlp")


def test_each_lever_row_is_the_cost_models_own_where_a_plan_expresses_it():
    levers = {lv.name: lv for lv in one_gpu_levers("llama-7b")}
    one = make_cluster("dgx-a100", 1)
    plain = estimate("llama-7b", one, Plan(micro_batch=1, global_batch=1))
    full = estimate("llama-7b", one, Plan(micro_batch=1, global_batch=1, recompute="full"))
    offload = estimate("llama-7b", one, Plan(micro_batch=1, global_batch=1, recompute="full", zero=1,
                                             offload="optimizer"))
    assert levers["full fine-tune, mixed-precision Adam"].total == pytest.approx(plain.memory_total)
    assert levers["+ full recomputation"].total == pytest.approx(full.memory_total)
    assert levers["ZeRO-Offload (optimizer on the CPU)"].total == pytest.approx(offload.memory_total)


def test_the_levers_of_llama_7b_cheapest_first():
    rows = one_gpu_levers("llama-7b")
    totals = [lv.total for lv in rows[:5]]
    assert totals == sorted(totals, reverse=True)  # each lever saves more than the one before
    full, int8, lora, qlora = rows[1], rows[2], rows[3], rows[4]
    n = get_model("llama-7b").num_params()
    assert not full.fits and not int8.fits and lora.fits and qlora.fits  # on an 80 GB A100
    assert full.terms["optimizer states"] - int8.terms["optimizer states"] == pytest.approx((8 - 2 - 8 / 2048) * n, rel=1e-3)
    assert lora.trainable < 0.01 * n and lora.terms["activations"] == full.terms["activations"]
    assert qlora.terms["parameters"] < 0.3 * lora.terms["parameters"]
