"""Mixed precision from scratch: fp16's range (65504, not the guide's 65506), underflow of small
gradients, a dynamic loss scaler that behaves as torch.amp.GradScaler and repairs a run that
underflows, bf16's range, and 16-bit memory measured at half of fp32's."""

from __future__ import annotations

import math

import pytest
import torch

from parlab.parallel import batches
from parlab.parallel.model import GPTConfig
from parlab.parallel.precision import (
    DynamicLossScaler,
    float_format,
    largest_from_bits,
    precision_memory,
    round_trip,
    scale_history,
    torch_scale_history,
    train_autocast,
    train_mixed,
    underflow_fraction,
)

CFG = GPTConfig(n_layer=1, hidden=32, n_head=4, seq_len=16)
SHRINK = 2.0**-20  # loss weight that pushes TinyGPT's gradients below fp16's smallest subnormal


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_fp16_largest_value_is_65504_not_65506():
    fp16 = float_format(torch.float16)
    assert fp16.max == 65504.0 == largest_from_bits(torch.float16) == (2 - 2**-10) * 2**15
    assert (fp16.exponent_bits, fp16.mantissa_bits) == (5, 10)
    # 65506 is not even a float16: the neighbours up there are 32 apart, so it rounds to 65504
    assert round_trip([65504, 65506, 65519], "float16") == [65504.0] * 3
    assert fp16.overflow_at == 65520.0
    assert round_trip([65520, 1e5], "float16") == [math.inf, math.inf]
    assert torch.tensor(300.0, dtype=torch.float16) ** 2 == math.inf  # 90000 > 65504: inf


def test_small_values_underflow_to_zero_in_fp16_but_not_bf16():
    fp16 = float_format(torch.float16)
    assert fp16.smallest_subnormal == 2.0**-24 and fp16.smallest_normal == 2.0**-14
    assert round_trip([2.0**-24, 2.0**-26], "float16") == [2.0**-24, 0.0]
    g = torch.full((1000,), 1e-8)
    assert underflow_fraction(g, torch.float16) == 1.0
    assert underflow_fraction(g, torch.bfloat16) == 0.0


def test_bf16_has_fp32s_range_and_less_precision():
    bf16, fp32 = float_format(torch.bfloat16), float_format(torch.float32)
    assert bf16.exponent_bits == fp32.exponent_bits == 8 and bf16.mantissa_bits == 7
    assert bf16.max == largest_from_bits(torch.bfloat16) and 3.38e38 < bf16.max < fp32.max
    assert bf16.smallest_normal == fp32.smallest_normal
    assert bf16.eps == 2.0**-7 and float_format(torch.float16).eps == 2.0**-10
    assert round_trip([1 + 2**-9], "bfloat16") == [1.0]  # 3 significant digits


def test_scaler_follows_torch_grad_scaler_step_for_step():
    pattern = [False, True, False, False, False, True, True, False, False, False]
    kwargs = {"init_scale": 2.0**10, "growth_interval": 3}
    ours = scale_history(pattern, DynamicLossScaler(**kwargs))
    assert ours == torch_scale_history(pattern, **kwargs)
    scales, taken = ours
    assert taken == [not bad for bad in pattern]  # a step with inf gradients is skipped
    assert scales[:3] == [2.0**10, 2.0**10, 2.0**9]  # halved after the inf
    assert scales[5] == 2.0**10  # doubled after 3 good steps


def test_loss_scaling_recovers_a_run_that_underflows():
    ref = train_mixed(CFG, steps=4, batch_size=4, dtype=torch.float32, loss_weight=SHRINK)
    plain = train_mixed(CFG, steps=4, batch_size=4, dtype=torch.float16, loss_weight=SHRINK)
    scaled = train_mixed(CFG, steps=4, batch_size=4, dtype=torch.float16, loss_weight=SHRINK,
                         scaler=DynamicLossScaler())
    assert min(plain.zero_grads) == 1.0  # every fp16 gradient element flushed to zero
    assert abs(plain.improvement) < 0.02  # no update: only the batches change
    assert max(scaled.zero_grads) < 0.05 and not any(scaled.skipped)
    assert ref.improvement > 0.1
    # fp16 forward/backward vs fp32: the same curve to 1e-3 (fp16's eps is 2^-10)
    for a, b in zip(scaled.losses, ref.losses, strict=True):
        assert abs(a - b) < 1e-3 * b


def test_torch_autocast_with_grad_scaler_matches_our_scaled_run():
    ours = train_mixed(CFG, steps=3, batch_size=4, dtype=torch.float16, loss_weight=SHRINK,
                       scaler=DynamicLossScaler())
    theirs = train_autocast(CFG, steps=3, batch_size=4, loss_weight=SHRINK)
    unscaled = train_autocast(CFG, steps=3, batch_size=4, loss_weight=SHRINK, grad_scaler=False)
    assert min(unscaled.zero_grads) == 1.0  # autocast's fp16 backward underflows the same way
    assert theirs.scales == ours.scales and theirs.skipped == ours.skipped
    # different casts (autocast keeps fp32 weights and some fp32 ops): the same curve to 1e-3
    for a, b in zip(theirs.losses, ours.losses, strict=True):
        assert abs(a - b) < 1e-3 * b


def test_a_scale_that_overflows_is_halved_and_its_steps_skipped():
    run = train_mixed(CFG, steps=5, batch_size=4, dtype=torch.float16, loss_weight=SHRINK,
                      scaler=DynamicLossScaler(init_scale=2.0**40))
    first_good = run.skipped.index(False)
    assert first_good >= 1 and all(run.skipped[:first_good])
    assert run.scales[: first_good + 1] == [2.0**40 / 2**k for k in range(first_good + 1)]


def test_16_bit_halves_the_weights_and_the_saved_activations():
    x, y = next(batches(4, CFG.seq_len))
    fp32, bf16 = (precision_memory(CFG, x, y, d) for d in (torch.float32, torch.bfloat16))
    assert bf16.weight_bytes * 2 == fp32.weight_bytes
    # every floating tensor halves; the int64 token ids and targets (8 B each) do not
    assert 0.5 < bf16.saved_bytes / fp32.saved_bytes < 0.52


def test_bad_input_names_the_rule():
    with pytest.raises(ValueError, match="backoff_factor"):
        DynamicLossScaler(backoff_factor=2.0)
    with pytest.raises(ValueError, match="dtype"):
        float_format("int8")


def test_cast_floating_casts_float_tensors_anywhere_and_leaves_token_ids():
    from parlab.parallel.precision import cast_floating

    ids, x = torch.arange(3), torch.ones(2, dtype=torch.float32)
    args, kwargs = cast_floating(((ids, [x]), {"mask": x, "n": 3}), torch.float16)
    assert args[0] is ids and args[1][0].dtype == torch.float16 and isinstance(args[1], list)
    assert kwargs["mask"].dtype == torch.float16 and kwargs["n"] == 3
