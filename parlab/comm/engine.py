"""The shared-memory message engine of the local backend: rings, control frames, progress.

Between every ordered pair of ranks there is a *ring*, ``capacity`` bytes of the launch's
shared arena that only the sender writes and only the receiver reads, and a Unix socket that
carries the small control frames:

    H  header (+ the payload itself when it is small: <= INLINE_MAX bytes)
    D  "the ring now holds data up to byte position p"       sender -> receiver
    C  "I have consumed the ring up to byte position p"       receiver -> sender (credit)

A large message is copied into the ring piece by piece as space allows and read (or reduced)
straight out of it by the receiver: two copies per byte, no pickling, no kernel copy of the
payload. A receiver also publishes how far it has read in the arena, so on x86-64 a sender
finds room without waiting for a C frame (which is sent only when the receiver would
otherwise wait). A rank with nothing to do spins briefly, yielding the core at every turn,
then blocks in ``poll`` on its sockets; where the ranks outnumber the cores, or spinning has
stopped paying, it blocks at once (``waiting.WaitPolicy``): four ranks can share two cores. Sends are eager:
whatever does not fit in the ring yet is copied to private memory and pushed later, whenever
this rank waits for anything. Messages of different groups share the pair's ring in FIFO
order; a receive for one group moves earlier messages of other groups to private memory.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from . import arrays as A
from . import tuning
from .errors import PeerGone, UnreceivedMessage
from .message import HEADER_LEN, Header, Signature
from .shm import EXITING, Arena, Status
from .waiting import WaitPolicy

INLINE_MAX = 16 << 10  # payloads up to this size travel inside the header frame
ALIGN = 64  # every message starts on a cache line of the ring, so pieces stay element-aligned
MIN_PIECE = 64 << 10  # do not dribble a big message into a nearly full ring
_FRAME = struct.Struct("<BI")  # kind, payload length
_POS = struct.Struct("<Q")
H, D, C, E = 1, 2, 3, 4  # E: "my function has returned; nothing more this run" (a warm World)
# x86-64 keeps a load ahead of a later store (TSO), so a receiver can publish its read position
# in shared memory, after reading, without a barrier; the sender reads it when it needs room.
# Elsewhere (arm64) positions also travel as C frames, whose system calls order memory.
# (PARLAB_SHARED_POSITIONS=0 forces the frames, to test that path on x86.)
SHARED_POSITIONS = tuning.read().shared_positions
_HEADER = struct.Struct(f"<{HEADER_LEN}q")
_HEADER_BYTES = _HEADER.size
HISTORY = 64  # collectives remembered per rank (``Engine.signed``)
STALL_S = 0.05  # a rank waiting for a message looks this often whether its peer is elsewhere


def _align(pos: int) -> int:
    return -(-pos // ALIGN) * ALIGN


class _Outgoing:
    __slots__ = ("data", "done", "started", "private")

    def __init__(self, data: np.ndarray):
        self.data, self.done, self.started, self.private = data, 0, False, False


class _Incoming:
    __slots__ = ("header", "inline", "spill", "got", "started")

    def __init__(self, header: Header, inline: bytes | None):
        self.header, self.inline = header, inline
        self.spill: np.ndarray | None = None
        self.got, self.started = 0, False


class _Link:
    """Everything about one peer: its socket, the two rings, positions and queues."""

    def __init__(self, peer: int, sock: socket.socket, tx: np.ndarray, rx: np.ndarray,
                 peer_read: np.ndarray, my_read: np.ndarray):
        self.peer, self.sock, self.tx, self.rx = peer, sock, tx, rx
        self.peer_read, self.my_read = peer_read, my_read  # shared read positions
        self.capacity = tx.size
        self.tx_pos = self.tx_acked = 0  # bytes written into tx / freed by the peer
        self.rx_end = self.rx_pos = 0  # bytes the peer has written into rx / we consumed
        self.credited = 0  # rx_pos as last told to the peer
        self.outbox: deque[_Outgoing] = deque()
        self.incoming: deque[_Incoming] = deque()
        self.wbuf = bytearray()
        self.rbuf = bytearray()
        self.closed = self.want_write = False
        self.peer_done = False  # the peer sent E: it has returned from this run's function

    def frame(self, kind: int, payload: bytes) -> None:
        self.wbuf += _FRAME.pack(kind, len(payload))
        self.wbuf += payload


class Engine:
    """One rank's side of every link, and the loop that moves bytes while the rank waits."""

    def __init__(self, rank: int, arena: Arena, socks: dict[int, socket.socket], status: Status):
        self.rank, self.status = rank, status
        self.n = arena.world_size
        self.policy = WaitPolicy(self.n)  # spin before blocking, or not (waiting.py)
        # shm_direct's shared windows: where stores are seen in order (x86), and the arena has them
        self.direct = None
        if SHARED_POSITIONS and arena.capacity:
            from .direct import Direct

            self.direct = Direct(rank, arena, status, self.push_pending, self.policy, self.queued)
        self.links: dict[int, _Link] = {}
        self.private_copies = 0  # sends that did not fit in their ring at once
        # (ctx, signature code) of this run's latest collectives, to name a message left over
        # from a collective this rank called otherwise (``_unreceived``)
        self.signed: deque[tuple[int, tuple[int, ...]]] = deque(maxlen=HISTORY)
        self.poller = select.poll()
        self.by_fd: dict[int, _Link] = {}
        for peer, sock in socks.items():
            sock.setblocking(False)
            link = _Link(peer, sock, arena.ring(rank, peer), arena.ring(peer, rank),
                         arena.read_pos(rank, peer), arena.read_pos(peer, rank))
            self.links[peer] = link
            self.by_fd[sock.fileno()] = link
            self.poller.register(sock, select.POLLIN)

    # ---------------------------------------------------------------- sending
    def send(self, peer: int, header: Header, data: np.ndarray) -> None:
        link = self.links[peer]
        if link.closed:
            raise PeerGone(f"rank {self.rank} cannot send to rank {peer}: it has ended")
        head = _HEADER.pack(*header.encode())
        if data.size <= INLINE_MAX:
            link.frame(H, head + b"\x01" + data.tobytes())
        else:
            link.frame(H, head + b"\x00")
            link.outbox.append(_Outgoing(data))
            self._push(link)
        self._flush(link)
        for out in link.outbox:  # eager: keep what did not fit, not the caller's array
            if not out.private:
                out.data, out.done, out.private = out.data[out.done:].copy(), 0, True
                self.private_copies += 1

    def push_pending(self) -> None:
        """Move what earlier sends left in private memory on into the rings, without waiting
        (a rank busy elsewhere, as in shm_direct, must still deliver its eager sends)."""
        for link in self.links.values():
            if link.outbox and not link.closed and self._push(link):
                self._flush(link)
            elif link.wbuf:
                self._flush(link)

    def _push(self, link: _Link) -> bool:
        """Copy as much of the outbox into the ring as fits; announce it with one D frame."""
        cap, pushed = link.capacity, False
        if SHARED_POSITIONS:
            link.tx_acked = int(link.peer_read[0])
        while link.outbox:
            out = link.outbox[0]
            if not out.started:
                link.tx_pos, out.started = _align(link.tx_pos), True
            remaining = out.data.size - out.done
            off = link.tx_pos % cap
            k = min(remaining, cap - (link.tx_pos - link.tx_acked), cap - off)
            if k < remaining:
                k -= k % ALIGN
                if k <= 0 or (k < min(MIN_PIECE, cap // 4) and k < cap - off):
                    break  # wait for a worthwhile piece of room (the ring's end always is)
            link.tx[off:off + k] = out.data[out.done:out.done + k]
            out.done += k
            link.tx_pos += k
            pushed = True
            if out.done == out.data.size:
                link.outbox.popleft()
        if pushed:
            link.frame(D, _POS.pack(link.tx_pos))
        return pushed

    def _flush(self, link: _Link) -> None:
        if not link.wbuf or link.closed:
            link.wbuf.clear()
            return
        try:
            sent = link.sock.send(link.wbuf)
        except BlockingIOError:
            sent = 0
        except OSError:  # the peer has ended; what it did not read it did not want
            link.closed = True
            link.wbuf.clear()
            return
        del link.wbuf[:sent]
        if bool(link.wbuf) != link.want_write:  # ask poll to wake us when it can take more
            link.want_write = bool(link.wbuf)
            self.poller.modify(link.sock, select.POLLIN | (select.POLLOUT if link.want_write else 0))

    # ---------------------------------------------------------------- receiving
    def recv(self, peer: int, ctx: int, accept: Callable[[Header], A.Array],
             make_sink: Callable[[A.Array], Callable],
             stalled: Callable[[], None] | None = None) -> tuple[Header, A.Array]:
        """Wait for the next message from ``peer`` in group ``ctx``. ``accept`` checks its header
        and returns the destination array; ``make_sink(dest)`` returns the function that takes
        each piece, ``sink(offset, bytes)``, as it arrives. ``stalled()`` is called every
        STALL_S s of waiting for the header (it raises if the wait is hopeless)."""
        link = self.links[peer]
        while (msg := self._first(link, ctx)) is None:
            if link.closed or link.peer_done:
                raise PeerGone(f"rank {peer} returned from its function (or ended) while rank "
                               f"{self.rank} waited for a message from it: a recv with no matching send")
            self.wait(stalled)
        dest = accept(msg.header)
        for earlier in list(link.incoming):  # FIFO ring: other groups' messages leave first
            if earlier is msg:
                break
            if earlier.inline is None and earlier.spill is None:
                earlier.spill = np.empty(earlier.header.nbytes, np.uint8)
                self._consume(link, earlier, copier(earlier.spill))
        link.incoming.remove(msg)
        sink = make_sink(dest)
        if msg.inline is not None:
            sink(0, np.frombuffer(msg.inline, np.uint8))
        elif msg.spill is not None:
            sink(0, msg.spill)
        else:
            self._consume(link, msg, sink)
        return msg.header, dest

    def forward(self, src: int, ctx: int, accept: Callable[[Header], A.Array], dst: int,
                header: Header, buf: A.Array, op: str | None,
                stalled: Callable[[], None] | None = None) -> Header | None:
        """Receive from ``src`` and send on to ``dst`` in one pass over the bytes: each arriving
        piece is combined with ``buf`` (op) or copied into it (op None) and written straight
        into dst's ring. Returns the incoming header, or None (nothing done) when dst's ring
        has no room for the whole message now; the caller then receives and sends apart."""
        out = self.links[dst]
        nbytes = header.nbytes
        if SHARED_POSITIONS:
            out.tx_acked = int(out.peer_read[0])
        start = _align(out.tx_pos)
        if (nbytes <= INLINE_MAX or out.outbox or out.closed
                or start + nbytes - out.tx_acked > out.capacity):
            return None
        out.frame(H, _HEADER.pack(*header.encode()) + b"\x00")
        out.tx_pos = start
        cap, mine = out.capacity, A.byte_view(buf)

        def sink(offset: int, raw: np.ndarray) -> None:
            pos = start + offset
            for a, b, r in _split(pos, raw.size, cap):  # the piece may wrap round dst's ring
                ring, piece = out.tx[r:r + b - a], raw[a:b]
                if op is None:
                    mine[offset + a:offset + b] = piece
                    ring[...] = mine[offset + a:offset + b]
                else:
                    acc = A.element_range(buf, offset + a, b - a)
                    A.reduce_arrays(A.typed(piece, acc), acc, op, out=A.typed(ring, acc))
            out.tx_pos = pos + raw.size
            out.frame(D, _POS.pack(out.tx_pos))
            self._flush(out)

        header_in, _ = self.recv(src, ctx, accept, lambda dest: sink, stalled)
        return header_in

    def queued(self, peer: int) -> list[Header]:
        """Headers of the messages from ``peer`` that have arrived and are not received yet
        (what its socket holds is read first, without waiting)."""
        link = self.links[peer]
        if not link.closed:
            self._read(link)
        return [m.header for m in link.incoming]

    def _first(self, link: _Link, ctx: int) -> _Incoming | None:
        for m in link.incoming:
            if m.header.ctx == ctx:
                return m
        return None

    def _consume(self, link: _Link, msg: _Incoming, sink: Callable[[int, np.ndarray], None]) -> None:
        """Stream a ring message into ``sink(offset, bytes)`` as its pieces arrive."""
        if not msg.started:
            link.rx_pos, msg.started = _align(link.rx_pos), True
        cap, n = link.capacity, msg.header.nbytes
        while msg.got < n:
            avail = link.rx_end - link.rx_pos
            if avail <= 0:
                if link.closed:
                    raise PeerGone(f"rank {link.peer} ended in the middle of a message to rank {self.rank}")
                self._credit(link)  # the sender may be waiting for room to send the rest
                self.wait()
                continue
            off = link.rx_pos % cap
            k = min(avail, n - msg.got, cap - off)
            sink(msg.got, link.rx[off:off + k])
            msg.got += k
            link.rx_pos += k
            link.my_read[0] = link.rx_pos  # publish: read after the bytes above were
            if not SHARED_POSITIONS and link.rx_pos - link.credited >= cap // 4:
                self._credit(link)

    def _credit(self, link: _Link) -> None:
        """Tell the sender, with a frame that wakes it, how far we have read."""
        if link.rx_pos != link.credited:
            link.credited = link.rx_pos
            link.frame(C, _POS.pack(link.rx_pos))
            self._flush(link)

    # ---------------------------------------------------------------- the loop
    def wait(self, stalled: Callable[[], None] | None = None) -> None:
        """Make progress: push pending sends; if none could move, wait until a frame arrives
        (spinning with sched_yield first where the policy says it pays, then blocking in poll;
        with ``stalled``, calling it every STALL_S s of blocking)."""
        pushed = False
        for link in self.links.values():
            if link.outbox and self._push(link):
                pushed = True
                self._flush(link)
        ready = self.poller.poll(0)
        if not ready and not pushed:
            budget = self.policy.budget()
            if budget:
                deadline = time.perf_counter() + budget
                while not ready and time.perf_counter() < deadline:
                    os.sched_yield()
                    ready = self.poller.poll(0)
                self.policy.spun(bool(ready))
            if not ready and stalled is None:
                ready = self.poller.poll(None)
            while not ready:
                stalled()
                ready = self.poller.poll(STALL_S * 1000)
        for fd, events in ready:
            link = self.by_fd[fd]
            if events & select.POLLOUT:
                self._flush(link)
            if events & ~select.POLLOUT:  # data, or the peer hung up
                self._read(link)
        self.status.progress()

    def _read(self, link: _Link) -> None:
        try:
            data = link.sock.recv(1 << 16)  # below malloc's mmap threshold: no page faults
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            link.closed = True
            self.poller.unregister(link.sock)
            return
        buf = link.rbuf
        buf += data
        pos = 0
        while len(buf) - pos >= _FRAME.size:
            kind, size = _FRAME.unpack_from(buf, pos)
            if len(buf) - pos - _FRAME.size < size:
                break
            body = pos + _FRAME.size
            if kind == D:
                link.rx_end = _POS.unpack_from(buf, body)[0]
            elif kind == C:
                link.tx_acked = _POS.unpack_from(buf, body)[0]
            elif kind == E:
                link.peer_done = True
            else:
                header = Header.decode(_HEADER.unpack_from(buf, body))
                inline = bytes(buf[body + _HEADER_BYTES + 1:body + size]) if buf[body + _HEADER_BYTES] else None
                link.incoming.append(_Incoming(header, inline))
            pos = body + size
        del buf[:pos]

    def end_run(self) -> None:
        """The end of one function's run on a warm ``World``: like ``close``, but the links stay
        open for the next run. Push every pending send, tell each peer (an E frame, after every
        frame of this run) that there is no more, then wait for the same from every peer; a
        message that arrived and was never received is an error (``UnreceivedMessage``)."""
        while any(link.outbox or link.wbuf for link in self.links.values() if not link.closed):
            self.wait()
        self.status.set(EXITING)
        for link in self.links.values():
            link.frame(E, b"")
            self._flush(link)
        while True:
            self._unreceived()
            if all(link.peer_done or link.closed for link in self.links.values()):
                break
            self.wait()
        while any(link.wbuf for link in self.links.values() if not link.closed):
            self.wait()
        for link in self.links.values():
            if link.closed:
                raise PeerGone(f"rank {link.peer} ended during the run (rank {self.rank}'s link to it closed)")
            link.peer_done = False

    def _unreceived(self) -> None:
        for link in self.links.values():
            if link.incoming:
                m = link.incoming[0]
                ctx, code = m.header.ctx, m.header.sig
                for mine in (c for x, c in self.signed if x == ctx and c[1] == code[1] and code[0]):
                    # the peer sent it in a collective this rank also called, with other arguments
                    Signature.decode(mine).check(code, self.rank, link.peer)
                raise UnreceivedMessage(
                    f"rank {self.rank} returned from its function, but rank {link.peer} had sent it "
                    f"{len(link.incoming)} message(s) it never received, the first from "
                    f"{Signature.decode(m.header.sig).describe()}: every send needs a matching "
                    f"recv, and every rank must call the same collectives")

    def close(self) -> None:
        """The rank's function has returned: push every pending send into the rings, tell each
        peer there is no more (shut the socket's sending side: a peer waiting for a message from
        us fails at once), then wait until every peer has said the same. A message that arrived
        and was never received is an error: the send had no matching recv."""
        while any(link.outbox or link.wbuf for link in self.links.values() if not link.closed):
            self.wait()
        self.status.set(EXITING)
        for link in self.links.values():
            if not link.closed:
                try:
                    link.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        while True:
            self._unreceived()
            if all(link.closed for link in self.links.values()):
                break
            self.wait()
        for link in self.links.values():
            link.sock.close()


def _split(pos: int, size: int, cap: int) -> list[tuple[int, int, int]]:
    """Bytes [0, size) written at stream position pos of a ring of ``cap`` bytes, as
    (first, last, ring offset) pieces: one, or two where it wraps round the end."""
    off = pos % cap
    if off + size <= cap:
        return [(0, size, off)]
    return [(0, cap - off, off), (cap - off, size, 0)]


def copier(dst: A.Array) -> Callable[[int, np.ndarray], None]:
    """sink(offset, bytes): copy the bytes into dst at that byte offset."""
    mine = A.byte_view(dst)

    def sink(offset: int, raw: np.ndarray) -> None:
        mine[offset:offset + raw.size] = raw
    return sink


def reducer(op: str) -> Callable[[A.Array], Callable[[int, np.ndarray], None]]:
    """make_sink for recv_reduce: combine the bytes into dst's elements at that offset."""
    def make(dst: A.Array) -> Callable[[int, np.ndarray], None]:
        def sink(offset: int, raw: np.ndarray) -> None:
            A.reduce_bytes(dst, offset, raw, op)
        return sink
    return make
