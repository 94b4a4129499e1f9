"""Every command's output fits 100 columns by default (issue 20: `parlab estimate` printed lines
up to 282 columns, `parlab search` 109, `bench comm` 207, the trainer's step line about 155);
``--wide`` keeps the full lines and every column. Mistyped flags name the subcommand and the
closest flag; a number given to --gpu points to --gpus."""

from __future__ import annotations

import argparse
import sys
import types

import pytest

from parlab.cli import main
from parlab.cli.fit import WIDTH, fit, fit_table

README_ESTIMATE = ["estimate", "--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8",
                   "--global-batch", "1536", "--recompute", "full"]
README_SEARCH = ["search", "--model", "llama-65b", "--gpus", "64", "--cluster", "pcie-10gbe"]
COMMANDS = [["models"], ["gpus"], ["memory", "--model", "175b", "--dtype", "mixed"], README_ESTIMATE,
            ["estimate", "--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8",
             "--global-batch", "1536", "--tokens", "300B", "--zero", "1", "--offload", "optimizer"],
            README_SEARCH, [*README_SEARCH, "--explain", "--offload", "none,optimizer+params"]]


def out_of(capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:3]))
def test_every_command_fits_100_columns(capsys, argv):
    assert widest(out_of(capsys, argv)) <= WIDTH


@pytest.mark.parametrize("argv", [README_ESTIMATE, README_SEARCH], ids=["estimate", "search"])
def test_wide_prints_the_full_lines_and_every_column(capsys, argv):
    narrow, wide = out_of(capsys, argv), out_of(capsys, [*argv, "--wide"])
    assert widest(wide) > WIDTH
    if argv[0] == "search":
        assert "tokens/s" in wide.splitlines()[3] and "tokens/s" not in narrow.splitlines()[3]
        assert "--wide shows every column" in narrow
    else:  # the same words, only wrapped
        assert narrow.split() == wide.split()


def test_recomputation_flops_only_when_there_is_recomputation(capsys):
    base = README_ESTIMATE[:-2]
    assert "with recomputation" not in out_of(capsys, [*base, "--recompute", "none"])
    assert "with recomputation)" in out_of(capsys, [*base, "--recompute", "full"])


def test_fit_wraps_a_term_under_its_name_and_leaves_short_text_alone():
    term = "  gradients" + " " * 30 + "11.3 GB   = " + "word " * 40
    lines = fit(term + "\n" + " " * 54 + "[a source]").splitlines()
    assert lines[0] == "  gradients" + " " * 30 + "11.3 GB" and lines[1].startswith("      = word")
    assert lines[-1] == "      [a source]" and widest("\n".join(lines)) <= WIDTH
    assert fit("short\n    kept   as is") == "short\n    kept   as is"
    text, dropped = fit_table([[1, "x" * 95, 2.5]], ["#", "plan", "extra"], "rlr", ["extra"])
    assert dropped == ["extra"] and "extra" not in text and widest(text) <= WIDTH


@pytest.fixture
def long_bench(monkeypatch):
    module = types.ModuleType("parlab_long_bench")
    module.HELP = "prints a long prose line and a wide table row"
    module.add_arguments = lambda parser: None

    def run(args: argparse.Namespace) -> int:
        print("overlap on 4 ranks: " + "compute 1.00 ms + all-reduce 2.00 ms " * 6, flush=True)
        print("row  " + "  ".join(["12.34"] * 22))  # a table row stays whole
        return 0

    module.run = run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    import parlab.bench
    import parlab.cli.bench

    monkeypatch.setattr(parlab.bench, "BENCHES", {"long": module.__name__})
    monkeypatch.setattr(parlab.cli.bench, "BENCHES", {"long": module.__name__})


def test_a_bench_prose_line_is_wrapped_and_a_table_row_kept(long_bench, capsys):
    lines = out_of(capsys, ["bench", "long"]).splitlines()
    row = next(line for line in lines if line.startswith("row  "))
    assert all(len(line) <= WIDTH for line in lines if line is not row) and len(row) > WIDTH
    assert " ".join(lines).count("compute 1.00 ms") == 6  # every word kept
    wide = out_of(capsys, ["bench", "long", "--wide"]).splitlines()
    assert widest(wide[0]) > WIDTH


def test_the_trainer_step_line_and_table_fit_with_the_rank_prefix(capsys):
    from parlab.parallel.trainer import PHASES, StepLog
    from parlab.parallel.trainer.report import SUMMARY, summary_table
    from parlab.train import Progress

    phases = dict(zip(PHASES, (2.251, 0.024, 0.120, 0.003, 1.234), strict=True))  # s, a busy step
    log = StepLog(step=1000, loss=3.51031, seconds=3.6, tokens_per_s=123456.0, phases=phases)
    Progress(1000)(log)
    Progress(1000, wide=True)(log)
    short, full = capsys.readouterr().out.splitlines()
    assert len("[rank 0] " + short) <= WIDTH < len("[rank 0] " + full)
    assert "pp 2251 tied 24 dp 120 opt 3 ckpt 1234" in short and "pipeline 2251ms" in full
    rows = [{"rank": r, "tp": r % 2, "dp": r // 2 % 2, "pp": r // 4,
             **{name: (327680.0, 327680.0) for name, _ in SUMMARY}} for r in range(8)]
    rows[3]["TP sent"] = (527360.0, 330752.0)  # a mismatch shows both
    text = summary_table(rows, "torch", wide=False)
    assert max(len("[rank 0] " + line) for line in text.splitlines()) <= WIDTH
    assert "527,360 (!= 330,752)" in text and "327,680 / 327,680" in summary_table(rows)
    assert "nominal" in text and "nominal" in summary_table(rows, "torch")


@pytest.mark.parametrize("argv, message", [
    (["estimate", "--gpsu", "1024"],
     "parlab estimate: error: unrecognized argument --gpsu 1024 (did you mean --gpus?)"),
    (["search", "--globl-batch", "8"], "parlab search: error: unrecognized argument --globl-batch 8 "
                                       "(did you mean --global-batch?)"),
    (["estimate", "--gpu", "8"], "argument --gpu: got '8', a number: for 8 GPUs use --gpus 8"),
    (["bench", "comm", "--sizs", "4"], "parlab bench comm: error: unrecognized argument --sizs 4 "
                                       "(did you mean --sizes?)"),
])
def test_a_mistyped_flag_names_the_command_and_the_closest_flag(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
