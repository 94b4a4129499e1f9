"""The static site (``make site``, ``parlab.site``): every notebook of course/ and exercises/ is a
page (the solutions are not), links and images all resolve (and the link checker does fail on a
broken one), answers stay hidden, dashboards show their stored previews, chapter 00's map points
at pages, the README's tables are on the front page, the glossary carries both languages, the
Pyodide bundle holds only pure-Python parlab, the vendored Pyodide is checked, the whole
site keeps within its size budget, and the allow-list sanitiser leaves no script in a page and
takes nothing a reader sees from a chapter (crafted attacks: ``test_site_safety.py``). Builds ``site/`` first if it is missing or stale."""

from __future__ import annotations

import re
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from parlab.site import bundle, calc, linkcheck, pages, vendor
from parlab.site.build import SIZE_BUDGET, ensure, site_bytes
from parlab.zh.glossary import GLOSSARY

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site() -> Path:
    return ensure(ROOT)


def notebooks(section: str) -> list[Path]:
    return sorted((ROOT / section).glob("*.ipynb"))


def test_every_chapter_and_exercise_is_a_page_and_no_solution_is(site):
    for section in ("course", "exercises"):
        for nb in notebooks(section):
            assert (site / section / f"{nb.stem}.html").is_file(), nb
    for nb in notebooks("exercises"):
        assert (site / "exercises" / nb.name).read_bytes() == nb.read_bytes()  # to download and run
    assert not (site / "solutions").exists()


def test_no_link_or_image_of_the_site_is_broken(site):
    broken, checked = linkcheck.check(site)
    assert broken == []
    assert checked > 20 * len(notebooks("course"))


def test_the_link_checker_reports_missing_pages_images_and_anchors(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a><a href="../index.html">ok</a>'
                                             '<a href="https://example.org/">outside: not followed</a>')
    with pytest.raises(ValueError, match="no index.html"):
        linkcheck.check(tmp_path)
    (tmp_path / "index.html").write_text('<a href="sub/a.html#here">ok</a><a href="sub/a.html#gone">bad anchor</a>'
                                         '<a href="sub/b.html">missing page</a><img src="fig.png">'
                                         '<a href="../up.html">outside</a>')
    broken, checked = linkcheck.check(tmp_path)
    assert sorted((b.page, b.url) for b in broken) == [
        ("index.html", "../up.html"), ("index.html", "fig.png"), ("index.html", "sub/a.html#gone"),
        ("index.html", "sub/b.html")]
    assert checked == 7


def test_answers_stay_hidden_and_pages_run_no_script(site):
    for nb in notebooks("course"):
        body = (site / "course" / f"{nb.stem}.html").read_text()
        for block in re.findall(r'<div class="parlab-check-yourself">.*?</ol></div>', body, re.S):
            assert block.count("<li>") == block.count('<details class="parlab-answer">'), nb.name
        assert re.findall(r'<script(?! defer src="(?:\.\./)*(?:static/site\.js|katex/))[^>]*>', body) == [], nb.name
    assert "parlab-check-yourself" in (site / "course" / "01_why_distributed.html").read_text()
    for page in [*site.glob("course/*.html"), *site.glob("exercises/*.html"), site / "index.html"]:
        main = page.read_text().partition('<main id="content">')[2]
        assert re.findall(r"\son\w+\s*=|javascript:|<(?:iframe|object|embed|svg|form)\b", main, re.I) == [], page


