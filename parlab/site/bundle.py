"""The pure-Python part of parlab as one zip for Pyodide: the modules that importing the
calculators (``parlab.site.calc``) loads and every module of the pure packages (``PURE``: some
are imported only when a plan needs them, as ``costmodel.pricing.moe_layer`` for a mixture of experts,
and a module missing from the zip would fail in the reader's browser only), found by importing
them all in a fresh interpreter, plus the data files beside them (``parlab/data/*.csv``).

A module from outside the standard library (numpy, say) in that import is an error naming it:
Pyodide's core has only the standard library, and the site loads no other package.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ENTRY = "parlab.site.calc"
PURE = ("parlab.costmodel", "parlab.schedules")  # pure Python, no numpy at import (DESIGN.md)
_PROBE = """
import importlib, json, pkgutil, sys
import {entry}
for pkg in {pure!r}:
    for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
        importlib.import_module(info.name)
mods = {{}}
for name, mod in sorted(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    mods[name] = f
print(json.dumps({{"mods": mods, "stdlib": sorted(sys.stdlib_module_names)}}))
"""


def imported(root: Path, entry: str = ENTRY, pure: tuple[str, ...] = PURE) -> list[Path]:
    """Files of the parlab modules that ``import entry`` and importing every module of ``pure``
    load (run in a fresh interpreter)."""
    out = subprocess.run([sys.executable, "-c", _PROBE.format(entry=entry, pure=pure)], capture_output=True, text=True,
                         cwd=root, env={"PYTHONPATH": str(root), "PATH": ""}, timeout=120, check=True)
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    stdlib, files, foreign = set(probe["stdlib"]), [], []
    for name, file in probe["mods"].items():
        top = name.split(".")[0]
        if top == "parlab":
            files.append(Path(file))
        elif top not in stdlib and not top.startswith("_") and file is not None and "site-packages" in file:
            foreign.append(name)
    if foreign:
        raise RuntimeError(f"import {entry} (and {', '.join(pure)}) loads modules Pyodide's core lacks: "
                           f"{', '.join(sorted(foreign))} "
                           "(the calculators may import only the standard library and parlab's pure packages)")
    return sorted(files)


def build(root: Path, dest: Path) -> list[str]:
    """Write ``dest`` (a zip of ``parlab/...`` paths) and return its member names."""
    package = root / "parlab"
    members: set[Path] = set()
    for file in imported(root):
        members.add(file.resolve())
        members.update(p.resolve() for p in file.parent.iterdir() if p.is_file() and p.suffix in {".csv", ".json"})
    dest.parent.mkdir(parents=True, exist_ok=True)
    names = []
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(members):
            name = str(path.relative_to(package.resolve().parent))
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # the same bytes on every build
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
            names.append(name)
    return names
