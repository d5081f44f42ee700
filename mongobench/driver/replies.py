"""Reply checks for every operation the experiments send (requests: driver.ops).

Replies are checked in place: a write's success reply is recognised by its
bytes (seen once, decoded once), a cursor's documents are counted from the
last array key when they are of one size, else by walking the BSON element
headers (never decoding a document); anything unexpected is
decoded and classified as pymongo would raise it, so the multiplexed path
counts the same errors under the same names as the pymongo path
("<op>: DuplicateKeyError", "<op>: WriteConcernError", ...).

A check returns an outcome tuple whose first item is None on success or the
name of the pymongo exception the reply would raise:
  writes:        (error, n, nModified, nUpserted, message, nWriteErrors)
  cursors:       (error, documents in this batch, cursor id, message)
  findAndModify: (error, found a document, upserted, message)
"""

from __future__ import annotations

import struct

import bson

from mongobench.driver import native

try:  # the codes pymongo turns into NotPrimaryError
    from pymongo.helpers_shared import _NOT_PRIMARY_CODES as NOT_PRIMARY_CODES
except ImportError:  # pragma: no cover - older pymongo
    NOT_PRIMARY_CODES = frozenset({11600, 11602, 10107, 91, 10058, 13435, 13436, 189})

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
MEMO_BYTES = 32 << 10  # replies (or arrays) up to this size are remembered by their bytes
MEMO_ENTRIES = 256
DUPLICATE_KEY_CODES = (11000, 11001, 12582)
# Top-level reply fields of replica sets and sharded clusters that differ in every
# reply and say nothing about the operation's outcome.
VARYING_FIELDS = frozenset(
    (b"$clusterTime", b"operationTime", b"opTime", b"electionId", b"$gleStats",
     b"lastCommittedOpTime", b"$configTime", b"$topologyTime")
)  # fmt: skip


# ----------------------------------------------------------------------------- BSON walking


def _cstring_end(buf, p: int) -> int:
    return buf.index(0, p)


def value_end(buf, t: int, p: int) -> int:
    """Offset after the value of BSON type `t` that starts at `p`."""
    if t in (1, 9, 17, 18):
        return p + 8
    if t == 16:
        return p + 4
    if t in (3, 4):
        return p + _I32.unpack_from(buf, p)[0]
    if t in (2, 13, 14):
        return p + 4 + _I32.unpack_from(buf, p)[0]
    if t == 8:
        return p + 1
    if t in (6, 10, 127, 255):
        return p
    if t == 7:
        return p + 12
    if t == 5:
        return p + 5 + _I32.unpack_from(buf, p)[0]
    if t == 19:
        return p + 16
    if t == 11:
        return _cstring_end(buf, _cstring_end(buf, p) + 1) + 1
    if t == 15:
        return p + _I32.unpack_from(buf, p)[0]
    if t == 12:
        return p + 4 + _I32.unpack_from(buf, p)[0] + 12
    raise ValueError(f"unknown BSON type {t}")


def fields(buf, start: int) -> dict[bytes, tuple[int, int, int]]:
    """The elements of the document at `start`: name -> (type, value start, value end)."""
    end = start + _I32.unpack_from(buf, start)[0] - 1
    p, out = start + 4, {}
    while p < end:
        t = buf[p]
        z = buf.index(0, p + 1)
        e = value_end(buf, t, z + 1)
        out[bytes(buf[p + 1 : z])] = (t, z + 1, e)
        p = e
    return out


def count_elements(buf, start: int) -> int:
    """Elements of the array (or document) at `start`, without decoding them."""
    end = start + _I32.unpack_from(buf, start)[0] - 1
    p, n, index = start + 4, 0, buf.index
    while p < end:
        t = buf[p]
        p = value_end(buf, t, index(0, p + 1) + 1)
        n += 1
    return n


# The compiled count where it is built (driver.native): the same count without Python per
# element, and cheaper than the memo's hash of the array's bytes (20 YCSB records: 0.2 us
# against ~7 us for the memo, ~10 us for the Python walk)
_compiled_count = native.helper("count_elements")


