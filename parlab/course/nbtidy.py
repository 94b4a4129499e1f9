"""What a learner must not see in a notebook, tidied away by one idempotent command.

    python -m parlab.course.nbtidy [NOTEBOOK ...]          # default: course/, solutions/, exercises/
    python -m parlab.course.nbtidy --check [NOTEBOOK ...]  # exit 1 (naming each cell) if any is untidy

Three rules; the first two touch only the cells' metadata and source (no output changes, so
nothing is re-executed), the third adds one cell with its output:

- **An answer cell's source is hidden** (``metadata.jupyter.source_hidden``, JupyterLab's
  collapsed input, as chapter 01 did first): a code cell of a "Check yourself" section
  (``answer_cells``) that calls ``parlab.viz.html.check_yourself`` computes the answers in
  plain sight.
- **nbval's markers are tags, not comments**: a ``# NBVAL_IGNORE_OUTPUT`` line (or any of
  nbval's comment markers) is removed from the source and becomes the cell tag nbval reads the
  same way (``nbval-ignore-output``: nbval's ``plugin.metadata_tags`` is its comment markers,
  lower case, ``_`` as ``-``).
- **A chapter opens with a picture**: a chapter of course/ with a cover (``parlab.course.cover.COVERS``)
  gets its cover cell (tag ``parlab-cover``, source hidden) after its first cell (the title and
  the guide questions), its output drawn by the same code the cell runs.

Running it twice changes nothing the second time; the coordinator re-runs it after merging
notebooks that several people edited (tests/test_nbtidy.py keeps every notebook tidy).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from parlab.viz.html import CHECK_MARKER

ROOT = Path(__file__).resolve().parents[2]
NBVAL_COMMENTS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION", "NBVAL_SKIP")
_MARKER = re.compile(r"^[ \t]*#+[ \t]*(" + "|".join(NBVAL_COMMENTS) + r")[ \t]*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.MULTILINE)
_CALL = re.compile(r"(?m)^[ \t]*check_yourself\(")


def nbval_tag(comment: str) -> str:
    """'NBVAL_IGNORE_OUTPUT' -> 'nbval-ignore-output', the tag nbval reads as that comment."""
    return comment.lower().replace("_", "-")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def shows_check_yourself(cell) -> bool:
    """A code cell that calls ``check_yourself(`` or stored its output."""
    if cell.get("cell_type") != "code":
        return False
    shown = any(CHECK_MARKER in _text(o.get("data", {}).get("text/html", ""))
                for o in cell.get("outputs", []))
    return shown or bool(_CALL.search(_text(cell.get("source", ""))))


def answer_cells(nb) -> list[int]:
    """Indices of the code cells that show "Check yourself" answers: under a markdown heading
    containing "Check yourself" (until the next heading of the same or a higher level), or whose
    first line is a comment mentioning "answer"."""
    found, level = [], None  # level: the heading level of the open "Check yourself" section
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for hashes, title in _HEADING.findall(cell.source):
                if level is not None and len(hashes) <= level:
                    level = None
                if "check yourself" in title.lower():
                    level = len(hashes)
        elif cell.cell_type == "code":
            first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            if level is not None or (first.startswith("#") and "answer" in first.lower()):
                found.append(i)
    return found


def to_hide(nb) -> list[int]:
    """The cells whose source computes "Check yourself" answers: an answer cell that shows
    ``check_yourself``, or any cell calling it with its default title ("Check yourself")."""
    under = set(answer_cells(nb))
    return [i for i, c in enumerate(nb.cells) if shows_check_yourself(c)
            and (i in under or "title=" not in c.source)]


def untidy(cell, answer: bool) -> list[str]:
    """What is wrong with one cell ([] when it is tidy); ``answer``: it is in ``to_hide``."""
    problems = []
    if answer and not cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
        problems.append("an answer cell whose source is shown")
    for line in _text(cell.get("source", "")).splitlines():
        if _MARKER.match(line):
            problems.append(f"an nbval comment {line.strip()!r} (use the tag)")
    return problems


def tidy_cell(cell, answer: bool) -> bool:
    """Apply both rules to one cell in place (``answer``: it is in ``to_hide``); True if it
    changed."""
    changed = False
    if answer:
        jupyter = cell.setdefault("metadata", {}).setdefault("jupyter", {})
        if not jupyter.get("source_hidden"):
            jupyter["source_hidden"] = True
            changed = True
    lines = _text(cell.get("source", "")).split("\n")
    markers = [m.group(1) for m in map(_MARKER.match, lines) if m]
    if markers:
        cell["source"] = "\n".join(line for line in lines if not _MARKER.match(line)).lstrip("\n")
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        for comment in markers:
            if nbval_tag(comment) not in tags:
                tags.append(nbval_tag(comment))
        changed = True
    return changed


COVER_TAG = "parlab-cover"


def has_cover(nb) -> bool:
    return any(COVER_TAG in c.get("metadata", {}).get("tags", []) for c in nb.cells)


def wants_cover(path: Path) -> str | None:
    """The cover's name for a chapter of course/ that has one in ``COVERS``, else None."""
    from parlab.course.cover import COVERS, chapter_name

    name = chapter_name(path)
    return name if path.parent.name == "course" and name in COVERS else None


def cover_cell(name: str):
    """The cover cell of chapter ``name``, with its output (what running it displays)."""
    import base64

    import nbformat

    from parlab.course.cover import cover_figure, cover_source, cover_text
    from parlab.viz.figures import figure_image

    image = figure_image(cover_figure(name), text=cover_text(name))
    data, metadata = image._repr_mimebundle_()
    cell = nbformat.v4.new_code_cell(cover_source(name), execution_count=1,
                                     metadata={"jupyter": {"source_hidden": True}, "tags": [COVER_TAG]})
    cell.outputs = [nbformat.v4.new_output("display_data", metadata=metadata, data={
        "image/png": base64.b64encode(data["image/png"]).decode(), "text/plain": data["text/plain"]})]
    return cell


def default_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(p for d in ("course", "solutions", "exercises") for p in (root / d).glob("*.ipynb"))


def tidy(path: Path, check: bool = False) -> list[str]:
    """Tidy one notebook file (rewritten only if a cell changed); with ``check``, change
    nothing. Returns one line per untidy cell found."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    hide = set(to_hide(nb))
    found = [f"{path}: cell {i}: {p}" for i, c in enumerate(nb.cells) for p in untidy(c, i in hide)]
    cover = wants_cover(path)
    if cover and not has_cover(nb):
        found.append(f"{path}: no cover cell (parlab.course.cover {cover!r})")
    if check:
        return found
    changed = any([tidy_cell(c, i in hide) for i, c in enumerate(nb.cells)])
    if cover and not has_cover(nb):
        nb.cells.insert(1, cover_cell(cover))
        changed = True
    if changed:
        nbformat.write(nb, path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parlab.course.nbtidy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any cell is untidy")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not path.is_file():
            parser.error(f"notebook {str(path)!r} does not exist")
    found = [line for path in args.notebooks or default_notebooks() for line in tidy(path, args.check)]
    for line in found:
        print(("untidy: " if args.check else "tidied: ") + line)
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
