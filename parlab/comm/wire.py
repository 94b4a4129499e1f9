"""Length-prefixed pickles over a socket: how the launcher and its workers talk."""

from __future__ import annotations

import pickle
import socket
import struct

_LEN = struct.Struct("<Q")


def send_obj(sock: socket.socket, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LEN.pack(len(data)) + data)


def recv_obj(sock: socket.socket) -> object | None:
    """The next object, or None if the other end closed before sending a whole one."""
    head = _recv_exact(sock, _LEN.size)
    if head is None:
        return None
    body = _recv_exact(sock, _LEN.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def _recv_exact(sock: socket.socket, n: int) -> bytearray | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        try:
            k = sock.recv_into(view[got:])
        except OSError:
            return None
        if k == 0:
            return None
        got += k
    return buf
