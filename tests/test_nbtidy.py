"""A learner sees the course, not its scaffolding (issue 20 items 10 and 13): every "Check
yourself" cell's source is hidden, nbval's markers are tags (not ``# NBVAL_...`` comments), every
chapter opens with its title, the guide questions and a picture (its cover), and no chapter's
prose speaks to the maintainers. ``python -m parlab.course.nbtidy`` makes the first three true; these
tests keep all four true."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import find_comment_markers, find_metadata_tags

from parlab.course.cover import COVERS, chapter_name, cover_text
from parlab.course.nbtidy import (
    COVER_TAG,
    NBVAL_COMMENTS,
    default_notebooks,
    main,
    nbval_tag,
    tidy_cell,
    to_hide,
    untidy,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = default_notebooks(ROOT)
CHAPTERS = sorted((ROOT / "course").glob("*.ipynb"))
MAINTAINER = re.compile(r"make notebooks|make test|a test fails|\bnbval\b|tests/test_\w+\.py|the CI\b"
                        r"|shared CPU cores", re.IGNORECASE)


@pytest.fixture(scope="module")
def notebooks():
    return {p: nbformat.read(p, as_version=4) for p in NOTEBOOKS}


def test_every_notebook_is_tidy(notebooks):
    found = [f"{p.relative_to(ROOT)}: cell {i}: {problem}" for p, nb in notebooks.items()
             for hide in [set(to_hide(nb))] for i, c in enumerate(nb.cells)
             for problem in untidy(c, i in hide)]
    assert not found, "run `python -m parlab.course.nbtidy`:\n" + "\n".join(found)


def test_every_chapter_from_02_hides_its_check_yourself_source(notebooks):
    for path in CHAPTERS[2:]:
        nb = notebooks[path]
        hidden = [i for i in to_hide(nb) if nb.cells[i].metadata.get("jupyter", {}).get("source_hidden")]
        assert hidden and hidden == to_hide(nb), path.name


def test_no_chapter_speaks_to_the_maintainers(notebooks):
    found = [f"{p.name}: cell {i}: {m.group(0)!r}" for p in CHAPTERS for i, c in enumerate(notebooks[p].cells)
             if c.cell_type == "markdown" for m in MAINTAINER.finditer(c.source)]
    assert not found, "\n".join(found)


FIRST_SCREEN_LINES = 25  # markdown lines above the cover: about 550 px, so it starts on a 760 px screen


def test_every_chapter_opens_with_its_questions_and_its_cover(notebooks):
    for path in CHAPTERS:
        nb, name = notebooks[path], chapter_name(path)
        assert name in COVERS, f"{path.name}: add its cover to parlab.course.cover.COVERS, then run python -m parlab.course.nbtidy"
        first, cover = nb.cells[0], nb.cells[1]
        assert first.cell_type == "markdown" and first.source.startswith("# "), path.name
        assert COVER_TAG in cover.metadata.get("tags", []), f"{path.name}: run python -m parlab.course.nbtidy"
        assert cover.metadata["jupyter"]["source_hidden"] and f'show_cover("{name}")' in cover.source
        (out,) = cover.outputs
        assert "image/png" in out.data and out.data["text/plain"] == cover_text(name)
        assert len(first.source.splitlines()) <= FIRST_SCREEN_LINES, f"{path.name}: the cover is below the first screen"
        if not path.name.startswith("00"):  # the question: guide sections, or what it is for
            assert re.search(r"guide questions? answered|guide \d\.\d|\?|chapter is for", first.source, re.IGNORECASE), (
                f"{path.name}: the title cell names no question it answers")


def test_a_chapter_name_survives_renumbering():
    assert chapter_name("course/13_derivations.ipynb") == chapter_name("course/14_derivations.ipynb") == "derivations"
    assert chapter_name("x/notes.ipynb") == "notes"


# -- the rules themselves ----------------------------------------------------------------------
def _cells():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.cells = [md("## Check yourself"), code("x = 1\ncheck_yourself([('q?', f'{x}')])"),
                md("## Sample"), code("check_yourself(v, title='The round')"),
                code("check_yourself([('q?', 'a')])"),
                code("# NBVAL_IGNORE_OUTPUT\n#  NBVAL_SKIP \nprint(1)  # NBVAL_CHECK_OUTPUT stays")]
    return nb


def test_answer_cells_are_hidden_and_markers_become_the_tags_nbval_reads():
    nb = _cells()
    assert to_hide(nb) == [1, 4]  # under the heading, or the default title; not 'The round'
    before = [dict(find_comment_markers(c.source)) for c in nb.cells]
    hide = set(to_hide(nb))
    assert [tidy_cell(c, i in hide) for i, c in enumerate(nb.cells)] == [False, True, False, False, True, True]
    assert nb.cells[1].metadata["jupyter"]["source_hidden"] and "source_hidden" not in str(nb.cells[3].metadata)
    marked = nb.cells[5]
    assert marked.source == "print(1)  # NBVAL_CHECK_OUTPUT stays"
    assert marked.metadata["tags"] == ["nbval-ignore-output", "nbval-skip"]
    assert dict(find_metadata_tags(marked.metadata)) == before[5]  # nbval reads the same options
    assert [tidy_cell(c, i in hide) for i, c in enumerate(nb.cells)] == [False] * 6  # idempotent
    assert all(untidy(c, i in hide) == [] for i, c in enumerate(nb.cells))


def test_every_nbval_comment_has_a_tag_nbval_knows():
    for comment in NBVAL_COMMENTS:
        assert dict(find_comment_markers(f"# {comment}")) == dict(find_metadata_tags({"tags": [nbval_tag(comment)]}))


def test_the_command_checks_tidies_and_names_a_missing_notebook(tmp_path, capsys):
    path = tmp_path / "x.ipynb"
    nbformat.write(_cells(), path)
    assert main(["--check", str(path)]) == 1
    assert "cell 1: an answer cell whose source is shown" in capsys.readouterr().out
    assert main([str(path)]) == 0 and main(["--check", str(path)]) == 0
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing.ipynb")])
    assert "does not exist" in capsys.readouterr().err
