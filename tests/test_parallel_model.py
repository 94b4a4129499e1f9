"""TinyGPT and its dataset: the serial reference of parlab.parallel.

The model is deterministic from its seed, causal, sized as the cost model's ModelSpec says, and
learns the shipped corpus: 100 AdamW steps take the loss from ln(32) = 3.47 nats to below 2.2
(measured: about 1.6). The batches are deterministic, and the data-parallel ranks' blocks stacked
in rank order are exactly the single-process batch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from parlab.parallel import dataset
from parlab.parallel.dataset import VOCAB, batches, corpus, decode, encode, tokens
from parlab.parallel.model import (
    GPTConfig,
    TinyGPT,
    count_params,
    lm_loss,
    make_optimizer,
    mean_loss,
    train_reference,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


# ---------------------------------------------------------------------------- config
@pytest.mark.parametrize("field, value, rule", [
    ("hidden", 0, "GPTConfig.hidden must be a positive integer"),
    ("n_layer", -1, "GPTConfig.n_layer must be a positive integer"),
    ("seq_len", 2.5, "GPTConfig.seq_len must be a positive integer"),
    ("n_head", 5, "GPTConfig.hidden=64 must be divisible by GPTConfig.n_head=5"),
    ("dropout", 1.0, r"GPTConfig.dropout must be in \[0, 1\)"),
    ("dropout", -0.1, "GPTConfig.dropout must be a number >= 0"),
    ("seed", -3, "GPTConfig.seed must be an integer >= 0"),
])
def test_config_rejects_bad_values_naming_the_field(field, value, rule):
    with pytest.raises(ValueError, match=rule):
        GPTConfig(**{field: value})


def test_config_rejects_wrong_types():
    with pytest.raises(TypeError, match="GPTConfig.tie_embeddings must be True or False"):
        GPTConfig(tie_embeddings="yes")
    with pytest.raises(TypeError, match="GPTConfig.vocab_size must be a positive integer"):
        GPTConfig(vocab_size="32")
    with pytest.raises(TypeError, match="config must be a GPTConfig"):
        TinyGPT({"hidden": 64})


def test_default_size_is_tiny_and_matches_the_cost_model():
    cfg = GPTConfig()
    assert (cfg.n_layer, cfg.hidden, cfg.n_head, cfg.vocab_size) == (2, 64, 4, len(VOCAB))
    for c in (cfg, GPTConfig(tie_embeddings=False, n_layer=3, ffn_mult=2)):
        assert count_params(TinyGPT(c)) == c.model_spec().num_params()
    assert 50_000 < count_params(TinyGPT(cfg)) < 500_000


# ---------------------------------------------------------------------------- the model
def test_init_is_deterministic_from_the_seed():
    a, b = params(TinyGPT(GPTConfig(seed=3))), params(TinyGPT(GPTConfig(seed=3)))
    assert all(torch.equal(a[n], b[n]) for n in a)
    c = params(TinyGPT(GPTConfig(seed=4)))
    assert not torch.equal(a["wte.weight"], c["wte.weight"])
    # GPT-2's scheme: residual projections scaled down by sqrt(2 n_layer), biases zero
    assert abs(a["blocks.0.mlp.fc.weight"].std().item() - 0.02) < 0.002
    assert abs(a["blocks.0.mlp.proj.weight"].std().item() - 0.02 / math.sqrt(4)) < 0.001
    assert torch.count_nonzero(a["blocks.1.attn.qkv.bias"]) == 0


def test_tied_and_untied_heads():
    tied, untied = TinyGPT(GPTConfig()), TinyGPT(GPTConfig(tie_embeddings=False))
    assert tied.lm_head.weight is tied.wte.weight
    assert untied.lm_head.weight is not untied.wte.weight
    assert "lm_head.weight" not in dict(tied.named_parameters())


def test_logits_shape_and_initial_loss_near_uniform():
    model = TinyGPT()
    x, y = next(batches(8, 32, seed=0))
    assert model(x).shape == (8, 32, len(VOCAB))
    loss = model(x, y)
    assert loss.shape == () and abs(loss.item() - math.log(len(VOCAB))) < 0.1
    assert torch.allclose(loss, lm_loss(model(x), y))


def test_attention_is_causal():
    """Changing token j changes no logit at a position before j."""
    model = TinyGPT()
    x, _ = next(batches(2, 32, seed=1))
    changed = x.clone()
    changed[:, 20] = (changed[:, 20] + 1) % len(VOCAB)
    a, b = model(x), model(changed)
    assert torch.equal(a[:, :20], b[:, :20])
    assert not torch.allclose(a[:, 20:], b[:, 20:])


def test_shorter_sequences_work_and_bad_tokens_are_refused():
    model = TinyGPT()
    assert model(torch.zeros(3, 5, dtype=torch.int64)).shape == (3, 5, len(VOCAB))
    with pytest.raises(ValueError, match="1 <= s <= seq_len=32, got \\(1, 33\\)"):
        model(torch.zeros(1, 33, dtype=torch.int64))
    with pytest.raises(ValueError, match="outside 0..vocab_size-1 = 0..31: min 0, max 32"):
        model(torch.tensor([[0, 32, 1, 2]]))
    with pytest.raises(TypeError, match="idx must be a torch int64 tensor"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="targets must have the shape of idx"):
        model(torch.zeros(1, 4, dtype=torch.int64), torch.zeros(1, 3, dtype=torch.int64))


def test_dropout_is_off_by_default_and_on_when_asked():
    x, _ = next(batches(2, 16, seed=2))
    model = TinyGPT().train()
    assert torch.equal(model(x), model(x))
    noisy = TinyGPT(GPTConfig(dropout=0.5)).train()
    assert not torch.equal(noisy(x), noisy(x))
    assert torch.equal(noisy.eval()(x), noisy(x))


# ---------------------------------------------------------------------------- training
def test_loss_falls_within_100_steps_on_the_shipped_corpus():
    model = TinyGPT()
    val = mean_loss(model, batches(32, 32, seed=1, split="val"), 2)
    losses = train_reference(model, batches(16, 32, seed=0), 100, lr=3e-3)
    after = mean_loss(model, batches(32, 32, seed=1, split="val"), 2)
    assert len(losses) == 100 and abs(losses[0] - math.log(len(VOCAB))) < 0.1
    assert np.mean(losses[-10:]) < losses[0] - 1.2, losses[::10]
    assert after < 2.2 < val, (val, after)  # it generalises to held-out text, not only memorises


def test_training_is_reproducible_and_sgd_works():
    a, b = TinyGPT(), TinyGPT()
    la = train_reference(a, batches(8, 16, seed=5), 3, optimizer="sgd", lr=0.5)
    lb = train_reference(b, batches(8, 16, seed=5), 3, optimizer="sgd", lr=0.5)
    assert la == lb and la[-1] < la[0]
    pa, pb = params(a), params(b)
    assert all(torch.equal(pa[n], pb[n]) for n in pa)


def test_training_arguments_are_checked():
    model = TinyGPT()
    with pytest.raises(ValueError, match="optimizer must be one of adamw, sgd, got 'lamb'"):
        make_optimizer(model.parameters(), "lamb")
    with pytest.raises(ValueError, match="lr must be a positive number"):
        train_reference(model, batches(2, 8), 1, lr=0)
    with pytest.raises(ValueError, match="batches ran out after 1 of steps=2"):
        train_reference(model, [next(batches(2, 8))], 2)


# ---------------------------------------------------------------------------- data
def test_corpus_is_deterministic_in_vocabulary_and_structured():
    text = corpus()
    assert len(text) == dataset.CORPUS_CHARS and text == corpus(0) and text != corpus(1)
    assert set(text) <= set(VOCAB)
    assert decode(encode(text[:500])) == text[:500]
    words = text.replace("\n", " ").split()
    assert {"the", "fox", "foxes", "river."} <= set(words)  # real words, not noise
    # structure a bigram model can learn: after 'the ' comes a letter, never punctuation
    follow = {text[i + 4] for i in range(len(text) - 5) if text[i:i + 4] == "the "}
    assert follow <= set("abcdefghijklmnopqrstuvwxyz")
    with pytest.raises(ValueError, match="character 'Z' is not in the vocabulary"):
        encode("Zebra")


def test_splits_and_batches_are_deterministic():
    train, val = tokens("train"), tokens("val")
    assert len(train) + len(val) == dataset.CORPUS_CHARS and not train.flags.writeable
    (x1, y1), (x2, y2) = next(batches(4, 16, seed=7)), next(batches(4, 16, seed=7))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (4, 16) and x1.dtype == torch.int64
    assert torch.equal(x1[:, 1:], y1[:, :-1])  # targets are the inputs shifted by one
    assert not torch.equal(next(batches(4, 16, seed=8))[0], x1)


def test_data_parallel_ranks_split_the_global_batch():
    world, steps = 4, 3
    full = batches(8, 16, seed=2)
    shards = [batches(8, 16, seed=2, rank=r, world=world) for r in range(world)]
    for _ in range(steps):
        x, y = next(full)
        parts = [next(s) for s in shards]
        assert all(p[0].shape == (2, 16) for p in parts)
        assert torch.equal(torch.cat([p[0] for p in parts]), x)
        assert torch.equal(torch.cat([p[1] for p in parts]), y)


@pytest.mark.parametrize("kwargs, rule", [
    ({"batch_size": 6, "world": 4}, "batch_size=6 must be divisible by world=4"),
    ({"rank": 4, "world": 4}, r"rank must be an integer in 0..world-1 = 0..3, got 4"),
    ({"batch_size": 0}, "batch_size must be a positive integer"),
    ({"seq_len": 10**6}, "seq_len=1000000 must be below"),
    ({"split": "test"}, "split must be one of train, val, got 'test'"),
])
def test_batches_reject_bad_arguments(kwargs, rule):
    args = {"batch_size": 4, "seq_len": 8} | kwargs
    with pytest.raises(ValueError, match=rule):
        next(batches(**args))
