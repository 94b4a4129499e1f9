"""Benchmarks behind ``parlab bench NAME``: heavy numbers live here, never in timed tests.

Each module named in ``BENCHES`` defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``, and prints a readable report; ``run`` returns 1 when one of the targets
it states was missed, else 0. A bench reports: ``parlab bench`` exits 1 for a missed target
only under ``--check`` (what a suite or CI asks for), since on a learner's busy laptop a missed
target is a measurement, not a failure. Every report ends with the machine's condition before
and after it (``conditions()``: cores and load average), so a figure is read with its load.
"""

from __future__ import annotations

import os

BENCHES: dict[str, str] = {
    "widgets": "parlab.bench.widgets",
    "costmodel": "parlab.bench.costmodel",
    "comm": "parlab.bench.comm",
    "pipeline": "parlab.bench.pipeline",
    "ddp": "parlab.bench.ddp",
    "zero": "parlab.bench.zero",
}


def load_average() -> str:
    """'load average 0.52 0.31 0.20 (1, 5, 15 min)', or 'load average unknown'."""
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1, 5, 15 min)"
    except OSError:  # pragma: no cover - no load average on this platform
        return "load average unknown"


def conditions() -> str:
    """'2 cores, load average 0.52 0.31 0.20 (1, 5, 15 min)': what the figures ran beside (the
    cores this process may use, as the local backend counts them)."""
    from parlab.comm.waiting import usable_cores

    return f"{usable_cores()} cores, {load_average()}"
