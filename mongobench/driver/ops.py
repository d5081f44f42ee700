"""Requests for every operation the experiments send (their replies: driver.replies).

Requests are encoded once (`Tmpl`: a command with sentinel values whose bytes
are patched per use by one `struct` call; `BulkInsert`: an insert whose
documents travel as an OP_MSG document sequence, built a batch at a time; the
documents themselves: docgen.DocFactory.write, a batch per `struct` call).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import bson

from mongobench.driver.protocol import HEADER, OP_MSG, encode_msg

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
MAX_MESSAGE = 48_000_000  # maxMessageSizeBytes (hello reports it; every version says 48 MB)
MAX_WRITE_BATCH = 100_000  # maxWriteBatchSize
SENTINEL = 0x5EED5EED00000000


def sentinel(i: int) -> bson.Int64:
    """The i-th Int64 placeholder of a template (distinct, unlikely in real data)."""
    return bson.Int64(SENTINEL + i)


def text_sentinel(length: int) -> str:
    """A placeholder string of `length` characters (values must keep that byte length)."""
    return "\x02" * length


def filler(node, slots=()):
    """A function values -> `node` (a command part with sentinels `slots`) with each
    sentinel replaced by its value (values in the order of `slots`; a text sentinel's value
    is bytes, as Tmpl.write takes it): what ops.Tmpl.write does to the encoded bytes, on
    the document itself (the pymongo path)."""
    pos = {s: k for k, s in enumerate(slots)}
    if not pos:
        return lambda vals: node

    def build(node):
        if isinstance(node, dict):
            parts = [(k, build(v)) for k, v in node.items()]
            return lambda vals: {k: f(vals) for k, f in parts}
        if isinstance(node, list):
            parts = [build(v) for v in node]
            return lambda vals: [f(vals) for f in parts]
        if type(node) is bson.Int64 and node in pos:
            k = pos[node]
            return lambda vals: vals[k]
        if isinstance(node, str) and node in pos:
            k = pos[node]
            return lambda vals: vals[k].decode()
        return lambda vals: node

    return build(node)


class Tmpl:
    """An OP_MSG encoded once; `write(buf, rid, *values)` writes it at the start of
    `buf` with request id `rid` and the values in place of the sentinels.

    `slots` are the sentinel values in the order `write` takes them: Int64
    sentinels take ints, string sentinels take bytes of the same length.
    """

    def __init__(self, command: dict, slots: list = ()):
        raw = encode_msg(command)
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
        # each slot's offset and format, in the order write takes them (a compiled source
        # patches the template itself: sources._compiled_writes)
        self.slots = {k: (off, f) for off, _, f, k in found}
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


@dataclass(frozen=True)
class Find:
    """A find's options (`find_tmpl`), as pymongo sends them: skip, limit and batchSize only
    when non-zero; `single` (find_one: limit 1) adds singleBatch."""

    projection: dict | None = None
    skip: int = 0
    limit: int = 0
    single: bool = False
    batch_size: int = 0


FIND_ONE = Find(limit=1, single=True)  # find_one by pymongo


def find_tmpl(db, coll, query, slots, find: Find | None = None) -> Tmpl:
    """A find of `query` (sentinels `slots`) with the options `find` (none by default)."""
    f = find or Find()
    cmd = {"find": coll, "filter": query}
    if f.projection is not None:
        cmd["projection"] = f.projection
    if f.skip:
        cmd["skip"] = int(f.skip)
    if f.limit:
        cmd["limit"] = int(f.limit)
    if f.batch_size:
        cmd["batchSize"] = int(min(f.batch_size, f.limit) if f.limit else f.batch_size)
    if f.single:
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