def _key_chars(n: int) -> int:
    """Characters of an array's keys "0" .. str(n - 1)."""
    total, lo, width = 0, 0, 1
    while lo < n:
        hi = min(n, 10**width)
        total += (hi - lo) * width
        lo, width = hi, width + 1
    return total


def equal_size_count(buf, a: int, e: int) -> int:
    """Documents in the array of documents at `a` (ending at `e`) when they all have
    the first one's size, in constant time; 0 when they do not (walk it then).

    An array's keys are its indexes, so the last element's key is the count less
    one. With documents of S bytes the last one starts S + 1 bytes before the
    array's end: its length there must read S, a key of digits before it must
    follow a type byte 3 (after the previous document's final NUL, or at the
    array's start), and the array's length must be exactly n elements of S bytes
    with their keys. Walking a reply of 100 1 KB documents element by element
    cost 31 us of Python, 400 cost 119; the results of a find are usually of one
    size (the project's documents, projections)."""
    if buf[a + 4] != 3 or buf[a + 5] != 48 or buf[a + 6] != 0:
        return 0
    size = _I32.unpack_from(buf, a + 7)[0]
    p = e - 1 - size  # where the last document starts if every one has `size` bytes
    if size < 5 or p < a + 7 or _I32.unpack_from(buf, p)[0] != size or buf[p - 1] != 0:
        return 0
    q = p - 2
    while q > a + 4 and 48 <= buf[q] <= 57:
        q -= 1
    if buf[q] != 3 or q == p - 2 or (q != a + 4 and buf[q - 1] != 0):
        return 0
    digits = bytes(buf[q + 1 : p - 1])
    if len(digits) > 1 and digits[0] == 48:
        return 0
    n = int(digits) + 1
    return n if e - a == 5 + n * (size + 2) + _key_chars(n) else 0


def _number(buf, t: int, p: int):
    if t == 1:
        return struct.unpack_from("<d", buf, p)[0]
    if t == 16:
        return _I32.unpack_from(buf, p)[0]
    if t == 18:
        return _I64.unpack_from(buf, p)[0]
    if t == 8:
        return buf[p]
    return None


def _only_varying(buf, p: int, end: int) -> bool:
    """Whether the elements from `p` to `end` (a document's final byte) are all
    VARYING_FIELDS."""
    while p < end:
        t = buf[p]
        z = buf.index(0, p + 1)
        if bytes(buf[p + 1 : z]) not in VARYING_FIELDS:
            return False
        p = value_end(buf, t, z + 1)
    return p == end


def reply_doc(buf, length: int) -> dict:
    """The decoded kind-0 document of the OP_MSG reply at the start of `buf` (slow path)."""
    if buf[20] != 0:
        raise ValueError("reply without a kind-0 section")
    start = 21
    n = _I32.unpack_from(buf, start)[0]
    return bson.decode(bytes(buf[start : start + n]))


# --------------------------------------------------------------------- error classification


def command_error(reply: dict) -> tuple[str, str] | None:
    """(pymongo exception name, message) for a reply with ok: 0 (or no ok), else None
    (pymongo.helpers_shared._check_command_response)."""
    if "ok" not in reply:
        return "OperationFailure", str(reply.get("$err", reply))[:300]
    if reply["ok"]:
        return None
    msg, code = str(reply.get("errmsg", "")), reply.get("code")
    if code in NOT_PRIMARY_CODES or (
        code is None and ("not master" in msg or "node is recovering" in msg)
    ):
        kind = "NotPrimaryError"
    elif code in DUPLICATE_KEY_CODES:
        kind = "DuplicateKeyError"
    elif code == 50:
        kind = "ExecutionTimeout"
    elif code == 43:
        kind = "CursorNotFound"
    else:
        kind = "OperationFailure"
    return kind, f"{msg}, full error: {reply}"[:300]


