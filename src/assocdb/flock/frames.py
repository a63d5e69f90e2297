"""Request frames, checked before thriftpy2 decodes them.

thriftpy2 trusts what a frame says: a 4-byte header makes it allocate and
buffer up to 2 GiB, and a list header makes it build as many Python objects
as the bytes allow, one per byte for a list of empty structs (a 16 MiB frame
took 2.8 GB and 24 s of CPU). Whoever can connect can send either, so each
frame is read whole here, at most `MAX_FRAME` bytes, and walked once (a
cheap pass: FlockDB's ids travel as one binary string per term) to check
that it holds whole (strict) binary-protocol messages of at most `MAX_VALUES` values
(fields, list, set and map items) nested at most `MAX_DEPTH` deep. A frame
that fails closes its connection before thriftpy2 sees it, as Thrift's Java
server does with an oversized frame: no answer can be framed for a request
that was not read. FlockDB's clients send one message per frame.

Time is bounded too, as each connection holds a thread: a connection may
wait `idle` seconds for its next request, but once a frame's first byte has
come, the whole frame must arrive within `frame` seconds (a client that
sends a header and then nothing, or a byte a minute, is cut off), and an
answer must be taken within `frame` seconds.
"""

from __future__ import annotations

import logging
import math
import socket
import struct
import time
from typing import Any

log = logging.getLogger("assocdb.flock")

MAX_FRAME = 16 << 20  # bytes of one request frame
MAX_VALUES = 100_000  # values in one frame's messages
MAX_DEPTH = 64  # nesting of structs and containers (thriftpy2's own limit)

_STOP, _BOOL, _BYTE, _DOUBLE, _I16, _I32, _I64 = 0, 2, 3, 4, 6, 8, 10
_STRING, _STRUCT, _MAP, _SET, _LIST = 11, 12, 13, 14, 15
_FIXED = {_BOOL: 1, _BYTE: 1, _DOUBLE: 8, _I16: 2, _I32: 4, _I64: 8}
_VERSION_MASK, _VERSION_1 = 0xFFFF0000, 0x80010000


class BadFrame(Exception):
    """Why a frame is refused."""


class CheckedFrames:
    """A transport factory: thriftpy2's framed transport (`framed`, its fast one) over
    the client's socket, read a checked frame at a time, within `idle` seconds of
    waiting for a request and `frame` seconds to read or write one (None: no limit)."""

    def __init__(self, framed: Any, idle: float | None = None, frame: float | None = None) -> None:
        self._framed = framed
        self._idle = idle
        self._frame = frame

    def get_transport(self, client: Any) -> Any:
        return self._framed(_Checked(client, self._idle, self._frame))


