"""The site's search index: one entry per section (h1-h3) of every page, its title, its address
and its text (code and hidden answers left out, tags stripped, capped), as JSON that ``static/site.js``
scans in the browser (a few hundred sections: a linear scan answers within a keystroke)."""

from __future__ import annotations

import html
import json
import re

TEXT_CAP = 1500  # characters of prose kept per section
_SPLIT = re.compile(r'(<h[1-3] id="[^"]*"[^>]*>.*?</h[1-3]>)', re.S)
_HEAD = re.compile(r'<h[1-3] id="([^"]*)"[^>]*>(.*?)</h[1-3]>', re.S)
_LEFT_OUT = re.compile(r'<div class="highlight[^"]*"><pre>.*?</pre></div>|<details.*?</details>|<svg.*?</svg>', re.S)


def _plain(fragment: str) -> str:
    fragment = re.sub(r'<a class="anchor-link".*?</a>', "", fragment, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def sections(href: str, page_title: str, body: str) -> list[dict[str, str]]:
    """``[{"t": title, "p": page title, "u": href#id, "x": prose}, ...]`` of one page body."""
    prose = _LEFT_OUT.sub(" ", body)
    out: list[dict[str, str]] = []
    pieces = _SPLIT.split(prose)
    for head, text in zip(pieces[1::2], pieces[2::2], strict=True):
        m = _HEAD.match(head)
        assert m is not None, head  # _SPLIT only yields headings of that shape
        out.append({"t": _plain(m.group(2)), "p": page_title, "u": f"{href}#{html.unescape(m.group(1))}",
                    "x": _plain(text)[:TEXT_CAP]})
    return out


def index_json(entries: list[dict[str, str]]) -> str:
    return json.dumps(entries, ensure_ascii=False, separators=(",", ":"))
