"""Issue 19's chapter claims, computed or checked on the stored notebooks: short answers of at most
three bullets, one LLaMA-7B walk cited by every chapter that prints a total, the guide's f/g names
(the same as Megatron's), and guide 1.12's options beside the naive split."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from parlab.course import COURSE_DIR, anchor

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT.parent / "shared" / "guide" / "interview_guide_zh.txt"
SHORT = "**The short answer an interviewer wants.**"
OWNED = ["01_why_distributed", "02_communication", "03_data_parallel", "04_pipeline_parallel",
         "05_tensor_parallel", "06_comparing", "07_zero_fsdp", "08_3d_parallelism", "09_memory_optimizations",
         "10_choosing_a_strategy", "11_practice", "12_interview_drill", "14_derivations", "15_how_true_the_numbers_are"]


def _cells(name: str):
    return nbformat.read(COURSE_DIR / f"{name}.ipynb", as_version=4).cells


@pytest.mark.parametrize("name", OWNED)
def test_the_short_answer_is_at_most_three_bullets(name):
    text = _cells(name)[0].source
    after = text[text.index(SHORT) + len(SHORT):].lstrip("\n")
    block = after.split("\n\n", 2)
    lead = block[0] if not block[0].startswith("- ") else ""
    bullets = re.findall(r"^- ", (block[1] if lead else block[0]), re.MULTILINE)
    assert 1 <= len(bullets) <= 3, f"{name}: {len(bullets)} bullets"
    assert len(lead.split()) <= 8
    for b in re.split(r"^- ", block[1] if lead else block[0], flags=re.MULTILINE)[1:]:
        assert len(b.split()) <= 60, f"{name}: a bullet of {len(b.split())} words"


def test_every_chapter_printing_a_llama_total_cites_the_one_walk():
    heading = "LLaMA-7B on one GPU, term by term"
    ch09 = " ".join(c.source for c in _cells("09_memory_optimizations") if c.cell_type == "markdown")
    assert f"### {heading}" in ch09 and "one_gpu_walk" in " ".join(c.source for c in _cells("09_memory_optimizations"))
    link = f"09_memory_optimizations.ipynb#{anchor(heading)}"
    for name in ("00_start_here", "01_why_distributed", "06_comparing"):
        assert link in " ".join(c.source for c in _cells(name)), f"{name} does not cite the walk"


def test_chapter_06_links_mfu_to_the_derivations():
    text = " ".join(c.source for c in _cells("06_comparing"))
    assert "14_derivations.ipynb" in text and "MFU" in text


@pytest.mark.skipif(not GUIDE.exists(), reason="the guide is not beside this checkout")
def test_the_guide_names_f_and_g_as_megatron_does():
    guide = GUIDE.read_text(encoding="utf-8")
    sec = guide[guide.index("\n1.7 "):guide.index("\n1.8 ")]
    # the guide's two layers, each an input operator f and an output operator g
    f_ops = re.findall(r"输入层（\$f\$）：\s*- forward：(.*?)\n- backward：(.*?)\n", sec)
    g_ops = re.findall(r"输出层（\$g\$）：\s*- forward：(.*?)\n- backward：(.*?)\n", sec)
    assert len(f_ops) == len(g_ops) == 2
    # Megatron's f: identity forward, all-reduce backward; g: all-reduce forward, identity backward
    assert any("identity" in fw and "all-reduce" in bw for fw, bw in f_ops)
    assert any("all-reduce" in fw and "identity" in bw for fw, bw in g_ops)
    text = " ".join(c.source for c in _cells("05_tensor_parallel"))
    assert "names f and g as Megatron does" in text and "differently from Megatron" not in text


def test_the_ways_out_of_guide_1_12_beside_the_naive_split():
    from parlab.costmodel.answers.too_big import too_big_options

    opts = too_big_options("llama-13b", 8, 32)
    assert all(e.fits for e in opts.values())
    naive = opts["naive split (pp, 1 micro-batch)"]
    assert naive.time.bubble > 0.5 * naive.step_time
    three = [opts[k] for k in ("pipeline, 1F1B micro-batches", "tensor parallel (TP in the node)",
                               "ZeRO-3 / FSDP data parallel")]
    assert all(3 * e.step_time < naive.step_time for e in three)
    offload = opts["1 GPU, optimizer offloaded"]
    assert offload.plan.n_gpus == 1 and all(offload.tokens_per_s < e.tokens_per_s / e.plan.n_gpus for e in three)


def test_chapter_10s_1_18_verdict_and_chapter_15s_overlap_claim_use_the_shared_band():
    """Chapter 10: TP over PCIe ranks above the best plan without TP on a 10 GbE cluster, but inside
    the out-of-sample band (issue 30: +-25%, a 67% comparison band), so it is a tie, not a verdict;
    chapter 15: with perfect overlap ZeRO-3 ties 3D at 512 GPUs, and is beyond the band at 1,024."""
    from parlab.costmodel import get_model
    from parlab.costmodel.answers.scenarios import tp_without_nvlink, zero3_vs_3d
    from parlab.costmodel.specs.assumptions import DEFAULT
    from parlab.costmodel.specs.bands import is_tie

    gpt3 = get_model("gpt3-175b")
    _, best, no_tp = tp_without_nvlink(gpt3, 1024, 1536, "pcie-10gbe", slowdowns=(1,)).rows[0]
    assert best.plan.tp > 1 and no_tp.plan.tp == 1 and is_tie(no_tp.step_time / best.step_time - 1)
    at512, at1024 = zero3_vs_3d(gpt3, [512, 1024], 2048, assumptions=DEFAULT.with_(zero3_overlap=1.0))
    margin = [p.three_d.model_tflops_per_gpu / p.zero3.model_tflops_per_gpu - 1 for p in (at512, at1024)]
    assert margin[0] > 0 and is_tie(margin[0]) and not is_tie(margin[1])


def test_chapter_10_does_not_repeat_chapter_07s_1_17_and_1_19():
    from parlab.course import chapters_for

    assert [c.number for c in chapters_for("1.19")] == [7] and [c.number for c in chapters_for("1.17")] == [7]
    text = " ".join(c.source for c in _cells("10_choosing_a_strategy"))
    assert "guide_1_19(" not in text and "megatron_zero3(" not in text and "zero3_ranking(" not in text
    assert "07_zero_fsdp.ipynb" in text and "15_how_true_the_numbers_are.ipynb" in text
