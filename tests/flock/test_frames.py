"""The check of request frames before thriftpy2 decodes them (flock/frames.py)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from assocdb.flock.frames import MAX_DEPTH, MAX_VALUES, BadFrame, check_frame
from assocdb.flock.server import idl

thriftpy2 = pytest.importorskip("thriftpy2")


def call(name: str, **args: Any) -> bytes:
    """The bytes a thriftpy2 client sends for a call (one message, strict binary)."""
    from thriftpy2.protocol import TBinaryProtocol
    from thriftpy2.thrift import TMessageType
    from thriftpy2.transport import TMemoryBuffer

    service = idl().FlockDB
    buffer = TMemoryBuffer()
    protocol = TBinaryProtocol(buffer)
    protocol.write_message_begin(name, TMessageType.CALL, 7)
    protocol.write_struct(getattr(service, f"{name}_args")(**args))
    protocol.write_message_end()
    return bytes(buffer.getvalue())


def header(name: bytes = b"count") -> bytes:
    return struct.pack("!Ii", 0x80010001, len(name)) + name + struct.pack("!i", 1)


def test_a_client_call_passes() -> None:
    m = idl()
    term = m.QueryTerm(1, 1, True, struct.pack("<3q", 2, 3, 4), [0])
    operations = [m.SelectOperation(1, term), m.SelectOperation(2, None)] * 50
    check_frame(call("count", operations=operations))
    check_frame(call("select", operations=operations, page=m.Page(10, -1)))
    check_frame(call("contains", source_id=1, graph_id=1, destination_id=2) * 3)  # pipelined


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (
            header() + struct.pack("!bhbi", 15, 1, 12, MAX_VALUES) + b"\0" * (MAX_VALUES + 1),
            "values",
        ),
        (header() + struct.pack("!bhbi", 15, 1, 12, 2**31 - 1) + b"\0" * 10, "ends within"),
        (header() + struct.pack("!bhbi", 15, 1, 12, -1) + b"\0", "negative"),
        (header() + b"\x0c\x00\x01" * MAX_DEPTH + b"\0" * (MAX_DEPTH + 1), "nests"),
        (header() + struct.pack("!bhi", 11, 1, 100) + b"short\0", "ends within"),
        (header() + struct.pack("!bh", 1, 1) + b"\0", "unknown value type 1"),
        (struct.pack("!Ii", 0x80020001, 5) + b"count" + struct.pack("!i", 1) + b"\0", "version"),
        (struct.pack("!i", 5) + b"count\x01" + struct.pack("!i", 1) + b"\0", "version"),
        (call("contains", source_id=1, graph_id=1, destination_id=2)[:-3], "ends within"),
    ],
)
def test_frames_refused(frame: bytes, why: str) -> None:
    with pytest.raises(BadFrame, match=why):
        check_frame(frame)
