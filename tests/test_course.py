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
    from parlab.course import readme_table

    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    for c in CHAPTERS:
        assert c.title in readme, f"README does not mention chapter {c.number:02d} '{c.title}'"
        assert f"course/{c.file}" in readme, f"README lists {c.file} as planned"
    assert readme_table() in readme, "README's chapter table differs from parlab.course.readme_table()"
    assert "planned" not in readme_table()


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
    from parlab.course.nbtools import FIRST_CHAPTER, main

    assert (ROOT / FIRST_CHAPTER).exists()
    assert main(["lab", "--dry-run", "--port", "8899"]) == 0
    out = capsys.readouterr().out
    token = re.search(r"--IdentityProvider.token=(\w+)", out).group(1)
    assert f"http://127.0.0.1:8899/lab/tree/{FIRST_CHAPTER}?token={token}" in out
    assert f"http://127.0.0.1:8899/lab?token={token}" in out
    assert "parlab.course.nbtools lab" in (ROOT / "Makefile").read_text()


def test_make_lab_names_a_bad_port_and_the_rule(capsys):
    from parlab.course.nbtools import main

    for bad in ("0", "65536"):
        with pytest.raises(SystemExit):
            main(["lab", "--dry-run", "--port", bad])
        assert f"--port must be in 1..65535, got {bad}" in capsys.readouterr().err


# -- the complete map: every guide section -> a chapter heading (anchor link) and its exercises ----------
from parlab.course import (  # noqa: E402
    EXERCISES,
    anchor,
    course_map,
    heading_text,
    map_problems,
    section_map,
    sections_named,
    unlinkable,
)

#: every section of the guide (1.1-1.22, 2.1-2.3, 3.1-3.5, 4.1-4.5)
ALL_SECTIONS = ([f"1.{i}" for i in range(1, 23)] + [f"2.{i}" for i in range(1, 4)]
                + [f"3.{i}" for i in range(1, 6)] + [f"4.{i}" for i in range(1, 6)])


def test_anchors_are_jupyterlab_s_heading_ids():
    # @jupyterlab/rendermime createHeaderId: textContent.replace(/ /g, '-'); markup is not text
    assert anchor("2. What one GPU holds (guide 1.14, second part)") == \
        "2.-What-one-GPU-holds-(guide-1.14,-second-part)"
    assert heading_text("The `no_sync` trick, **measured** [here](x.ipynb)") == "The no_sync trick, measured here"
    assert anchor("5. Guide 1.19: ZeRO-3 over 10 GbE") == "5.-Guide-1.19:-ZeRO-3-over-10-GbE"
    assert unlinkable(anchor("BLOOM's table (guide 2.3)")) == ""
    assert '"' in unlinkable(anchor('The "20n GB" rule')) and "\u00b7" in unlinkable(anchor("00 \u00b7 Start"))


def test_a_heading_names_sections_singly_in_lists_and_in_ranges():
    assert sections_named("6. Slow networks (guide 1.18, 3.3-3.5)") == ["1.18", "3.3", "3.4", "3.5"]
    assert sections_named("4. The numbers: guide 1.5's three effects") == ["1.5"]
    assert sections_named("Pipeline bubbles (guide 1.9, guide 1.10)") == ["1.9", "1.10"]
    assert sections_named("2. What one GPU holds (guide 1.14, second part)") == ["1.14"]
    assert sections_named("Bucket sizes of 1.5 MB") == []


def test_the_map_covers_every_guide_section_in_order():
    assert [r.section for r in section_map()] == ALL_SECTIONS
    assert all(r.answers for r in section_map())
    assert {s for e in EXERCISES for s in e.sections} <= set(ALL_SECTIONS)


def test_every_map_link_resolves_to_a_heading_of_an_existing_chapter_and_exercise():
    """Strict: every chapter exists, has a ## or ### heading naming each of its sections with an id a
    JupyterLab link can reach, and every exercise the map names is on disk."""
    problems = map_problems()
    assert not problems, "\n".join(problems)


def test_chapter_00_stores_the_current_map_with_no_planned_entries():
    nb = nbformat.read(COURSE_DIR / "00_start_here.ipynb", as_version=4)
    stored = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "parlab-course-map" in "".join(o.get("data", {}).get("text/html", ""))]
    assert len(stored) == 1, "chapter 00 shows the map once (display(course_map()))"
    assert "".join(stored[0].data["text/html"]) == course_map().html(), "re-execute chapter 00"
    text = " ".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                    for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "(planned)" not in text


CHAPTER_LINK = re.compile(r"\]\((\d\d_[\w-]+\.ipynb)#([^)\s]+)\)")


def test_every_link_from_one_chapter_to_a_heading_of_another_resolves():
    """A markdown link ``[..](NN_name.ipynb#anchor)`` anywhere in course/, solutions/ or exercises/
    points at an existing notebook of course/ with a ## / ### heading whose JupyterLab id is the
    anchor (a renamed heading breaks the links to it)."""
    from parlab.course import anchor

    ids = {}
    for path in COURSE_DIR.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        ids[path.name] = {anchor(m.group(1)) for c in nb.cells if c.cell_type == "markdown"
                          for m in re.finditer(r"^#{1,6}\s+(.*)$", c.source, re.MULTILINE)}
    broken = []
    for path in sorted(p for d in ("course", "solutions", "exercises") for p in (COURSE_DIR.parent / d).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "markdown":
                continue
            for target, frag in CHAPTER_LINK.findall(cell.source):
                if frag not in ids.get(target, set()):
                    broken.append(f"{path.parent.name}/{path.name} cell {i}: {target}#{frag}")
    assert not broken, "links to no heading:\n" + "\n".join(broken)
