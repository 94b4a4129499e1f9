"""The site's two JavaScript dependencies, vendored into it at build time (no CDN when it runs):
Pyodide's core runtime (Python in WebAssembly, for the calculators) and KaTeX (the chapters' TeX).

``npm pack`` fetches each pinned package from the npm registry into a cache inside the checkout
(``build/site-cache``, git-ignored; npm's own cache is put there too), the tarball's SHA-512 must
equal the pin (npm's ``integrity`` field), and only the files a page needs are copied into the
site: for Pyodide the loader, the WebAssembly runtime, the standard library and the package lock
file it reads at start (no other Pyodide package is ever loaded); for KaTeX its script, its
auto-render extension, its stylesheet and its woff2 fonts. Their licences travel with them.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NpmPackage:
    """A pinned npm package and the files of it (globs under ``strip``) that the site ships."""

    name: str
    version: str
    sha512: str  # npm's dist.integrity, without its "sha512-" prefix
    files: tuple[str, ...]
    licence: str
    strip: str = ""


PYODIDE = NpmPackage(
    "pyodide", "0.29.5", "TkYrUv9m8QmfImADKRmpwZulL48E0uUaBSO+dvRQKyAJc0qh9gu7jn8btyHPh3NZm1r2IH2YrJhIr7Q2B9urAw==",
    ("pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", "package.json"),
    "Pyodide (Python 3.13), https://github.com/pyodide/pyodide, Mozilla Public License 2.0")
KATEX = NpmPackage(
    "katex", "0.16.47", "Eeo8Ys1doU1z+x8AZsPpQu+p/QcZBI5PeOo7QGQdy2x2m0MU/hYagBbGOmXwr5KVbEfVuWv9LpnQWeehogurjg==",
    ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js", "fonts/*.woff2"),
    "KaTeX, https://katex.org, MIT licence", strip="dist/")
PACKAGES = (PYODIDE, KATEX)


def integrity(path: Path) -> str:
    """npm's ``integrity`` of a file: base64 of its SHA-512."""
    return base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def tarball(package: NpmPackage, cache: Path) -> Path:
    """The pinned tarball of ``package`` in ``cache``, fetched with ``npm pack`` unless already
    there, checked against its SHA-512 (a mismatch deletes it)."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{package.name}-{package.version}.tgz"
    if not path.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(f"make site needs npm (Node.js) to fetch {package.name} from the npm registry: "
                               "install Node.js 18 or newer")
        subprocess.run([npm, "pack", f"{package.name}@{package.version}", "--pack-destination", str(cache),
                        "--cache", str(cache / "npm"), "--silent", "--no-audit", "--no-fund"],
                       check=True, stdout=subprocess.DEVNULL, timeout=600)
    got = integrity(path)
    if got != package.sha512:
        path.unlink()
        raise RuntimeError(f"{path.name} has SHA-512 {got}, expected {package.sha512} (the pinned version's npm "
                           "integrity); deleted it, run make site again")
    return path


def install(package: NpmPackage, dest: Path, cache: Path) -> list[Path]:
    """Copy ``package``'s shipped files into ``dest`` (paths below ``strip``), and its licence note."""
    copied = []
    with tarfile.open(tarball(package, cache)) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/")
            if not member.isfile() or not name.startswith(package.strip):
                continue
            rel = name.removeprefix(package.strip)
            if any(fnmatch.fnmatchcase(rel, pattern) for pattern in package.files):
                source = tar.extractfile(member)
                assert source is not None, name  # a regular file of the tarball
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read())
                copied.append(target)
    missing = [p for p in package.files if not any(fnmatch.fnmatchcase(str(c.relative_to(dest)), p) for c in copied)]
    if missing:
        raise RuntimeError(f"{package.name} {package.version} has no {', '.join(missing)}")
    (dest / "LICENSE.txt").write_text(f"{package.licence}; version {package.version} from the npm registry.\n")
    return copied
