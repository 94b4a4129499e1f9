"""The course map covers every guide question; chapters, README and stored outputs agree."""

import re
from pathlib import Path

import nbformat
import pytest

from parlab.course import CHAPTERS, COURSE_DIR, GUIDE_QUESTIONS, chapters_for, question_map

ROOT = COURSE_DIR.parent
GUIDE = ROOT.parent / "shared" / "guide" / "interview_guide_zh.txt"
NOTEBOOKS = sorted(COURSE_DIR.glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.skipif(not GUIDE.exists(), reason="the guide is not beside this checkout")
def test_every_guide_section_is_in_the_map():
    sections = re.findall(r"^(\d\.\d+) ", GUIDE.read_text(encoding="utf-8"), re.MULTILINE)
    assert sections == list(GUIDE_QUESTIONS)


def test_every_guide_question_has_a_chapter():
    assert all(chapters_for(s) for s in GUIDE_QUESTIONS)
    assert len(question_map()) == len(GUIDE_QUESTIONS)


def test_every_notebook_in_course_is_a_chapter():
    files = {c.file for c in CHAPTERS}
    for nb in COURSE_DIR.glob("*.ipynb"):
        assert nb.name in files, f"{nb.name} is not listed in parlab.course.CHAPTERS"


def test_readme_lists_the_chapters_and_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    for c in CHAPTERS:
        assert c.title in readme, f"README does not mention chapter {c.number:02d} '{c.title}'"
        if c.ready:
            assert f"course/{c.file}" in readme, f"README lists {c.file} as planned, but it exists"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_stored_executed_without_errors(path: Path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.strip():
            assert cell.execution_count is not None, f"cell {i} has no stored output: run `make notebooks`"
            assert not [o for o in cell.outputs if o.output_type == "error"], f"cell {i} stored an error"
        assert "TODO" not in cell.source


def test_guide_1_14_is_two_questions_said_the_same_way_everywhere():
    from parlab.course import PARTS, part

    q = GUIDE_QUESTIONS["1.14"]
    assert "combined" in q and "80 GB card" in q
    assert set(PARTS["1.14"]) == {c.number for c in chapters_for("1.14")} == {1, 8}
    where = dict((s, w) for s, _, w in question_map())["1.14"]
    assert part("1.14", 1) in where and part("1.14", 8) in where
    for path in (COURSE_DIR / "01_why_distributed.ipynb", ROOT / "solutions" / "ex01_memory_estimator.ipynb"):
        text = " ".join(" ".join(c.source.split()) for c in nbformat.read(path, as_version=4).cells)
        assert part("1.14", 1) in text, f"{path.name} does not name its part of guide 1.14"
        assert "first half of 1.14" not in text


def test_make_lab_prints_the_direct_link_to_chapter_00(capsys):
    from parlab.nbtools import FIRST_CHAPTER, main

    assert (ROOT / FIRST_CHAPTER).exists()
    assert main(["lab", "--dry-run", "--port", "8899"]) == 0
    out = capsys.readouterr().out
    token = re.search(r"--IdentityProvider.token=(\w+)", out).group(1)
    assert f"http://127.0.0.1:8899/lab/tree/{FIRST_CHAPTER}?token={token}" in out
    assert f"http://127.0.0.1:8899/lab?token={token}" in out
    assert "parlab.nbtools lab" in (ROOT / "Makefile").read_text()


def test_make_lab_names_a_bad_port_and_the_rule(capsys):
    from parlab.nbtools import main

    for bad in ("0", "65536"):
        with pytest.raises(SystemExit):
            main(["lab", "--dry-run", "--port", bad])
        assert f"--port must be in 1..65535, got {bad}" in capsys.readouterr().err
