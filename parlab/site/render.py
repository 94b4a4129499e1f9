"""One executed notebook as the body of a site page, from its stored outputs (nothing is run).

nbconvert's ``basic`` template (cells only, no CSS or JavaScript of its own) renders the cells;
before it, a dashboard's live widget output is dropped so that its stored static preview (the PNG
or HTML the dashboard also emits) is what shows, a cell whose source the notebook collapses
(``jupyter.source_hidden``: "Check yourself" answers, the 中文口述版 calls) loses its source, and
figures are extracted to files beside the page. After it, links between notebooks
(``04_pipeline_parallel.ipynb#...``) point at the pages, heading ids are JupyterLab's
(nbconvert URL-quotes them; links in the course are written against JupyterLab's), and the whole
body goes through the allow-list sanitiser (``sanitize``): a page runs nothing that a notebook's
output or markdown holds.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import unquote

from .sanitize import sanitize

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
HIDE_INPUT, HIDE_OUTPUT = "site-hide-input", "site-hide-output"
_NB_LINK = re.compile(r'(href=")(?![a-z][a-z0-9+.-]*:|/|#)([^"#]*?)\.ipynb(#[^"]*)?"')
_HEADING = re.compile(r'<h([1-3]) id="([^"]*)"[^>]*>(.*?)</h\1>', re.S)


@dataclass(frozen=True)
class Rendered:
    """A page body: its title (the first heading), its h2 headings (id, text) for the sidebar,
    the HTML, and the figures extracted from it (file name -> bytes)."""

    title: str
    headings: tuple[tuple[str, str], ...]
    body: str
    files: dict[str, bytes]


@cache
def _exporter():
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExtractOutputPreprocessor, TagRemovePreprocessor

    exporter = HTMLExporter(template_name="basic", exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT},
                                                         remove_all_outputs_tags={HIDE_OUTPUT}), enabled=True)
    exporter.register_preprocessor(ExtractOutputPreprocessor(), enabled=True)
    return exporter


def prepare(nb) -> None:
    """Drop live widgets (their static preview stays) and tag collapsed sources and outputs."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        jupyter = cell.metadata.get("jupyter", {})
        tags = set(cell.metadata.get("tags", []))
        if jupyter.get("source_hidden"):
            tags.add(HIDE_INPUT)
        if jupyter.get("outputs_hidden"):
            tags.add(HIDE_OUTPUT)
        cell.metadata["tags"] = sorted(tags)
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data and WIDGET_VIEW in data:
                del data[WIDGET_VIEW]


def fix_links(body: str) -> str:
    """``x.ipynb#h`` -> ``x.html#h`` for relative links; heading ids (and their own anchor links)
    un-quoted, as JupyterLab spells them."""
    body = _NB_LINK.sub(lambda m: f'{m.group(1)}{m.group(2)}.html{m.group(3) or ""}"', body)
    for quoted in set(re.findall(r'<h[1-6] id="([^"]*)"', body)):
        plain = html.escape(unquote(html.unescape(quoted)))
        if plain != quoted:
            body = body.replace(f'id="{quoted}"', f'id="{plain}"').replace(f'href="#{quoted}"', f'href="#{plain}"')
    return body


def _alt_texts(body: str, nb, stem: str) -> str:
    """Each extracted figure's alt text: its output's plain-text form (a dashboard's says what it
    shows), instead of nbconvert's "No description has been provided for this image"."""
    pattern = re.compile(r'<img alt="No description has been provided for this image"([^>]*?)src="('
                         + re.escape(stem) + r'_files/output_(\d+)_(\d+)\.png)"')

    def alt(m: re.Match) -> str:
        out = nb.cells[int(m.group(3))].outputs[int(m.group(4))]
        text = " ".join(str(out.get("data", {}).get("text/plain", "")).split())[:300]
        return f'<img alt="{html.escape(text or "figure")}"{m.group(1)}src="{m.group(2)}"'

    return pattern.sub(alt, body)


def _text(fragment: str) -> str:
    fragment = re.sub(r'<a class="anchor-link".*?</a>', "", fragment, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def render(path: Path) -> Rendered:
    """The page body of the notebook at ``path`` (figures under ``<stem>_files/``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    prepare(nb)
    body, resources = _exporter().from_notebook_node(nb, resources={"output_files_dir": f"{path.stem}_files"})
    body = sanitize(fix_links(_alt_texts(body, nb, path.stem)))
    heads = [(int(level), html.unescape(hid), _text(inner)) for level, hid, inner in _HEADING.findall(body)]
    title = next((t for level, _, t in heads if level == 1), path.stem)
    return Rendered(title, tuple((hid, t) for level, hid, t in heads if level == 2), body,
                    dict(resources.get("outputs", {})))
