"""``make lab`` (``parlab.course.nbtools lab``): the server it starts has the virtualenv first on PATH
(JupyterLab's Terminal then finds ``parlab`` and ``python -m parlab.train``, as chapter 00
says), and SIGTERM or SIGHUP to ``make lab`` stop the server as Ctrl-C does (it used to be left
running). A stand-in child takes the server's place: no Jupyter is started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import has_ended
from parlab.course.nbtools import lab_command, lab_env

ROOT = Path(__file__).resolve().parents[1]
BIN = os.path.dirname(sys.executable)
# the stand-in server: says its pid and environment, then waits to be stopped
STAND_IN = ("import json, os, sys, time; p = sys.argv[1]; "
            "json.dump({'pid': os.getpid(), 'env': dict(os.environ)}, open(p + '.tmp', 'w')); "
            "os.rename(p + '.tmp', p); time.sleep(600)")


def test_the_server_has_the_virtualenv_first_on_path_and_a_plain_shell():
    env = lab_env({"PATH": os.pathsep.join(["/usr/bin", BIN, "/bin"]), "HOME": "/h"})
    assert env["PATH"].split(os.pathsep) == [BIN, "/usr/bin", "/bin"] and env["HOME"] == "/h"
    if sys.prefix != sys.base_prefix:
        assert env["VIRTUAL_ENV"] == sys.prefix
    settings = [a for a in lab_command(8899, "t") if a.startswith("--ServerApp.terminado_settings=")]
    assert len(settings) == 1 and "-l" not in settings[0]  # not a login shell: PATH stays


def started(path: Path, proc: subprocess.Popen, limit: float = 120.0) -> dict:
    """The stand-in's report, once written (or a failure after ``limit`` s or if ``proc`` ends)."""
    deadline = time.monotonic() + limit
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return json.loads(path.read_text())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_to_make_lab_stops_its_server(signum, tmp_path):
    report = tmp_path / "server.json"
    code = ("import signal, sys\n"
            "for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
            "    signal.signal(s, signal.SIG_DFL if s != signal.SIGINT else signal.default_int_handler)\n"
            "from parlab.course.nbtools import serve\n"
            f"sys.exit(serve([sys.executable, '-c', {STAND_IN!r}, {str(report)!r}], "
            "'http://127.0.0.1:1/', 'ready'))")
    lab = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    server = None
    try:
        server = started(report, lab)
        assert server["env"]["PATH"].split(os.pathsep)[0] == BIN
        lab.send_signal(signum)
        out, err = lab.communicate(timeout=120)
        assert has_ended(server["pid"], 60.0), err
        assert "Traceback" not in err, err
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.communicate()
        if server is not None and not has_ended(server["pid"], 0):
            os.kill(server["pid"], signal.SIGKILL)
