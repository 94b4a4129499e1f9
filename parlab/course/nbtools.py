"""Notebook tooling: re-execute notebooks in place, and generate exercises/ from solutions/.

    python -m parlab.course.nbtools execute [NOTEBOOK ...]   # default: course/*.ipynb solutions/*.ipynb
    python -m parlab.course.nbtools exercises                # solutions/*.ipynb -> exercises/*.ipynb
    python -m parlab.course.nbtools check                    # exit 1 if exercises/ is out of date
    python -m parlab.course.nbtools lab [--port N]           # JupyterLab, printing chapter 00's link

One source for both: a solution notebook marks the learner's part of a code cell with
``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines (nbgrader's markers); the exercise gets
a ``raise NotImplementedError`` stub in its place, at the marker's indentation, and no outputs.
A cell whose metadata tags include ``check`` calls a checker from ``parlab.checks``: it passes
on the solution and must fail on the stub (tests/test_exercises.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

ROOT = Path(__file__).resolve().parents[2]
# nbformat (1.5 s of imports: jsonschema) is imported where a notebook is read, not here: the
# exercise checkers import STUB on every rank they launch
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("exercise: write this part (see the markdown above)")'


def stub_source(source: str) -> str:
    """Replace every BEGIN/END SOLUTION block of a cell's source by a NotImplementedError stub."""
    out: list[str] = []
    inside = False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"nested {BEGIN!r} in cell:\n{source}")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif stripped == END:
            if not inside:
                raise ValueError(f"{END!r} without {BEGIN!r} in cell:\n{source}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN!r} without {END!r} in cell:\n{source}")
    return "\n".join(out)


def make_exercise(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The exercise notebook for a solution notebook: stubs in place of solutions, no outputs."""
    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = stub_source(cell.source)
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)  # the solution's run times: not the learner's
    nb.metadata.pop("widgets", None)
    return nb


def exercise_path(solution: Path) -> Path:
    return solution.parent.parent / "exercises" / solution.name


def solutions(root: Path = ROOT) -> list[Path]:
    return sorted((root / "solutions").glob("*.ipynb"))


def write_exercises(root: Path = ROOT) -> list[Path]:
    """(Re)write exercises/X.ipynb for every solutions/X.ipynb; return the paths written."""
    import nbformat

    written = []
    for sol in solutions(root):
        ex = make_exercise(nbformat.read(sol, as_version=4))
        path = exercise_path(sol)
        path.parent.mkdir(exist_ok=True)
        nbformat.write(ex, path)
        written.append(path)
    return written


def out_of_date(root: Path = ROOT) -> list[str]:
    """Exercises whose code or text differs from what their solution generates."""
    import nbformat

    stale = []
    for sol in solutions(root):
        want = make_exercise(nbformat.read(sol, as_version=4))
        path = exercise_path(sol)
        if not path.exists():
            stale.append(f"{path.relative_to(root)} (missing)")
            continue
        have = nbformat.read(path, as_version=4)
        if [(c.cell_type, c.source) for c in have.cells] != [(c.cell_type, c.source) for c in want.cells]:
            stale.append(str(path.relative_to(root)))
    return stale


def execute(path: Path, timeout: int = 600) -> None:
    """Run a notebook top to bottom in its own folder and save it with outputs and widget state."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:  # nbclient's per-cell timestamps would change every file on every run
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


FIRST_CHAPTER = "course/00_start_here.ipynb"


def free_port(start: int = 8888, tries: int = 50) -> int:
    """The first port from ``start`` on which 127.0.0.1 accepts a listener."""
    for port in range(start, start + tries):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ValueError(f"no free port in {start}..{start + tries - 1}; pass --port")


def lab_links(port: int, token: str) -> dict[str, str]:
    """The two links ``make lab`` prints: JupyterLab, and chapter 00 opened directly (for a
    machine with no browser, where the link is copied to another one)."""
    base = f"http://127.0.0.1:{port}"
    return {"JupyterLab": f"{base}/lab?token={token}",
            "chapter 00": f"{base}/lab/tree/{FIRST_CHAPTER}?token={token}"}


def lab_command(port: int, token: str) -> list[str]:
    """The ``jupyter lab`` command line: the repository as root, a fixed port and token, and
    the Terminal's shell run as itself (``$SHELL``, not a login shell: jupyter_server_terminals
    adds ``-l`` when stdout is not a terminal, and a login shell's /etc/profile resets PATH)."""
    shell = os.environ.get("SHELL") or "sh"
    cmd = [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}",
           "--ServerApp.terminado_settings=" + json.dumps({"shell_command": [shell]})]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    return cmd + [FIRST_CHAPTER]


