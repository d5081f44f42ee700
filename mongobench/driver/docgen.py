"""Documents of an exact BSON size, made fast enough not to bottleneck the client.

A document is encoded once as a template; new documents are its bytes with a
fresh `_id` and fresh random integers at offsets found by encoding sentinel
values, followed by a *body* (the fields after them: the int/date/text groups
and the padding) taken from a pool of bodies whose text fields hold random
hex digits. So every document has random, poorly compressible content (as
data from outside would) without a second encoding.

The pool (`POOL_BYTES` per document layout, built once per process before any
timed phase and shared by its clients) is what makes a document cost about as
much as copying it: the bodies' text used to be drawn per document, one
Python object per 32-character field, which cost 1.5 us per 1 KB document
and 2.7 per 4 KB one (more than the 2 us per KB the client may spend on a
bulk insert, issue 12). A client walks the pool from its own random start, so
its bodies repeat only after `POOL_BYTES` of documents: far more than a
WiredTiger page or a compressor's window holds, so compression and the
storage sizes see random data as before. The `_id` and the integer fields
(the targets of secondary indexes) stay fresh in every document.

One `struct` call writes a whole batch straight into a buffer (the message
the multiplexed driver sends): its format alternates the template's constant
pieces with the varying slots (the _id, the integer fields, the body). `make`
and `batch` wrap the same bytes as `RawBSONDocument`s for pymongo, so both
client paths insert the same documents.
"""

from __future__ import annotations

import binascii
import datetime
import os
import random
import struct
import threading
import time
import uuid
import zlib

import bson
from bson.raw_bson import RawBSONDocument

ID_TYPES = ("objectid", "uuid", "business_id", "serial")

# Seed 000's business key: "ACC" + 5 digits for the account (about 20,000
# accounts) + 8 hex digits. The seed calls the hex part a timestamp; here it is
# what UniBench wrote there: a per-account sequence (5 hex digits) and the
# writer's lane (3 hex digits, its seed), so keys rise within an account as
# time goes on and are unique across threads and processes without coordination.
ACCOUNTS = 20_000
LANES = 1 << 12
_SEQ_LIMIT = 1 << 20
_BUSINESS_ID_LEN = len("ACC") + 5 + 8
_ID_LEN = {"objectid": 12, "uuid": 16, "business_id": _BUSINESS_ID_LEN, "serial": 8}
_TEXT_CHUNK = 32  # characters of random text per string field (UniBench: 1-32)
POOL_BYTES = 16 << 20  # document bodies kept per layout and process
POOL_MIN_DOCS = 8
_POOL_LAYOUTS = 4  # layouts whose pools a process keeps (a run uses one or two at a time)
_POOLS: dict[bytes, tuple[list[bytes], int]] = {}  # body template -> (bodies, count)
_POOLS_LOCK = threading.Lock()  # loaders make factories from several threads
_SENTINEL_INT = 0x5EED0000
_SENTINEL_ID = {
    "objectid": bson.ObjectId(b"\xee" * 12),
    "uuid": bson.Binary(b"\xee" * 16, bson.binary.UUID_SUBTYPE),
    "business_id": "Z" * _BUSINESS_ID_LEN,
    "serial": bson.Int64(0x5EED5EED5EED5EED),  # serial integers, given by the caller
}
_BE32 = struct.Struct(">I")
_I32 = struct.Struct("<i")
# RFC 4122 version 4: the version nibble and the variant bits of a 128-bit value
# (as uuid.UUID(int=..., version=4) sets them).
_UUID_KEEP = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UUID_SET = (0x8000 << 48) | (4 << 76)


def business_id(account: int, seq: int, lane: int) -> str:
    """Seed 000's business key, e.g. ACC01234000a7003: account 1234, its 167th key
    from lane 3."""
    return f"ACC{account:05d}{seq:05x}{lane:03x}"


