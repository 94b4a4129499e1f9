"""Every chapter in a real browser: JupyterLab on 127.0.0.1, headless Debian Chromium at 1400x900
driven by Playwright, one server for all chapters.

For each chapter of course/ (discovered, so a new chapter joins by existing): open it; before
running, each dashboard cell shows a picture, not a Python repr, and every stored figure is
displayed at or below its natural width (parlab's 2x PNGs at half their pixel width); then run
what the dashboards need: the dashboard cells (``...Dashboard(`` cells) and the earlier cells that
define a name they use (``cells_to_run``; nbval has already run every cell of every chapter, so
running the live cells again here would only repeat it); in every dashboard move one control
(``MOVES`` names it for a dashboard, or the first enabled dropdown, else slider) and see its
output, and its figure if it has one, change without an error; with the file browser open,
every dashboard (controls, headline numbers, figure) is at most 760 px tall at 1400x900 (what
is visible under JupyterLab's bars) and, at both 1400x900 and 1000x800 (a 568 px notebook
column), nothing of it reaches past the notebook's column unless inside a scroll box of its own
(the control grid wraps; a wide table scrolls). Screenshots land in test-artifacts/.

Skipped where /usr/bin/chromium is missing, unless PARLAB_REQUIRE_BROWSER=1 (CI sets it), which
turns the skip into a failure.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
VIEWPORT = {"width": 1400, "height": 900}
NARROW = {"width": 1000, "height": 800}
DASHBOARD_HEIGHT = 760  # px of a dashboard visible at once at 1400x900, under JupyterLab's bars
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DASHBOARD_CALL = re.compile(r"\b\w*Dashboard\(")

#: (chapter, k-th dashboard) -> (CSS class of the control to move, how); the default is the
#: dashboard's first enabled dropdown, else its first slider
MOVES = {("01_why_distributed.ipynb", 0): ("parlab-micro-batch", "slider"),
         # the compute wall's first dropdown is the GPU, whose next choice (A100 40 GB) has the
         # same peak as the A100 80 GB: same figure; the GPU count moves the point
         ("01_why_distributed.ipynb", 1): ("parlab-n-gpus", "slider")}

#: chapter -> (CSS class of a slider, steps right) that makes its first dashboard its tallest
#: (chapter 04's Gantt and table grow with the stages: 850 px at p >= 6 before they were fitted)
TALLEST = {"04_pipeline_parallel.ipynb": ("parlab-stages", 4)}

if not CHROMIUM.exists():
    if os.environ.get("PARLAB_REQUIRE_BROWSER") == "1":
        pytest.fail("PARLAB_REQUIRE_BROWSER=1 but /usr/bin/chromium is missing (make browser)",
                    pytrace=False)
    pytest.skip("no /usr/bin/chromium (install Debian's chromium: make browser)", allow_module_level=True)


def chapters() -> list[str]:
    """Every chapter of the course (file names)."""
    return [path.name for path in sorted((ROOT / "course").glob("*.ipynb"))]


#: the chapters are dealt round this many files (this one and tests/test_browser_shard*.py),
#: each with its own JupyterLab and Chromium: ``make test`` keeps a file on one worker, and as
#: one file the browser test alone set the suite's wall time
SHARDS = 3


def shard(k: int) -> list[str]:
    """The chapters that file ``k`` of the SHARDS checks: every SHARDS-th, from the k-th."""
    return chapters()[k::SHARDS]


def dashboard_cells(chapter: str) -> list[int]:
    """Indices (among code cells) of the cells that build a dashboard."""
    return [i for i, c in enumerate(code_cells(chapter)) if DASHBOARD_CALL.search(c.source)]


def names_of(source: str) -> tuple[set[str], set[str]]:
    """(names a cell defines, names it reads) — assignments, imports, defs; builtins left out."""
    defined, used = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, (ast.Store, ast.Del)) else used).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
    return defined, used - set(dir(builtins))


def cells_to_run(sources: list[str], targets: list[int]) -> list[int]:
    """The target cells and every earlier cell that defines a name one of them (or such a cell)
    reads: what must run, in order, for the targets to run as they do under Run All."""
    info = [names_of(s) for s in sources]
    need = set(targets)
    while True:
        wanted = set().union(*(info[i][1] for i in need))
        last = max(need)
        more = {j for j in range(last) if j not in need and info[j][0] & wanted}
        if not more:
            return sorted(need)
        need |= more


def test_cells_to_run_follows_every_definition_a_dashboard_reads():
    sources = ["import numpy as np", "from parlab.widgets import A", "x = launch_everything()",
               "cfg = dict(n=np.int64(2))", "A(cfg)", "y = x"]
    assert cells_to_run(sources, [4]) == [0, 1, 3, 4]
    assert cells_to_run(sources, [5]) == [2, 5]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scratch_copy(src: Path, dst: Path) -> None:
    """course/ as the browser runs it: in each chapter with a dashboard, the code cells that no
    dashboard needs become ``pass`` (their stored outputs stay, so the page looks as the learner's
    does until it runs); every other file as it is."""
    shutil.copytree(src, dst)
    for path in sorted(dst.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        dash = [i for i, c in enumerate(code) if DASHBOARD_CALL.search(c.source)]
        if not dash:
            continue
        keep = set(cells_to_run([c.source for c in code], dash))
        for i, cell in enumerate(code):
            if i not in keep:
                cell.source = "pass"
        nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over a scratch copy of course/ (running cells never touches the repo)."""
    root = tmp_path_factory.mktemp("lab")
    scratch_copy(ROOT / "course", root / "course")
    # render every cell (JupyterLab 4 virtualises cells out of view by default)
    settings = root / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    news = root / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = free_port(), secrets.token_hex(16)
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root / 'course'}",
         "--ServerApp.disable_check_xsrf=True", "--allow-root",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "JUPYTER_CONFIG_DIR": str(root / "cfg"),
             "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"),
             "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces")})
    base = f"http://127.0.0.1:{port}"
    try:
        # JupyterLab imports for seconds on a quiet machine, and for minutes on a busy one (the
        # suite under ../shared/tools/under-load): only a server that never answers fails here
        started = time.monotonic()
        deadline = started + 300
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not answer within {time.monotonic() - started:.0f} s:\n"
                                       + (root / "server.log").read_text()) from None
                time.sleep(0.5)
        yield base, token
    finally:
        # the server shuts its kernels down too; on a busy machine that takes a while, so each
        # step waits generously, and a server that still lives is killed: never left behind
        try:
            req = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(req, timeout=60)
            server.wait(timeout=120)
        except Exception:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"browser_{name}.png"))


