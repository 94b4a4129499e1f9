"""``parlab estimate`` takes the uneven pipeline split and module-level recompute of ``Plan``:
``--first-stage-layers``/``--last-stage-layers``, ``--embedding-as-layer``/``--loss-as-layer``,
``--recompute modules --recompute-modules mlp,core_attn``; bad values are one line, status 2."""

import pytest

from parlab.cli import main


def run(capsys, *argv):
    """Exit code, stdout with its lines re-joined (the CLI wraps them to the terminal), stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err


def test_estimate_prices_an_uneven_split_and_module_recompute(capsys):
    code, out, err = run(capsys, "estimate", "--tp", "8", "--pp", "16", "--first-stage-layers", "4",
                         "--last-stage-layers", "8", "--global-batch", "32", "--recompute-modules", "mlp,core_attn")
    assert code == 0, err
    assert "first=4 last=8 recompute=modules(core_attn,mlp)" in out
    assert "split 4 + 14 x 6 + 8" in out and "rank 120 (last pipeline stage" in out


def test_estimate_counts_the_embedding_and_loss_as_layers(capsys):
    """96 + 2 = 98 layer slots over pp = 7: 13 layers on the end stages, 14 on the others."""
    code, out, err = run(capsys, "estimate", "--tp", "8", "--pp", "7", "--global-batch", "14",
                         "--embedding-as-layer", "--loss-as-layer", "--recompute", "modules",
                         "--recompute-modules", "layernorm")
    assert code == 0, err
    assert "embedding-as-layer loss-as-layer" in out and "recompute=modules(layernorm)" in out
    assert "split 13 + 5 x 14 + 13" in out
    code, out, err = run(capsys, "estimate", "--tp", "8", "--pp", "4", "--schedule", "interleaved", "--chunks", "2",
                         "--global-batch", "16", "--embedding-as-layer", "--loss-as-layer")
    assert code == 2 and "layers + 2 = 98 divisible by pp x chunks = 4 x 2 = 8" in err


@pytest.mark.parametrize("argv, message", [
    (["--recompute-modules", "attn"], "argument --recompute-modules: unknown recompute module 'attn'; allowed: "
                                      "core_attn, layernorm, mlp, moe, moe_act, shared_experts, mla_up_proj"),
    (["--recompute-modules", "moe"], "recompute module 'moe' recomputes MoE layers, and gpt3-175b is a dense model"),
    (["--recompute", "modules"], "it needs them"),
    (["--first-stage-layers", "5"], "the 91 layers left by first/last stage layers (5, None) of 96 must split evenly"),
    (["--first-stage-layers", "0"], "argument --first-stage-layers: must be a positive integer, got '0'"),
])
def test_bad_split_or_module_flags_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, "estimate", "--tp", "8", "--pp", "16", *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
