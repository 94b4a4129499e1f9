"""What a page of the site may hold: an allow-list HTML sanitiser for every notebook page body and
every piece of rendered markdown (a page runs nothing, whatever a notebook's output or markdown holds).

A notebook's HTML output and its markdown reach the page as written, so a regular expression
looking for ``<script>`` is not enough: ``<img src=x onerror=...>``, ``<svg onload=...>``,
``<details ontoggle=...>``, ``<iframe srcdoc=...>`` and ``javascript:`` links all run script. The
body is therefore parsed and rebuilt by Ammonia (https://github.com/rust-ammonia/ammonia, through
its Python binding ``nh3``, https://nh3.readthedocs.io), which keeps only the elements, attributes,
URL schemes and CSS properties listed here, the ones the chapters use (measured on the built site:
tables and their inline alignment and padding, figures, ``details``/``summary`` answers, headings
with ids, code highlighted by class, ``lang`` spans of the two languages, TeX left as text for
KaTeX). Everything else is dropped; the text inside a dropped element stays, except inside the
``DROPPED_WITH_CONTENT`` elements (scripts, styles, frames, embedded SVG and MathML).

Not imported in the browser (Pyodide never builds pages): ``nh3`` is a build-time dependency only.
"""

from __future__ import annotations

import re
from functools import cache

#: the elements kept (Ammonia's default set, HTML's text, list, table and figure elements; no
#: form, frame, media, SVG, MathML, style or script element)
TAGS = frozenset({
    "a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd",
    "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s",
    "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "time", "tr", "u", "ul", "var", "wbr",
})
#: removed together with everything inside them
DROPPED_WITH_CONTENT = frozenset({"script", "style", "iframe", "frame", "frameset", "object", "embed",
                                  "applet", "template", "noscript", "svg", "math", "textarea", "select"})
#: attributes kept on any element; event handlers (``on*``), ``srcdoc``, ``srcset``, ``formaction``
#: and the like are on no list
GENERIC = frozenset({"class", "id", "lang", "dir", "title", "style"})
ATTRIBUTES: dict[str, frozenset[str]] = {
    "a": frozenset({"href", "hreflang", "name"}),
    "img": frozenset({"src", "alt", "width", "height", "align"}),
    "details": frozenset({"open"}),
    "ol": frozenset({"start", "type", "reversed"}),
    "li": frozenset({"value"}),
    "table": frozenset({"align", "border", "summary"}),
    "td": frozenset({"colspan", "rowspan", "align", "headers"}),
    "th": frozenset({"colspan", "rowspan", "align", "headers", "scope", "abbr"}),
    "col": frozenset({"span", "align"}),
    "colgroup": frozenset({"span", "align"}),
    "tr": frozenset({"align"}),
    "thead": frozenset({"align"}),
    "tbody": frozenset({"align"}),
    "tfoot": frozenset({"align"}),
    "time": frozenset({"datetime"}),
    "q": frozenset({"cite"}),
    "blockquote": frozenset({"cite"}),
    "del": frozenset({"cite", "datetime"}),
    "ins": frozenset({"cite", "datetime"}),
}
#: link schemes kept (relative URLs are kept too); ``data:`` only as an image, see ``DATA_IMAGE``
URL_SCHEMES = frozenset({"http", "https", "mailto", "data"})
#: the only ``data:`` URLs kept: an ``<img src>`` of a raster image or an SVG (an SVG shown by
#: ``<img>`` runs no script, https://www.w3.org/TR/SVG2/conform.html#secure-static-mode)
DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp|svg\+xml)[;,]", re.IGNORECASE)
#: the CSS properties an inline ``style`` keeps (layout and colour of tables and text; no
#: ``position``, no ``background`` image, nothing that loads a URL)
STYLE_PROPERTIES = frozenset({
    "text-align", "vertical-align", "white-space", "padding", "padding-top", "padding-right", "padding-bottom",
    "padding-left", "margin", "margin-top", "margin-right", "margin-bottom", "margin-left", "border",
    "border-top", "border-right", "border-bottom", "border-left", "border-collapse", "border-spacing",
    "border-color", "border-width", "border-style", "caption-side", "font-family", "font-weight", "font-style",
    "font-size", "line-height", "color", "background-color", "width", "min-width", "max-width", "height",
    "text-decoration", "list-style-type",
})


def _attribute(tag: str, name: str, value: str) -> str | None:
    """Ammonia's per-attribute hook: a ``data:`` URL only as an image's source."""
    if name in ("href", "src") and value.strip().lower().startswith("data:"):
        return value if tag == "img" and name == "src" and DATA_IMAGE.match(value.strip()) else None
    return value


@cache
def _cleaner():
    import nh3

    return nh3.Cleaner(tags=set(TAGS), clean_content_tags=set(DROPPED_WITH_CONTENT),
                       attributes={"*": set(GENERIC), **{t: set(a) for t, a in ATTRIBUTES.items()}},
                       attribute_filter=_attribute, url_schemes=set(URL_SCHEMES), link_rel=None,
                       strip_comments=True, filter_style_properties=set(STYLE_PROPERTIES))


def sanitize(fragment: str) -> str:
    """``fragment`` (HTML) with only the allowed elements, attributes, URLs and styles left."""
    return _cleaner().clean(fragment)