def code_cells(chapter: str) -> list:
    return [c for c in nbformat.read(ROOT / "course" / chapter, as_version=4).cells if c.cell_type == "code"]


def run_all(page, chapter: str) -> None:
    """Run All (of the scratch copy: the cells the dashboards need, the others ``pass``), then
    wait until the last code cell with a visible input has run: a fresh kernel numbers the code
    cells 1..n in order (a hidden-input cell shows no prompt)."""
    from playwright.sync_api import expect

    page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
    page.locator('li[data-command="runmenu:run-all"]').click()
    n = max(i for i, c in enumerate(code_cells(chapter), 1)
            if not c.metadata.get("jupyter", {}).get("source_hidden"))
    expect(page.locator(".jp-InputArea-prompt", has_text=f"[{n}]")).to_have_count(1, timeout=420_000)
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=120_000)


# what a figure looks like in the page: its displayed width and its PNG's pixel width
FIGURE_SIZES = """els => els.filter(e => e.naturalWidth > 0).map(e => ({
    shown: e.getBoundingClientRect().width, natural: e.naturalWidth,
    parlab: e.classList.contains('parlab-figure') ||
            (e.getAttribute('width') !== null && +e.getAttribute('width') * 2 <= e.naturalWidth)}))"""


def assert_figures_at_natural_width(page) -> int:
    """Every displayed image at or below its natural width; parlab's 2x figures at half their
    pixel width or less. Returns how many were checked."""
    sizes = page.locator(".jp-OutputArea img").evaluate_all(FIGURE_SIZES)
    for s in sizes:
        natural = s["natural"] / 2 if s["parlab"] else s["natural"]
        assert 0 < s["shown"] <= natural + 1, f"figure shown {s['shown']:.0f} px wide, natural {natural:.0f} px"
    return len(sizes)


