"""``parlab bench zero`` runs end to end on a tiny configuration (local backend) and refuses bad options."""

from __future__ import annotations

import pytest

from parlab.cli import main


def test_the_zero_benchmark_prints_ratios_and_bytes_held(capsys):
    assert main(["bench", "zero", "--ranks", "2", "--layers", "2", "--hidden", "32", "--batch", "2",
                 "--repeats", "1", "--skip-torch"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("DDP", "ZeRO-"))}
    assert sorted(rows) == ["DDP", "ZeRO-0", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    held = {k: float(v[2]) for k, v in rows.items()}
    assert held["ZeRO-0"] == held["DDP"] > held["ZeRO-1"] > held["ZeRO-2"]  # fp32 DDP = bf16 ZeRO-0: 16 B/param
    sent = {k: float(v[5]) for k, v in rows.items()}
    assert sent["ZeRO-1"] == sent["ZeRO-2"] == 0.5 and sent["ZeRO-3"] == 0.75  # bf16 vs DDP's fp32


@pytest.mark.parametrize("argv, message", [(["--ranks", "1"], "--ranks must be between 2 and 8"),
                                           (["--hidden", "30"], "--hidden must be divisible by"),
                                           (["--repeats", "0"], "--repeats must be >= 1")])
def test_bad_options_are_one_line_errors(argv, message):
    with pytest.raises(SystemExit, match=message):
        main(["bench", "zero", *argv])
