"""Guide 3.2's stacks as data (``costmodel.stacks``): every run cites its source, and the runs parlab
already holds (Megatron-LM's Table 1, MT-NLG) come from their own data files, not a second copy."""

from __future__ import annotations

from parlab.costmodel.frameworks import FRAMEWORKS
from parlab.costmodel.stacks import GIVES, gives_rows, stack_rows, stack_runs
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
