"""Published measurements used to validate the cost model (each CSV cites its source in its header)."""

from __future__ import annotations

import csv
from importlib import resources


def read_csv(name: str) -> list[dict[str, str]]:
    """Rows of ``parlab/data/<name>.csv`` as dicts of strings (``#`` comment lines skipped)."""
    text = resources.files(__package__).joinpath(f"{name}.csv").read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(lines))


def source(name: str) -> str:
    """The comment header of ``parlab/data/<name>.csv``: where the numbers come from."""
    text = resources.files(__package__).joinpath(f"{name}.csv").read_text()
    return "\n".join(line[1:].strip() for line in text.splitlines() if line.startswith("#"))
