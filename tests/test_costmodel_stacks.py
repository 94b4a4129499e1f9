"""Guide 3.2's stacks as data (``costmodel.stacks``): every run cites its source, and the runs parlab
already holds (Megatron-LM's Table 1, MT-NLG) come from their own data files, not a second copy."""

from __future__ import annotations

from parlab.costmodel.answers.frameworks import FRAMEWORKS
from parlab.costmodel.answers.stacks import GIVES, gives_rows, stack_rows, stack_runs
from parlab.data import read_csv


def test_every_run_names_its_source_and_a_positive_figure():
    runs = stack_runs()
    assert len(runs) == len(stack_rows()[0]) >= 7
    assert all(r.source and r.figure > 0 and r.count > 0 for r in runs)
    assert len({r.run for r in runs}) == len(runs)


def test_the_runs_parlab_already_holds_are_read_from_their_data():
    runs = {r.stack: r for r in stack_runs()[:2]}
    t1 = [r for r in read_csv("megatron2021_weak_scaling") if r["params_b"] == "1008.0"][0]
    assert runs["Megatron-LM"].figure == float(t1["tflops_per_gpu"]) and runs["Megatron-LM"].count == int(t1["gpus"])
    mt = [r for r in read_csv("mtnlg2022_throughput") if r["gpus"] == "2240"][0]
    assert runs["Megatron-DeepSpeed"].figure == float(mt["tflops_per_gpu"])


def test_each_library_of_the_gives_table_is_in_the_framework_table():
    names = {f.name for f in FRAMEWORKS}
    for lib in GIVES:
        assert any(part.strip() in names or any(part.strip() in n for n in names) for part in lib.split("/")), lib
    assert len(gives_rows()[0]) == len(GIVES)


#: each run of stack_runs.csv as checked against its source's text (issue 19; the CSV header says how):
#: run prefix -> (figure, count, the section the figure is printed in)
CHECKED = {"BLOOM 176B": (156, 384, "Sec. 3.4"), "OPT-175B": (147, 992, "Sec. 2.4"),
           "GPT-2-like 8B-100B": (15, 400, "Sec. X-B"), "PaLM 540B": (46.2, 6144, "Sec. 4.1 and Table 3"),
           "Llama 3 405B": (400, 16384, "Sec. 3.3.2 and Table 4")}


def test_the_csv_runs_are_the_checked_figures_and_sections_and_its_header_says_how():
    from parlab.data import source

    rows = read_csv("stack_runs")
    assert len(rows) == len(CHECKED)
    for prefix, (figure, count, section) in CHECKED.items():
        (row,) = [r for r in rows if r["run"].startswith(prefix)]
        assert (float(row["figure"]), int(row["count"])) == (figure, count) and section in row["source"], row
    assert "Checked (issue 19)" in source("stack_runs") and "metaseq" in source("stack_runs")
