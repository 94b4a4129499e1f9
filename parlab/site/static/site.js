// parlab site: the language switch and the search box (no framework, no network beyond the site).
(() => {
  const root = document.currentScript.dataset.root;
  const html = document.documentElement;

  function setLang(lang) {
    html.dataset.lang = lang;
    html.lang = lang === "zh" ? "zh-CN" : "en";
    localStorage.setItem("parlab-lang", lang);
    // in Chinese, the 中文口述版 blocks of a chapter open by themselves
    document.querySelectorAll("details.parlab-zh-spoken").forEach((d) => { d.open = lang === "zh"; });
  }

  let index = null;
  async function search(query) {
    if (index === null) index = await (await fetch(root + "search.json")).json();
    const words = query.toLowerCase().split(/\s+/).filter((w) => w);
    const out = document.getElementById("search-results");
    out.replaceChildren();
    if (!words.length) return;
    const hits = index.filter((e) => {
      const text = (e.t + " " + e.x).toLowerCase();
      return words.every((w) => text.includes(w));
    }).slice(0, 20);
    for (const e of hits) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = root + e.u;
      a.textContent = e.t;
      const small = document.createElement("small");
      small.textContent = " " + e.p;
      li.append(a, small);
      out.append(li);
    }
    if (!hits.length) out.append(Object.assign(document.createElement("li"), { textContent: "—" }));
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (window.renderMathInElement) {  // the chapters' TeX, by the vendored KaTeX (pages.katex_head)
      window.renderMathInElement(document.getElementById("content"), {
        delimiters: [{ left: "$$", right: "$$", display: true }, { left: "$", right: "$", display: false },
                     { left: "\\(", right: "\\)", display: false }, { left: "\\[", right: "\\]", display: true }],
        throwOnError: false,
      });
    }
    setLang(localStorage.getItem("parlab-lang") || "en");
    document.getElementById("lang").addEventListener("click",
      () => setLang(html.dataset.lang === "zh" ? "en" : "zh"));
    const box = document.getElementById("search");
    box.addEventListener("input", () => search(box.value));
  });
})();
