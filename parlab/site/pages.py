"""The site's page frame (sidebar, search box, language switch) and its generated pages: the front
page (the README's tables), the calculators page and the glossary.

Languages are data: every string of the frame is a ``UI`` entry in both English and Chinese,
written into the page in both (``<span lang=...>``), and the switch (``static/site.js``) only
flips which one CSS shows; the glossary shows both definitions the same way.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

from .calc import CALCULATORS, Calculator, Control, compute

UI: dict[str, dict[str, str]] = {
    "site": {"en": "parlab: distributed LLM training", "zh": "parlab：大模型分布式训练"},
    "home": {"en": "Home", "zh": "首页"},
    "calculators": {"en": "Calculators", "zh": "计算器"},
    "glossary": {"en": "Glossary", "zh": "术语表"},
    "course": {"en": "Chapters", "zh": "章节"},
    "exercises": {"en": "Exercises", "zh": "练习"},
    "search": {"en": "Search the course", "zh": "搜索课程"},
    "language": {"en": "中文", "zh": "English"},
    "explained": {"en": "Explained in", "zh": "讲解见"},
    "download": {"en": "Download this notebook (run it in JupyterLab: make lab)",
                 "zh": "下载此笔记本（在 JupyterLab 中运行：make lab）"},
    "loading": {"en": "Loading Python (Pyodide) in your browser: the numbers below are the defaults, "
                      "computed when the site was built.",
                "zh": "正在浏览器中加载 Python（Pyodide）：下方数字为默认值，构建网站时算出。"},
    "term": {"en": "term", "zh": "术语"},
    "definition": {"en": "definition", "zh": "定义"},
    "where": {"en": "where", "zh": "出处"},
}


#: the calculators' words in Chinese (the glossary's terms), keyed by their English: titles,
#: blurbs, control labels, row labels; a label without an entry shows in English only
CALC_ZH: dict[str, str] = {
    "Memory per GPU": "每卡显存", "Step time and MFU": "步时与模型算力利用率（MFU）",
    "Pipeline schedule (Gantt)": "流水线调度（甘特图）", "Rank grid: who talks to whom": "rank 网格：谁和谁通信",
    "model": "模型", "cluster": "集群", "intra-node link": "节点内互联", "inter-node link": "节点间互联",
    "ZeRO stage": "ZeRO 阶段", "dtype": "数据类型", "offload": "卸载", "recompute": "重计算",
    "sequence parallel": "序列并行", "sequence length": "序列长度", "micro-batch": "微批次大小",
    "micro-batches per step m": "每步微批次数 m", "schedule": "调度", "chunks v (interleaved)": "模型块数 v（交错式）",
    "stages p": "流水线阶段数 p", "micro-batches m": "微批次数 m", "forward cost F": "前向耗时 F",
    "backward cost B": "反向耗时 B", "weight-gradient cost W": "权重梯度耗时 W", "GPUs per node": "每节点 GPU 数",
    "dp": "dp", "tp": "tp", "pp": "pp", "rank": "rank",
    "parameters": "参数", "gradients": "梯度", "optimizer states": "优化器状态", "activations": "激活值",
    "buffers + fragmentation (allowance)": "缓冲区 + 碎片（预留）", "total per GPU": "每卡合计", "fits": "放得下",
    "most loaded GPU": "负载最重的卡", "compute: matmuls": "计算：矩阵乘", "compute: elementwise": "计算：逐元素",
    "TP communication": "TP 通信", "PP communication": "PP 通信", "pipeline bubble": "流水线气泡",
    "DP/ZeRO communication (exposed)": "DP/ZeRO 通信（未被计算掩盖）", "optimizer step": "优化器更新",
    "offload transfers": "卸载传输", "step time": "步时", "MFU": "MFU", "tokens / s": "token / 秒",
    "memory per GPU": "每卡显存", "makespan (time units)": "总时长（时间单位）", "bubble fraction": "气泡率",
    "peak activations per stage (micro-batches)": "每阶段激活峰值（微批次）", "world size": "总卡数（world size）",
    "coordinates (tp, dp, pp)": "坐标 (tp, dp, pp)", "its TP group": "所在 TP 组", "its DP group": "所在 DP 组",
    "its PP group": "所在 PP 组", "nodes one TP group spans": "一个 TP 组跨的节点数",
    "nodes one DP group spans": "一个 DP 组跨的节点数", "nodes one PP group spans": "一个 PP 组跨的节点数",
    "previous / next pipeline stage": "上一 / 下一流水线阶段",
}


def both(text: str, zh: dict[str, str] = CALC_ZH) -> str:
    """``text`` in English and, where ``zh`` has it, in Chinese (the switch shows one)."""
    if text not in zh:
        return html.escape(text)
    return f'<span class="t" lang="en">{html.escape(text)}</span><span class="t" lang="zh-CN">{html.escape(zh[text])}</span>'


def t(key: str) -> str:
    """The UI string ``key`` in every language, the English one shown unless the switch says zh."""
    return "".join(f'<span class="t" lang="{"zh-CN" if lang == "zh" else "en"}">{html.escape(text)}</span>'
                   for lang, text in UI[key].items())


@dataclass(frozen=True)
class NavItem:
    """A sidebar entry: ``href`` from the site root, its title, and its sections (id, text)."""

    href: str
    title: str
    group: str  # "course" | "exercises" | "" (top level)
    sections: tuple[tuple[str, str], ...] = ()
    ui: str = ""  # a UI key: the title in every language


def _untex(text: str) -> str:
    """A heading's TeX as plain text for the sidebar ('states: $2 + 2 + 12$' -> 'states: 2 + 2 + 12')."""
    return re.sub(r"\$([^$]*)\$", lambda m: m.group(1).replace("\\", ""), text)


