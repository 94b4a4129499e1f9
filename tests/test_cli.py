"""The ``parlab`` command: readable tables, and bad input as one line on stderr with status 2."""

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
    (["memory", "--dtype", "fp8"], "unknown dtype 'fp8'"),
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
