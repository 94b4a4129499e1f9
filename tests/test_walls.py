"""Chapter 01's compositions: training memory on one GPU and training time at perfect scaling."""

import pytest

from parlab.costmodel import GPUS, activation_bytes, get_model, model_state_memory, train_flops_6nd
from parlab.costmodel.answers.walls import compute_wall, largest_trainable, memory_wall


def test_memory_wall_is_states_plus_activations():
    w = memory_wall("llama-7b", "mixed", "adam", micro_batch=2, recompute="selective")
    m = get_model("llama-7b")
    assert w.states == model_state_memory(m.num_params(), "mixed", "adam")
    assert w.activations == activation_bytes(m, 2, "selective")
    assert w.total == pytest.approx(sum(w.terms().values()))


def test_inference_keeps_no_activations():
    assert memory_wall("llama-7b", "fp16", "none").activations == 0


def test_a_small_model_fits_one_card_and_gpt3_fits_none():
    small = memory_wall("350M", micro_batch=1)
    assert all(f.fits_one and f.min_gpus == 1 for f in small.fits())
    gpt3 = memory_wall("gpt3-175b", recompute="full")
    assert not any(f.fits_one for f in gpt3.fits())
    a100 = gpt3.fit("a100-80gb")
    # states split over min_gpus cards, each keeping all activations, fit; one card fewer does not
    room = GPUS["a100-80gb"].memory_bytes - gpt3.activations
    assert gpt3.states.total / a100.min_gpus <= room < gpt3.states.total / (a100.min_gpus - 1)


def test_activations_alone_can_overflow_a_card():
    w = memory_wall("gpt3-175b", micro_batch=32)
    assert w.fit("v100-32gb").min_gpus is None


def test_largest_trainable_grows_with_recomputation_and_fits():
    sizes = [largest_trainable("a100-80gb", recompute=r) for r in ("none", "selective", "full")]
    counts = [w.model.num_params() for w in sizes]
    assert counts == sorted(counts)
    assert all(w.total <= GPUS["a100-80gb"].memory_bytes for w in sizes)


def test_compute_wall_scales_perfectly():
    one = compute_wall("gpt3-175b", 300e9, "a100-80gb", 1, 0.5)
    many = compute_wall("gpt3-175b", 300e9, "a100-80gb", 1024, 0.5)
    assert one.flops == train_flops_6nd(get_model("gpt3-175b").num_params(), 300e9)
    assert many.seconds * 1024 == pytest.approx(one.seconds)
    assert many.seconds_one_gpu == pytest.approx(one.seconds)


def test_compute_wall_rejects_bad_input():
    with pytest.raises(ValueError, match="tokens"):
        compute_wall("7B", tokens=0)
    with pytest.raises(ValueError, match="n_gpus"):
        compute_wall("7B", n_gpus=0)


def test_the_wall_fits_by_the_course_s_one_estimate_not_by_states_plus_activations():
    """Content review E5: chapter 01 said LLaMA-7B training (117 GB of states + activations)
    "fits one h200" while chapter 09's estimate of the same job does not fit its 141 GB."""
    from parlab.costmodel.answers.phases import one_gpu_fit

    w = memory_wall("llama-7b", "mixed-fp32-grad", "adam", micro_batch=1, recompute="none")
    h200 = w.fit("h200")
    assert h200.estimate == pytest.approx(one_gpu_fit("llama-7b", "h200").total)  # chapter 09's 144.2 GB
    assert not h200.fits_one and w.total < GPUS["h200"].memory_bytes < h200.estimate
    mixed = memory_wall("llama-7b", "mixed", "adam", 1, "none")
    assert mixed.estimate_total == pytest.approx(
        one_gpu_fit("llama-7b", "h200", dtype="mixed", fp32_grads=False).total)
    assert not any(f.fits_one for f in mixed.fits())
    assert all(f.fits_one == (f.estimate <= f.gpu.memory_bytes) for f in mixed.fits())


def test_jobs_no_plan_models_fit_by_the_wall_s_own_total():
    for w in (memory_wall("llama-7b", "fp16", "none"), memory_wall("llama-7b", "bf16", "adam")):
        assert w.estimate_total is None
        assert all(f.estimate is None and f.fits_one == (w.total <= f.gpu.memory_bytes) for f in w.fits())


def test_the_dashboard_says_which_terms_its_headline_leaves_out():
    from parlab.widgets.walls import MemoryWallDashboard

    line = MemoryWallDashboard.summary(None, memory_wall("llama-7b"))
    assert "117 GB of states + activations" in line and "149 GB in all" in line
    assert line.endswith("fits none of the GPUs shown (v100-32gb to h200)")  # a B200 holds it: not "no GPU"