def wce_kind(wce: dict) -> str:
    if wce.get("code") == 64 or (wce.get("errInfo") or {}).get("wtimeout"):
        return "WTimeoutError"
    return "WriteConcernError"


def write_outcome(reply: dict, bulk: bool) -> tuple:
    """The outcome of a decoded write reply, with pymongo's exception names:
    insert_many raises BulkWriteError for write or write-concern errors; the
    single-document calls raise the last write error (DuplicateKeyError for
    11000, else WriteError), then WTimeoutError / WriteConcernError."""
    n, nmod = int(reply.get("n", 0) or 0), int(reply.get("nModified", 0) or 0)
    ups = len(reply.get("upserted") or ())
    bad = command_error(reply)
    if bad:
        return (bad[0], n, nmod, ups, bad[1], 0)
    errors = reply.get("writeErrors") or []
    wce = reply.get("writeConcernError")
    if bulk and (errors or wce):
        msg = f"batch op errors occurred, full error: {errors[-1] if errors else wce}"
        return ("BulkWriteError", n, nmod, ups, msg[:300], len(errors))
    if errors:
        last = errors[-1]
        kind = "DuplicateKeyError" if last.get("code") == 11000 else "WriteError"
        return (kind, n, nmod, ups, str(last.get("errmsg", last))[:300], len(errors))
    if wce:
        return (wce_kind(wce), n, nmod, ups, str(wce.get("errmsg", wce))[:300], 0)
    return (None, n, nmod, ups, None, 0)


# ----------------------------------------------------------------------------- reply checks


class Check:
    """Judges the reply to one kind of request. `op` names the logical operation
    whose error a broken connection is counted under."""

    def __init__(self, op: str):
        self.op = op

    def __call__(self, buf, length: int) -> tuple:
        raise NotImplementedError

    def decoded(self, buf, length: int) -> dict | None:
        try:
            return reply_doc(buf, length)
        except Exception:  # noqa: BLE001 - any undecodable reply is an error outcome
            return None


class WriteCheck(Check):
    """insert / update / delete replies. Success replies without varying content
    are remembered by their bytes: later equal replies cost one slice and one
    dict look-up. A replica set's replies vary in every reply ($clusterTime,
    operationTime, opTime): those are walked (their top-level element headers),
    not decoded, when they hold nothing but counts, ok: 1 and such fields."""

    SUCCESS_FIELDS = frozenset((b"n", b"nModified", b"ok"))

    def __init__(self, op: str, bulk: bool = False):
        super().__init__(op)
        self.bulk = bulk
        self.memo: dict[bytes, tuple] = {}

    def _walked(self, buf) -> tuple[tuple, bool] | None:
        """(outcome, has varying fields) of a plain success, else None."""
        try:
            top = fields(buf, 21)
        except (ValueError, IndexError, struct.error):
            return None
        names = top.keys()
        if not names - self.SUCCESS_FIELDS <= VARYING_FIELDS or b"ok" not in top:
            return None
        ok, n, nmod = top[b"ok"], top.get(b"n"), top.get(b"nModified")
        if _number(buf, ok[0], ok[1]) != 1:
            return None
        n = _number(buf, n[0], n[1]) if n is not None else 0
        nmod = _number(buf, nmod[0], nmod[1]) if nmod is not None else 0
        if n is None or nmod is None:
            return None
        return (None, int(n), int(nmod), 0, None, 0), len(names) > len(names & self.SUCCESS_FIELDS)

    def __call__(self, buf, length):
        key = bytes(buf[16:length]) if length <= MEMO_BYTES else None
        out = self.memo.get(key)
        if out is not None:
            return out
        out = self._walked(buf)
        if out is not None:
            out, varying = out
            if not varying and key is not None and len(self.memo) < MEMO_ENTRIES:
                self.memo[key] = out
            return out
        reply = self.decoded(buf, length)
        if reply is None:
            return ("InvalidBSON", 0, 0, 0, "undecodable reply", 0)
        out = write_outcome(reply, self.bulk)
        if (
            key is not None
            and out[0] is None
            and not reply.keys() - {"n", "nModified", "ok"}
            and len(self.memo) < MEMO_ENTRIES
        ):
            self.memo[key] = out
        return out


