"""Chapter 01 in a real browser: JupyterLab on 127.0.0.1, headless Debian Chromium driven by
Playwright. Run all cells, move a slider, and see the memory number and the figure change.

Skipped where /usr/bin/chromium is missing, unless PARLAB_REQUIRE_BROWSER=1 (CI sets it), which
turns the skip into a failure. A screenshot lands in test-artifacts/.
"""

from __future__ import annotations

import os
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

NOTEBOOK = "01_why_distributed.ipynb"
ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not CHROMIUM.exists():
    if os.environ.get("PARLAB_REQUIRE_BROWSER") == "1":
        pytest.fail("PARLAB_REQUIRE_BROWSER=1 but /usr/bin/chromium is missing (make browser)",
                    pytrace=False)
    pytest.skip("no /usr/bin/chromium (install Debian's chromium: make browser)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over a scratch copy of course/ (running cells never touches the repo)."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "course", root / "course")
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
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (root / "server.log").read_text()) from None
                time.sleep(0.5)
        yield base, token
    finally:
        try:  # shuts down the kernels too
            req = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(req, timeout=10)
            server.wait(timeout=30)
        except Exception:
            server.terminate()
            server.wait(timeout=30)
        log.close()


@pytest.mark.timeout(300)
def test_chapter_01_runs_and_its_memory_dashboard_reacts_to_a_slider(lab):
    from playwright.sync_api import expect, sync_playwright

    base, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            page.locator(".jp-Notebook").first.wait_for()
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=90_000)

            page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
            page.locator('li[data-command="runmenu:run-all"]').click()
            # a fresh kernel numbers the code cells 1..n in order: wait for the last one whose
            # input is visible (collapsed answer cells show a placeholder instead of a prompt)
            code = [c for c in nbformat.read(ROOT / "course" / NOTEBOOK, as_version=4).cells
                    if c.cell_type == "code"]
            n = max(i for i, c in enumerate(code, 1)
                    if not c.metadata.get("jupyter", {}).get("source_hidden"))
            expect(page.locator(".jp-InputArea-prompt", has_text=f"[{n}]")).to_have_count(
                1, timeout=180_000)

            dash = page.locator(".parlab-dashboard").first
            output = dash.locator(".parlab-output")
            expect(output).to_contain_text("total", timeout=120_000)
            figure = dash.locator("img.parlab-figure")
            before_text, before_src = output.inner_text(), figure.get_attribute("src")
            assert "micro-batch 1" in before_text

            # move the micro-batch slider: focus its handle and press the arrow key twice
            handle = dash.locator(".parlab-micro-batch .noUi-handle")
            handle.focus()
            handle.press("ArrowRight")
            handle.press("ArrowRight")
            expect(output).to_contain_text("micro-batch 3", timeout=30_000)
            after_text = output.inner_text()
            assert after_text != before_text
            total = [line for line in after_text.splitlines() if line.startswith("total")]
            assert total and total[0] not in before_text, "the total memory did not change"
            page.wait_for_function(
                "([el, old]) => el.getAttribute('src') !== old", arg=[figure.element_handle(), before_src],
                timeout=30_000)
            dash.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "browser_ch01_memory_dashboard.png"))
        finally:
            browser.close()
