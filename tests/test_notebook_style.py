"""What a learner sees in every stored notebook (course/, solutions/, exercises/), checked on the
files, without running them:

- no stored text output has a line longer than 110 characters (it wraps at 1400 px with the file
  browser open);
- "Check yourself" answers are hidden until clicked: answers are shown only by
  ``parlab.viz.html.check_yourself``, whose output (``text/html`` carrying the class
  ``CHECK_MARKER``) holds each answer inside a closed ``<details class="parlab-answer">``; no
  answer's text appears outside its ``<details>`` (neither in the HTML nor in ``text/plain``).
  A code cell counts as an answer cell when it sits under a markdown heading containing "Check
  yourself" (until the next heading of the same or a higher level) or when its first line is a
  comment mentioning "answer"; such a cell may output nothing but ``check_yourself`` outputs;
- every dashboard cell (a widget view of a ``parlab.widgets.Dashboard``: its stored widget state
  has the ``parlab-dashboard`` class, or the cell's source calls a ``...Dashboard(``) also stores
  a static picture of its state: an ``image/png`` (or, for a dashboard without a figure, a
  ``text/html``), so a notebook opened before Run All or rendered statically shows it;
- every stored parlab table fits the notebook's column at 1400x900 with the file browser open:
  its narrowest layout (text that may not wrap at full length, other text at its longest word,
  ``CHAR_PX`` a character and ``CELL_PAD_PX`` a cell, as ``parlab.viz.html.min_width_px``
  estimates it) is at most ``COLUMN_PX`` wide, so no column is hidden past the screen's edge;
- every stored PNG is crisp: rendered at 2x and shown at its natural width (``width`` metadata
  at most half the PNG's pixel width), as ``parlab.viz.figures`` does.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import nbformat
import pytest

from parlab.course.nbtidy import answer_cells
from parlab.viz.figures import png_size
from parlab.viz.html import ANSWER_CLASS, CELL_PAD_PX, CHAR_PX, CHECK_MARKER, COLUMN_PX, TEXT_WIDTH

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p for d in ("course", "solutions", "exercises") for p in (ROOT / d).glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
DASHBOARD_CALL = re.compile(r"\b\w*Dashboard\(")
DETAILS = re.compile(r"<details\b([^>]*)>(.*?)</details>", re.DOTALL | re.IGNORECASE)
SUMMARY = re.compile(r"<summary\b.*?</summary>", re.DOTALL | re.IGNORECASE)
TAG = re.compile(r"<[^>]+>")
PARLAB_TABLE = re.compile(r'<table class="parlab-table".*?</table>', re.DOTALL)
TABLE_ROW = re.compile(r"<tr\b.*?</tr>", re.DOTALL)
TABLE_CELL = re.compile(r'<t[hd] style="([^"]*)">(.*?)</t[hd]>', re.DOTALL)

ids = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _plain(fragment: str) -> str:
    """Visible text of an HTML fragment, whitespace collapsed."""
    return " ".join(html.unescape(TAG.sub(" ", fragment)).split())


def text_outputs(cell) -> list[str]:
    """The stored text of a cell: streams, ``text/plain`` of results and displays, errors."""
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append(_text(o.text))
        elif o.output_type in ("display_data", "execute_result"):
            if "text/plain" in o.data:
                out.append(_text(o.data["text/plain"]))
        elif o.output_type == "error":
            out.append(f"{o.ename}: {o.evalue}")
    return out


def is_check_yourself(output) -> bool:
    return (output.output_type in ("display_data", "execute_result")
            and CHECK_MARKER in _text(output.get("data", {}).get("text/html", "")))


def hidden_answer_problems(output) -> list[str]:
    """Why a check_yourself output shows an answer without a click ([] when it does not)."""
    page = _text(output.data["text/html"])
    plain = _text(output.data.get("text/plain", ""))
    problems, answers = [], []
    for attrs, body in DETAILS.findall(page):
        if re.search(r"\bopen\b", attrs):
            problems.append("a <details> answer is stored open")
        if ANSWER_CLASS not in attrs:
            problems.append(f"a <details> lacks class {ANSWER_CLASS!r}")
        answers.append(_plain(SUMMARY.sub(" ", body)))
    if not answers:
        problems.append("no <details> answer at all")
    outside = _plain(DETAILS.sub(" ", page))
    for a in answers:
        if a and a in outside:
            problems.append(f"answer visible outside <details>: {a[:60]!r}")
        if a and a in " ".join(plain.split()):
            problems.append(f"answer in text/plain: {a[:60]!r}")
    return problems


def dashboard_models(nb) -> set[str]:
    """Model ids of the stored widget state whose DOM classes mark a parlab Dashboard."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return {mid for mid, m in state.items()
            if "parlab-dashboard" in m.get("state", {}).get("_dom_classes", [])}


