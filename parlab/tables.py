"""Plain-text tables and human units, shared by the CLI, the benchmarks and the notebooks."""

from __future__ import annotations

import math
from collections.abc import Sequence


def table(rows: Sequence[Sequence[object]], headers: Sequence[str], align: str = "") -> str:
    """A fixed-width text table. ``align`` has one letter per column, 'l' or 'r' (default:
    numbers right, text left). A column of floats shares one number of decimals, as many as its
    most precise value shows at 4 significant digits ('72.0' under '66.1', not '72')."""
    decimals = [_decimals([row[i] for row in rows]) for i in range(len(headers))]
    cells = [[str(h) for h in headers]] + [
        [_cell(v) if d is None else f"{v:,.{d}f}" for v, d in zip(row, decimals, strict=True)] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if not align:
        first = rows[0] if rows else [""] * len(headers)
        align = "".join("r" if isinstance(v, (int, float)) else "l" for v in first)
    lines = []
    for n, row in enumerate(cells):
        parts = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(row, widths, align, strict=True)]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _decimals(column: Sequence[object]) -> int | None:
    """The decimals a column of finite floats shares (None: another value, or one in exponent form)."""
    if not column or not all(isinstance(v, float) and math.isfinite(v) for v in column):
        return None
    texts = [_cell(v) for v in column]
    if any("e" in t for t in texts):
        return None
    return max(len(t.partition(".")[2]) for t in texts)


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def human_bytes(n: float, unit: str = "GB") -> str:
    """Bytes in decimal units (GB = 1e9, as GPU datasheets and the guide count), e.g. '2,800 GB'.
    ``unit='auto'`` takes the largest unit that keeps the number >= 1: '116 KB', '3.2 GB'."""
    if unit == "auto":
        unit = next((u for u, sc in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)) if abs(n) >= sc), "B")
    scale = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
    v = n / scale
    return f"{v:,.1f} {unit}" if v < 100 else f"{v:,.0f} {unit}"


def human_ibytes(n: float, spec: str = ".3g") -> str:
    """Bytes in binary units, as message and buffer sizes are usually given: '64 KiB', '1.5 MiB'.
    ``spec`` formats the number (``"g"`` keeps every digit)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:{spec}} {unit}"
    return f"{n:.0f} B"


def human_count(n: float, digits: int = 4) -> str:
    """1.746e11 -> '174.6B' (``digits`` significant digits)."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.{digits}g}{unit}"
    return f"{n:.{digits}g}"


def human_seconds(s: float) -> str:
    """Seconds in the largest sensible unit: '3.2 ms', '14 s', '5.1 h', '34 days', '288 years', '15 µs'."""
    if s == 0:
        return "0 s"
    for unit, one, scale in (("years", "year", 365.25 * 86400), ("days", "day", 86400), ("h", "h", 3600),
                             ("min", "min", 60), ("s", "s", 1)):
        if s >= scale:
            v = f"{s / scale:,.3g}"
            return f"{v} {one if v == '1' else unit}"
    for unit, factor in (("s", 1), ("ms", 1e3)):  # rounding up to 1 stays in the larger unit:
        if float(f"{s * factor:.3g}") >= 1:  # 0.9996 s is '1 s', not '1e+03 ms'
            return f"{s * factor:.3g} {unit}"
    return f"{s * 1e6:.3g} µs"


def human_rate(bytes_per_s: float) -> str:
    """A bandwidth in decimal bytes per second, three significant digits: '2.51 GB/s', '300 GB/s',
    '140 MB/s' (never '2.51189 GB/s')."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if float(f"{bytes_per_s / scale:.3g}") >= 1:  # 999.6 GB/s is '1 TB/s', not '1e+03 GB/s'
            return f"{bytes_per_s / scale:.3g} {unit}"
    return f"{bytes_per_s:.3g} B/s"


def plural(n: float, word: str, many: str = "") -> str:
    """A count with its noun in agreement: plural(1, 'micro-batch') -> '1 micro-batch', plural(8,
    'micro-batch') -> '8 micro-batches', plural(1024, 'GPU') -> '1,024 GPUs'. ``many`` is the
    plural when it is not ``word`` + 's' / 'es'."""
    if not many:
        many = word + ("es" if word.endswith(("s", "sh", "ch", "x", "z")) else "s")
    number = f"{n:,}" if isinstance(n, int) else f"{n:,.4g}"
    return f"{number} {word if n == 1 else many}"
