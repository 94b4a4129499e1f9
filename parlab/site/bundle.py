"""The pure-Python part of parlab as one zip for Pyodide: exactly the modules that importing the
calculators (``parlab.site.calc``) loads, found by importing it in a fresh interpreter, plus the
data files beside them (``parlab/data/*.csv``).

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
_PROBE = """
import json, sys
import {entry}
mods = {{}}
for name, mod in sorted(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    mods[name] = f
print(json.dumps({{"mods": mods, "stdlib": sorted(sys.stdlib_module_names)}}))
"""


def imported(root: Path, entry: str = ENTRY) -> list[Path]:
    """Files of the parlab modules that ``import entry`` loads (run in a fresh interpreter)."""
    out = subprocess.run([sys.executable, "-c", _PROBE.format(entry=entry)], capture_output=True, text=True,
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
        raise RuntimeError(f"import {entry} loads modules Pyodide's core lacks: {', '.join(sorted(foreign))} "
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
