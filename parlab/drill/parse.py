"""Reading a learner's typed answer: a number with an optional unit ("12.5 GB", "3/11", "25%",
"7B", "1.2e23 FLOPs", "70 ms") or a name among options ("all-reduce" = "AllReduce" = "all_reduce").

Every reader returns a value or raises ``Unreadable`` with a message that says what was typed
and what is expected; ``check`` turns that into feedback, never into a traceback. What is typed is
bounded before it is read (``MAX_ANSWER`` characters, exponents within ``MAX_EXPONENT``), so no
answer costs more than microseconds: ``Fraction("1e99999999")`` alone builds a 100-million-digit
integer, and Python refuses ``int()`` of more than 4,300 digits (its ``sys.int_info`` limit).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

#: the longest answer read, in characters (an option's text is at most 117; a test keeps it so):
#: a longer one is refused before any parsing, and never echoed whole
MAX_ANSWER = 300
#: the largest power of ten read (``1e400``; a double ends near 1.8e308): checked before any arithmetic
MAX_EXPONENT = 400
SHOWN = 40  # characters of a typed answer quoted back in a message


class Unreadable(ValueError):
    """The learner's input could not be read as an answer of the expected kind."""


#: why an answer is not checked, by rule (``Uncheckable.key``); ``parlab.drill.zh.translate.UNCHECKABLE_ZH``
#: says each in Chinese, with the same fields
UNCHECKABLE: dict[str, str] = {
    "long": "{shown} has {n:,} characters, more than the {limit} an answer may have: not an answer I can check",
    "exponent": "{shown} has an exponent beyond 1e±{limit}: not a number I can check; write e.g. {example}",
    "zero": "{shown} divides by zero: not a number I can check; write e.g. {example}",
    "huge": "{shown} is beyond ±1.8e308 (the largest double): not a number I can check; write e.g. {example}",
}


class Uncheckable(Unreadable):
    """An answer no check is tried on (rule ``key`` of ``UNCHECKABLE``, its fields ``fields``): too
    long, an exponent past ``MAX_EXPONENT``, a division by zero, a value past the double range."""

    def __init__(self, key: str, **fields: object) -> None:
        self.key, self.fields = key, fields
        super().__init__(UNCHECKABLE[key].format(**fields))


def _digits(n: int) -> int:
    """Decimal digits of ``n`` (without str(), which refuses more than 4,300 of them)."""
    n = abs(n)
    return len(str(n)) if n.bit_length() < 10_000 else int(n.bit_length() * math.log10(2)) + 1