class _Checked:
    """A client's socket whose reads give whole checked frames (header included);
    a frame that fails its check, or comes too late, ends the connection
    (TTransportException, which the server takes as a closed connection)."""

    def __init__(self, trans: Any, idle: float | None, frame: float | None) -> None:
        self._trans = trans
        self._idle = idle
        self._frame = math.inf if frame is None else frame
        self._ready = b""  # checked bytes not yet read
        self._at = 0

    def read(self, size: int) -> bytes:
        if self._at == len(self._ready):
            self._ready, self._at = self._next_frame(), 0
        data = self._ready[self._at : self._at + size]  # never more than asked
        self._at += len(data)
        return data

    def _next_frame(self) -> bytes:
        first = self._read(4, self._idle, "no request came")
        until = time.monotonic() + self._frame  # the frame has begun
        header = first + self._read_exactly(4 - len(first), until)
        (size,) = struct.unpack("!i", header)
        try:
            if not 0 < size <= MAX_FRAME:
                raise BadFrame(f"it declares {size} bytes (at most {MAX_FRAME})")
            body = self._read_exactly(size, until)
            check_frame(body)
        except BadFrame as exc:
            return self._refuse(str(exc))
        return header + body

    def _read_exactly(self, size: int, until: float) -> bytes:
        parts, left = [], size
        while left:
            wait = until - time.monotonic()
            part = self._read(min(left, 1 << 16), wait, "a request frame did not arrive")
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def _read(self, size: int, wait: float | None, late: str) -> bytes:
        """Up to `size` bytes, within `wait` seconds (None: no limit); at least one."""
        if wait is not None and wait <= 0:
            return self._timed_out(late)
        self._settimeout(wait)
        try:
            part: bytes = self._trans.read(size)
        except TimeoutError:
            return self._timed_out(late)
        if not part:
            return self._end("the client closed the connection")
        return part

    def _settimeout(self, wait: float | None) -> None:
        sock: socket.socket | None = self._trans.sock
        if sock is not None:
            sock.settimeout(None if wait == math.inf else wait)

    def _timed_out(self, late: str) -> bytes:
        log.info("closing a FlockDB connection: %s in time", late)
        self._trans.close()
        return self._end(f"{late} in time")

    def _refuse(self, why: str) -> bytes:
        log.warning("closing a FlockDB connection: a request frame is refused: %s", why)
        self._trans.close()
        return self._end(f"a request frame is refused: {why}")

    def _end(self, why: str) -> bytes:
        from thriftpy2.transport import TTransportException

        raise TTransportException(TTransportException.END_OF_FILE, why)

    def write(self, data: bytes) -> None:
        self._settimeout(self._frame)  # a client that does not read its answers
        try:
            self._trans.write(data)
        except OSError as exc:  # the timeout, or a reset: end the connection quietly
            self._trans.close()
            self._end(f"the answer could not be sent: {exc}")

    def flush(self) -> None:
        self._trans.flush()

    def is_open(self) -> bool:
        return bool(self._trans.is_open())

    def open(self) -> None:
        self._trans.open()

    def close(self) -> None:
        self._trans.close()


def check_frame(frame: bytes) -> None:
    """BadFrame unless `frame` holds whole binary-protocol messages within the limits."""
    walk = _Walk(frame)
    while walk.at < len(frame):
        walk.message()


class _Walk:
    """A pass over binary-protocol bytes that decodes nothing but lengths."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0
        self.values = 0

    def message(self) -> None:
        (first,) = struct.unpack("!I", self.take(4))
        if first & _VERSION_MASK != _VERSION_1:  # the server reads strict binary only
            raise BadFrame(f"no protocol version 1 header ({first:#010x})")
        self.take(self.length())  # the method's name
        self.take(4)  # sequence id
        self.struct(0)

    def struct(self, depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise BadFrame(f"it nests more than {MAX_DEPTH} levels deep")
        while True:
            kind = self.take(1)[0]
            if kind == _STOP:
                return
            self.take(2)  # field id
            self.value(kind, depth + 1)

    def value(self, kind: int, depth: int) -> None:
        self.values += 1
        if self.values > MAX_VALUES:
            raise BadFrame(f"it holds more than {MAX_VALUES:,} values")
        if kind in _FIXED:
            self.take(_FIXED[kind])
        elif kind == _STRING:
            self.take(self.length())
        elif kind == _STRUCT:
            self.struct(depth)
        elif kind in (_LIST, _SET, _MAP):
            self.container(kind, depth)
        else:
            raise BadFrame(f"unknown value type {kind}")

    def container(self, kind: int, depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise BadFrame(f"it nests more than {MAX_DEPTH} levels deep")
        kinds = list(self.take(2 if kind == _MAP else 1))
        for _ in range(self.length()):  # each item takes a byte at least: bounded
            for item in kinds:
                self.value(item, depth + 1)

    def length(self) -> int:
        (n,) = struct.unpack("!i", self.take(4))
        if n < 0:
            raise BadFrame(f"a negative length {n}")
        return int(n)

    def take(self, n: int) -> bytes:
        end = self.at + n
        if end > len(self.data):
            raise BadFrame("it ends within a message")
        piece = self.data[self.at : end]
        self.at = end
        return piece
