"""Documents of an exact BSON size, made fast enough not to bottleneck the client.

A document is encoded once as a template; each new document copies the bytes
and patches in a fresh `_id`, fresh random integers and fresh random text at
offsets found by encoding sentinel values. So every document has random,
poorly compressible content (as data from outside would) at the cost of one
`bytearray` copy, and goes to the server as a `RawBSONDocument` without a
second encoding.
"""

from __future__ import annotations

import datetime
import random
import struct
import time
import uuid

import bson
from bson.raw_bson import RawBSONDocument

ID_TYPES = ("objectid", "uuid", "business_id", "serial")

# Seed 000: "ACC" + 5-digit account number + hex timestamp.
_BUSINESS_ID_LEN = len("ACC") + 5 + 16
_TEXT_CHUNK = 32  # characters of random text per string field (UniBench: 1-32)
_SENTINEL_INT = 0x5EED0000
_SENTINEL_ID = {
    "objectid": bson.ObjectId(b"\xee" * 12),
    "uuid": bson.Binary(b"\xee" * 16, bson.binary.UUID_SUBTYPE),
    "business_id": "Z" * _BUSINESS_ID_LEN,
    "serial": bson.Int64(0x5EED5EED5EED5EED),  # serial integers, given by the caller
}
_HEX = b"0123456789abcdef"


def business_id(rng: random.Random, clock_ns: int) -> str:
    """Seed 000's business key: account number plus a hex timestamp."""
    return f"ACC{rng.randrange(100000):05d}{clock_ns:016x}"


class DocFactory:
    """Makes documents of `size_bytes` BSON bytes (within a few bytes).

    Fields: `_id`; `n_int_fields` random integers `i0..` (the targets of
    secondary indexes); groups of an int, a date and a text field, repeated up
    to the size; a padding string to land on the size. Each thread owns one
    factory (the RNG is not shared), seeded for reproducible content.
    """

    def __init__(
        self,
        size_bytes: int,
        id_type: str = "objectid",
        n_int_fields: int = 0,
        int_range: int = 1_000_000,
        int_fields: tuple[str, ...] = (),
        seed: int = 0,
        extra_fields: dict | None = None,
    ):
        if id_type not in ID_TYPES:
            raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
        if size_bytes < 64:
            raise ValueError(f"document size must be at least 64 bytes, not {size_bytes}")
        self.id_type = id_type
        self.size_bytes = size_bytes
        self.int_range = int_range
        self._rng = random.Random(seed)
        self._seq = 0
        self._template, self._id_off, self._int_offs, self._text_offs = self._build(
            size_bytes,
            id_type,
            [f"i{i}" for i in range(n_int_fields)] + list(int_fields),
            extra_fields or {},
        )

    @staticmethod
    def _build(size, id_type, int_names, extra_fields):
        sentinel_text = "\x01" * _TEXT_CHUNK
        doc = {"_id": _SENTINEL_ID[id_type]}
        for i, name in enumerate(int_names):
            doc[name] = _SENTINEL_INT + i
        doc.update(extra_fields)
        date = datetime.datetime(2020, 9, 22, tzinfo=datetime.timezone.utc)
        # Encoding once per group would be quadratic (a 2 MB document has ~20k
        # groups): estimate the count from one group's size, then correct.
        base = len(bson.encode(doc))
        one = len(bson.encode({"n0": 0, "d0": date, "s0": sentinel_text})) - 5
        count = max(0, (size - base - 120) // (one + 3))
        while True:
            trial = dict(doc)
            for g in range(count):
                trial[f"n{g}"] = g
                trial[f"d{g}"] = date
                trial[f"s{g}"] = sentinel_text
            if len(bson.encode(trial)) + 120 < size or count == 0:
                break
            count = max(0, count - max(1, count // 100))
        doc = trial
        doc["pad"] = ""
        pad = size - len(bson.encode(doc))
        doc["pad"] = "p" * max(0, pad)
        raw = bson.encode(doc)
        id_bytes = _encoded_id(doc["_id"])
        id_off = raw.index(id_bytes)
        int_offs = []
        for i in range(len(int_names)):
            int_offs.append(raw.index(struct.pack("<i", _SENTINEL_INT + i)))
        text_offs = []
        start = 0
        needle = sentinel_text.encode()
        while (pos := raw.find(needle, start)) != -1:
            text_offs.append(pos)
            start = pos + len(needle)
        return bytes(raw), id_off, int_offs, text_offs

    @property
    def n_bytes(self) -> int:
        return len(self._template)

    def new_id(self):
        if self.id_type == "serial":
            raise ValueError("serial ids are given by the caller: make(_id=n)")
        if self.id_type == "objectid":
            return bson.ObjectId()
        if self.id_type == "uuid":
            return bson.Binary(uuid.UUID(int=self._rng.getrandbits(128), version=4).bytes, 4)
        self._seq += 1
        return business_id(self._rng, time.time_ns() + self._seq)

    def make(self, _id=None, ints: list[int] | None = None) -> RawBSONDocument:
        buf = bytearray(self._template)
        _id = self.new_id() if _id is None else _id
        idb = _encoded_id(_id)
        buf[self._id_off : self._id_off + len(idb)] = idb
        rng = self._rng
        for k, off in enumerate(self._int_offs):
            value = ints[k] if ints is not None else rng.randrange(self.int_range)
            buf[off : off + 4] = struct.pack("<i", value)
        if self._text_offs:
            text = rng.randbytes(_TEXT_CHUNK // 2 * len(self._text_offs)).hex().encode()
            for k, off in enumerate(self._text_offs):
                buf[off : off + _TEXT_CHUNK] = text[k * _TEXT_CHUNK : (k + 1) * _TEXT_CHUNK]
        return RawBSONDocument(bytes(buf))

    def batch(self, n: int) -> list[RawBSONDocument]:
        return [self.make() for _ in range(n)]

    def random_int(self) -> int:
        return self._rng.randrange(self.int_range)


def _encoded_id(value) -> bytes:
    if isinstance(value, bson.ObjectId):
        return value.binary
    if isinstance(value, int):
        return struct.pack("<q", value)
    if isinstance(value, bson.Binary):
        return bytes(value)
    if isinstance(value, str):
        if len(value) != _BUSINESS_ID_LEN:
            raise ValueError(f"business id must be {_BUSINESS_ID_LEN} characters: {value!r}")
        return value.encode()
    raise TypeError(f"unsupported _id type {type(value).__name__}")