def shown(value: object, limit: int = SHOWN) -> str:
    """``repr`` of what was typed, cut to about ``limit`` characters ('aaaaaaaaaa…aaaa')."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() >= 10_000:
        return f"an integer of {_digits(value):,} digits"
    text = repr(value[: 2 * limit] + value[-limit:] if isinstance(value, str) and len(value) > 3 * limit
                 else value)
    return text if len(text) <= limit else f"{text[: limit - 8]}…{text[-6:]}"


def typed(answer: object) -> str:
    """What the learner typed as text (``Result.given``), cut to ``MAX_ANSWER`` characters."""
    if answer is None:
        return ""
    text = shown(answer) if isinstance(answer, int) and _digits(answer) > MAX_ANSWER else str(answer)
    return text.strip()[:MAX_ANSWER]


def limit_length(answer: object) -> None:
    """``Uncheckable`` when ``answer`` (a string, or an integer's digits) is longer than
    ``MAX_ANSWER``: checked before anything else reads it."""
    if isinstance(answer, bool) or not isinstance(answer, str | int):
        return
    n = len(answer) if isinstance(answer, str) else _digits(answer)
    if n > MAX_ANSWER:
        raise Uncheckable("long", shown=shown(answer), n=n, limit=MAX_ANSWER)


@dataclass(frozen=True)
class Dimension:
    """A kind of quantity: its units (lower-case spelling -> factor to the base unit) and how
    the expected value is shown (``display`` unit, its factor) with an example input."""

    name: str
    units: dict[str, float]
    display: str
    example: str


_DECIMAL = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_BINARY = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40, "pi": 2.0**50}


def _byte_units() -> dict[str, float]:
    units = {"b": 1.0, "byte": 1.0, "bytes": 1.0}
    for p, f in _DECIMAL.items():
        if p:
            units[p + "b"] = f
            units[p + "byte"] = units[p + "bytes"] = f
    for p, f in _BINARY.items():
        units[p + "b"] = f
        units[p + "byte"] = units[p + "bytes"] = f
    return units


_RATE = re.compile(r"^(?P<prefix>[kmgtp]i?)?(?P<what>b|bit|bits|byte|bytes)(?:/s|/sec|ps)$",
                   re.IGNORECASE)


def _rate_factor(unit: str) -> float | None:
    """Bytes/s in one ``unit``, or None. Case matters for the letter b, as networks write it:
    'GB/s' and 'GBps' are bytes, 'Gb/s', 'Gbit/s' and 'Gbps' bits (a factor of 8)."""
    m = _RATE.match(unit)
    if not m:
        return None
    prefix, what = (m.group("prefix") or "").lower(), m.group("what")
    scale = _BINARY[prefix] if prefix.endswith("i") else _DECIMAL[prefix]
    bits = what == "b" or what.lower().startswith("bit")
    return scale / 8 if bits else scale


_SECONDS = {"s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3, "msec": 1e-3,
            "millisecond": 1e-3, "milliseconds": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6,
            "microsecond": 1e-6, "microseconds": 1e-6, "ns": 1e-9, "min": 60.0, "mins": 60.0,
            "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0,
            "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0,
            "y": 365.25 * 86400, "yr": 365.25 * 86400, "year": 365.25 * 86400, "years": 365.25 * 86400}
_COUNT = {"": 1.0, "k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9,
          "billion": 1e9, "g": 1e9, "t": 1e12, "trillion": 1e12}


def _with_suffix(base: dict[str, float], words: tuple[str, ...]) -> dict[str, float]:
    """Counts followed by a word: '7B params', '3.6e23 FLOPs', '16 B/param', '8 GPUs'."""
    units = dict(base)
    for p, f in base.items():
        for w in words:
            units[(p + " " + w).strip()] = units[p + w] = f
    return units


DIMENSIONS: dict[str, Dimension] = {
    d.name: d for d in [
        Dimension("bytes", _byte_units(), "GB", "12.5 GB (also MB, TB, GiB, bytes)"),
        Dimension("rate", {}, "GB/s", "1.25 GB/s (also Gb/s = gigabits, Gbps, MB/s)"),
        Dimension("seconds", _SECONDS, "s", "70 ms (also s, µs or us, min, h, days, years)"),
        Dimension("count", _with_suffix(_COUNT, ("params", "parameters", "gpus", "flops", "flop",
                                                  "tokens", "ranks", "nodes", "steps")),
                  "", "6.7B, 350M, 2240, 1.2e23"),
        Dimension("fraction", {"": 1.0, "%": 0.01, "percent": 0.01}, "", "0.25, 25%, 3/11"),
        Dimension("ratio", {"": 1.0, "x": 1.0, "times": 1.0}, "x", "2.3 or 2.3x"),
        Dimension("bytes/param", {"": 1.0, "b": 1.0, "bytes": 1.0, "b/param": 1.0, "bytes/param": 1.0,
                                  "bytes per param": 1.0, "bytes per parameter": 1.0}, "bytes/param",
                  "16 or 16 bytes/param"),
    ]
}

_NUMBER = re.compile(r"""^\s*(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:e[-+]?\d+)?)
                         (?:\s*/\s*(?P<den>\d+(?:\.\d+)?))?\s*(?P<unit>.*?)\s*$""",
                     re.IGNORECASE | re.VERBOSE)


def read_number(text: object, dimension: str, unit: str | None = None,
                example: str | None = None) -> float:
    """The value of ``text`` in the base unit of ``dimension`` (bytes, bytes/s, seconds, ...).

    A missing unit means ``unit`` (the unit the question asks for; default the dimension's
    display unit): "12.5" for a GB question is 12.5 GB. Raises ``Unreadable`` naming the input
    and an example of what is expected (``example``; default the dimension's).
    """
    dim = DIMENSIONS[dimension]
    default = dim.display if unit is None else unit
    example = example or dim.example  # a card passes its own (``example_for``: never its answer)
    if not isinstance(text, str | int | float) or isinstance(text, bool):
        raise Unreadable(f"expected a typed answer such as {example}, got {shown(text)}")
    limit_length(text)
    raw = str(text).strip().replace("\u2009", " ").replace("\u00a0", " ").replace("×", "x")
    if not raw:
        raise Unreadable(f"empty answer: type a number, e.g. {example}")
    m = _NUMBER.match(raw.replace("x10^", "e").replace("*10^", "e"))
    if not m or not re.search(r"\d", m.group("num") or ""):
        raise Unreadable(f"could not read a number from {shown(raw)}; write e.g. {example}")
    value = _value(m.group("num").replace(",", ""), m.group("den"), raw, example)
    spelled = re.sub(r"\s+", " ", m.group("unit")).rstrip(".") or default
    if dimension == "rate":
        factor = _rate_factor(spelled.replace(" ", ""))
        if factor is None:
            raise Unreadable(f"unit {shown(m.group('unit'))} in {shown(raw)} is not a unit of {dimension}; "
                             f"write e.g. {example}")
        return _finite(value * factor, raw, example)
    key = spelled.lower()
    if key not in dim.units:
        raise Unreadable(f"unit {shown(m.group('unit'))} in {shown(raw)} is not a unit of {dimension}; "
                         f"write e.g. {example}")
    return _finite(value * dim.units[key], raw, example)


def _value(num: str, den: str | None, raw: str, example: str) -> float:
    """``num`` (or ``num / den``) as a float: an exponent past ``MAX_EXPONENT`` is refused before any
    arithmetic, then a zero ``den`` and a value past the double range."""
    exponent = re.search(r"e([-+]?\d+)$", num, re.IGNORECASE)
    if exponent and abs(int(exponent.group(1))) > MAX_EXPONENT:
        raise Uncheckable("exponent", shown=shown(raw), limit=MAX_EXPONENT, example=example)
    if den is None:
        return _finite(float(num), raw, example)
    if Fraction(den) == 0:
        raise Uncheckable("zero", shown=shown(raw), example=example)
    try:
        return _finite(float(Fraction(num) / Fraction(den)), raw, example)
    except OverflowError:  # the exact quotient is past the largest double
        raise Uncheckable("huge", shown=shown(raw), example=example) from None


def _finite(value: float, raw: str, example: str) -> float:
    if not math.isfinite(value):
        raise Uncheckable("huge", shown=shown(raw), example=example)
    return value


def unit_factor(dimension: str, unit: str) -> float:
    """Base units in one ``unit`` of ``dimension`` ('GB' -> 1e9 bytes, 'ms' -> 1e-3 s)."""
    return read_number("1 " + unit if unit else "1", dimension, unit)


def normalize_name(text: str) -> str:
    """'All-Reduce', 'all_reduce', ' allreduce ' -> 'allreduce' (case, spaces, - and _ ignored)."""
    return re.sub(r"[\s\-_.'\"`()]+", "", str(text).lower())


# ---------------------------------------------------------------------------- input hints
#: Example inputs per dimension, far apart: a card shows the first whose numbers all lie well
#: away from its answer (``example_for``), so a hint never gives the answer away (issue 20:
#: "e.g. 1.25 GB/s" on the 10 GbE card, whose answer is 1.25 GB/s; "e.g. 2.3x" within 2% of 2.27).
HINTS: dict[str, tuple[str, ...]] = {
    "bytes": (DIMENSIONS["bytes"].example, "350 MB (also GB, TB, GiB, bytes)",
              "4 TB (also GB, MB, GiB, bytes)"),
    "rate": (DIMENSIONS["rate"].example, "40 GB/s (also Gb/s = gigabits, Gbps, MB/s)",
             "300 MB/s (also GB/s, Gb/s = gigabits, Gbps)"),
    "seconds": (DIMENSIONS["seconds"].example, "3.5 s (also ms, µs or us, min, h, days, years)",
                "20 min (also s, ms, µs or us, h, days, years)"),
    "count": (DIMENSIONS["count"].example, "13B, 70M, 512, 4.5e21", "175B, 1.5M, 64, 3e25"),
    "fraction": (DIMENSIONS["fraction"].example, "0.6, 60%, 5/8", "0.05, 5%, 1/20"),
    "ratio": (DIMENSIONS["ratio"].example, "7.5 or 7.5x", "0.4 or 0.4x"),
    "bytes/param": (DIMENSIONS["bytes/param"].example, "6 or 6 bytes/param", "40 or 40 bytes/param"),
}
NEAR = 0.25  # a hint value within 25% of the answer (or 3x the card's tolerance) is too near


def hint_values(hint: str, dimension: str) -> list[float]:
    """The values an example hint shows, in base units: '2.3 or 2.3x' -> [2.3, 2.3]."""
    head = re.sub(r"\s*\(.*\)\s*$", "", hint)  # '1.25 GB/s (also ...)' -> '1.25 GB/s'
    return [read_number(part, dimension) for part in re.split(r",\s*|\s+or\s+", head) if part.strip()]


def too_near(value: float, answer: float, rtol: float) -> bool:
    """Whether a hint ``value`` lies within max(NEAR, 3 rtol) of ``answer`` (relative)."""
    if answer == 0:
        return abs(value) <= 1e-12
    return abs(value - answer) <= max(NEAR, 3 * rtol) * abs(answer)


def example_for(dimension: str, answer: object = None, rtol: float = 0.0) -> str:
    """The example input a card of ``dimension`` shows: the first of ``HINTS`` none of whose
    values is ``too_near`` its ``answer`` (any hint when the answer is not a number)."""
    try:
        target = float(answer)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return HINTS[dimension][0]
    for hint in HINTS[dimension]:
        if not any(too_near(v, target, rtol) for v in hint_values(hint, dimension)):
            return hint
    unit = DIMENSIONS[dimension].display
    return f"a number{' in ' + unit if unit else ''} (every example lies near this answer)"
