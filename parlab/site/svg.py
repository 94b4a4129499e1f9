"""A tiny SVG writer: rectangles, lines and text in user units, serialised to one ``<svg>``
string (what the calculators' figures are drawn with, natively and in Pyodide)."""

from __future__ import annotations

from html import escape

#: one colour per meaning, the same in every figure (the course's palette: F blue, B orange, ...)
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")


class Svg:
    """An SVG canvas of ``width`` x ``height`` pixels; add shapes, then ``str()`` it."""

    def __init__(self, width: float, height: float, label: str) -> None:
        self.width, self.height, self.label = width, height, label
        self._parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, title: str = "",
             stroke: str = "none") -> None:
        tip = f"<title>{escape(title)}</title>" if title else ""
        self._parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
                           f'fill="{fill}" stroke="{stroke}">{tip}</rect>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#333",
             width: float = 1, dash: str = "") -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self._parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                           f'stroke="{stroke}" stroke-width="{width}"{d}/>')

    def text(self, x: float, y: float, s: str, size: float = 12, anchor: str = "start",
             fill: str = "#222", bold: bool = False) -> None:
        weight = ' font-weight="bold"' if bold else ""
        self._parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                           f'fill="{fill}"{weight}>{escape(s)}</text>')

    def __str__(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
                f'width="{self.width:.0f}" height="{self.height:.0f}" role="img" aria-label="{escape(self.label)}" '
                f'font-family="sans-serif">' + "".join(self._parts) + "</svg>")
