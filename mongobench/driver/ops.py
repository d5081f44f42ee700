"""Requests for every operation the experiments send (their replies: driver.replies).

Requests are encoded once (`Tmpl`: a command with sentinel values whose bytes
are patched per use by one `struct` call; `BulkInsert`: an insert whose
documents travel as an OP_MSG document sequence, built a batch at a time;
`DocBatch`: the documents themselves, a batch per `struct` call).
"""

from __future__ import annotations

import binascii
import os
import random
import struct
import time

import bson

from mongobench.driver.docgen import DocFactory

OP_MSG = 2013
HEADER = struct.Struct("<iiii")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_BE32 = struct.Struct(">I")
MAX_MESSAGE = 48_000_000  # maxMessageSizeBytes (hello reports it; every version says 48 MB)
MAX_WRITE_BATCH = 100_000  # maxWriteBatchSize
SENTINEL = 0x5EED5EED00000000


def sentinel(i: int) -> bson.Int64:
    """The i-th Int64 placeholder of a template (distinct, unlikely in real data)."""
    return bson.Int64(SENTINEL + i)


def text_sentinel(length: int) -> str:
    """A placeholder string of `length` characters (values must keep that byte length)."""
    return "\x02" * length


def encode(command: dict, request_id: int = 0, sequences: dict[str, bytes] | None = None) -> bytes:
    """One OP_MSG: the command (section kind 0) and document sequences (kind 1:
    identifier -> concatenated BSON documents)."""
    body = b"\x00\x00\x00\x00\x00" + bson.encode(command)
    for ident, docs in (sequences or {}).items():
        name = ident.encode() + b"\x00"
        body += b"\x01" + _I32.pack(4 + len(name) + len(docs)) + name + docs
    return HEADER.pack(16 + len(body), request_id, 0, OP_MSG) + body


class Tmpl:
    """An OP_MSG encoded once; `write(buf, rid, *values)` writes it at the start of
    `buf` with request id `rid` and the values in place of the sentinels.

    `slots` are the sentinel values in the order `write` takes them: Int64
    sentinels take ints, string sentinels take bytes of the same length.
    """

    def __init__(self, command: dict, slots: list = ()):
        raw = encode(command)
        found = []
        for k, s in enumerate(slots):
            if isinstance(s, str):
                needle, fmt = s.encode(), f"{len(s.encode())}s"
            else:
                needle, fmt = _I64.pack(int(s)), "q"
            if raw.count(needle) != 1:
                raise ValueError(f"placeholder {k} must occur exactly once in the command")
            found.append((raw.index(needle), len(needle), fmt, k))
        found.sort()
        fmt, args, at = ["<4si"], [raw[:4], 0], 8
        self.order = [k for _, _, _, k in found]
        for off, n, f, _ in found:
            fmt.append(f"{off - at}s{f}")
            args += [raw[at:off], None]
            at = off + n
        fmt.append(f"{len(raw) - at}s")
        args.append(raw[at:])
        self.struct = struct.Struct("".join(fmt))
        self.size = len(raw)
        self.raw = raw
        self.args = args
        pack, p = self.struct.pack_into, args
        if not found:
            self.write = lambda buf, rid: pack(buf, 0, p[0], rid, p[2])
        elif len(found) == 1:
            p0, p2, p4 = p[0], p[2], p[4]
            self.write = lambda buf, rid, a: pack(buf, 0, p0, rid, p2, a, p4)
        elif self.order == [0, 1]:
            p0, p2, p4, p6 = p[0], p[2], p[4], p[6]
            self.write = lambda buf, rid, a, b: pack(buf, 0, p0, rid, p2, a, p4, b, p6)
        else:
            order = self.order

            def write(buf, rid, *values):
                a = args.copy()
                a[1] = rid
                a[3::2] = [values[k] for k in order]
                pack(buf, 0, *a)

            self.write = write

    def buffer(self) -> bytearray:
        return bytearray(self.size)


# ----------------------------------------------------------------------------- requests


def write_concern(setting, uri_default: dict | None) -> dict | None:
    """The variant's write_concern setting (as Workload.collection reads it), else the URI's."""
    if setting is None:
        return uri_default
    return {"w": int(setting) if str(setting).isdigit() else setting}


def _with_wc(cmd: dict, wc: dict | None) -> dict:
    if wc:
        cmd["writeConcern"] = wc
    return cmd


