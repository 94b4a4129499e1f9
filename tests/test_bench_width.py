"""Every bench's output fits 100 columns (issue 20 item 7): ``bench widgets``, ``ddp``,
``pipeline`` and ``zero`` printed with slow, many-digit figures (their measurements replaced by
fixed results: the layout is under test, not the machine; pipeline's tables alone, the whole run
is tests/test_bench_pipeline.py's), and ``--wide`` keeps every column; ``bench widgets`` says
what it times, then shows a progress bar while it runs (about 2.5 minutes)."""

from __future__ import annotations

import types

import pytest

from parlab.cli import main
from parlab.cli.fit import WIDTH

SLOW = 12345.678e-3  # seconds: five-digit milliseconds in every column


def lines_of(capsys, argv: list[str]) -> list[str]:
    main(argv)
    return capsys.readouterr().out.splitlines()


def too_wide(lines: list[str]) -> list[str]:
    return [f"{len(line)}: {line}" for line in lines if len(line) > WIDTH]


@pytest.fixture
def fake_widgets(monkeypatch):
    from parlab.bench import widgets

    class Slow:  # every dashboard's name, one slow update
        def __init__(self):
            self.controls = {"x": types.SimpleNamespace(value=0)}
            self.timings = {"compute_s": SLOW, "render_s": SLOW, "total_s": SLOW}

    names = ["MemoryWallDashboard", "TensorParallelDashboard", "AdvisorDashboard"]
    monkeypatch.setattr(widgets, "dashboards", lambda: [(n, Slow, "x", (1, 2), 0.15) for n in names])


@pytest.fixture
def fake_ddp(monkeypatch):
    from parlab.bench import ddp

    def measure(ranks, *args, **kwargs):
        keys = ("overlap", "no overlap", "sync every micro-batch", "no_sync", "parlab", "torch")
        out = {n: {k: SLOW if i % 2 else 1.2e-3 for i, k in enumerate(keys)} for n in ranks}  # padded
        out[max(ranks)].update({("bucket", c): SLOW for c in ddp.CAPS_MB})
        return out

    monkeypatch.setattr(ddp, "measure", measure)


@pytest.fixture
def fake_zero(monkeypatch):
    from parlab.bench import zero

    def measure(n, *args, **kwargs):
        names = ["DDP", *(f"ZeRO-{s}" for s in zero.STAGES)]
        return {"local": {k: (SLOW, 123456789.0, 123456789.0) for k in names},
                "torch": {k: SLOW for k in ["ZeRO-1", "ZeRO-3", "torch ZeroRedundancyOptimizer",
                                            "torch FSDP2"]}}

    monkeypatch.setattr(zero, "measure", measure)


@pytest.mark.parametrize("argv, fixture", [
    (["bench", "widgets", "--repeats", "1"], "fake_widgets"),
    (["bench", "ddp"], "fake_ddp"),
    (["bench", "zero"], "fake_zero"),
], ids=lambda v: v if isinstance(v, str) else v[1])
def test_every_bench_fits_100_columns(argv, fixture, request, capsys):
    request.getfixturevalue(fixture)
    wide = too_wide(lines_of(capsys, argv))
    assert not wide, "\n".join(wide)


def test_bench_pipeline_s_tables_fit_100_columns():
    from parlab.bench.pipeline import NAMES, step_table

    slow = f"{SLOW * 1e3:.1f}"
    text = step_table([[name, slow, slow, slow, "1234.56x", "1234.56x"] for name in NAMES])
    assert not too_wide(text.splitlines()), text


def test_bench_widgets_leaves_out_a_column_and_wide_keeps_it(fake_widgets, capsys):
    narrow = lines_of(capsys, ["bench", "widgets", "--repeats", "1"])
    header = next(line for line in narrow if line.startswith("dashboard"))
    assert "max (ms)" not in header and "(max (ms) left out to fit 100 columns: --wide shows them)" in narrow
    wide = lines_of(capsys, ["bench", "widgets", "--repeats", "1", "--wide"])
    assert "max (ms)" in next(line for line in wide if line.startswith("dashboard"))


def test_bench_widgets_says_first_what_it_times_and_shows_its_progress(fake_widgets, capsys):
    main(["bench", "widgets", "--repeats", "1"])
    out, err = capsys.readouterr()
    assert out.startswith("one update of each dashboard (1 timed;")
    assert "bench widgets" in err and all(name in err for name in
                                          ["MemoryWallDashboard", "AdvisorDashboard"]), err