class DocFactory:
    """Makes documents of `size_bytes` BSON bytes (within a few bytes).

    Fields: `_id`; `n_int_fields` random integers `i0..` (the targets of
    secondary indexes) then `int_fields`; groups of an int, a date and a text
    field, repeated up to the size; a padding string to land on the size.
    `_id`: an ObjectId in creation order (timestamp, random, counter, as a
    driver makes it), a random version-4 UUID, a business id (see
    `business_id`; the lane is `seed`) or a serial integer the caller gives.
    Each client owns one factory (the RNG is not shared), seeded for
    reproducible content.
    """

    def __init__(
        self,
        size_bytes: int,
        id_type: str = "objectid",
        n_int_fields: int = 0,
        int_range: int = 1_000_000,
        int_fields: tuple[str, ...] = (),
        seed: int = 0,
    ):
        if id_type not in ID_TYPES:
            raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
        if size_bytes < 64:
            raise ValueError(f"document size must be at least 64 bytes, not {size_bytes}")
        if id_type == "business_id" and not 0 <= seed < LANES:
            raise ValueError(
                f"business ids take the seed as their lane: 0..{LANES - 1}, not {seed}"
            )
        self.id_type = id_type
        self.int_range = int_range
        names = [f"i{i}" for i in range(n_int_fields)] + list(int_fields)
        raw, self._id_off, self._int_offs, text_offs = self._build(size_bytes, id_type, names)
        self.raw, self.size = raw, len(raw)  # the template: also a placeholder document
        self._n_ints = len(self._int_offs)
        slots = []  # (offset, length, struct code)
        if id_type == "objectid":  # 8 bytes constant per batch, then 4 varying
            slots += [(self._id_off, 8, "8s"), (self._id_off + 8, 4, "4s")]
        elif id_type == "serial":
            slots.append((self._id_off, 8, "q"))
        else:
            n = _ID_LEN[id_type]
            slots.append((self._id_off, n, f"{n}s"))
        slots += [(o, 4, "i") for o in self._int_offs]
        if [s[0] for s in slots] != sorted(s[0] for s in slots) or (
            text_offs and text_offs[0] < slots[-1][0] + slots[-1][1]
        ):
            raise ValueError("unexpected document layout (slots out of order)")
        self._pieces, fmt, at = _interleave(raw, slots)
        self._doc_fmt = fmt + f"{len(raw) - at}s"  # the body: from the pool
        self._per = 2 * len(slots) + 1  # struct arguments per document
        self._writers: dict[int, tuple] = {}
        self._bodies, self._n_bodies = _pool(raw[at:], [o - at for o in text_offs])
        self._rng = random.Random(seed)
        self._at = self._rng.randrange(self._n_bodies)  # this client's place in the pool
        self._lane = seed
        self._account_seq = [0] * ACCOUNTS if id_type == "business_id" else None
        self._oid_counter = self._rng.randrange(1 << 24)
        self._oid_rand = os.urandom(5)

    @staticmethod
    def _build(size, id_type, int_names):
        sentinel_text = "\x01" * _TEXT_CHUNK
        doc = {"_id": _SENTINEL_ID[id_type]}
        for i, name in enumerate(int_names):
            doc[name] = _SENTINEL_INT + i
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
        id_off = raw.index(_encoded_id(doc["_id"]))
        int_offs = [raw.index(_I32.pack(_SENTINEL_INT + i)) for i in range(len(int_names))]
        text_offs = []
        start = 0
        needle = sentinel_text.encode()
        while (pos := raw.find(needle, start)) != -1:
            text_offs.append(pos)
            start = pos + len(needle)
        return bytes(raw), id_off, int_offs, text_offs

    def prepare(self, *sizes: int) -> DocFactory:
        """Builds the batch writers for `sizes` documents now (one per batch size,
        else on first use: tens of microseconds to milliseconds, which a short timed
        phase would count)."""
        for n in sizes:
            if n > 0:
                self._writer(n)
        return self

    def _writer(self, n: int):
        got = self._writers.get(n)
        if got is None:
            per = self._per
            args = [None] * (per * n)
            for d in range(n):
                for k, piece in enumerate(self._pieces):
                    args[d * per + 2 * k] = piece
            uuid_bits = None
            if self.id_type == "uuid":
                keep = set_ = 0
                for _ in range(n):
                    keep, set_ = (keep << 128) | _UUID_KEEP, (set_ << 128) | _UUID_SET
                uuid_bits = (keep, set_, struct.Struct("16s" * n))
            got = (struct.Struct("<" + self._doc_fmt * n), args, uuid_bits)
            self._writers[n] = got
        return got

    def write(self, buf, pos: int, n: int, ids=None) -> int:
        """Writes `n` documents at `pos` of `buf` (ids: the serial _id values, else
        made here); returns the bytes written."""
        s, args, uuid_bits = self._writer(n)
        per, rng = self._per, self._rng
        args = args.copy()
        col = 1
        kind = self.id_type
        if kind == "objectid":
            prefix = _BE32.pack(int(time.time())) + self._oid_rand[:4]
            args[col::per] = [prefix] * n
            c = self._oid_counter
            base = self._oid_rand[4] << 24
            args[col + 2 :: per] = list(
                map(_BE32.pack, [base | ((c + i) & 0xFFFFFF) for i in range(n)])
            )
            self._oid_counter = (c + n) & 0xFFFFFF
            col += 4
        else:
            if kind == "serial":
                if ids is None:
                    raise ValueError("serial ids are given by the caller: make(_id=n)")
                values = list(ids)
            elif kind == "uuid":
                keep, set_, unpack = uuid_bits
                v = int.from_bytes(rng.randbytes(16 * n), "big") & keep | set_
                values = unpack.unpack(v.to_bytes(16 * n, "big"))
            else:
                values = self._business_ids(n)
            args[col::per] = values
            col += 2
        r = self.int_range
        for _ in range(self._n_ints):
            raw = struct.unpack(f"<{n}I", rng.randbytes(4 * n))
            args[col::per] = list(map(r.__rmod__, raw))
            col += 2
        at, m = self._at, self._n_bodies
        if at + n <= 2 * m:  # the pool is stored twice over: any n <= m in one slice
            args[per - 1 :: per] = self._bodies[at : at + n]
        else:
            args[per - 1 :: per] = [self._bodies[(at + d) % m] for d in range(n)]
        self._at = (at + n) % m
        s.pack_into(buf, pos, *args)
        return self.size * n

    def _business_ids(self, n: int) -> list[bytes]:
        accounts = map(ACCOUNTS.__rmod__, struct.unpack(f"<{n}I", self._rng.randbytes(4 * n)))
        seqs, lane, out = self._account_seq, self._lane, []
        for a in accounts:
            c = seqs[a]
            if c >= _SEQ_LIMIT:
                raise ValueError(f"account {a} of lane {lane} has used all {_SEQ_LIMIT} keys")
            seqs[a] = c + 1
            out.append(b"ACC%05d%05x%03x" % (a, c, lane))
        return out

    def make(self, _id=None, ints: list[int] | None = None) -> RawBSONDocument:
        """One document; `_id` and `ints` (the integer fields, in order) replace the
        values made here."""
        buf = bytearray(self.size)
        if self.id_type == "serial":
            if _id is None:
                raise ValueError("serial ids are given by the caller: make(_id=n)")
            self.write(buf, 0, 1, (_id,))
        else:
            self.write(buf, 0, 1)
            if _id is not None:
                idb = _encoded_id(_id)
                buf[self._id_off : self._id_off + len(idb)] = idb
        if ints is not None:
            for value, off in zip(ints, self._int_offs, strict=True):
                _I32.pack_into(buf, off, value)
        return RawBSONDocument(bytes(buf))

    def batch(self, n: int, ids=None) -> list[RawBSONDocument]:
        """`n` documents in one write (ids: the serial _id values, as `write` takes them)."""
        buf = bytearray(self.size * n)
        self.write(buf, 0, n, ids)
        data, size = bytes(buf), self.size
        return [RawBSONDocument(data[i * size : (i + 1) * size]) for i in range(n)]