def move_a_control(page, dash, chapter: str, k: int) -> str:
    """Move dashboard ``k``'s control (``MOVES``), or else its first enabled dropdown, or else its
    first slider; returns what was moved (for the failure message)."""
    css, how = MOVES.get((chapter, k), (None, None))
    if how is None:
        how = "dropdown" if dash.locator("select:enabled").count() else "slider"
    if how == "slider":
        handle = dash.locator(f".{css} .noUi-handle" if css else ".noUi-handle").first
        assert handle.count(), f"dashboard {k} of {chapter} has no dropdown or slider to move"
        handle.focus()
        handle.press("ArrowRight")
        handle.press("ArrowRight")
        return f"slider {css or '(first)'}"
    select = dash.locator(f".{css} select" if css else "select:enabled").first
    options = select.locator("option").all_inner_texts()
    current = select.evaluate("s => s.selectedIndex")
    select.select_option(index=(current + 1) % len(options))
    return f"dropdown {css or '(first)'}: {options[current]!r} -> {options[(current + 1) % len(options)]!r}"


def assert_reacts(page, dash, chapter: str, k: int) -> None:
    """Moving one control of dashboard ``k`` changes its output (and its figure), with no error."""
    from playwright.sync_api import expect

    output, error = dash.locator(".parlab-output"), dash.locator(".parlab-error")
    expect(output).not_to_be_empty(timeout=60_000)
    figure = dash.locator("img.parlab-figure")
    before_text = output.inner_text()
    before_src = figure.get_attribute("src") if figure.count() else None
    dash.scroll_into_view_if_needed()
    moved = move_a_control(page, dash, chapter, k)
    try:
        page.wait_for_function("([el, old]) => el.innerText !== old",
                               arg=[output.element_handle(), before_text], timeout=60_000)
    except Exception as err:
        raise AssertionError(f"dashboard {k} of {chapter}: moving {moved} did not change its output") from err
    assert error.inner_text().strip() == "", (
        f"dashboard {k} of {chapter}: moving {moved} gave an error: {error.inner_text()}")
    if before_src is not None:
        page.wait_for_function("([el, old]) => el.getAttribute('src') !== old",
                               arg=[figure.element_handle(), before_src], timeout=60_000)
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=120_000)


# the elements of a dashboard that reach past the notebook column (its output area's right edge)
# and are not inside a scroll box of the dashboard's own: what the learner cannot see
OVERFLOW = """dash => {
    const right = dash.closest('.jp-OutputArea-output, .jp-Cell').getBoundingClientRect().right;
    const out = [];
    for (const el of dash.querySelectorAll('*')) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 || r.right <= right + 1) continue;
        let p = el.parentElement, inside = false;
        while (p && p !== dash.parentElement) {
            const o = getComputedStyle(p).overflowX;
            if ((o === 'auto' || o === 'scroll') && p.getBoundingClientRect().right <= right + 1) {
                inside = true;
                break;
            }
            p = p.parentElement;
        }
        if (!inside) out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')} ` +
                              `${Math.round(r.right - right)} px past the column`);
    }
    return out.slice(0, 4);
}"""


def open_file_browser(page) -> None:
    """The left sidebar's file browser open, as a learner who navigates the course has it."""
    if not page.locator("#filebrowser").is_visible():
        page.locator('.jp-SideBar.jp-mod-left li[data-id="filebrowser"]').click()
    page.locator("#filebrowser").wait_for(state="visible")


def assert_fits(page, dashes, chapter: str, size: dict, tall: int | None) -> None:
    """At viewport ``size``: every dashboard within the notebook column (and ``tall`` px)."""
    page.set_viewport_size(size)
    page.wait_for_function("w => window.innerWidth === w", arg=size["width"])
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    problems = []
    for k in range(dashes.count()):
        dash = dashes.nth(k)
        if tall is not None and dash.bounding_box()["height"] > tall:
            problems.append(f"dashboard {k} is {dash.bounding_box()['height']:.0f} px tall (at most {tall})")
        problems += [f"dashboard {k}: {p}" for p in dash.evaluate(OVERFLOW)]
    if problems:
        dashes.first.scroll_into_view_if_needed()
        shoot(page, f"{chapter.removesuffix('.ipynb')}_{size['width']}x{size['height']}")
    assert not problems, f"{chapter} at {size['width']}x{size['height']}:\n" + "\n".join(problems)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("chapter", shard(0))
