"""The ``parlab`` command's model options: ``--model`` takes a Hugging Face config.json, the shape
flags change one field of the model, ``parlab models`` lists today's presets with their counts, and
bad input is one line with status 2."""

from pathlib import Path

import pytest

from parlab.cli import main

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_lists_the_modern_presets_with_their_counts(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith("-")}
    assert "8.03B" in rows["llama-3.1-8b"] and "405.9B" in rows["llama-3.1-405b"]
    assert "235.1B" in rows["qwen3-235b-a22b"] and "22.19B" in rows["qwen3-235b-a22b"]  # total and active
    assert rows["llama-3.1-8b"].split()[5] == "8"  # K/V heads (a dense row has no active count)
    assert "config.json" in out


def test_model_accepts_a_config_json(capsys):
    code, out, err = run(capsys, "memory", "--model", str(CONFIGS / "qwen3-8b.json"))
    assert code == 0, err
    assert out.startswith("qwen3-8b: 8.191B parameters")


def test_shape_flags_change_one_field_of_the_model(capsys):
    code, out, _ = run(capsys, "memory", "--model", "llama-2-7b", "--kv-heads", "8", "--vocab", "128256",
                       "--ffn", "14336")
    assert code == 0
    assert out.startswith("llama-2-7b (kv_heads=8, ffn_hidden=14336, vocab=128256): 8.03B parameters")
    code, out, _ = run(capsys, "estimate", "--model", "llama-7b", "--layers", "16", "--gpus", "8")
    assert code == 0 and "llama-7b (layers=16)" in out
    code, out, _ = run(capsys, "estimate", "--model", "llama-2-7b", "--kv-heads", "8", "--gpus", "8")
    assert code == 0 and "attention: GQA 8 KV heads of 32" in out


@pytest.mark.parametrize("argv, message", [
    (["memory", "--model", "13b"], "argument --model: model size '13b' is ambiguous: gpt3-13b and llama-13b"),
    (["memory", "--model", "missing/config.json"], "argument --model: cannot read a Hugging Face config.json"),
    (["memory", "--model", "llama-2-7b", "--kv-heads", "5"], "ModelSpec.kv_heads=5 must divide heads=32"),
    (["memory", "--kv-heads", "0"], "argument --kv-heads: must be a positive integer, got '0'"),
    (["estimate", "--model", "llama-3.1-8b", "--cp", "16", "--cp-impl", "ulysses"],
     "DeepSpeed-Ulysses needs n_kv_head % cp == 0"),
])
def test_bad_model_input_is_one_line_and_status_2(capsys, argv, message):
    """(Grouped-query attention is priced now: its Ulysses rule is the one-line refusal here.)"""
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
