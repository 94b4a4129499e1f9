"""``parlab bench comm`` runs end to end on a tiny configuration and refuses bad options."""

from __future__ import annotations

import pytest

from parlab.cli import main


def test_the_comm_benchmark_prints_ratios_bus_bandwidth_and_launch_latency(capsys):
    assert main(["bench", "comm", "--ranks", "2", "--sizes", "1K", "--ops", "all_reduce",
                 "--rounds", "1", "--repeats", "1", "--launches", "1"]) == 0
    out = capsys.readouterr().out
    assert "gloo/local" in out and "local busbw (GB/s)" in out
    assert max(len(line) for line in out.splitlines()) <= 100, out  # fits the terminal (--wide: all)
    assert "memcpy bandwidth of this machine" in out
    assert "launch latency" in out and "torch" in out
    assert "async_op=True" in out and "compute that leaves the cores free" in out  # the overlap


@pytest.mark.parametrize("argv, message", [
    (["--ops", "scan"], "unknown op 'scan'; allowed: all_reduce, all_gather, reduce_scatter, broadcast"),
    (["--ranks", "1"], "--ranks must be >= 2"),
    (["--launches", "0"], "--launches >= 1"),
    (["--sizes", "0"], "sizes must be positive element counts, got '0'"),
    (["--sizes", "abc"], "--sizes takes element counts such as 1000, 16K or 1M, got 'abc'"),
    (["--sizes", "1.5M"], "--sizes takes element counts such as 1000, 16K or 1M, got '1.5M'"),
    (["--ranks", "two"], "--ranks takes rank counts such as 2,4, got 'two'"),
])
def test_bad_options_are_one_line_errors(capsys, argv, message):
    assert main(["bench", "comm", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_machine_line_fits_100_columns_on_a_busy_machine(capsys, monkeypatch):
    """Under load the load averages have two-digit integer parts (seen: 101 columns at 12.44)."""
    import types

    import parlab.cli.bench as cli_bench

    busy = "2 cores, load average 12.44 10.60 118.83 (1, 5, 15 min)"
    monkeypatch.setattr(cli_bench, "conditions", lambda: busy)
    monkeypatch.setattr(cli_bench, "load_average", lambda: "load average 12.73 10.69 118.86 (1, 5, 15 min)")
    assert cli_bench._report(types.SimpleNamespace(run=lambda args: 0), None) == 0
    out = capsys.readouterr().out
    assert "machine: 2 cores, load average: 12.44 10.60 118.83 before, 12.73 10.69 118.86 after (1, 5, 15 min)" \
        in out.splitlines(), out  # one line, under 100 columns
