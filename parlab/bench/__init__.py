"""Benchmarks behind ``parlab bench NAME``: heavy numbers live here, never in timed tests.

Each module named in ``BENCHES`` defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``, and prints a readable report.
"""

BENCHES: dict[str, str] = {
    "widgets": "parlab.bench.widgets",
    "costmodel": "parlab.bench.costmodel",
    "comm": "parlab.bench.comm",
    "pipeline": "parlab.bench.pipeline",
    "ddp": "parlab.bench.ddp",
    "zero": "parlab.bench.zero",
}