def _sidebar(nav: list[NavItem], current: str, root: str) -> str:
    parts = [f'<p class="brand"><a href="{root}index.html">{t("site")}</a></p>',
             f'<input id="search" type="search" autocomplete="off" placeholder="{UI["search"]["en"]}" '
             f'aria-label="{UI["search"]["en"]}"><ol id="search-results"></ol>',
             f'<button id="lang" type="button">{t("language")}</button><ul>']
    group = ""
    for item in nav:
        if item.group != group:
            parts.append(f'</ul><p class="group">{t(item.group)}</p><ul>')
            group = item.group
        here = ' class="here"' if item.href == current else ""
        title = t(item.ui) if item.ui else html.escape(_untex(item.title))
        parts.append(f'<li{here}><a href="{root}{item.href}">{title}</a>')
        if item.href == current and item.sections:
            parts.append("<ul>" + "".join(f'<li><a href="#{html.escape(i)}">{both(_untex(s))}</a></li>'
                                          for i, s in item.sections) + "</ul>")
        parts.append("</li>")
    return "".join(parts) + "</ul>"


def page(title: str, body: str, nav: list[NavItem], current: str, extra_head: str = "") -> str:
    """A whole HTML page at ``current`` (a path from the site root) with the sidebar."""
    root = "../" * current.count("/")
    return (f'<!doctype html><html lang="en" data-lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{html.escape(title)} · parlab</title><link rel="icon" href="data:,">'
            f'<link rel="stylesheet" href="{root}static/site.css"><link rel="stylesheet" href="{root}static/pygments.css">'
            f'{extra_head}<script defer src="{root}static/site.js" data-root="{root}"></script></head>'
            f'<body><nav id="sidebar">{_sidebar(nav, current, root)}</nav>'
            f'<main id="content">{body}</main></body></html>')


def katex_head(body: str, current: str) -> str:
    """KaTeX's stylesheet and scripts for a page with TeX in it (``$...$``; ``static/site.js``
    renders it), else nothing."""
    if not re.search(r"\$[^$\s][^$]*\$", body):
        return ""
    root = "../" * current.count("/")
    return (f'<link rel="stylesheet" href="{root}katex/katex.min.css">'
            f'<script defer src="{root}katex/katex.min.js"></script>'
            f'<script defer src="{root}katex/contrib/auto-render.min.js"></script>')


# -- the calculators page ------------------------------------------------------------------------
def _control(calc: Calculator, c: Control) -> str:
    cid = f"{calc.name}-{c.name}"
    if c.options:
        opts = "".join(f'<option{" selected" if o == c.default else ""}>{html.escape(o)}</option>' for o in c.options)
        field = f'<select id="{cid}" name="{c.name}">{opts}</select>'
    else:
        field = (f'<input id="{cid}" name="{c.name}" type="number" min="{c.low}" max="{c.high}" step="1" '
                 f'value="{c.default}">')
    return f'<label for="{cid}">{both(c.label)}</label>{field}'


def calculator_links(calcs: list[Calculator], root: str) -> str:
    """A chapter's line pointing at the calculators it explains."""
    links = ", ".join(f'<a href="{root}calculators.html#{c.name}">{html.escape(c.title)}</a>' for c in calcs)
    return f'<p class="note">{t("calculators")}: {links}</p>'


def rows_html(result: dict) -> str:
    """The rows of a calculator's result as table rows (``data-key``, ``data-raw``: what tests read);
    the same markup ``static/calc.js`` writes."""
    return "".join(f'<tr data-key="{html.escape(r["key"])}" data-raw="{html.escape(r["raw"])}"><th>'
                   f'{both(r["label"])}</th><td>{html.escape(r["shown"])}</td></tr>' for r in result["rows"])