def test_chapter_shows_crisp_figures_and_its_dashboards_react_and_fit(lab, browser, chapter):
    from playwright.sync_api import expect

    base, token = lab
    stem = chapter.removesuffix(".ipynb")
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.set_default_timeout(60_000)
        # a workspace of its own per chapter: no tab of an earlier chapter is restored beside it
        page.goto(f"{base}/lab/workspaces/{stem}/tree/{chapter}?token={token}")
        page.locator(".jp-Notebook").first.wait_for()
        expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=120_000)

        # before running: each dashboard cell shows a picture, not "XDashboard(children=(..."
        dash_cells = dashboard_cells(chapter)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        for i in dash_cells:
            out = cells.nth(i).locator(".jp-OutputArea")
            expect(out.locator("img").first).to_be_visible(timeout=30_000)
            assert "Dashboard(children=" not in out.inner_text()
        page.wait_for_function(  # every stored figure loaded, so their widths are final
            "() => [...document.querySelectorAll('.jp-OutputArea img')].every(i => i.complete)")
        assert_figures_at_natural_width(page)
        if dash_cells:
            cells.nth(dash_cells[0]).scroll_into_view_if_needed()
        shoot(page, f"{stem}_before_run")
        if not dash_cells:  # nothing reacts: its cells' outputs are nbval's to check
            assert page.locator(".parlab-dashboard").count() == 0
            return

        run_all(page, chapter)
        dashes = page.locator(".parlab-dashboard")
        expect(dashes.first).to_be_visible()
        page.wait_for_function(  # every dashboard figure loaded, so the heights below are final
            "() => [...document.querySelectorAll('.parlab-dashboard img.parlab-figure')]"
            ".every(i => i.offsetParent === null || (i.complete && i.naturalWidth > 0))")
        assert dashes.count() >= len(dash_cells), (
            f"{chapter}: {len(dash_cells)} dashboard cells but {dashes.count()} dashboards shown")
        dashes.first.scroll_into_view_if_needed()
        shoot(page, f"{stem}_dashboard")  # before the checks: a failure leaves its picture
        open_file_browser(page)
        assert_fits(page, dashes, chapter, VIEWPORT, DASHBOARD_HEIGHT)
        assert_fits(page, dashes, chapter, NARROW, None)
        page.set_viewport_size(VIEWPORT)
        for k in range(dashes.count()):
            assert_reacts(page, dashes.nth(k), chapter, k)
        assert assert_figures_at_natural_width(page) >= 1  # the dashboards' own, redrawn
        if chapter in TALLEST:
            css, steps = TALLEST[chapter]
            output = dashes.first.locator(".parlab-output")
            before = output.inner_text()
            handle = dashes.first.locator(f".{css} .noUi-handle").first
            handle.focus()
            for _ in range(steps):
                handle.press("ArrowRight")
            page.wait_for_function("([el, old]) => el.innerText !== old",
                                   arg=[output.element_handle(), before], timeout=60_000)
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=120_000)
            page.wait_for_function("() => [...document.querySelectorAll('.parlab-dashboard img.parlab-figure')]"
                                   ".every(i => i.offsetParent === null || i.complete)")
            assert_fits(page, dashes, chapter, VIEWPORT, DASHBOARD_HEIGHT)
        dash = dashes.first
        dash.scroll_into_view_if_needed()
        page.evaluate("el => el.scrollIntoView({block: 'start'})", dash.element_handle())
        shoot(page, f"{stem}_dashboard")
    finally:
        page.close()
        shut_down_kernels(base, token)


def shut_down_kernels(base: str, token: str) -> None:
    """Stop every kernel of the server, so that one chapter's kernel never slows the next."""
    import json

    with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10) as r:
        kernels = json.load(r)
    for k in kernels:
        req = urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(req, timeout=30)