_ID_NAME = b"_id\x00"
_FIXED = {0x01: 8, 0x07: 12, 0x09: 8, 0x10: 4, 0x12: 8}  # double, ObjectId, date, int32, int64


def first_id(buf, pos: int = 0):
    """The `_id` of the BSON document at `pos` of `buf` when it is its first field (as every
    DocFactory document has it), reading only that field: the audit's sampled ids cost a few
    bytes' copy in the timed loop, not a document's decoding. None for another layout."""
    t = buf[pos + 4]
    if bytes(buf[pos + 5 : pos + 9]) != _ID_NAME:
        return None
    v = pos + 9
    if t in _FIXED:
        end = v + _FIXED[t]
    elif t == 0x02:  # string: int32 length (with its NUL), bytes
        end = v + 4 + int.from_bytes(buf[v : v + 4], "little")
    elif t == 0x05:  # binary: int32 length, subtype, bytes
        end = v + 5 + int.from_bytes(buf[v : v + 4], "little")
    else:
        return None
    elem = bytes(buf[pos + 4 : end])
    return bson.decode((len(elem) + 5).to_bytes(4, "little") + elem + b"\x00")["_id"]


def key_example(id_type: str) -> str:
    """One `_id` of `id_type` as mongosh shows it, made by a factory (a reader of a
    variant's metadata sees the key's shape); serial keys are integers from 0."""
    if id_type == "serial":
        return "0"
    _id = bson.decode(DocFactory(64, id_type, seed=1).make().raw)["_id"]
    if isinstance(_id, bson.ObjectId):
        return f"ObjectId('{_id}')"
    if isinstance(_id, bson.Binary):
        return f"UUID('{uuid.UUID(bytes=bytes(_id))}')"
    return f"'{_id}'"


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


