"""``make setup`` installs the CPU build of torch from PyTorch's CPU wheel index by default (issue
20: a plain ``torch==2.13.0`` on Linux resolves PyPI's CUDA build and its multi-GB runtime), as an
extra index so a local wheel cache or mirror in pip's configuration still answers, and a CUDA
user can name another index. Read from ``make -n`` (nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def setup_commands(tmp_path: Path, *overrides: str) -> list[str]:
    venv = tmp_path / "venv"  # absent: make -n prints every step of a first setup
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH", "TORCH_INDEX", "MAKEFLAGS")}
    done = subprocess.run(["make", "-n", "setup", f"VENV={venv}", *overrides], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # the Makefile's defaults, whatever the caller set
    assert done.returncode == 0, done.stderr
    assert not venv.exists()
    return [line for line in done.stdout.splitlines() if "pip install" in line and "torch==" in line]


def test_torch_comes_from_the_cpu_index_pinned(tmp_path):
    first, deps = setup_commands(tmp_path)
    assert '--no-deps --extra-index-url "https://download.pytorch.org/whl/cpu" "torch==2.13.0"' in first
    assert "--index-url" not in first.replace("--extra-index-url", "")  # pip's own indexes stay
    assert deps.endswith('pip install --quiet "torch==2.13.0"')  # its dependencies, as usual


def test_a_cuda_user_names_another_index(tmp_path):
    first, _ = setup_commands(tmp_path, "TORCH_INDEX=https://download.pytorch.org/whl/cu126")
    assert '--extra-index-url "https://download.pytorch.org/whl/cu126" "torch==2.13.0"' in first
    first, _ = setup_commands(tmp_path, "TORCH_INDEX=")
    assert "index-url" not in first
