"""OP_MSG encoding and in-place reply checks (request templates: driver.ops.Tmpl)."""

from __future__ import annotations

import ssl
import struct
from collections.abc import Callable

import bson

OP_MSG = 2013
HEADER = struct.Struct("<iiii")
BUF_BYTES = 1 << 20  # receive buffer; grows for a larger message
MAX_MESSAGE = 64 << 20  # MongoDB's maxMessageSizeBytes is 48 MB
MAX_LOWAT = 256 << 10
PATIENCE = 0.005  # s to wait for the bytes expected before taking fewer
COALESCE = 16  # replies expected per wake-up of receive_checked
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class WireError(RuntimeError):
    """A command failed, the connection broke, or the deployment cannot be used."""


class AuthError(WireError):
    """Authentication failed (wrong credentials, or the server could not prove itself)."""


# ------------------------------------------------------------------------ messages


def encode_msg(command: dict, request_id: int = 0) -> bytes:
    body = b"\x00\x00\x00\x00" + b"\x00" + bson.encode(command)  # flags, section kind 0
    return HEADER.pack(16 + len(body), request_id, 0, OP_MSG) + body


def _reply_doc(msg) -> dict:
    """The kind-0 document of an OP_MSG reply (header included in `msg`)."""
    flags = int.from_bytes(msg[16:20], "little")
    if msg[20] != 0:
        raise WireError("reply without a kind-0 section")
    end = len(msg) - 4 if flags & 1 else len(msg)  # checksumPresent: CRC-32C at the end
    return bson.decode(bytes(msg[21:end]))


class ReplyShapes:
    """Recognises success replies of one kind of request by their bytes.

    `accept(reply)` judges a decoded reply: None for success, else the reason.
    Success replies are remembered (up to MAX_SHAPES of them, by length): a
    later reply of the same length whose bytes equal one of them outside one
    varying region is the same success, without decoding. The region is the
    content of the single document in the array named by `inner` (e.g.
    b"\x04firstBatch\x00": the document a read returned); without `inner`, the
    whole reply must be equal. The bytes kept before the region end with that
    document's length and those after it start by closing the array, so a
    matching reply has the remembered structure (ok: 1, exactly one document,
    ...) and only that document's content differs (it is not parsed: the
    workload needs its presence, not its fields). Any other reply is decoded
    and judged.
    """

    MAX_SHAPES = 16

    def __init__(self, name: str, accept: Callable[[dict], str | None], inner: bytes | None = None):
        self.name = name
        self.accept = accept
        self.inner = inner
        self.known: dict[int, list[tuple[bytes, bytes]]] = {}  # length -> [(from byte 16, suffix)]
        self.shapes = 0
        self.expect = 26  # bytes a reply is expected to take: the shortest success seen

    def judge(self, msg: bytes) -> str | None:
        """Decodes and judges one reply (the slow path); learns it when it succeeded."""
        try:
            reply = _reply_doc(msg)
        except (bson.errors.InvalidBSON, WireError, IndexError) as e:
            return f"undecodable reply: {e}"
        why = self.accept(reply)
        if why is None and self.shapes < self.MAX_SHAPES:
            self._learn(msg)
        return why

    def _learn(self, msg: bytes) -> None:
        self.expect = len(msg) if not self.shapes else min(self.expect, len(msg))
        if self.inner is None:
            self._add(len(msg), msg[16:], b"")
            return
        if msg.count(self.inner) != 1:
            return
        el = msg.index(self.inner) + len(self.inner) + 4  # past the array's length
        if msg[el : el + 3] != b"\x030\x00":  # element "0", an embedded document
            return
        doc = el + 3
        end = doc + int.from_bytes(msg[doc : doc + 4], "little")
        if msg[end : end + 1] != b"\x00":  # the array ends after that one document
            return
        self._add(len(msg), msg[16 : doc + 4], msg[end:])

    def _add(self, length: int, prefix: bytes, suffix: bytes) -> None:
        shapes = self.known.setdefault(length, [])
        if (prefix, suffix) not in shapes:
            shapes.append((prefix, suffix))
            self.shapes += 1