def _interleave(raw: bytes, slots) -> tuple[list[bytes], str, int]:
    """The constant pieces of `raw` before each slot (offset, length, struct code), a
    struct format alternating them with the slots, and the offset after the last slot."""
    pieces, fmt, at = [], [], 0
    for off, n, code in slots:
        pieces.append(raw[at:off])
        fmt.append(f"{off - at}s{code}")
        at = off + n
    return pieces, "".join(fmt), at


def _pool(body: bytes, text_offs: list[int]) -> tuple[list[bytes], int]:
    """The process's pool of bodies for the body template `body` (text slots at
    `text_offs`): (the bodies twice over, their count). Seeded by the layout, so
    every process and run makes the same ones."""
    with _POOLS_LOCK:
        got = _POOLS.get(body)
        if got is None:
            got = _make_pool(body, text_offs)
            if len(_POOLS) >= _POOL_LAYOUTS:
                del _POOLS[next(iter(_POOLS))]  # the oldest layout
            _POOLS[body] = got
        return got


def _make_pool(body: bytes, text_offs: list[int]) -> tuple[list[bytes], int]:
    if not text_offs:  # nothing random in it (the smallest documents)
        return [body, body], 1
    count = max(POOL_MIN_DOCS, POOL_BYTES // len(body))
    pieces, fmt, at = _interleave(body, [(o, _TEXT_CHUNK, f"{_TEXT_CHUNK}s") for o in text_offs])
    one = struct.Struct(fmt + f"{len(body) - at}s")
    texts = struct.Struct(f"{_TEXT_CHUNK}s" * len(text_offs))
    args = [None] * (2 * len(text_offs) + 1)
    args[0::2] = pieces + [body[at:]]
    rng, half = random.Random(zlib.crc32(body)), _TEXT_CHUNK // 2 * len(text_offs)
    bodies = []
    for _ in range(count):
        args[1::2] = texts.unpack(binascii.b2a_hex(rng.randbytes(half)))
        bodies.append(one.pack(*args))
    return bodies + bodies, count