# The compiled sources read a plain success in C (write_success) for this class's checks
# only, not a subclass's, which may answer otherwise
if native.helper("register_write_check") is not None:
    native.helper("register_write_check")(WriteCheck)


class CursorCheck(Check):
    """find / aggregate / getMore replies: documents in the batch (counted by their
    element headers, never decoded) and the cursor id.

    A success reply's layout is remembered (up to MAX_SHAPES): its bytes before the
    cursor document, the cursor's elements before the batch and the id (in mongod's
    order, batch first, or the stand-in's, id first: it was walked every time until
    then), those between the two, and the rest after them, with the lengths of the
    reply, the cursor and the batch read from the reply itself. A later reply whose bytes equal
    these around a batch of any size (and whose lengths add up) is the same kind of
    success, checked by a few byte comparisons: one layout serves replies of every
    length (a find by key returns documents of varying sizes: remembered by length, as
    before, such replies were walked, 5.7 us per check of a YCSB record's find against
    2.1 us now). Other replies are walked element by element (arrays up to MEMO_BYTES
    remembered by their bytes); a reply that is not ok: 1 with a cursor is decoded.
    """

    MAX_SHAPES = 16

    def __init__(self, op: str, batch: bytes = b"firstBatch"):
        super().__init__(op)
        self.batch = batch
        self.memo: dict[bytes, int] = {}
        # (head, pre, inner, mid, tail, gap, cursor_rest, varying, id_first): see _learn
        self.shapes: list[tuple] = []

    def _count(self, buf, a: int, e: int) -> int:
        # One document: "\x03" "0\x00" and a document that fills the array.
        if buf[a + 4] == 3 and buf[a + 5] == 48 and buf[a + 6] == 0:
            if a + 7 + _I32.unpack_from(buf, a + 7)[0] == e - 1:
                return 1
        n = equal_size_count(buf, a, e)
        if n:
            return n
        if _compiled_count is not None:
            return _compiled_count(buf, a)
        if e - a <= MEMO_BYTES:
            key = bytes(buf[a:e])
            n = self.memo.get(key)
            if n is None:
                n = count_elements(buf, a)
                if len(self.memo) < MEMO_ENTRIES:
                    self.memo[key] = n
            return n
        return count_elements(buf, a)

    def _shaped(self, buf, length: int) -> tuple | None:
        """(documents, cursor id) of a reply of a remembered layout, else None."""
        unpack = _I32.unpack_from
        for head, pre, inner, mid, tail, gap, cursor_rest, varying, id_first in self.shapes:
            cl = 25 + len(pre)  # the cursor document
            if not (
                buf.startswith(head, 16)
                and buf.startswith(pre, 25)
                and buf.startswith(inner, cl + 4)
                and unpack(buf, 21)[0] == length - 21 - gap
            ):
                continue
            if id_first:  # {id, ns, batch}: the stand-in's order
                c = cl + 4 + len(inner)  # the cursor id
                a = c + 8 + len(mid)  # the batch
                if a + 4 > length or not buf.startswith(mid, c + 8):
                    continue
                e = a + unpack(buf, a)[0]
                after = e  # where the tail starts
            else:  # {batch, id, ns}: mongod's
                a = cl + 4 + len(inner)
                e = a + unpack(buf, a)[0]
                c = e + len(mid)
                after = c + 8
                if not (e <= length - 8 and buf.startswith(mid, e)):
                    continue
            t = after + len(tail)
            if (
                a < e <= length
                and buf.startswith(tail, after)
                and cl + unpack(buf, cl)[0] == after + cursor_rest
                and (t == length if not varying else _only_varying(buf, t, length - 1))
            ):
                return self._count(buf, a, e), _I64.unpack_from(buf, c)[0]
        return None

    def _learn(self, buf, length: int, top: dict, cur, a: int, e: int, cid: int) -> None:
        """Remembers the layout of a success reply: its cursor id before or after its batch.
        The tail (from the later of the two) is compared up to the first varying field (an
        element's start: its value's, less the type byte, name and NUL); every element from
        there on must be a varying field."""
        id_first = cid < a
        after = e if id_first else cid + 8
        starts = {k: v[1] - len(k) - 2 for k, v in top.items()}
        rest = min((at for k, at in starts.items() if k in VARYING_FIELDS), default=None)
        if rest is not None and (
            rest < after or not all(k in VARYING_FIELDS for k, at in starts.items() if at >= rest)
        ):
            return
        cl = cur[1]
        first = cid if id_first else a  # the cursor's elements before it are constant
        self.shapes.append(
            (
                bytes(buf[16:21]),  # flag bits and the kind-0 section
                bytes(buf[25:cl]),  # the top-level elements before the cursor's
                bytes(buf[cl + 4 : first]),  # the cursor's elements before the first
                bytes(buf[cid + 8 : a] if id_first else buf[e:cid]),  # between the two
                bytes(buf[after : length if rest is None else rest]),
                length - 21 - _I32.unpack_from(buf, 21)[0],  # bytes after the document
                cur[2] - after,  # the cursor's bytes after the later of the two
                rest is not None,
                id_first,
            )
        )

    def __call__(self, buf, length):
        if self.shapes:
            found = self._shaped(buf, length)
            if found is not None:
                return (None, found[0], found[1], None)
        try:
            top = fields(buf, 21)
            cur = top.get(b"cursor")
            ok = top.get(b"ok")
            if (
                cur is not None
                and cur[0] == 3
                and ok is not None
                and _number(buf, ok[0], ok[1]) == 1
                and b"writeConcernError" not in top
            ):
                inner = fields(buf, cur[1])
                arr = inner.get(self.batch)
                cid = inner.get(b"id")
                if arr is not None and arr[0] == 4 and cid is not None and cid[0] == 18:
                    a, e = arr[1], arr[2]
                    if len(self.shapes) < self.MAX_SHAPES:
                        self._learn(buf, length, top, cur, a, e, cid[1])
                    return (None, self._count(buf, a, e), _I64.unpack_from(buf, cid[1])[0], None)
        except (ValueError, IndexError, struct.error):
            pass
        reply = self.decoded(buf, length)
        if reply is None:
            return ("InvalidBSON", 0, 0, "undecodable reply")
        bad = command_error(reply)
        if bad:
            return (bad[0], 0, 0, bad[1])
        return ("InvalidOperation", 0, 0, f"no cursor in the reply: {str(reply)[:200]}")


class FindAndModifyCheck(Check):
    """findAndModify replies: whether a document was found (or upserted). As
    pymongo (which parses write-concern errors for this command), a write-concern
    error comes first, then ok: 0."""

    def __call__(self, buf, length):
        try:
            top = fields(buf, 21)
            ok, value, leo = top.get(b"ok"), top.get(b"value"), top.get(b"lastErrorObject")
            if (
                ok is not None
                and _number(buf, ok[0], ok[1]) == 1
                and value is not None
                and b"writeConcernError" not in top
            ):
                upserted = False
                if leo is not None and leo[0] == 3:
                    upserted = b"upserted" in fields(buf, leo[1])
                return (None, value[0] == 3, upserted, None)
        except (ValueError, IndexError, struct.error):
            pass
        reply = self.decoded(buf, length)
        if reply is None:
            return ("InvalidBSON", False, False, "undecodable reply")
        wce = reply.get("writeConcernError")
        if wce:
            return (wce_kind(wce), False, False, str(wce.get("errmsg", wce))[:300])
        bad = command_error(reply)
        if bad:
            return (bad[0], False, False, bad[1])
        leo = reply.get("lastErrorObject") or {}
        return (None, reply.get("value") is not None, "upserted" in leo, None)
