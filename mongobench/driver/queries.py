"""Query, aggregation, bucket, mixed and regex-prefix workloads over a preloaded collection."""

from __future__ import annotations

import random
import re
import struct
import threading

from pymongo.errors import OperationFailure

from mongobench.core.units import KiB
from mongobench.driver import docgen, ops
from mongobench.driver.base import (
    LOAD_BATCH,
    META,
    ThreadStats,
    load_serial,
    register,
)
from mongobench.driver.docgen import DocFactory
from mongobench.driver.workload import CursorRead, Declared, Split
from mongobench.driver.writes import Field, Inserts, Records

# Query templates: RANDINT(a,b) -> uniform integer in [a, b); RANDINTLIST(a,b,n) ->
# n distinct such integers. a and b are integers or names of settings (scaled sizes).
_RANDINT = re.compile(r"^RANDINT\((\w+),(\w+)\)$")
_RANDINTLIST = re.compile(r"^RANDINTLIST\((\w+),(\w+),(\d+)\)$")


def template_bound(settings: dict, tok: str) -> int:
    """A RANDINT/RANDINTLIST bound: a number, or the name of a setting."""
    if tok.isdigit():
        return int(tok)
    if tok not in settings:
        raise ValueError(f"query template names unknown setting {tok!r}")
    return int(settings[tok])


def sample_distinct(rng, lo: int, hi: int, n: int) -> list[int]:
    """`n` distinct integers from [lo, hi), in random order: a batch of 64-bit
    draws reduced in one comprehension and deduplicated, the repeats drawn again
    (the reduction's bias is below span / 2**64). For 100 values this costs
    about half of random.sample, whose per-value Python calls were the largest
    client cost of a $in query (25 of 27 us). Samples of more than half the
    range use random.sample (the redraws would grow)."""
    span = hi - lo
    if 2 * n > span:
        return rng.sample(range(lo, hi), n)
    out: dict[int, None] = {}
    while len(out) < n:
        k = n - len(out)
        raw = struct.unpack(f"<{k}Q", rng.randbytes(8 * k))
        out.update(dict.fromkeys([lo + v % span for v in raw]))
    return list(out)


class Template:
    """A query template compiled once for both client paths: `query` is the template with
    an Int64 sentinel (ops.sentinel) in place of each random integer, `slots` those
    sentinels in order, `values(rng)` the integers of one query in that order (for the
    multiplexed path's ops.Tmpl), and calling it, `template(rng)`, gives the query itself
    (for pymongo): the same values from the same rng calls either way."""

    def __init__(self, query, slots: list, makers: list):
        self.query, self.slots, self._makers = query, slots, makers
        self._fill = ops.filler(query, slots)

    def values(self, rng) -> list[int]:
        out = []
        for kind, lo, hi, n in self._makers:
            if kind == "one":
                out.append(rng.randrange(lo, hi))
            else:
                out += sample_distinct(rng, lo, hi, n)
        return out

    def __call__(self, rng):
        return self._fill(self.values(rng))

    @property
    def ranges(self) -> tuple | None:
        """How the values are drawn, in slot order, for a compiled source that draws them
        itself (cursor_sources): (lo, hi) for one value drawn as randrange(lo, hi), (lo, hi,
        n) for n distinct ones (sample_distinct: its batches, or random.sample's pool where
        n is more than half the range)."""
        return tuple((lo, hi) if kind == "one" else (lo, hi, n) for kind, lo, hi, n in self._makers)


def compile_template(template, settings: dict) -> Template:
    """The Template of `template` (JSON-like, with RANDINT / RANDINTLIST strings; their
    bounds are numbers or names of `settings`)."""
    slots, makers = [], []

    def bound(tok):
        return template_bound(settings, tok)

    def build(node):
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(v) for v in node]
        if isinstance(node, str):
            m = _RANDINT.match(node)
            if m:
                lo, hi = bound(m.group(1)), bound(m.group(2))
                if hi <= lo:
                    raise ValueError(f"{node}: empty range [{lo}, {hi})")
                slots.append(ops.sentinel(len(slots)))
                makers.append(("one", lo, hi, 1))
                return slots[-1]
            m = _RANDINTLIST.match(node)
            if m:
                lo, hi, n = bound(m.group(1)), bound(m.group(2)), int(m.group(3))
                if hi - lo < n:
                    raise ValueError(f"{node}: fewer than {n} values in [{lo}, {hi})")
                out = [ops.sentinel(len(slots) + j) for j in range(n)]
                slots.extend(out)
                makers.append(("list", lo, hi, n))
                return out
        return node

    query = build(template)
    return Template(query, slots, makers)