def update_tmpl(db, coll, q, u, slots, wc=None, upsert=False, multi=False) -> Tmpl:
    stmt = {"q": q, "u": u}
    if upsert:
        stmt["upsert"] = True
    if multi:
        stmt["multi"] = True
    return Tmpl(
        _with_wc({"update": coll, "ordered": True, "updates": [stmt], "$db": db}, wc), slots
    )


def delete_tmpl(db, coll, q, slots, wc=None, many=False) -> Tmpl:
    stmt = {"q": q, "limit": 0 if many else 1}
    return Tmpl(
        _with_wc({"delete": coll, "ordered": True, "deletes": [stmt], "$db": db}, wc), slots
    )


def find_and_modify_tmpl(db, coll, q, update, slots, wc=None, upsert=False, new=True) -> Tmpl:
    cmd = {"findAndModify": coll, "query": q, "update": update, "new": new, "upsert": upsert}
    cmd["$db"] = db
    return Tmpl(_with_wc(cmd, wc), slots)


def find_tmpl(
    db, coll, query, slots, projection=None, skip=0, limit=0, single=False, batch_size=0
) -> Tmpl:
    """A find as pymongo sends it (skip, limit and batchSize only when non-zero;
    find_one: limit 1 and singleBatch)."""
    cmd = {"find": coll, "filter": query}
    if projection is not None:
        cmd["projection"] = projection
    if skip:
        cmd["skip"] = int(skip)
    if limit:
        cmd["limit"] = int(limit)
    if batch_size:
        cmd["batchSize"] = int(min(batch_size, limit) if limit else batch_size)
    if single:
        cmd["singleBatch"] = True
    cmd["$db"] = db
    return Tmpl(cmd, slots)


def aggregate_tmpl(db, coll, pipeline, slots) -> Tmpl:
    return Tmpl({"aggregate": coll, "pipeline": pipeline, "cursor": {}, "$db": db}, slots)


def get_more_tmpl(db, coll, batch_size: bool) -> Tmpl:
    """getMore {cursor id, batchSize}: slots (id, batchSize), or (id) without batchSize."""
    cmd = {"getMore": sentinel(0), "collection": coll}
    slots = [sentinel(0)]
    if batch_size:
        cmd["batchSize"] = sentinel(1)
        slots.append(sentinel(1))
    cmd["$db"] = db
    return Tmpl(cmd, slots)


