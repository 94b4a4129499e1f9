"""Every link and image of a built site resolves: each relative ``href``/``src`` of every page names
a file of the site, and each ``#fragment`` an id of the page it points at. Links with a scheme
(``https:``) are outside the site and not followed (the site must work offline: they are only
references to papers and repositories); ``data:`` images are inline. Only regular files are read:
a site with anything else named ``*.html`` (a FIFO, whose read would block for ever, a device, a
link, a folder) is refused in one line, and a link to any other non-regular file is broken.

    python -m parlab.site check site      # one line per broken link; exit status 1 if any
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

_ATTRS = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if named.get("id"):
            self.ids.add(named["id"] or "")
        if named.get("name") and tag == "a":
            self.ids.add(named["name"] or "")
        url = named.get(_ATTRS.get(tag, ""))
        if url is not None:
            self.refs.append((tag, url))


@dataclass(frozen=True)
class Broken:
    page: str
    tag: str
    url: str
    why: str

    def __str__(self) -> str:
        return f"{self.page}: <{self.tag}> {self.url!r}: {self.why}"


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (``lstat``: a link is not followed, nothing is opened)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _kind(path: Path) -> str:
    """What ``path`` is, in words, when it is not a regular file."""
    try:
        mode = path.lstat().st_mode
    except OSError as err:
        return f"unreadable: {err.strerror}"
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _parse(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def check(site: Path) -> tuple[list[Broken], int]:
    """(broken links, links checked) of every ``*.html`` under ``site``."""
    site = site.resolve()
    if not _regular(site / "index.html"):
        raise ValueError(f"{site} has no index.html (a regular file): not a built site (make site builds one)")
    found = sorted(site.rglob("*.html"))
    odd = next((p for p in found if not _regular(p)), None)
    if odd is not None:
        raise ValueError(f"{odd} is {_kind(odd)}, not a regular file: a built site's pages are regular files "
                         "(not read)")
    pages = {p: _parse(p) for p in found}
    broken, checked = [], 0
    for path, parsed in pages.items():
        rel = str(path.relative_to(site))
        for tag, url in parsed.refs:
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//"):
                continue  # outside the site (https:, mailto:, data:)
            checked += 1
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if site not in target.parents and target != site:
                broken.append(Broken(rel, tag, url, "points outside the site"))
            elif not target.exists():
                broken.append(Broken(rel, tag, url, f"no such file {target.relative_to(site)}"))
            elif not _regular(target):
                broken.append(Broken(rel, tag, url, f"{target.relative_to(site)} is not a regular file"))
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(Broken(rel, tag, url, f"no id {unquote(parts.fragment)!r} in "
                                                        f"{target.relative_to(site)}"))
    return broken, checked
