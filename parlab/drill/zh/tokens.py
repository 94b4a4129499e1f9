"""Number tokens: how a Chinese text takes its numbers from its English twin.

A Chinese drill text writes ``{0}``, ``{1}``, ... where its English twin has its first, second, ...
number (``numbers(text)``): a computed answer, a drawn parameter, a figure of the prompt. So the
Chinese card shows exactly the numbers the English card shows, computed once, and holds no digit of
its own (``stray_digits``). Digits inside names (ZeRO-3, fp16, gpt3-175b, a100-80gb, 1F1B) are not
numbers: a token starts after a space or punctuation and ends before a letter, a '.digit' or '-bit'
/'-byte' (16-bit, 2.5D, 10.0.0.2 are names), except a magnitude suffix (175B, 1.4T, 30%, 2.27x); a sign and a range belong to it (-13%, 1-3).
"""

from __future__ import annotations

import re

NUMBER = re.compile(r"(?<![\w.\-+])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?(?:-\d+(?![\w.]))?"
                    r"(?:[KMBT](?![a-z])|x(?![a-z]))?%?(?![\w]|\.\d|-bit|-byte)")
SLOT = re.compile(r"\{\{|\}\}|\{(\d*)\}|\{([a-z_]+)\}")


def numbers(text: str) -> list[str]:
    """The number tokens of an English text, in order."""
    return NUMBER.findall(text)


def _indices(template: str) -> list[int | str]:
    """The slots of ``template`` in order: number indices (``{}`` counts on from the last ``{}``)
    and names; ``{{`` / ``}}`` are literal braces."""
    out: list[int | str] = []
    auto = 0
    for m in SLOT.finditer(template):
        if m.group(0) in ("{{", "}}"):
            continue
        if m.group(2):
            out.append(m.group(2))
        elif m.group(1) == "":
            out.append(auto)
            auto += 1
        else:
            out.append(int(m.group(1)))
    return out


def fill(template: str, english: str, names: dict[str, object] | None = None) -> str:
    """``template`` with ``{}`` / ``{i}`` replaced by the English twin's numbers and ``{name}`` by
    ``names[name]`` (ValueError naming the slot when either is missing)."""
    tokens, names = numbers(english), names or {}
    order = iter(_indices(template))

    def one(m: re.Match) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        slot = next(order)
        if isinstance(slot, str):
            if slot not in names:
                raise ValueError(f"Chinese template slot {{{slot}}} has no value; known: {', '.join(names)}")
            return str(names[slot])
        if slot >= len(tokens):
            raise ValueError(f"Chinese template slot {slot} but its English twin has {len(tokens)} numbers: "
                             f"{english[:80]!r}")
        return tokens[slot]

    return SLOT.sub(one, template)


def slots(template: str) -> list[int]:
    """The number slots of ``template``, in order."""
    return [s for s in _indices(template) if isinstance(s, int)]


def stray_digits(template: str, names: tuple[str, ...] = ()) -> list[str]:
    """The numbers ``template`` types itself (should be []): number tokens, by the same ``NUMBER``
    rule as the English, outside its slots and outside ``names``. Digits tied to a symbol or a
    name (p-1, t0, 2ND, 16-bit, 1F1B, eth0) are not numbers, in either language."""
    text = SLOT.sub("\u00a7", template)  # a slot is a neutral character: "{}-3" still shows "-3"
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, "\u00a7")
    return numbers(text)
