// The calculators: Pyodide (vendored in ../pyodide/) runs parlab's pure-Python cost model, schedules
// and rank grid (py/parlab.zip); every control change calls parlab.site.calc.run(name, values) and
// writes the rows and the SVG it returns. window.parlabCalc exposes the load time and the update
// times (tests and the README's measurements read them).
import { loadPyodide } from "../pyodide/pyodide.mjs";

const started = performance.now();
const status = document.getElementById("calc-status");
const state = { ready: false, loadMs: null, phases: {}, timings: [], error: null };
const mark = (phase) => { state.phases[phase] = Math.round(performance.now() - started); };
window.parlabCalc = state;
const zh = JSON.parse(document.getElementById("calc-zh").textContent);  // pages.CALC_ZH

function values(form) {
  const out = {};
  for (const el of form.elements) if (el.name) out[el.name] = el.value;
  return out;
}

function show(name, result) {
  const error = document.querySelector(`[data-error="${name}"]`);
  const box = document.querySelector(`[data-result="${name}"]`);
  if (result.error) {
    error.textContent = result.error;
    error.hidden = false;
    box.classList.add("stale");  // an invalid plan clears nothing silently: the old result is greyed
    return;
  }
  error.hidden = true;
  box.classList.remove("stale");
  const rows = result.rows.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.key = r.key;
    tr.dataset.raw = r.raw;
    const th = document.createElement("th");
    if (r.label in zh) {  // both languages, as pages.both writes them; the switch shows one
      for (const [lang, text] of [["en", r.label], ["zh-CN", zh[r.label]]]) {
        th.append(Object.assign(document.createElement("span"), { className: "t", lang, textContent: text }));
      }
    } else {
      th.textContent = r.label;
    }
    const td = document.createElement("td");
    td.textContent = r.shown;
    tr.append(th, td);
    return tr;
  });
  box.querySelector("table").replaceChildren(...rows);
  box.querySelector(".calc-svg").innerHTML = result.svg;
}

try {
  const base = new URL("../", import.meta.url);
  const py = await loadPyodide({ indexURL: new URL("pyodide/", base).href });
  mark("python");
  const zip = await (await fetch(new URL("py/parlab.zip", base))).arrayBuffer();
  py.unpackArchive(zip, "zip", { extractDir: "/parlab-site" });
  py.runPython("import sys; sys.path.insert(0, '/parlab-site')");
  const run = py.pyimport("parlab.site.calc").run;
  mark("parlab");
  state.update = (name) => {
    const t0 = performance.now();
    const form = document.querySelector(`form[data-calc="${name}"]`);
    show(name, JSON.parse(run(name, JSON.stringify(values(form)))));
    state.timings.push(performance.now() - t0);
  };
  for (const form of document.querySelectorAll("form[data-calc]")) {
    form.addEventListener("input", () => state.update(form.dataset.calc));
    form.addEventListener("submit", (e) => e.preventDefault());
  }
  state.loadMs = performance.now() - started;
  state.ready = true;
  const secs = (state.loadMs / 1000).toFixed(1);
  status.replaceChildren(
    Object.assign(document.createElement("span"), { className: "t", lang: "en",
      textContent: `Python is running in your browser (loaded in ${secs} s): change any control.` }),
    Object.assign(document.createElement("span"), { className: "t", lang: "zh-CN",
      textContent: `Python 已在你的浏览器中运行（加载用时 ${secs} 秒）：调整任意控件即可重算。` }));
} catch (err) {
  state.error = String(err);
  status.textContent = `Could not start Python in this browser (${err}); the numbers shown are the defaults.`;
}
