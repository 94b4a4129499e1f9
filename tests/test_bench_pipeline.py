"""``parlab bench pipeline`` runs end to end on a tiny configuration and refuses bad options."""

from __future__ import annotations

import pytest

from parlab.cli import main


@pytest.mark.timeout(180)
def test_the_pipeline_benchmark_prints_ratios_and_bubbles(capsys):
    assert main(["bench", "pipeline", "--ranks", "2", "--m", "2", "--batch", "4", "--layers", "4",
                 "--hidden", "32", "--repeats", "1", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "torch/local" in out and "simulated, measured costs" in out and "local CPU (ms)" in out
    assert max(len(line) for line in out.splitlines()) <= 100  # issue 20 item 7
    for name in ("gpipe", "1f1b", "interleaved", "zb-h1"):
        assert out.count(name) >= 2


@pytest.mark.parametrize("argv, message", [
    (["--ranks", "1"], "--ranks must be >= 2"),
    (["--rounds", "0"], "--rounds >= 1"),
    (["--batch", "30", "--m", "8"], "--batch (30) must be a multiple of --m (8)"),
    (["--layers", "6"], "--layers (6) must be >= 2 x --ranks (8)"),
])
def test_bad_options_are_one_line_errors(capsys, argv, message):
    assert main(["bench", "pipeline", *argv]) == 2
    assert message in capsys.readouterr().err