def long_lines(nb) -> list[str]:
    """The stored text lines of ``nb`` longer than ``TEXT_WIDTH``, one message each."""
    long = []
    for i, cell in enumerate(nb.cells):
        for text in text_outputs(cell):
            long += [f"cell {i}: {len(line)} chars: {line[:80]}..." for line in text.splitlines()
                     if len(line) > TEXT_WIDTH]
    return long


def missing_pictures(nb) -> list[str]:
    """The dashboard outputs of ``nb`` stored without an image/png or text/html picture."""
    dashboards = dashboard_models(nb)
    missing = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            view = o.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            if view.get("model_id") in dashboards or DASHBOARD_CALL.search(cell.source):
                if "image/png" not in o.data and "text/html" not in o.data:
                    missing.append(f"cell {i}: a dashboard output without image/png or text/html "
                                   f"({', '.join(o.data)})")
    return missing


def table_min_width(page: str) -> int:
    """The estimated px of a stored ``<table class="parlab-table">`` at its narrowest."""
    widths: list[int] = []
    for row in TABLE_ROW.findall(page):
        cells = [(style, _plain(value)) for style, value in TABLE_CELL.findall(row)]
        need = [len(v) if "nowrap" in style else max((len(w) for w in v.split()), default=0) for style, v in cells]
        widths = [max(a, b) for a, b in zip(widths, need, strict=True)] if widths else need
    return sum(CHAR_PX * w + CELL_PAD_PX for w in widths)


def wide_tables(nb) -> list[str]:
    """The stored parlab tables of ``nb`` wider than the notebook column (``COLUMN_PX``)."""
    out = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            for page in PARLAB_TABLE.findall(_text(o.get("data", {}).get("text/html", ""))):
                if (w := table_min_width(page)) > COLUMN_PX:
                    out.append(f"cell {i}: a table {w} px wide at least (the column holds {COLUMN_PX} px)")
    return out