def lab_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The server's environment: this interpreter's directory (the virtualenv's ``bin``) first
    on PATH and VIRTUAL_ENV set, as ``source .venv/bin/activate`` does, so that ``parlab`` and
    ``python -m parlab.train`` work in JupyterLab's Terminal (chapter 00 says they do)."""
    bindir = os.path.dirname(sys.executable)
    rest = [d for d in environ.get("PATH", "").split(os.pathsep) if d and d != bindir]
    env = {**environ, "PATH": os.pathsep.join([bindir, *rest])}
    if sys.prefix != sys.base_prefix:  # a virtualenv
        env["VIRTUAL_ENV"] = sys.prefix
    return env


def lab(port: int | None, dry_run: bool = False) -> int:
    """Start JupyterLab over the repository; once it answers, print both links."""
    port = port or free_port()
    token = secrets.token_hex(24)
    cmd, links = lab_command(port, token), lab_links(port, token)
    show = "\n".join(f"  {name}: {url}" for name, url in links.items())
    if dry_run:
        print(" ".join(cmd))
        print(show)
        return 0
    return serve(cmd, f"http://127.0.0.1:{port}/api/status?token={token}",
                 f"\nparlab: JupyterLab is running (Ctrl-C to stop). Open:\n{show}\n")


def serve(cmd: list[str], status_url: str, ready: str) -> int:
    """Run the server ``cmd`` (environment: ``lab_env``) until it ends, printing ``ready`` once
    ``status_url`` answers. Ctrl-C, SIGTERM and SIGHUP (a closed terminal, ``kill``) stop it
    alike: SIGTERM to the server (it shuts its kernels down), then wait for it; a second one
    while waiting kills it. Returns the server's exit status."""
    from parlab.train.stop import signals_as_interrupt

    server = None
    with signals_as_interrupt(signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            server = subprocess.Popen(cmd, cwd=ROOT, env=lab_env())
            while server.poll() is None:
                try:
                    urllib.request.urlopen(status_url, timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            if server.poll() is None:
                print(ready, flush=True)
            return server.wait()
        except KeyboardInterrupt:
            if server is None:
                return 130
            server.terminate()
            try:
                return server.wait()
            except KeyboardInterrupt:
                server.kill()
                return server.wait()


def default_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted((root / "course").glob("*.ipynb")) + solutions(root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parlab.course.nbtools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("execute", help="re-execute notebooks in place")
    ex.add_argument("notebooks", nargs="*", type=Path)
    sub.add_parser("exercises", help="regenerate exercises/ from solutions/")
    sub.add_parser("check", help="fail if exercises/ is out of date")
    lb = sub.add_parser("lab", help="start JupyterLab and print the link to chapter 00")
    lb.add_argument("--port", type=int, default=None, help="port (default: the first free from 8888)")
    lb.add_argument("--dry-run", action="store_true", help="print the command and links; start nothing")
    args = parser.parse_args(argv)
    if args.cmd == "lab":
        if args.port is not None and not 0 < args.port < 65536:
            parser.error(f"--port must be in 1..65535, got {args.port}")
        return lab(args.port, args.dry_run)
    if args.cmd == "execute":
        paths = args.notebooks or default_notebooks()
        for i, path in enumerate(paths, 1):
            print(f"[{i}/{len(paths)}] executing {path}", flush=True)
            execute(Path(path).resolve())
        return 0
    if args.cmd == "exercises":
        for path in write_exercises():
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    stale = out_of_date()
    for name in stale:
        print(f"out of date: {name} (run `make exercises`)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
