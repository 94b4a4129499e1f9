"""The browser test (tests/test_browser.py) for its shard 2: every third chapter from the
third, with a JupyterLab server and a Chromium of this file's own, so that another
worker runs them beside the others."""

from __future__ import annotations

import pytest
import test_browser  # skips this module without Chromium, as that one does
from test_browser import browser, lab  # noqa: F401 - the module fixtures, one of each for this file


@pytest.mark.timeout(900)
@pytest.mark.parametrize("chapter", test_browser.shard(2))
def test_chapter_shows_crisp_figures_and_its_dashboards_react_and_fit(lab, browser, chapter):  # noqa: F811
    test_browser.test_chapter_shows_crisp_figures_and_its_dashboards_react_and_fit(lab, browser, chapter)
