"""What a journal job holds (`Work`), and its encoding in the journal."""

from __future__ import annotations

import msgspec

from ..core.ops import EdgeWrite, NodeJob, ObjectWrite, Rows, TypeChange
from .fanout import Deliveries, FanoutJob

Work = Rows | EdgeWrite | TypeChange | ObjectWrite | NodeJob | FanoutJob | Deliveries
_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Work] = msgspec.msgpack.Decoder(Work)


def encode(work: Work) -> bytes:
    return _encoder.encode(work)


def decode(body: bytes) -> Work:
    return _decoder.decode(body)
