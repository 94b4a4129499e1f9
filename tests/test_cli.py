"""The ``parlab`` command: readable tables, and bad input as one line on stderr with status 2."""

import re
import subprocess
import sys

import pytest

from parlab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_lists_every_preset(capsys):
    from parlab.costmodel import MODELS

    code, out, _ = run(capsys, "models")
    assert code == 0
    for name in MODELS:
        assert name in out
    assert "174.6B" in out  # GPT-3's exact count, rounded


def test_gpus_lists_memory_and_peak(capsys):
    code, out, _ = run(capsys, "gpus", "--sources")
    assert code == 0 and "h100-sxm" in out and "989" in out and "datasheet" in out


def test_memory_175b_mixed(capsys):
    code, out, _ = run(capsys, "memory", "--model", "175b", "--dtype", "mixed")
    assert code == 0
    assert "gpt3-175b" in out and "2,794 GB" in out and "16" in out


@pytest.mark.parametrize("argv, message", [
    (["memory", "--model", "gpt5"], "unknown model 'gpt5'"),
    (["memory", "--dtype", "int8"], "unknown dtype 'int8'"),
    (["memory", "--optimizer", "lion"], "unknown optimizer 'lion'"),
    (["memory", "--model", "0B"], "model size must be a positive number"),
])
def test_bad_input_is_one_line_and_status_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_console_script_runs_as_a_module():
    res = subprocess.run([sys.executable, "-m", "parlab.cli", "memory", "--model", "7B"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "llama-7b" in res.stdout


# -- every message names the flag, the value and the rule (issue 7 items 2-4, 15) ---------------
@pytest.mark.parametrize("argv, message", [
    (["estimate", "--tp", "0", "--gpus", "8"], "argument --tp: must be a positive integer, got '0'"),
    (["estimate", "--gpus", "0"], "argument --gpus: must be a positive integer, got '0'"),
    (["estimate", "--dp", "0"], "argument --dp: must be a positive integer, got '0'"),
    (["estimate", "--seq", "0"], "argument --seq: must be a positive integer, got '0'"),
    (["estimate", "--gpus-per-node", "0"], "argument --gpus-per-node: must be a positive integer, got '0'"),
    (["estimate", "--nics", "0"], "argument --nics: must be a positive integer, got '0'"),
    (["estimate", "--tokens", "abc"], "argument --tokens: must be a positive number of tokens"),
    (["estimate", "--gpus", "10", "--tp", "4"], "--gpus 10 is not divisible by --tp x --pp = 4 x 1"),
    (["estimate", "--recompute", "some"], "argument --recompute: unknown recompute 'some'"),
    (["estimate", "--dtype", "int8"], "argument --dtype: unknown dtype 'int8'"),
    (["search", "--micro-batches", "0"], "argument --micro-batches: must be a positive integer, got '0'"),
    (["search", "--global-batch", "0"], "argument --global-batch: must be a positive integer, got '0'"),
    (["search", "--zero", "a"], "argument --zero: must be a ZeRO stage 0, 1, 2 or 3, got 'a'"),
    (["search", "--top", "-1"], "argument --top: must be a positive integer, got '-1'"),
    (["search", "--gpus", "10000000"], "global batch 512 does not split over 10,000,000 GPUs"),
    (["bench", "costmodel", "--repeat", "0"], "argument --repeat: must be a positive integer, got '0'"),
    (["bench", "costmodel", "--gpus", "100"], "parlab bench costmodel: error: --gpus must be a multiple of 64"),
    (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
])
def test_bad_values_name_the_flag_the_value_and_the_rule(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "_ints" not in err


def test_a_global_batch_too_small_for_the_gpus_does_not_advise_adding_gpus(capsys):
    _, _, err = run(capsys, "search", "--gpus", "10000000")
    assert "add GPUs" not in err and "fewer GPUs" in err


def test_every_spelling_gives_the_same_numbers(capsys):
    base = ["estimate", "--pp", "8", "--gpus", "8", "--global-batch", "64"]
    lower = run(capsys, *base, "--schedule", "gpipe", "--recompute", "full")
    assert lower[0] == 0 and "64 micro-batches in flight" in lower[1]
    assert run(capsys, *base, "--schedule", "GPipe", "--recompute", "Full") == lower


def test_one_precision_vocabulary_for_every_command(capsys):
    for command in (["estimate", "--gpus", "8"], ["search", "--model", "7b", "--gpus", "8", "--global-batch", "8",
                                                 "--micro-batches", "1", "--recompute", "full"]):
        fp32, bf16 = run(capsys, *command, "--dtype", "mixed-fp32-grad"), run(capsys, *command, "--dtype", "bf16")
        assert bf16[0] == 0 and fp32 == bf16  # bf16 keeps fp32 gradients (Megatron-LM, DeepSpeed)
        mixed = run(capsys, *command, "--dtype", "mixed")
        assert mixed[0] == 0 and mixed != bf16  # the ZeRO paper's 16-bit gradients
    bf16, fp32 = run(capsys, "memory", "--dtype", "bf16")[1], run(capsys, "memory", "--dtype", "mixed-fp32-grad")[1]
    assert "dtype bf16 (model states: mixed-fp32-grad)" in bf16 and bf16.split("\n")[1:] == fp32.split("\n")[1:]
    code, out, _ = run(capsys, "estimate", "--gpus", "8", "--dtype", "bf16")
    assert code == 0 and "x 4 B (fp32 gradients: what Megatron-LM and DeepSpeed keep with bf16" in out


def test_tokens_are_read_before_anything_is_printed(capsys):
    code, out, err = run(capsys, "estimate", "--tokens", "300b")
    assert code == 0 and "time to train on 300B tokens" in out and err == ""


def test_search_reports_tried_and_valid_once_when_they_are_equal(capsys):
    code, out, _ = run(capsys, "search", "--model", "7b", "--gpus", "8", "--global-batch", "8")
    assert code == 0 and re.search(r"^[\d,]+ plans tried, all valid; [\d,]+ fit in memory$", out, re.M)


def test_single_gpu_plans_print_no_link_and_counts_agree_with_their_nouns(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "7b")
    assert code == 0 and "inter-node" not in out and "between nodes" not in out and "ib-hdr" not in out
    assert "1 micro-batch in flight" in out and "1 x a100-80gb (a single GPU)" in out
    assert "micro-batches in flight" not in out and "1 sequences" not in out and " us " not in out


def test_version(capsys):
    import parlab

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"parlab {parlab.__version__}"