class _Seen(HTMLParser):
    """What a reader sees of a page body: its elements, attributes (styles as property:value) and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: list[object] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        style = {k: ";".join(":".join(p.strip() for p in d.split(":", 1)) for d in (v or "").split(";") if ":" in d)
                 for k, v in attrs if k == "style"}
        self.seen.append((tag, sorted({**{k: v or "" for k, v in attrs}, **style}.items())))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)  # <img/> is <img>

    def handle_endtag(self, tag: str) -> None:
        self.seen.append(f"/{tag}")

    def handle_data(self, data: str) -> None:
        self.seen.append(data)


def _seen(body: str) -> list[object]:
    parser = _Seen()
    parser.feed(body)
    return parser.seen


@pytest.mark.parametrize("stem", ["01_why_distributed", "12_interview_drill"])
def test_the_sanitiser_takes_nothing_a_reader_sees_from_a_chapter(stem, monkeypatch):
    """A chapter rendered with and without the allow-list (``site.sanitize``): the same elements,
    attributes, styles and text (the build's site of every chapter was compared the same way)."""
    from parlab.site import render as render_module

    kept = render_module.render(ROOT / "course" / f"{stem}.ipynb").body
    monkeypatch.setattr(render_module, "sanitize", lambda body: body)
    assert _seen(kept) == _seen(render_module.render(ROOT / "course" / f"{stem}.ipynb").body)


def test_every_stored_figure_and_dashboard_preview_is_shown(site):
    for nb in notebooks("course"):
        cells = nbformat.read(nb, as_version=4).cells
        pngs = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        body = (site / "course" / f"{nb.stem}.html").read_text()
        assert len(re.findall(rf'<img[^>]* src="{nb.stem}_files/[^"]+\.png"', body)) == pngs, nb.name
        assert "widget-view+json" not in body and "widget-state+json" not in body, nb.name
        assert "No description has been provided" not in body, nb.name  # alt: the output's text


def test_chapter_00s_map_links_to_pages(site):
    """Every notebook link of chapter 00 (its map and glossary) became a link to that page."""
    nb = notebooks("course")[0]
    body = (site / "course" / f"{nb.stem}.html").read_text()
    hrefs = set(re.findall(r'href="([^"#]+)', body))
    assert not [h for h in hrefs if h.endswith(".ipynb")]
    linked = set(re.findall(r'(?:href=\\"|\]\()([\w./-]+)\.ipynb', nb.read_text()))
    assert len(linked) > len(notebooks("course")) // 2
    assert {f"{stem}.html" for stem in linked} <= hrefs


def test_the_front_page_has_the_readme_tables_linking_the_pages(site):
    readme = (ROOT / "README.md").read_text()
    body = (site / "index.html").read_text()
    assert body.count("<table>") == len(pages.readme_tables(readme)) > 0
    for nb in notebooks("course"):
        assert f'href="course/{nb.stem}.html"' in body, nb.name


def test_the_glossary_and_the_frame_carry_both_languages(site):
    body = (site / "glossary.html").read_text()
    assert len(re.findall(r'<tr id="term-\d+"><td lang="zh-CN">', body)) == len(GLOSSARY)
    assert all(set(texts) == {"en", "zh"} and all(texts.values()) for texts in pages.UI.values())
    assert body.count('<span class="t" lang="zh-CN">') >= len(GLOSSARY)


def test_every_calculator_word_has_its_chinese():
    for c in calc.CALCULATORS.values():
        assert c.title in pages.CALC_ZH and all(x.label in pages.CALC_ZH for x in c.controls), c.name
        rows = calc.compute(c.name, {x.name: x.default for x in c.controls})["rows"]
        assert [r["label"] for r in rows if r["key"] != "capacity" and r["label"] not in pages.CALC_ZH] == []


def test_the_calculators_page_shows_the_defaults_computed_at_build_time(site):
    body = (site / "calculators.html").read_text()
    for name, c in calc.CALCULATORS.items():
        result = calc.compute(name, {x.name: x.default for x in c.controls})
        assert "error" not in result, name
        assert pages.rows_html(result) in body, name
        assert all(f'id="{name}-{x.name}"' in body for x in c.controls)


def test_a_bad_control_value_is_one_line_naming_it():
    assert calc.compute("grid", {"dp": "two"}) == {"error": "dp must be a whole number, got 'two'"}
    assert calc.compute("grid", {"tp": "0"}) == {"error": "tp must be in 1..64, got 0"}
    assert calc.compute("memory", {"dtype": "fp8"})["error"].startswith("dtype must be one of fp32, fp16, bf16")
    assert "tp must divide the attention heads" in calc.compute("memory", {"tp": "64", "dp": "2"})["error"]


def test_the_bundle_holds_only_pure_python_parlab(site):
    names = zipfile.ZipFile(site / "py" / "parlab.zip").namelist()
    assert all(n.startswith("parlab/") for n in names)
    assert {"parlab/costmodel/plan/estimate.py", "parlab/schedules/simulate.py", "parlab/layout.py",
            "parlab/site/calc.py"} <= set(names)
    assert not any(n.startswith(("parlab/widgets", "parlab/viz", "parlab/comm", "parlab/parallel")) for n in names)
    # every module of the pure packages, also those a plan imports only when it needs them (a
    # mixture of experts: costmodel.moe_layer), else that plan fails in the browser alone
    for pkg in ("costmodel", "schedules"):
        assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "parlab" / pkg).glob("*.py")} <= set(names)
    with pytest.raises(RuntimeError, match="pluggy"):
        bundle.imported(ROOT, "pluggy")  # a package Pyodide's core lacks is named (pytest's own)


def test_the_vendored_packages_are_the_pinned_files_only(site, tmp_path):
    shipped = sorted(p.name for p in (site / "pyodide").iterdir())
    assert shipped == sorted([*vendor.PYODIDE.files, "LICENSE.txt"])
    assert f'"version": "{vendor.PYODIDE.version}"' in (site / "pyodide" / "package.json").read_text()
    assert (site / "katex" / "katex.min.js").is_file() and list((site / "katex" / "fonts").glob("*.woff2"))
    fake = tmp_path / f"pyodide-{vendor.PYODIDE.version}.tgz"
    fake.write_bytes(b"not the registry's tarball")
    with pytest.raises(RuntimeError, match="SHA-512"):
        vendor.tarball(vendor.PYODIDE, tmp_path)
    assert not fake.exists()


def test_the_site_keeps_its_size_budget(site):
    assert site_bytes(site) <= SIZE_BUDGET, f"site/ is {site_bytes(site) / 1e6:.1f} MB, budget {SIZE_BUDGET / 1e6:.0f} MB"


def test_the_figures_draw_what_the_engines_computed():
    from parlab.layout import Grid
    from parlab.schedules import make_schedule
    from parlab.site import figures

    svg = calc.compute("pipeline", {"schedule": "interleaved", "p": "4", "m": "8", "v": "2"})["svg"]
    ops = sum(len(stage) for stage in make_schedule("interleaved", 4, 8, 2).stages)
    assert svg.count("<rect") == ops and svg.count("<title>stage ") == ops
    svg = calc.compute("grid", {"dp": "2", "tp": "4", "pp": "4", "rank": "13"})["svg"]
    grid = Grid(dp=2, tp=4, pp=4)
    coloured = set().union(*(grid.group(d, 13) for d in ("tp", "dp", "pp")))
    ranks = re.findall(r'fill="([^"]+)" stroke="[^"]+"><title>rank (\d+),', svg)
    assert len(ranks) == grid.world
    assert {int(r) for fill, r in ranks if fill in figures.GROUP_COLOUR.values()} == coloured
    assert svg.count('stroke="#000"') == 1  # the chosen rank
    result = calc.compute("memory", {})
    terms = [r for r in result["rows"] if r["key"] in ("parameters", "gradients", "optimizer states", "activations")]
    assert all(f"{r['key']}: {r['shown']}" in result["svg"] for r in terms)
