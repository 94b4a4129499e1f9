"""The notebook faces of parlab.viz: figures rendered at 2x and shown at their natural width; HTML
tables aligned by Python type with one number format per column and a plain-text twin that fits
110 characters; "check yourself" answers collapsed until clicked."""

import subprocess
import sys

import pytest

from parlab.viz.figures import (
    FigureImage,
    figure_image,
    natural_size,
    new_figure,
    png_size,
    render_png,
)
from parlab.viz.html import (
    ANSWER_CLASS,
    CHECK_MARKER,
    COLUMN_PX,
    TEXT_WIDTH,
    WRAP_AFTER,
    CheckYourself,
    Table,
    check_yourself,
    html_table,
    min_width_px,
    text_table,
    wrap_limit,
    wrap_text,
)


def _fig(w=6.0, h=3.0):
    fig = new_figure(w, h)
    fig.add_subplot().plot([1, 2, 3], [3, 1, 2])
    return fig


# -- figures --------------------------------------------------------------------------------------
def test_a_figure_renders_at_twice_its_natural_size():
    fig = _fig(6, 3)
    assert natural_size(fig) == (600, 300)
    assert png_size(render_png(fig)) == (1200, 600)
    assert png_size(render_png(fig, scale=1)) == (600, 300)


def test_rendering_is_deterministic_and_leaves_the_figure_as_it_was():
    fig = _fig()
    assert render_png(fig) == render_png(fig)
    assert natural_size(fig) == (600, 300) and fig.dpi == 100


def test_a_shown_figure_carries_its_natural_width():
    img = figure_image(_fig(5, 2))
    data, meta = img._repr_mimebundle_()
    assert isinstance(img, FigureImage) and data["image/png"].startswith(b"\x89PNG")
    assert meta["image/png"] == {"width": 500, "height": 200}
    assert png_size(data["image/png"])[0] == 2 * meta["image/png"]["width"]
    assert "PNG" not in data["text/plain"]


def test_a_figure_of_fractional_pixels_is_never_shown_wider_than_half_its_png():
    fig = new_figure(6.725, 2.005)  # 672.5 x 200.5 CSS px: an odd-width 1345 px PNG
    img = figure_image(fig)
    pw, ph = png_size(img.png)
    assert 2 * img.width <= pw and 2 * img.height <= ph
    assert pw - 2 * img.width <= 1 and ph - 2 * img.height <= 1


def test_bad_scale_and_bad_png_are_errors():
    with pytest.raises(ValueError, match="scale"):
        render_png(_fig(), scale=0)
    with pytest.raises(ValueError, match="PNG"):
        png_size(b"GIF89a")


