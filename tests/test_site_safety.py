"""The site's doors and what its pages may hold (F18, F19 of the attack review): a notebook's output
or markdown that would run script (event handlers, ``<svg onload>``, ``<iframe srcdoc>``,
``javascript:`` links, ``<script>`` in any case) reaches no page, while what the chapters show
(tables, figures, answers in ``details``, highlighted code, links, TeX) stays; ``build`` into a
file or a folder it did not make, and ``check`` of a folder holding a FIFO, are one line each.
No site is built here (the refusals come before any page is rendered)."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from parlab.site import linkcheck, pages
from parlab.site.__main__ import main
from parlab.site.render import render
from parlab.site.sanitize import sanitize

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
#: the review's crafted cases, each as a notebook's markdown or HTML output could carry it
ATTACKS = [
    '<img src="data:," onerror="alert(1)">', '<svg onload="alert(2)"><circle r="1"/></svg>',
    '<details ontoggle="alert(3)" open><summary>s</summary>x</details>',
    '<iframe srcdoc="&lt;script&gt;alert(4)&lt;/script&gt;"></iframe>', '<a href="javascript:alert(5)">j</a>',
    '<a href=" JaVaScRiPt:alert(6)">k</a>', '<script>alert(7)</script>', '<SCRIPT>alert(8)</SCRIPT>',
    '<a href="data:text/html,&lt;script&gt;alert(9)&lt;/script&gt;">d</a>', '<img src="x" srcset="javascript:alert(10)">',
    '<object data="javascript:alert(11)"></object>', '<embed src="javascript:alert(12)">',
    '<form action="javascript:alert(13)"><button formaction="javascript:alert(14)">b</button></form>',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(15)">', '<base href="javascript:alert(16)//">',
    '<div style="position:fixed;inset:0;background:url(javascript:alert(17))">cover</div>',
    '<math><mtext><a href="javascript:alert(18)">m</a></mtext></math>', '<body onload="alert(19)">',
]
#: what the chapters need, which must come through unchanged in meaning
KEPT = [
    '<table class="dataframe"><thead><tr><th style="text-align: right">GB</th></tr></thead>'
    '<tbody><tr><td style="padding: 0 4px; white-space: nowrap">12.5</td></tr></tbody></table>',
    f'<img src="data:image/png;base64,{PNG}" alt="a dot">', '<img src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=">',
    '<details class="parlab-answer"><summary>answer</summary><p>42</p></details>',
    '<a href="https://arxiv.org/abs/1909.08053">Megatron</a>', '<a href="02_communication.ipynb#ring">ring</a>',
    '<span class="t" lang="zh-CN">张量并行</span>', '<p>$a &lt; b$ and $$\\sum_i x_i$$</p>',
]
RUNS = re.compile(r"<\s*(script|iframe|svg|math|object|embed|form|meta|base)\b|\son\w+\s*=|javascript:|srcdoc|"
                  r"srcset|data:text|position:\s*fixed|url\(", re.IGNORECASE)


def notebook(tmp_path: Path, html: str) -> Path:
    """A notebook carrying ``html`` in a markdown cell, an HTML output and a markdown output."""
    nb = new_notebook(cells=[
        new_markdown_cell(f"# Crafted\n\n{html}\n"),
        new_code_cell("show()", outputs=[
            new_output("display_data", data={"text/html": html, "text/plain": "html"}),
            new_output("execute_result", data={"text/markdown": html, "text/plain": "md"}, execution_count=1)]),
    ])
    path = tmp_path / "crafted.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("attack", ATTACKS)
def test_nothing_that_runs_reaches_a_page_from_markdown_or_an_output(tmp_path, attack):
    body = render(notebook(tmp_path, attack)).body
    assert RUNS.findall(body) == [], body
    front = pages.front_body(f"# parlab\n{attack}\n\n## Chapters\n\n| a |\n|---|\n| {attack} |\n", {})
    assert RUNS.findall(front) == [], front


def test_what_the_chapters_need_is_kept(tmp_path):
    body = render(notebook(tmp_path, "\n\n".join(KEPT))).body
    for needed in ('<table class="dataframe">', 'style="text-align:right"', 'style="padding:0 4px;white-space:nowrap"',
                   f'src="data:image/png;base64,{PNG}"', 'src="data:image/svg+xml;base64,', '<details class="parlab-answer">',
                   "<summary>answer</summary>", 'href="https://arxiv.org/abs/1909.08053"',
                   'href="02_communication.html#ring"', '<span class="t" lang="zh-CN">张量并行</span>',
                   "$a &lt; b$", "$$\\sum_i x_i$$", '<h1 id="Crafted">'):
        assert body.count(needed) >= 2 or (needed.startswith("<h1") and needed in body), needed
    assert sanitize(body) == body  # a sanitised body is a fixed point


def test_build_into_a_file_or_a_folder_it_did_not_make_is_one_line_and_deletes_nothing(tmp_path, capsys):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    a_file = tmp_path / "a_file"
    a_file.write_text("mine too")
    for out, why in ((mine, "was not made by make site .* not deleting it"), (a_file, "is not a folder"),
                     (a_file / "sub", "cannot make the site folder .*a_file/sub: Not a directory")):
        assert main(["build", str(out)]) == 2
        err = capsys.readouterr().err
        assert re.search(why, err), err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert (mine / "keep.txt").read_text() == "mine" and a_file.read_text() == "mine too"


def test_check_reads_only_regular_files_a_fifo_named_like_a_page_is_one_line(tmp_path, capsys):
    (tmp_path / "index.html").write_text('<a href="b.html">b</a><img src="fig.png">')
    os.mkfifo(tmp_path / "fig.png")
    assert main(["check", str(tmp_path)]) == 1  # a link to a FIFO is broken, and the FIFO is not opened
    assert "index.html: <img> 'fig.png': fig.png is not a regular file" in capsys.readouterr().out
    os.mkfifo(tmp_path / "b.html")
    done: dict[str, object] = {}
    worker = threading.Thread(target=lambda: done.update(rc=main(["check", str(tmp_path)])), daemon=True)
    worker.start()
    worker.join(timeout=120)  # it takes milliseconds; before the fix it blocked for ever opening b.html
    if worker.is_alive():  # unblock the reader so that nothing is left behind, then fail
        os.close(os.open(tmp_path / "b.html", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=60)
        pytest.fail("python -m parlab.site check blocked reading a FIFO named b.html")
    assert done["rc"] == 2
    err = capsys.readouterr().err
    assert err == f"{tmp_path}/b.html is a FIFO, not a regular file: a built site's pages are regular files (not read)\n"
    os.remove(tmp_path / "b.html")
    (tmp_path / "b.html").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="b.html is a symbolic link, not a regular file"):
        linkcheck.check(tmp_path)
    os.remove(tmp_path / "index.html")
    os.mkfifo(tmp_path / "index.html")
    with pytest.raises(ValueError, match="no index.html .*not a built site"):
        linkcheck.check(tmp_path)