def query_fields(groups: int):
    """UniBench's query data: member k of group g has _id k*groups + g."""
    return lambda i: {"group": i % groups, "group_seq": i // groups, "group_seq_i": i // groups}


@register("query")
class QueryWorkload(Declared):
    """find(query).skip().limit().projection(), every result iterated.

    Settings: preload_docs, doc_size_kb, group_size, threads, duration_s or
    total_ops, query (template), limit, skip, projection, expect_full (each
    query must return exactly `limit` documents; short results are errors),
    warmup_s (an untimed run with the same keys first).
    """

    required = ("preload_docs", "doc_size_kb", "group_size", "threads", "query", "limit")
    coll_name = "query"

    def __init__(self, db, settings, log=print):
        super().__init__(db, settings, log)
        n = int(self.s["preload_docs"])
        groups = max(1, n // int(self.s["group_size"]))
        self.s = dict(self.s, docs=n, groups=groups)
        self.make_query = compile_template(self.s["query"], self.s)

    def prepare(self):
        reused = load_serial(
            self, self.coll_name, self.s["docs"], self.s["doc_size_kb"],
            query_fields(self.s["groups"]), f"query/{self.s['groups']}",
        )  # fmt: skip
        coll = self.collection(self.coll_name)
        have = {ix["name"] for ix in coll.list_indexes()}
        for keys in ([("group", 1)], [("group", 1), ("group_seq_i", 1)]):
            name = "_".join(f"{k}_1" for k, _ in keys)
            if name not in have:
                coll.create_index(keys, name=name)
        plan = self._plan(coll)
        if plan.startswith("COLLSCAN"):
            self.log(f"warning: {self.s['query']} is a collection scan ({plan})")
        warm = float(self.s.get("warmup_s") or 0)
        if warm:
            self._warmup(warm)
        return {"preload_reused": reused, "plan": plan, "warmup_s": warm}

    def declare(self):
        limit, q = int(self.s["limit"]), self.make_query
        return CursorRead(
            "find", self.coll_name, q.query, tuple(q.slots), q.values,
            self.s.get("projection") or {"_id": 0, "nofieldsplease": 1},
            int(self.s.get("skip") or 0), limit,
            limit if self.s.get("expect_full", True) else None, q.ranges,
        )  # fmt: skip

    def _plan(self, coll) -> str:
        try:
            d = QueryWorkload.declare(self)  # the find (mixed: beside its inserts)
            explain = d.cursor(coll, d.values(random.Random(0))).explain()
        except OperationFailure:
            return "unknown"  # stand-ins have no explain
        return plan_of(explain)

    def _warmup(self, seconds):
        warm = dict(self.s, duration_s=seconds, total_ops=None)
        clone = type(self)(self.db, warm, self.log)
        stop = threading.Event()
        n = int(self.s["threads"])
        threads = [
            threading.Thread(target=clone.worker, args=(i, n, ThreadStats(), stop))
            for i in range(n)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


@register("aggregate")
class AggregateWorkload(QueryWorkload):
    """$group over a range of groups, or $lookup joining documents (seed's "To Add")."""

    required = ("preload_docs", "doc_size_kb", "group_size", "threads", "pipeline")

    def __init__(self, db, settings, log=print):
        settings = dict(settings, query={}, limit=0)
        super().__init__(db, settings, log)
        self.make_pipeline = compile_template(self.s["pipeline"], self.s)

    def _plan(self, coll):
        return "aggregate"

    def declare(self):
        p = self.make_pipeline
        return CursorRead(
            "aggregate", self.coll_name, p.query, tuple(p.slots), p.values, ranges=p.ranges
        )


@register("bucket")
class BucketWorkload(Declared):
    """Seed 004's bucket test: N small records pushed into buckets of B, or one document each.

    Settings: records, bucket_size (0: no bucket), threads. Reports the time
    and the collection's storage size (collStats; missing where unsupported).
    """

    required = ("records", "bucket_size", "threads")
    coll_name = "buckets"

    def prepare(self):
        self.fresh(self.coll_name)
        return {}

    def planned(self):
        return {"docs": int(self.s["records"])}

    def declare(self) -> Records:
        coll, size = self.coll_name, int(self.s["bucket_size"])
        # _id (the bucket, or the record), seq, ts, v, tag
        fields = (Field(div=size or 1), Field(), Field(now=True), Field(mod=97),
                  Field(mod=13, prefix="t"))  # fmt: skip

        def shape(v: list) -> dict:
            atomic = {"seq": v[1], "ts": v[2], "v": v[3], "tag": v[4]}
            if size:
                return {"q": {"_id": v[0]}, "u": {"$push": {"items": atomic}}, "upsert": True}
            return {"_id": v[0], **atomic}  # as pymongo sends it: _id first

        kind = "update" if size else "insert"
        records = int(self.s["records"])
        return Records("push" if size else "insert", coll, records, kind, fields, shape)

    @property
    def audit_check(self):
        if int(self.s["bucket_size"]):
            return "records in buckets = before + acknowledged pushes"
        return "documents = before + acknowledged inserts"

    def audit_state(self):
        coll = self.db[self.coll_name]
        if not int(self.s["bucket_size"]):
            return coll.estimated_document_count()
        # pushed records live inside the buckets: counted there (the seed's 10,000 records
        # are a few hundred KB to read, after the timed phase)
        return sum(len(d.get("items") or ()) for d in coll.find({}, {"items": 1}))

    def finish(self) -> dict:
        try:
            st = self.db.command("collStats", self.coll_name)
        except OperationFailure:
            return {"storage_bytes": None}
        size = st.get("storageSize")
        # A server that keeps no storage (the in-memory stand-in) reports 0: unknown.
        return {"storage_bytes": size or None, "data_bytes": st.get("size")}


@register("mixed")
class MixedWorkload(QueryWorkload):
    """Seed 004: inserts and findOne (the variant's query) at the same time, from
    separate threads."""

    required = ("preload_docs", "doc_size_kb", "group_size", "threads", "insert_threads", "query")

    def __init__(self, db, settings, log=print):
        super().__init__(db, dict(settings, limit=1), log)

    @classmethod
    def key_example(cls, settings: dict) -> str:
        found = super().key_example(settings)
        return f"{found} (findOne); {docgen.key_example('objectid')} (insert)"

    def prepare(self):
        facts = super().prepare()
        self.fresh("mixed_inserts")
        return facts

    audit_check = "inserted documents = before + acknowledged inserts (the finds write nothing)"

    def audit_state(self):
        return self.db["mixed_inserts"].estimated_document_count()

    def audit_expected(self, baseline, stats):
        return baseline + stats.ops["insert"]

    def declare(self) -> Split:
        size = int(self.s["doc_size_kb"] * KiB)
        inserts = Inserts(
            "mixed_inserts", lambda idx: DocFactory(size, "objectid", seed=idx + 7),
            count_bytes=False,
        )  # fmt: skip
        return Split(int(self.s["insert_threads"]), inserts, super().declare())


@register("regex_prefix")
class RegexPrefixWorkload(Declared):
    """Seed 004: prefix regex on an indexed keyword field, 10 documents per query."""

    required = ("preload_docs", "threads", "prefix_len", "limit")
    coll_name = "keywords"
    ALPHABET = "abcdefghijklmnopqrstuvwxyz"

    def prepare(self):
        coll = self.collection(self.coll_name)
        n = int(self.s["preload_docs"])
        marker = {"_id": self.coll_name, "docs": n, "shape": "keywords"}
        reused = self.db[META].find_one({"_id": self.coll_name}) == marker
        if not reused or coll.estimated_document_count() != n:
            coll = self.fresh(self.coll_name)
            rng = random.Random(42)
            for lo in range(0, n, LOAD_BATCH):
                coll.insert_many(
                    [{"_id": i, "name": "".join(rng.choices(self.ALPHABET, k=8))}
                     for i in range(lo, min(n, lo + LOAD_BATCH))]
                )  # fmt: skip
            coll.create_index([("name", 1)], name="name_1")
            self.db[META].replace_one({"_id": self.coll_name}, marker, upsert=True)
            reused = False
        return {"preload_reused": reused}

    def declare(self):
        k, alphabet = int(self.s["prefix_len"]), self.ALPHABET
        slot = "^" + ops.text_sentinel(k)

        def values(rng):
            return [("^" + "".join(rng.choices(alphabet, k=k))).encode()]

        return CursorRead(
            "find", self.coll_name, {"name": {"$regex": slot}}, (slot,), values, {"name": 1},
            limit=int(self.s["limit"]), ranges=(("^", alphabet, k),),
        )  # fmt: skip


def plan_of(explain: dict) -> str:
    """The access path of an explain: mongod's stage (COLLSCAN, IXSCAN, IDHACK, EXPRESS);
    FerretDB's (its SQLite `SCAN`/`SEARCH ... USING INDEX` rows or PostgreSQL's node types, and
    `filterPushdown: false`, which filters every document in FerretDB) as `COLLSCAN (FerretDB
    ...)` or `IXSCAN (FerretDB ...)`; else `plan format unknown`."""
    qp = explain.get("queryPlanner", explain)
    if "filterPushdown" in explain:  # FerretDB's extension
        plan = (qp or {}).get("Plan")
        text = str(plan)
        pushed = bool(explain.get("filterPushdown"))
        if isinstance(plan, list):  # SQLite: EXPLAIN QUERY PLAN rows
            indexed = "USING INDEX" in text or "USING PRIMARY KEY" in text
            backend = "SQLite"
        else:  # PostgreSQL: node types
            indexed = "Index Scan" in text or "Bitmap Index Scan" in text
            backend = "PostgreSQL"
        if indexed and pushed:
            return f"IXSCAN (FerretDB/{backend} index)"
        why = "filterPushdown false" if not pushed else "full scan"
        return f"COLLSCAN (FerretDB/{backend}: {why})"
    text = str(qp)
    for stage in ("COLLSCAN", "IXSCAN", "IDHACK", "EXPRESS"):
        if stage in text:
            return stage
    return "plan format unknown"