def test_viz_never_imports_the_widgets():
    code = ("import sys, parlab.viz.figures, parlab.viz.html, parlab.viz.walls, parlab.viz.costmodel, "
            "parlab.viz.comm; bad = [m for m in ('parlab.widgets', 'ipywidgets') if m in sys.modules]; "
            "print(bad); sys.exit(bool(bad))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


# -- tables ---------------------------------------------------------------------------------------
def _aligns(page: str) -> list[str]:
    import re

    return re.findall(r'<td style="text-align:(\w+)', page)


def test_alignment_follows_the_python_type_not_the_first_character():
    page = html_table([["1F1B", 2, 2.5, "349 ms", True]], ["schedule", "n", "x", "time", "flag"])
    assert _aligns(page) == ["left", "right", "right", "left", "left"]


def test_one_number_format_per_column():
    rows = [["a", 1234.5678, 3], ["b", 2.0, 40000]]
    page = html_table(rows, ["name", "GB", "count"])
    assert ">1,235<" in page and ">2<" in page  # floats: 4 significant digits for the largest
    assert ">40,000<" in page and ">3<" in page
    page = html_table(rows, ["name", "GB", "count"], {"GB": ",.2f"})
    assert ">1,234.57<" in page and ">2.00<" in page
    page = html_table(rows, ["name", "GB", "count"], [None, lambda v: f"{v:.1e}", ",d"])
    assert ">1.2e+03<" in page


def test_formats_must_name_real_columns():
    with pytest.raises(ValueError, match="no column 'TB'"):
        html_table([[1]], ["GB"], {"TB": ".1f"})
    with pytest.raises(ValueError, match="2 entries for 1 columns"):
        html_table([[1]], ["GB"], [".1f", ".1f"])
    with pytest.raises(ValueError, match="row 0 has 2 values for 1 headers"):
        html_table([[1, 2]], ["GB"])


def test_short_values_never_wrap_and_everything_is_escaped():
    page = html_table([["349 ms", "<b>", "a long sentence of description that may wrap " * 2]],
                      ["time", "tag", "what"])
    assert page.count("white-space:nowrap") == 2 + 3  # the two short cells and the three headers
    assert "&lt;b&gt;" in page and "<b>" not in page


def test_a_table_wider_than_the_column_lets_shorter_text_wrap_until_it_fits():
    headers = [f"column {i}" for i in range(9)]
    rows = [[f"a value of {i} in row {r} here" for i in range(9)] for r in range(3)]  # 26 characters
    assert wrap_limit([headers] + rows) < 26 < WRAP_AFTER  # 9 x 26 characters do not fit on one line
    assert min_width_px(rows, headers) <= COLUMN_PX
    page = html_table(rows, headers)
    assert page.count("white-space:nowrap") == 9  # the headers only: every value may wrap
    narrow = html_table([["a sentence of thirty characters", 1]], ["what", "n"])
    assert narrow.count("white-space:nowrap") == 2 + 2  # fits: nothing of 40 characters or less wraps


def test_highlight_last_and_header_alignment():
    page = html_table([["weights", 2.0], ["total", 16.0]], ["term", "bytes / param"], highlight_last=True)
    assert page.count("font-weight:bold") == 1
    assert '<th style="text-align:right' in page  # the header over an all-number column


def test_the_text_twin_is_a_table_when_it_fits_and_records_when_not():
    small = text_table([["weights", 2.0], ["total", 16.0]], ["term", "bytes / param"])
    assert small.splitlines()[0] == "term     bytes / param" and small.splitlines()[-1] == "total            16.00"
    wide = text_table([["x" * 60, "y" * 60, 3]], ["a", "b", "c"])
    assert all(len(line) <= TEXT_WIDTH for line in wide.splitlines())
    assert wide.startswith("a: " + "x" * 60)
    assert text_table([["x" * 60, "y" * 60, 3]], ["a", "b", "c"]) == wide


def test_a_table_object_shows_html_and_plain_text():
    t = Table([["weights", 2.0]], ["term", "GB"], caption="model states")
    assert t._repr_html_().startswith('<table class="parlab-table"') and "model states" in t._repr_html_()
    assert repr(t).splitlines()[0] == "model states"


def test_wrap_text_keeps_short_lines_and_indents_the_rest():
    text = "short\n  " + "word " * 40
    out = wrap_text(text, width=50).splitlines()
    assert out[0] == "short" and all(len(line) <= 50 for line in out)
    assert out[1].startswith("  word") and out[2].startswith("    word")


# -- check yourself -------------------------------------------------------------------------------
def test_answers_are_collapsed_and_absent_from_the_plain_text():
    cy = CheckYourself([("What is 6 x 7?", "42, computed"), ("And 2 + 2?", "4")])
    page, plain = cy._repr_html_(), repr(cy)
    assert CHECK_MARKER in page and page.count(f'<details class="{ANSWER_CLASS}">') == 2
    assert " open" not in page
    before = page.split("<details")[0]
    assert "What is 6 x 7?" in before and "42" not in before
    assert "What is 6 x 7?" in plain and "42" not in plain and "2 questions" in plain


def test_an_answer_can_be_a_table():
    cy = CheckYourself([("Which terms?", Table([["weights", 2.0]], ["term", "GB"]))])
    inside = cy._repr_html_().split("<details")[1]
    assert "parlab-table" in inside


def test_check_yourself_rejects_items_that_are_not_pairs():
    with pytest.raises(ValueError, match="item 0 must be a \\(question, answer\\) pair"):
        check_yourself(["a question without an answer"])
