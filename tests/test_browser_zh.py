"""The Chinese renders in a real browser: headless Debian Chromium (as tests/test_browser.py uses it)
opens a small page holding chapter 01's stored 中文口述版 and a drill card posed in Chinese by the
dashboard, and checks that their Chinese is drawn with real glyphs, not boxes, and is not mojibake.

The glyph check (``glyph_report``): a string drawn with a CJK font is as wide as its characters'
advances, while a string of characters no font has (``TOFU``, private-use code points) is drawn
as the fallback box; a page without a CJK font draws Chinese as those same boxes, so the Chinese
string's width equals the box string's width, and its pixels equal the boxes' pixels. The test
shows it can fail: the same page under a fontconfig that knows no CJK font reports boxes.

A learner's machine needs a CJK font for the same reason (Debian: ``apt-get install
fonts-noto-cjk``); the figures stay English. Skipped, like tests/test_browser.py, without
/usr/bin/chromium (a failure with PARLAB_REQUIRE_BROWSER=1).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import nbformat
import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, ROOT  # skips this module without Chromium

CJK = "中文口述版显存气泡率"
TOFU = "\ue000" * len(CJK)  # private use: no font has a glyph, every browser draws its fallback box
FONT_STACK = "system-ui, -apple-system, 'Segoe UI', sans-serif"  # what JupyterLab's content font falls to

#: measures CJK against TOFU in the page's font: widths, and whether a canvas draws them alike
GLYPH_REPORT = """([cjk, tofu, font]) => {
    const span = s => { const e = document.createElement('span'); e.style.font = '20px ' + font;
                        e.textContent = s; document.body.appendChild(e);
                        const w = e.getBoundingClientRect().width; e.remove(); return w; };
    const pixels = s => { const c = document.createElement('canvas'); c.width = 400; c.height = 40;
                          const g = c.getContext('2d'); g.font = '20px ' + font; g.fillText(s, 0, 28);
                          return Array.from(g.getImageData(0, 0, 400, 40).data).join(','); };
    return {cjk: span(cjk), tofu: span(tofu), same_pixels: pixels(cjk) === pixels(tofu)};
}"""


def glyph_report(page) -> dict:
    """{'cjk': width, 'tofu': width, 'same_pixels': bool, 'boxes': bool} for CJK in ``page``."""
    r = page.evaluate(GLYPH_REPORT, [CJK, TOFU, FONT_STACK])
    r["boxes"] = r["same_pixels"] or abs(r["cjk"] - r["tofu"]) < 0.5
    return r


def chinese_page() -> str:
    """Chapter 01's stored 中文口述版 (the HTML its cell output holds) and a drill card in Chinese."""
    from parlab.widgets.drill import DrillDashboard

    nb = nbformat.read(ROOT / "course" / "01_why_distributed.ipynb", as_version=4)
    spoken = next(o.data["text/html"] for c in nb.cells if "zh" in c.metadata.get("tags", [])
                  for o in c.get("outputs", []) if "text/html" in o.get("data", {}))
    dash = DrillDashboard(seed=0)
    dash.controls["language"].value = "zh"
    body = "".join(spoken) + dash.output.value
    return (f'<!doctype html><html lang="zh-CN"><head><meta charset="utf-8"><title>中文</title></head>'
            f'<body style="font-family:{html.escape(FONT_STACK)}">{body}</body></html>')


def no_cjk_fontconfig(tmp: Path) -> Path:
    """A fontconfig file that knows only DejaVu and Liberation: a machine without a CJK font."""
    conf = tmp / "fonts.conf"
    dirs = "".join(f"<dir>{d}</dir>" for d in ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation")
                   if Path(d).is_dir())
    conf.write_text(f'<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>{dirs}'
                    f"<cachedir>{tmp / 'cache'}</cachedir></fontconfig>")
    return conf


def open_page(p, env: dict | None = None):
    browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, env=env)
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    page.set_content(chinese_page())
    return browser, page


def test_chinese_renders_with_glyphs_and_without_mojibake():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = open_page(p)
        try:
            details = page.locator("details.parlab-zh-spoken")
            assert details.count() >= 1
            details.first.locator("summary").click()  # open it, as a learner does
            text = details.first.inner_text()
            assert "中文口述版" in text and "显存墙" in text and "\ufffd" not in text
            card = page.locator('.parlab-card[lang="zh-CN"]').inner_text()
            assert "guide" in card and "\ufffd" not in card
            report = glyph_report(page)
            assert not report["boxes"], f"Chinese drawn as fallback boxes: {report} (install fonts-noto-cjk)"
        finally:
            browser.close()


def test_the_check_reports_boxes_where_no_cjk_font_is_installed(tmp_path):
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "FONTCONFIG_FILE": str(no_cjk_fontconfig(tmp_path)), "HOME": str(tmp_path)}
    with sync_playwright() as p:
        browser, page = open_page(p, env)
        try:
            report = glyph_report(page)
        finally:
            browser.close()
    if not report["boxes"]:
        pytest.skip(f"this Chromium finds a CJK font outside fontconfig: {report}")
    assert report["boxes"]
