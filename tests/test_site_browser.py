"""One truth: the numbers the site's calculators show in a real browser (headless Debian Chromium,
Python in Pyodide, the site served from a local port, every request elsewhere refused) equal what
parlab's engines compute natively for the same inputs: ``parlab.costmodel.estimate`` (memory,
step time), ``parlab.schedules.simulate`` (the pipeline Gantt) and ``parlab.layout.Grid`` (the
rank grid), for every control moved by hand and for 50 random plans per calculator, invalid
plans included (the same error line). The expected values are computed here from the engines'
public API, not through ``parlab.site.calc``; only the number formats are shared.

The first-load and update times land in test-artifacts/site-browser.json (the README quotes
them). Skipped where /usr/bin/chromium is missing, unless PARLAB_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import functools
import http.server
import json
import math
import os
import random
import statistics
import threading
from fractions import Fraction
from pathlib import Path

import pytest

import parlab.costmodel as cm
from parlab.layout import Grid
from parlab.schedules import SCHEDULES, Costs, make_schedule, simulate
from parlab.site import calc
from parlab.site.build import ensure

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
PLANS = 50
REL_TOL = 1e-12  # a float shown may differ from the native one in its last bits only (``same``)
#: the issue's target for a control change; the median is asserted (measured: about 2 ms on a
#: loaded 2-core machine), the 95th percentile and the maximum are recorded
MEDIAN_UPDATE_MS = 100

if not CHROMIUM.exists():
    if os.environ.get("PARLAB_REQUIRE_BROWSER") == "1":
        pytest.fail("PARLAB_REQUIRE_BROWSER=1 but /usr/bin/chromium is missing (make browser)", pytrace=False)
    pytest.skip("no /usr/bin/chromium (install Debian's chromium: make browser)", allow_module_level=True)


# -- what the engines say, natively ----------------------------------------------------------------
def _estimate(v: dict[str, str]):
    dp, tp, pp = int(v["dp"]), int(v["tp"]), int(v["pp"])
    links = {k: v[k] for k in ("intra", "inter") if v.get(k, calc.SAME) != calc.SAME}
    interleaved = v.get("schedule") == "interleaved"
    return cm.estimate(cm.get_model(v["model"]).with_(seq_len=int(v["seq_len"])),
                    cm.make_cluster(v["cluster"], dp * tp * pp, **links),
                    cm.Plan(dp=dp, tp=tp, pp=pp, zero=int(v["zero"]), micro_batch=int(v["micro_batch"]),
                         micro_batches=int(v["micro_batches"]), schedule=v.get("schedule", "1f1b"),
                         chunks=int(v["chunks"]) if interleaved else 1, recompute=v["recompute"],
                         sequence_parallel=v["sp"] == "on", offload=v["offload"], dtype=v["dtype"]))


def memory(v):
    est = _estimate(v)
    rows = {k: (calc.gigabytes(x), repr(x)) for k, x in est.memory_terms().items()}
    rows |= {"total": (calc.gigabytes(est.memory_total), repr(est.memory_total)),
             "capacity": (calc.gigabytes(est.memory_capacity), repr(est.memory_capacity)),
             "fits": ("yes" if est.fits else "no", repr(est.fits)), "rank": (est.rank_label, str(est.rank))}
    return rows


def step(v):
    est = _estimate(v)
    rows = {k: (calc.seconds(x), repr(x)) for k, x in est.time_terms().items()}
    rows |= {"step": (calc.seconds(est.step_time), repr(est.step_time)),
             "mfu": (calc.percent(est.mfu), repr(est.mfu)),
             "tokens": (calc.count(est.tokens_per_s), repr(est.tokens_per_s)),
             "memory": (calc.gigabytes(est.memory_total), repr(est.memory_total)),
             "fits": ("yes" if est.fits else "no", repr(est.fits))}
    return rows


def pipeline(v):
    tl = simulate(make_schedule(v["schedule"], int(v["p"]), int(v["m"]), int(v["v"])),
                  Costs(f=int(v["f"]), b=int(v["b"]), w=int(v["w"])))
    peaks = ", ".join(map(str, tl.peak_in_flight))
    return {"makespan": (calc.fraction(Fraction(tl.makespan)), str(tl.makespan)),
            "bubble": (calc.fraction(Fraction(tl.bubble_fraction)), str(tl.bubble_fraction)),
            "peak": (peaks, peaks)}


def grid(v):
    g, rank, per_node = Grid(dp=int(v["dp"]), tp=int(v["tp"]), pp=int(v["pp"])), int(v["rank"]), int(v["gpus_per_node"])
    if rank >= g.world:
        raise ValueError(f"rank must be below the world size dp x tp x pp = {g.world}, got {rank}")
    c, (prev, nxt) = g.coords(rank), g.pipeline_neighbours(rank)
    rows = {"world": (str(g.world),) * 2, "coords": (f"{c.tp}, {c.dp}, {c.pp}", f"{c.tp},{c.dp},{c.pp}")}
    rows |= {f"{d}_group": (calc.ranks(g.group(d, rank)),) * 2 for d in ("tp", "dp", "pp")}
    rows |= {f"{d}_nodes": (str(g.span(d, per_node).nodes),) * 2 for d in ("tp", "dp", "pp")}
    rows["neighbours"] = (f"{'-' if prev is None else prev} / {'-' if nxt is None else nxt}", f"{prev},{nxt}")
    return rows


NATIVE = {"memory": memory, "step": step, "pipeline": pipeline, "grid": grid}


def expected(name: str, values: dict[str, str]) -> dict:
    try:
        return {"error": None, "rows": NATIVE[name](values)}
    except ValueError as err:
        return {"error": str(err), "rows": None}


def random_plan(name: str, rng: random.Random) -> dict[str, str]:
    """Random values every control accepts (the plan they make may still be invalid)."""
    c = rng.choice
    if name in ("memory", "step"):
        v = {"model": c(list(cm.MODELS)), "cluster": c(list(cm.CLUSTERS)), "dp": c("1 2 4 8 16 32 64".split()),
             "tp": c("1 2 4 8".split()), "pp": c("1 2 4 8 16".split()), "zero": c("0123"), "dtype": c(cm.DTYPES),
             "offload": c(cm.OFFLOADS), "recompute": c(cm.RECOMPUTE), "seq_len": str(c([512, 1024, 2048, 4096])),
             "micro_batch": str(c([1, 2, 4])), "micro_batches": str(c([1, 2, 8, 16, 32, 64]))}
        v["sp"] = c(calc.ON_OFF) if v["tp"] != "1" else "off"
        # mostly within the plan rules (ZeRO-2/3 only without pipeline stages, offload needs ZeRO),
        # so that most plans are valid; the rest show their error
        stages = ("0", "1", "2", "3") if v["pp"] == "1" else ("0", "1")
        v["zero"] = {"none": c(stages), "optimizer": c(stages[1:])}.get(v["offload"], "3")
        if v["offload"] == "optimizer+params":
            v["pp"] = "1"
        if name == "step":
            v |= {"intra": c([calc.SAME, *cm.LINKS]), "inter": c([calc.SAME, *cm.LINKS]),
                  "schedule": c(cm.SCHEDULES), "chunks": c("2 3 4".split())}
            if v["schedule"] == "interleaved" and v["pp"] != "1":
                v["micro_batches"] = str(int(v["pp"]) * c([1, 2, 4]))
        return v
    if name == "pipeline":
        return {"schedule": c(SCHEDULES), "p": str(rng.randint(1, 8)), "m": str(rng.randint(1, 16)),
                "v": str(rng.randint(2, 4)), "f": str(rng.randint(1, 3)), "b": str(rng.randint(1, 3)),
                "w": str(rng.randint(1, 3))}
    dp, tp, pp = (rng.choice([1, 2, 3, 4, 8]) for _ in range(3))
    return {"dp": str(dp), "tp": str(tp), "pp": str(pp), "gpus_per_node": str(c([1, 2, 4, 8, 16])),
            "rank": str(rng.randrange(dp * tp * pp + 2))}  # now and then one past the grid: its error


# -- the browser ----------------------------------------------------------------------------------
READ = """name => {
  const err = document.querySelector(`[data-error="${name}"]`);
  const rows = [...document.querySelectorAll(`[data-result="${name}"] tr`)]
    .map(tr => [tr.dataset.key, tr.querySelector("td").textContent, tr.dataset.raw]);
  const form = document.querySelector(`form[data-calc="${name}"]`);
  const values = Object.fromEntries([...form.elements].filter(e => e.name).map(e => [e.name, e.value]));
  return {error: err.hidden ? null : err.textContent, rows, values};
}"""
PLAN_BATCH = """([name, plans]) => {
  const read = READ;
  const form = document.querySelector(`form[data-calc="${name}"]`);
  return plans.map((plan, i) => {
    for (const [k, v] of Object.entries(plan)) form.elements[k].value = v;
    const keys = Object.keys(plan);  // the event comes from one control, a different one each time
    form.elements[keys[i % keys.length]].dispatchEvent(new Event("input", {bubbles: true}));
    return read(name);
  });
}""".replace("READ", READ)


def shown(result: dict) -> dict:
    if result["error"] is not None:
        return {"error": result["error"], "rows": None}
    return {"error": None, "rows": {k: (text, raw) for k, text, raw in result["rows"]}}


def same(got: dict, want: dict) -> bool:
    """Equal rows: the same text shown, and the same value up to the last bits of a float.
    Pyodide runs CPython 3.13, whose ``sum()`` of floats is compensated (3.12+) and whose libm is
    emscripten's: a float may differ from a 3.11 build's in its last bit or two, never more
    (REL_TOL). Fractions, counts and ranks are exact."""
    if got["error"] != want["error"] or (got["rows"] is None) != (want["rows"] is None):
        return False
    if got["rows"] is None:
        return True
    if list(got["rows"]) != list(want["rows"]):
        return False
    for key, (text, raw) in got["rows"].items():
        want_text, want_raw = want["rows"][key]
        if text != want_text:
            return False
        try:
            a, b = float(raw), float(want_raw)
        except ValueError:
            a = b = None
        if (a is None and raw != want_raw) or (a is not None and not math.isclose(a, b, rel_tol=REL_TOL)):
            return False
    return True


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    site = ensure(ROOT)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}/"
    refused: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(origin)
                      else (refused.append(route.request.url), route.abort()))
            errors: list[str] = []
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            # what scripts fetch (search.json, the bundle, Pyodide's files) must exist too
            tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            tab.goto(origin + "calculators.html")
            tab.wait_for_function("window.parlabCalc && (window.parlabCalc.ready || window.parlabCalc.error)",
                                  timeout=240_000)
            assert tab.evaluate("window.parlabCalc.error") is None
            yield tab
            assert errors == [], errors
            assert refused == [], f"the site asked for something outside it: {refused}"
        finally:
            browser.close()
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("name", list(calc.CALCULATORS))
def test_every_control_moved_shows_the_native_numbers(page, name):
    for control in calc.CALCULATORS[name].controls:
        sel = f"#{name}-{control.name}"
        now = page.input_value(sel)
        if control.options:
            page.select_option(sel, control.options[(control.options.index(now) + 1) % len(control.options)])
        else:
            page.fill(sel, str(int(now) + 1 if int(now) < control.high else control.low))
        got = page.evaluate(READ, name)
        assert same(shown(got), expected(name, got["values"])), (control.name, got["values"], shown(got))
    # the rows calc.js writes carry both languages, as the page's own do (pages.both)
    assert page.locator(f'[data-result="{name}"] th .t[lang="zh-CN"]').count() > 0


@pytest.mark.parametrize("name", list(calc.CALCULATORS))
def test_random_plans_show_the_native_numbers(page, name):
    rng = random.Random(f"site-{name}")
    plans = [random_plan(name, rng) for _ in range(PLANS)]
    results = page.evaluate(PLAN_BATCH, [name, plans])
    valid = 0
    for plan, got in zip(plans, results, strict=True):
        assert got["values"] == {**got["values"], **plan}  # every value reached its control
        assert same(shown(got), expected(name, got["values"])), (plan, shown(got))
        valid += got["error"] is None
    assert valid >= PLANS // 3, f"only {valid} of {PLANS} random {name} plans were valid"


def test_first_load_and_updates_are_measured(page):
    load, phases, times = page.evaluate("[parlabCalc.loadMs, parlabCalc.phases, parlabCalc.timings]")
    assert len(times) >= 4 * PLANS
    stats = {"first_load_s": round(load / 1000, 2), "python_started_s": phases["python"] / 1000,
             "parlab_imported_s": phases["parlab"] / 1000, "updates": len(times),
             "update_median_ms": round(statistics.median(times), 1),
             "update_p95_ms": round(sorted(times)[int(0.95 * len(times))], 1), "update_max_ms": round(max(times), 1)}
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "site-browser.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(stats)
    assert stats["update_median_ms"] < MEDIAN_UPDATE_MS, stats


def test_the_language_switch_and_the_search_box(page):
    """Last (it leaves the calculators): 中文 shows the Chinese strings and definitions, opens a
    chapter's 中文口述版, and is remembered; the search box finds a section of a chapter."""
    origin = page.url.rsplit("/", 1)[0] + "/"
    page.goto(origin + "glossary.html")
    zh = page.locator('table.glossary .t[lang="zh-CN"]').first
    assert not zh.is_visible()
    page.click("#lang")
    assert zh.is_visible() and not page.locator('table.glossary .t[lang="en"]').first.is_visible()
    page.goto(origin + "course/01_why_distributed.html")
    assert page.evaluate("document.documentElement.dataset.lang") == "zh"
    assert page.locator("details.parlab-zh-spoken").first.evaluate("d => d.open")
    page.click("#lang")
    page.fill("#search", "pipeline bubble")
    page.wait_for_selector("#search-results li a")
    hrefs = page.eval_on_selector_all("#search-results a", "links => links.map(a => a.getAttribute('href'))")
    assert any("course/04_pipeline_parallel.html#" in h for h in hrefs), hrefs
    page.fill("#search", "气泡率")  # the glossary's Chinese is searchable too
    page.wait_for_function("[...document.querySelectorAll('#search-results a')].some(a => a.href.includes('glossary.html#term-'))")
