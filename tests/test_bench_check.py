"""A bench reports; only ``--check`` turns a missed target into exit status 1."""

from __future__ import annotations

import argparse
import re
import sys
import types

import pytest

from parlab.cli import main


@pytest.fixture
def fake_bench(monkeypatch):
    """``parlab bench fake`` whose target is missed when ``--miss`` is given."""
    module = types.ModuleType("parlab_fake_bench")
    module.HELP = "a bench that misses its target on demand"

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--miss", action="store_true")

    def run(args: argparse.Namespace) -> int:
        print("figure: 1.00x (target >= 2x): " + ("BELOW TARGET" if args.miss else "ok"))
        return 1 if args.miss else 0

    module.add_arguments, module.run = add_arguments, run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    import parlab.bench
    import parlab.cli.bench

    monkeypatch.setattr(parlab.bench, "BENCHES", {"fake": module.__name__})
    monkeypatch.setattr(parlab.cli.bench, "BENCHES", {"fake": module.__name__})


@pytest.mark.parametrize("argv, code", [([], 0), (["--miss"], 0), (["--check"], 0), (["--miss", "--check"], 1)])
def test_a_missed_target_fails_only_under_check(fake_bench, capsys, argv, code):
    assert main(["bench", "fake", *argv]) == code
    out = capsys.readouterr().out
    assert re.search(r"^machine: \d+ cores, load average: [\d.]+ [\d.]+ [\d.]+ before, "
                     r"[\d.]+ [\d.]+ [\d.]+ after \(1, 5, 15 min\)$", out, re.M)
    if "--miss" in argv and "--check" not in argv:
        assert "a target was missed (a report, not a failure: `--check` makes it exit 1)" in out


def test_bench_all_takes_check_too(fake_bench, capsys):
    assert main(["bench", "all"]) == 0
    assert main(["bench", "all", "--check"]) == 0  # the fake's default meets its target
    assert "== parlab bench fake ==" in capsys.readouterr().out