def blurry_pngs(nb) -> list[str]:
    """The stored PNGs of ``nb`` not shown at half their pixel width or less."""
    blurry = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if "image/png" not in o.get("data", {}):
                continue
            w, _ = png_size(base64.b64decode(_text(o.data["image/png"])))
            shown = o.get("metadata", {}).get("image/png", {}).get("width")
            if shown is None or int(shown) * 2 > w:
                blurry.append(f"cell {i}: a {w} px PNG shown at {shown or 'the cell width'} "
                              "(use parlab.viz.figures.show_figure)")
    return blurry


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_stored_text_line_is_longer_than_110_characters(path):
    long = long_lines(nbformat.read(path, as_version=4))
    assert not long, "\n".join(long)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_check_yourself_answers_are_hidden_until_clicked(path):
    nb = nbformat.read(path, as_version=4)
    problems = []
    for i in answer_cells(nb):
        for o in nb.cells[i].outputs:
            if not is_check_yourself(o):
                kind = o.output_type if o.output_type == "stream" else ", ".join(o.get("data", {}))
                problems.append(f"cell {i} shows answers outside check_yourself ({kind})")
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if is_check_yourself(o):
                problems += [f"cell {i}: {p}" for p in hidden_answer_problems(o)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_dashboard_cell_stores_a_static_picture(path):
    missing = missing_pictures(nbformat.read(path, as_version=4))
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_stored_table_fits_the_column_at_1400x900(path):
    problems = wide_tables(nbformat.read(path, as_version=4))
    assert not problems, f"{path.name} (re-execute it, or shorten the table's text):\n" + "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_stored_png_is_rendered_at_2x_and_shown_at_natural_width(path):
    blurry = blurry_pngs(nbformat.read(path, as_version=4))
    assert not blurry, "\n".join(blurry)


# -- the rules themselves: each catches what it is for ------------------------------------------
def _nb(cells, widgets=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    if widgets is not None:
        nb.metadata["widgets"] = {WIDGET_STATE: {"state": widgets}}
    return nb


def _check_output(items):
    from parlab.viz.html import CheckYourself

    obj = CheckYourself(items)
    return nbformat.v4.new_output("display_data", data={"text/html": obj._repr_html_(),
                                                        "text/plain": repr(obj)})


def test_answer_cells_are_those_under_a_check_yourself_heading_or_marked_answers():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = _nb([md("## See it"), code("x = 1"), md("## Check yourself\n1. why?"), code("print(2)"),
              md("### a sub-heading"), code("print(3)"), md("## Next"), code("y = 2"),
              code("# Answers (click to expand)\nprint(4)")])
    assert answer_cells(nb) == [3, 5, 8]


def test_printed_answers_are_caught_and_check_yourself_is_not():
    assert hidden_answer_problems(_check_output([("What is 6 x 7?", "42, computed")])) == []
    shown = _check_output([("What is 6 x 7?", "42, computed")])
    shown.data["text/html"] = shown.data["text/html"].replace("<details ", "<details open ")
    assert any("open" in p for p in hidden_answer_problems(shown))
    leaked = _check_output([("What is 6 x 7?", "42, computed")])
    leaked.data["text/plain"] += "\n42, computed"
    assert any("text/plain" in p for p in hidden_answer_problems(leaked))


def test_a_dashboard_is_recognised_by_its_stored_dom_class():
    nb = _nb([], widgets={"a": {"state": {"_dom_classes": ["parlab-dashboard"]}},
                          "b": {"state": {"_dom_classes": []}}})
    assert dashboard_models(nb) == {"a"}


def test_an_answer_printed_beside_its_details_is_caught():
    out = _check_output([("What is 6 x 7?", "42, computed")])
    out.data["text/html"] += "<p>42, computed</p>"
    assert any("outside <details>" in p for p in hidden_answer_problems(out))


def test_a_long_stored_line_is_caught_and_one_of_110_is_not():
    code = nbformat.v4.new_code_cell
    stream = nbformat.v4.new_output
    ok = code("print()", outputs=[stream("stream", name="stdout", text="x" * TEXT_WIDTH + "\n")])
    too_long = code("print()", outputs=[stream("stream", name="stdout", text="x" * (TEXT_WIDTH + 1))])
    assert long_lines(_nb([ok])) == []
    assert len(long_lines(_nb([ok, too_long]))) == 1


def test_a_dashboard_output_without_a_picture_is_caught():
    code, output = nbformat.v4.new_code_cell, nbformat.v4.new_output
    view = {WIDGET_VIEW: {"model_id": "a"}, "text/plain": "MemoryWallDashboard(...)"}
    bare = code("MemoryWallDashboard()", outputs=[output("display_data", data=view)])
    shown = code("MemoryWallDashboard()",
                 outputs=[output("display_data", data={**view, "text/html": "<b>t</b>"})])
    assert missing_pictures(_nb([shown])) == []
    assert len(missing_pictures(_nb([bare]))) == 1
    by_state = code("d", outputs=[output("display_data", data=view)])  # no Dashboard( in source
    assert len(missing_pictures(_nb([by_state], widgets={"a": {"state": {
        "_dom_classes": ["parlab-dashboard"]}}}))) == 1


def test_a_png_shown_wider_than_half_its_pixels_is_caught():
    from parlab.viz.figures import new_figure, render_png

    png = base64.b64encode(render_png(new_figure(2.0, 1.0), 2)).decode()
    w, _ = png_size(base64.b64decode(png))
    output = nbformat.v4.new_output

    def cell(width):
        meta = {} if width is None else {"image/png": {"width": width}}
        return nbformat.v4.new_code_cell("f", outputs=[output("display_data", data={"image/png": png},
                                                               metadata=meta)])

    assert blurry_pngs(_nb([cell(w // 2)])) == []
    assert len(blurry_pngs(_nb([cell(w // 2 + 1), cell(None)]))) == 2


def test_a_stored_table_wider_than_the_column_is_caught_and_a_wrapping_one_is_not():
    from parlab.viz.html import html_table

    headers = [f"column {i}" for i in range(9)]
    rows = [[f"a value of {i} in row {r} here" for i in range(9)] for r in range(3)]
    wide = html_table(rows, headers).replace('">a value', ';white-space:nowrap">a value')  # as before
    assert len(wide_tables(_nb([_cell_with_html(wide)]))) == 1
    assert wide_tables(_nb([_cell_with_html(html_table(rows, headers))])) == []


def _cell_with_html(page: str):
    out = nbformat.v4.new_output("display_data", data={"text/html": page, "text/plain": "t"})
    return nbformat.v4.new_code_cell("show_table(rows, headers)", outputs=[out])
