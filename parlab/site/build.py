"""``make site``: the course as static files in ``site/``, from the notebooks' stored outputs.

Pages: the front page (README's tables), every chapter (``course/*.ipynb``) and exercise
(``exercises/*.ipynb``, with the notebook to download; the solutions stay out: they are the
answers), whatever notebooks exist; the calculators; the glossary; a search index. Then
Pyodide's core and KaTeX (``vendor``), the pure-Python bundle (``bundle``), and the link check.
"""

from __future__ import annotations

import fcntl
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import bundle, linkcheck, pages, search, vendor
from .render import Rendered, render

STATIC = Path(__file__).parent / "static"
MARKER = ".parlab-site"  # a site/ this build made (the only kind of folder it deletes)
SECTIONS = ("course", "exercises")  # notebook folders published, in sidebar order
#: what site/ may weigh (README, tests/test_site.py): Pyodide's core is 12.3 MB of it, the
#: chapters' pages and figures about 5.5 MB today
SIZE_BUDGET = 25_000_000


@dataclass(frozen=True)
class Report:
    pages: int
    links: int
    bytes: int
    seconds: float

    def __str__(self) -> str:
        return (f"site: {self.pages} pages, {self.links} links checked, {self.bytes / 1e6:.1f} MB, "
                f"built in {self.seconds:.1f} s")


def site_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def _clean(out: Path) -> None:
    """Make ``out`` an empty folder for a build: an earlier build's (with ``MARKER``) is deleted,
    anything else there is refused, one line, before anything is written or deleted."""
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise RuntimeError(f"{out} exists and is not a folder: the site is built into a folder (give a "
                               "new path or an earlier site's)")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise RuntimeError(f"{out} exists and was not made by make site (no {MARKER} in it): not deleting it")
        shutil.rmtree(out)
    try:
        out.mkdir(parents=True)
    except OSError as err:
        raise RuntimeError(f"cannot make the site folder {out}: {err.strerror or err}") from None
    (out / MARKER).write_text("built by python -m parlab.site build; safe to delete\n")


def _glossary(rendered_hrefs: set[str]) -> list[tuple[str, str, str, str, str | None]]:
    from parlab.zh.glossary import GLOSSARY, link

    rows = []
    for term in GLOSSARY:
        target = link(term)
        href = None
        if target:
            file, _, frag = target.partition("#")
            page = f"course/{file.removesuffix('.ipynb')}.html"
            href = f"{page}#{frag}" if page in rendered_hrefs else None
        rows.append((term.zh, term.en, term.zh_def, term.en_def, href))
    return rows


def notebook_pages(root: Path) -> dict[str, Rendered]:
    """Every published notebook rendered (and sanitised: ``render``), by its page's path
    ('course/01_why_distributed.html')."""
    return {f"{section}/{nb.stem}.html": render(nb) for section in SECTIONS
            for nb in sorted((root / section).glob("*.ipynb"))}


def _write_notebook_page(root: Path, out: Path, href: str, p: Rendered, nav: list[pages.NavItem]) -> None:
    """One notebook's page and its figures; a chapter links its calculators, an exercise offers
    its notebook to download."""
    dest = out / href
    dest.parent.mkdir(parents=True, exist_ok=True)
    body = p.body
    tools = [c for c in pages.CALCULATORS.values() if href.startswith(f"course/{c.chapter}_")]
    if tools:
        body = pages.calculator_links(tools, "../") + body
    if href.startswith("exercises/"):
        shutil.copy(root / href.replace(".html", ".ipynb"), dest.with_suffix(".ipynb"))
        body = (f'<p class="download"><a href="{dest.with_suffix(".ipynb").name}" download>{pages.t("download")}</a>'
                "</p>" + body)
    dest.write_text(pages.page(p.title, body, nav, href, pages.katex_head(body, href)), encoding="utf-8")
    for name, data in p.files.items():
        (dest.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (dest.parent / name).write_bytes(data)


def build(root: Path, out: Path, cache: Path | None = None) -> Report:
    """Build the site of the checkout at ``root`` into ``out``; raise if a link is broken."""
    start = time.perf_counter()
    root, out = root.resolve(), out.resolve()
    _clean(out)
    rendered = notebook_pages(root)
    nav = [pages.NavItem("index.html", "Home", "", ui="home"),
           pages.NavItem("calculators.html", "Calculators", "",
                         tuple((c.name, c.title) for c in pages.CALCULATORS.values()), ui="calculators"),
           pages.NavItem("glossary.html", "Glossary", "", ui="glossary")]
    nav += [pages.NavItem(href, p.title, href.split("/")[0], p.headings) for href, p in rendered.items()]
    entries = []
    for href, p in rendered.items():
        _write_notebook_page(root, out, href, p, nav)
        entries += search.sections(href, p.title, p.body)
    chapters = {href.split("/")[1][:2]: (href, p.title) for href, p in rendered.items() if href.startswith("course/")}
    missing = sorted({c.chapter for c in pages.CALCULATORS.values()} - set(chapters))
    if missing:
        raise RuntimeError(f"calculators link to chapters {missing}, which course/ does not have")
    glossary = _glossary(set(rendered))
    generated = {
        "index.html": ("parlab", pages.front_body((root / "README.md").read_text(encoding="utf-8"),
                                                  {h.removesuffix(".html"): h for h in rendered})),
        "calculators.html": ("Calculators", pages.calculators_body(chapters)),
        "glossary.html": ("Glossary", pages.glossary_body(glossary)),
    }
    entries += [{"t": f"{zh} / {en}", "p": "Glossary", "u": f"glossary.html#{pages.glossary_id(i)}",
                 "x": f"{en_def} {zh_def}"} for i, (zh, en, zh_def, en_def, _) in enumerate(glossary)]
    for href, (title, body) in generated.items():
        head = '<script type="module" src="static/calc.js"></script>' if href == "calculators.html" else ""
        (out / href).write_text(pages.page(title, body, nav, href, head), encoding="utf-8")
    (out / "search.json").write_text(search.index_json(entries), encoding="utf-8")
    shutil.copytree(STATIC, out / "static")
    _pygments_css(out / "static" / "pygments.css")
    for package in vendor.PACKAGES:
        vendor.install(package, out / package.name, cache or root / "build" / "site-cache")
    bundle.build(root, out / "py" / "parlab.zip")
    broken, links = linkcheck.check(out)
    if broken:
        raise RuntimeError(f"{len(broken)} broken links in {out}:\n" + "\n".join(map(str, broken)))
    (out / MARKER).touch()  # the build's end: ``ensure`` compares the inputs' times with it
    return Report(len(rendered) + len(generated), links, site_bytes(out), time.perf_counter() - start)


def _pygments_css(dest: Path) -> None:
    from pygments.formatters import HtmlFormatter

    dest.write_text(HtmlFormatter(style="default").get_style_defs(".highlight"), encoding="utf-8")


def inputs(root: Path) -> list[Path]:
    """What a site is built from: the published notebooks, the README and parlab's code."""
    return [*(p for s in SECTIONS for p in (root / s).glob("*.ipynb")), root / "README.md",
            *(root / "parlab").rglob("*.py"), *STATIC.iterdir()]


def ensure(root: Path) -> Path:
    """``root/site``, built first if it is missing or older than one of its ``inputs`` (under a
    lock in ``build/``, so that two test processes never build it at once)."""
    out, lock = root / "site", root / "build" / "site.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        marker = out / MARKER
        if not marker.exists() or max(p.stat().st_mtime for p in inputs(root)) > marker.stat().st_mtime:
            build(root, out)
    return out
