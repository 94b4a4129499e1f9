"""Every ``parlab.…`` name the course cites in its prose exists: a module moved or renamed
(as when ``parlab.parallel`` was laid out by strategy) is caught here, not by a reader."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"`(parlab(?:\.\w+)+)")  # `parlab.x.y` or `parlab.x.y(...)`, in backticks
SOURCES = sorted([*ROOT.glob("course/*.ipynb"), *ROOT.glob("solutions/*.ipynb"), ROOT / "README.md"])


def cited(path: Path) -> set[str]:
    if path.suffix == ".md":
        text = path.read_text()
    else:
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return set(CITED.findall(text))


def resolves(name: str) -> bool:
    """An importable module, or an attribute path below the longest importable prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_the_course_cites_parlab_names():
    assert sum(len(cited(p)) for p in SOURCES) > 20


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_parlab_name_in_the_prose_exists(path):
    missing = sorted(n for n in cited(path) if not resolves(n))
    assert not missing, f"{path.name} cites {missing}: no such module or attribute"