class BulkInsert:
    """Insert commands whose documents travel as one document sequence (section
    kind 1), split like pymongo's insert_many at maxWriteBatchSize and
    maxMessageSizeBytes. `messages(buf, rid, docs)` yields (view of the message,
    documents in it) over `docs`, a list of BSON documents (bytes)."""

    def __init__(self, db, coll, wc=None, ordered=False):
        cmd = _with_wc({"insert": coll, "ordered": ordered, "$db": db}, wc)
        self.kind0 = b"\x00\x00\x00\x00\x00" + bson.encode(cmd)
        self.ident = b"documents\x00"

    def prefix_size(self) -> int:
        return 16 + len(self.kind0) + 5 + len(self.ident)

    def write_prefix(self, buf, rid: int, docs_bytes: int) -> int:
        """Writes header, command and sequence header for `docs_bytes` of documents
        that follow; returns where the documents start."""
        total = self.prefix_size() + docs_bytes
        HEADER.pack_into(buf, 0, total, rid, 0, OP_MSG)
        p = 16 + len(self.kind0)
        buf[16:p] = self.kind0
        buf[p] = 1
        _I32.pack_into(buf, p + 1, 4 + len(self.ident) + docs_bytes)
        buf[p + 5 : p + 5 + len(self.ident)] = self.ident
        return p + 5 + len(self.ident)

    def max_docs(self, doc_bytes: int) -> int:
        room = MAX_MESSAGE - self.prefix_size()
        return max(1, min(MAX_WRITE_BATCH, room // max(1, doc_bytes)))


class DocBatch:
    """Documents as DocFactory makes them (same fields, sizes and kinds of
    content), written a batch at a time straight into a message buffer.

    DocFactory costs several microseconds per document (a copy, a Python loop
    over the text fields, a RawBSONDocument); here one `struct` call writes a
    whole batch: its format alternates the template's constant pieces with the
    varying slots (the _id, the integer fields, the random text), and the
    values of each slot are produced for the whole batch by C-level calls
    (randbytes, hex, unpack, map). ObjectIds keep their order (timestamp,
    random, big-endian counter), so inserts append to the _id index as a
    driver's do.
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
        self.id_type = id_type
        self.int_range = int_range
        names = [f"i{i}" for i in range(n_int_fields)] + list(int_fields)
        raw, id_off, int_offs, text_offs = DocFactory._build(size_bytes, id_type, names, {})
        self.raw, self.size = raw, len(raw)
        self.n_ints, self.n_texts = len(int_offs), len(text_offs)
        id_len = {"objectid": 12, "uuid": 16, "business_id": 24, "serial": 8}[id_type]
        slots = []  # (offset, length, struct code)
        if id_type == "objectid":  # 8 bytes constant per batch, then 4 varying
            slots.append((id_off, 8, "8s"))
            slots.append((id_off + 8, 4, "4s"))
        elif id_type == "serial":
            slots.append((id_off, 8, "q"))
        else:
            slots.append((id_off, id_len, f"{id_len}s"))
        slots += [(o, 4, "i") for o in int_offs]
        slots += [(o, 32, "32s") for o in text_offs]
        if [s[0] for s in slots] != sorted(s[0] for s in slots):
            raise ValueError("unexpected document layout (slots out of order)")
        self.slots = slots
        pieces, fmt, at = [], [], 0
        for off, n, code in slots:
            pieces.append(raw[at:off])
            fmt.append(f"{off - at}s{code}")
            at = off + n
        self.tail = raw[at:]
        self.pieces = pieces
        self.doc_fmt = "".join(fmt) + f"{len(self.tail)}s"
        self._structs: dict[int, tuple] = {}
        self._rng = random.Random(seed)
        self._oid_counter = self._rng.randrange(1 << 24)
        self._oid_rand = os.urandom(5)

    def _struct(self, n: int):
        got = self._structs.get(n)
        if got is None:
            s = struct.Struct("<" + self.doc_fmt * n)
            per = 2 * len(self.slots) + 1
            args = [None] * (per * n)
            for d in range(n):
                for k, piece in enumerate(self.pieces):
                    args[d * per + 2 * k] = piece
                args[d * per + per - 1] = self.tail
            text = struct.Struct("32s" * (self.n_texts * n))
            got = self._structs[n] = (s, args, text)
        return got

    def write(self, buf, pos: int, n: int, ids=None) -> int:
        """Writes `n` documents at `pos` (ids: the serial _id values, else made
        here); returns the bytes written."""
        s, args, text_struct = self._struct(n)
        per, rng = 2 * len(self.slots) + 1, self._rng
        args = args.copy()
        col = 1
        if self.id_type == "objectid":
            prefix = struct.pack(">I", int(time.time())) + self._oid_rand[:4]
            args[col::per] = [prefix] * n
            c = self._oid_counter
            base = self._oid_rand[4] << 24
            args[col + 2 :: per] = list(
                map(_BE32.pack, [base | ((c + i) & 0xFFFFFF) for i in range(n)])
            )
            self._oid_counter = (c + n) & 0xFFFFFF
            col += 4
        else:
            if self.id_type == "serial":
                if ids is None:
                    raise ValueError("serial ids are given by the caller")
                values = list(ids)
            elif self.id_type == "uuid":
                values = list(struct.unpack("16s" * n, rng.randbytes(16 * n)))
            else:
                t = time.time_ns()
                values = [f"ACC{rng.randrange(100000):05d}{t + i:016x}".encode() for i in range(n)]
            args[col::per] = values
            col += 2
        r = self.int_range
        for _ in range(self.n_ints):
            raw = struct.unpack(f"<{n}I", rng.randbytes(4 * n))
            args[col::per] = list(map(r.__rmod__, raw))
            col += 2
        t = self.n_texts
        if t:
            chunks = text_struct.unpack(binascii.b2a_hex(rng.randbytes(16 * t * n)))
            for k in range(t):
                args[col::per] = chunks[k::t]
                col += 2
        s.pack_into(buf, pos, *args)
        return self.size * n

    def make(self, _id=None) -> bytes:
        """One document (bytes)."""
        buf = bytearray(self.size)
        self.write(buf, 0, 1, None if _id is None else [_id])
        return bytes(buf)
