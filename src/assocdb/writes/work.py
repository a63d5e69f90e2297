"""What a journal job holds (`Work`), and its encoding in the journal."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..core.ops import EdgeWrite, NodeJob, ObjectWrite, Rows, TypeChange
from .fanout import Deliveries, FanoutJob

Work = Rows | EdgeWrite | TypeChange | ObjectWrite | NodeJob | FanoutJob | Deliveries
_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Work] = msgspec.msgpack.Decoder(Work)


#: A job's body: the encoder's own method (no Python frame around it: one per write).
encode: Callable[[Work], bytes] = _encoder.encode


def decode(body: bytes) -> Work:
    return _decoder.decode(body)