def calculators_body(chapters: dict[str, tuple[str, str]]) -> str:
    """Every calculator: its controls, its default result (computed natively at build time, so
    the page reads before Pyodide is up), and a link to its chapter (``chapters``: number ->
    (href, title))."""
    out = ['<h1>Calculators</h1><p>The cost model, the pipeline simulator and the rank grid of the course, '
           'running in your browser (Python in WebAssembly, no server): change a control and the numbers '
           'and the figure are recomputed by the same code the notebooks call.</p>',
           f'<p id="calc-status" class="status">{t("loading")}</p><ul class="toc">']
    out += [f'<li><a href="#{c.name}">{both(c.title)}</a></li>' for c in CALCULATORS.values()]
    out.append("</ul>")
    for calc in CALCULATORS.values():
        href, title = chapters[calc.chapter]
        result = compute(calc.name, {c.name: c.default for c in calc.controls})
        out.append(f'<section class="calc" id="{calc.name}"><h2>{both(calc.title)}</h2>'
                   f'<p>{html.escape(calc.blurb)} {t("explained")} <a href="{href}">{html.escape(title)}</a>.</p>'
                   f'<form class="controls" data-calc="{calc.name}">'
                   + "".join(_control(calc, c) for c in calc.controls) + "</form>"
                   f'<p class="calc-error" data-error="{calc.name}" hidden></p>'
                   f'<div class="calc-result" data-result="{calc.name}"><table class="calc-out">'
                   f'{rows_html(result)}</table><div class="calc-svg">{result["svg"]}</div></div></section>')
    out.append(f'<script type="application/json" id="calc-zh">{json.dumps(CALC_ZH, ensure_ascii=False)}</script>')
    return "".join(out)


# -- the glossary ---------------------------------------------------------------------------------
def glossary_id(i: int) -> str:
    return f"term-{i}"


def glossary_body(terms: list[tuple[str, str, str, str, str | None]]) -> str:
    """术语表: (zh, en, zh definition, en definition, link or None) rows, both languages."""
    rows = []
    for i, (zh, en, zh_def, en_def, link) in enumerate(terms):
        where = f'<a href="{html.escape(link)}">§</a>' if link else ""
        rows.append(f'<tr id="{glossary_id(i)}"><td lang="zh-CN">{html.escape(zh)}</td><td>{html.escape(en)}</td>'
                    f'<td><span class="t" lang="en">{html.escape(en_def)}</span>'
                    f'<span class="t" lang="zh-CN">{html.escape(zh_def)}</span></td><td>{where}</td></tr>')
    return (f'<h1>{t("glossary")}</h1><p>The course\'s terms as Chinese engineers say them, each with its '
            'English twin (the language switch shows the definitions in Chinese).</p>'
            f'<table class="glossary"><thead><tr><th>中文</th><th>English</th><th>{t("definition")}</th>'
            f'<th>{t("where")}</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


# -- the front page -------------------------------------------------------------------------------
def readme_tables(markdown: str) -> list[tuple[str, str]]:
    """(section heading, table markdown) for every table of the README."""
    out, heading, block = [], "", []
    for line in markdown.splitlines() + [""]:
        if line.startswith("## "):
            heading = line[3:].strip()
        if line.startswith("|"):
            block.append(line)
        elif block:
            out.append((heading, "\n".join(block)))
            block = []
    return out


def front_body(markdown: str, pages: dict[str, str]) -> str:
    """The README's title, first paragraph and tables, names of built pages linked (``pages``:
    a notebook's path without suffix, 'course/01_why_distributed' -> its page's href)."""
    import mistune

    from .sanitize import sanitize

    head, _, _ = markdown.partition("\n## ")
    title, _, intro = head.partition("\n")
    title = title.lstrip("# ").strip()
    parts = [f"<h1>{html.escape(title)}</h1>", sanitize(str(mistune.html(intro))),
             f'<p><a href="calculators.html">{t("calculators")}</a>: memory, step time, pipeline Gantt and '
             f'rank grid, computed in your browser by the course\'s own cost model. '
             f'<a href="glossary.html">{t("glossary")}</a> (中文 / English).</p>']
    for heading, table in readme_tables(markdown):
        rendered = sanitize(str(mistune.html(table)))
        parts.append(f"<h2>{html.escape(heading)}</h2>{_link_names(rendered, pages)}")
    return "".join(parts)


def _link_names(rendered: str, pages: dict[str, str]) -> str:
    def link(m: re.Match) -> str:
        name = html.unescape(m.group(1))
        key = name.removesuffix(".ipynb")
        href = pages.get(key) or next((h for k, h in pages.items() if k.endswith("/" + key)), None)
        return f'<a href="{href}"><code>{m.group(1)}</code></a>' if href else m.group(0)

    return re.sub(r"<code>([^<]+)</code>", link, rendered)
