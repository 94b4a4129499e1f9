"""Single-copy reads of a peer's memory: Linux's cross-memory attach (``process_vm_readv``).

A shared-memory transport moves a large message in two copies: the sender copies it into a
shared buffer, the receiver copies it out. Cross-memory attach (Linux 3.2, "CMA") lets the
receiver copy straight out of the sender's address space in one system call, so the bytes
cross memory once: Open MPI's shared-memory transport uses it as its single-copy mechanism for
large messages (``btl_vader_single_copy_mechanism=cma``; ``smsc/cma`` in Open MPI 5). The local
backend's large broadcast uses it (``parlab.comm.direct``): every peer reads the root's buffer
in place.

Where the kernel refuses (no such call, a seccomp filter, Yama's ``ptrace_scope``, another
user), ``readv`` raises ``OSError`` and the backend keeps its two-copy path; the ranks decide
together, once per world (``Direct.single_copy``), so they never disagree on the protocol.
Under Yama's ``ptrace_scope`` 1 a process may read only its descendants', unless the target
names a reader: ``allow_siblings`` names the launcher, whose descendants are the ranks.
"""

from __future__ import annotations

import ctypes
import os
import sys

from . import tuning

PR_SET_PTRACER = 0x59616D61  # prctl option: Yama's "this process (and its descendants) may trace me"


class _IOVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.process_vm_readv
    except (OSError, AttributeError):  # pragma: no cover - a libc without the wrapper
        return None
    fn.restype = ctypes.c_ssize_t
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IOVec), ctypes.c_ulong, ctypes.POINTER(_IOVec),
                   ctypes.c_ulong, ctypes.c_ulong]
    return libc


_LIBC = _libc()
AVAILABLE = _LIBC is not None and tuning.read().single_copy  # PARLAB_SINGLE_COPY


def allow_siblings() -> None:
    """Let the launcher's other children read this process where Yama restricts ptrace to
    descendants (``ptrace_scope`` 1; elsewhere the call fails harmlessly and is ignored)."""
    if _LIBC is not None:
        _LIBC.prctl(ctypes.c_int(PR_SET_PTRACER), ctypes.c_ulong(os.getppid()), 0, 0, 0)


def readv(pid: int, remote: int, local: int, nbytes: int) -> None:
    """Copy ``nbytes`` from address ``remote`` of process ``pid`` to address ``local`` of this
    process, all of them (the kernel may stop short: it goes on from there), or raise OSError."""
    if _LIBC is None:
        raise OSError("process_vm_readv is not available on this system")
    done = 0
    while done < nbytes:
        lo = _IOVec(local + done, nbytes - done)
        ro = _IOVec(remote + done, nbytes - done)
        got = _LIBC.process_vm_readv(pid, ctypes.byref(lo), 1, ctypes.byref(ro), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise OSError(err, f"process_vm_readv from pid {pid}: {os.strerror(err) if err else 'no bytes'}")
        done += got
