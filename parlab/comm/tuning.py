"""The comm runtime's tuning variables (``PARLAB_*`` in the environment), read and checked in one place.

    PARLAB_DIRECT_CHUNK       bytes of a buffer per shm_direct chunk (default 2 MiB)
    PARLAB_DIRECT_SLOTS       shm_direct slots that successive chunks use in turn (default 2)
    PARLAB_SPIN               seconds a local-backend rank spins before it blocks (default 100e-6)
    PARLAB_SINGLE_COPY        1: large broadcasts may read the root's memory (default), 0: never
    PARLAB_SHARED_POSITIONS   1: ring positions in shared memory (x86 default), 0: as frames
    PARLAB_ZYGOTE             1: ranks forked by a warm zygote (default), 0: fresh interpreters

``launch`` and ``World`` call ``read()`` before any process starts, so a wrong value is one line
naming the variable, its value and the rule (ValueError) in the caller, never an error on every
rank; the ranks inherit the environment and read the same values.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass

MIN_CHUNK, MAX_CHUNK = 4 << 10, 1 << 30  # a chunk holds one element per rank (256 x 16 bytes) at least
MAX_SLOTS = 64
MAX_SPIN_S = 1.0
_X86 = platform.machine().lower() in ("x86_64", "amd64")


@dataclass(frozen=True)
class Tuning:
    direct_chunk: int = 2 << 20
    direct_slots: int = 2
    spin_s: float = 100e-6
    single_copy: bool = True
    shared_positions: bool = _X86
    zygote: bool = True


def _refuse(name: str, raw: str, rule: str) -> ValueError:
    return ValueError(f"{name}={raw!r} is not valid: it must be {rule}")


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int, multiple: int, rule: str) -> int:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        raise _refuse(name, raw, rule) from None
    if not lo <= v <= hi or v % multiple:
        raise _refuse(name, raw, rule)
    return v


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    if raw.strip() not in ("0", "1"):
        raise _refuse(name, raw, f"0 or 1 (default {int(default)})")
    return raw.strip() == "1"


def read(env: Mapping[str, str] | None = None) -> Tuning:
    """The tuning variables of ``env`` (default: this process's environment), checked."""
    env = os.environ if env is None else env
    d = Tuning()
    chunk = _int(env, "PARLAB_DIRECT_CHUNK", d.direct_chunk, MIN_CHUNK, MAX_CHUNK, 64,
                 f"an integer number of bytes, a multiple of 64 from {MIN_CHUNK} to {MAX_CHUNK} "
                 f"(default {d.direct_chunk})")
    slots = _int(env, "PARLAB_DIRECT_SLOTS", d.direct_slots, 2, MAX_SLOTS, 2,
                 f"an even integer from 2 to {MAX_SLOTS} (default {d.direct_slots})")
    spin = d.spin_s
    if (raw := env.get("PARLAB_SPIN")) is not None:
        rule = f"a number of seconds from 0 to {MAX_SPIN_S:g} (default {d.spin_s:g})"
        try:
            spin = float(raw)
        except ValueError:
            raise _refuse("PARLAB_SPIN", raw, rule) from None
        if not (math.isfinite(spin) and 0 <= spin <= MAX_SPIN_S):
            raise _refuse("PARLAB_SPIN", raw, rule)
    return Tuning(chunk, slots, spin, _flag(env, "PARLAB_SINGLE_COPY", d.single_copy),
                  _flag(env, "PARLAB_SHARED_POSITIONS", d.shared_positions),
                  _flag(env, "PARLAB_ZYGOTE", d.zygote))
