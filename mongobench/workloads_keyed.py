"""Workloads over a preloaded collection with serial integer keys.

Hot-document updates, the update-API comparison, multi-field updates,
replace, delete, queries, aggregation, and seed 004's shell tests. The
preloaded data is reused between variants (and experiments) when a marker
document says the collection already holds exactly that data, as UniBench
does, so a sweep does not reload 60 million documents per variant.
"""

from __future__ import annotations

import random
import re
import threading
import time

import bson
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure, PyMongoError

from mongobench.docgen import DocFactory
from mongobench.workloads import KB, ThreadStats, Workload, register, split, timed_call

META = "perftables_meta"
LOAD_BATCH = 1000
LOAD_THREADS = 4


def load_serial(workload: Workload, coll_name: str, n: int, doc_kb: float, fields, shape: str):
    """Fill `coll_name` with documents `_id` 0..n-1 (Int64) unless it already holds them.

    `fields(i)` gives the named integer fields of document i. Returns True when
    the data was reused.
    """
    db = workload.db
    names = tuple(fields(0).keys())
    marker = {"_id": coll_name, "docs": n, "doc_kb": doc_kb, "shape": shape, "fields": list(names)}
    coll = workload.collection(coll_name)
    found = db[META].find_one({"_id": coll_name})
    if found == marker and coll.estimated_document_count() == n:
        return True
    db[META].delete_one({"_id": coll_name})
    coll = workload.fresh(coll_name)
    errors = []

    def body(t):
        f = DocFactory(int(doc_kb * KB), "serial", int_fields=names, seed=1000 + t)
        start = sum(split(n, LOAD_THREADS, k) for k in range(t))
        end = start + split(n, LOAD_THREADS, t)
        try:
            for lo in range(start, end, LOAD_BATCH):
                docs = [
                    f.make(_id=i, ints=list(fields(i).values()))
                    for i in range(lo, min(end, lo + LOAD_BATCH))
                ]
                coll.insert_many(docs, ordered=False)
        except PyMongoError as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(LOAD_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"loading {coll_name} failed: {errors[0]}")
    count = coll.count_documents({})
    if count != n:
        raise RuntimeError(f"loading {coll_name}: {count} documents instead of {n}")
    db[META].replace_one({"_id": coll_name}, marker, upsert=True)
    return False


class TimedLoop(Workload):
    """Count-based (`total_ops`) or time-based (`duration_s`) operation loops."""

    def loop(self, idx, nthreads, stats, stop, one_op):
        quota = self.s.get("total_ops")
        quota = split(int(quota), nthreads, idx) if quota else None
        duration = self.s.get("duration_s")
        t_end = time.perf_counter() + float(duration) if duration else None
        if quota is None and t_end is None:
            raise ValueError(f"workload {self.name} needs total_ops or duration_s")
        rng = random.Random(idx + 1)
        i = 0
        while not stop.is_set():
            if quota is not None and i >= quota:
                break
            if t_end is not None and time.perf_counter() >= t_end:
                break
            one_op(rng, i, stats, idx)
            i += 1

    def planned(self):
        return {k: self.s[k] for k in ("total_ops", "duration_s") if self.s.get(k)}


@register("hot_update")
class HotUpdateWorkload(TimedLoop):
    """Many threads `$inc` one document (seed: hot documents and concurrency).

    Settings: preload_docs, doc_size_kb, threads, total_ops, index_update
    (index {_id: 1, count: 1}, so every update also moves an index entry).
    """

    required = ("preload_docs", "doc_size_kb", "threads", "total_ops")
    coll_name = "hotspot"

    def prepare(self):
        reused = load_serial(
            self, self.coll_name, int(self.s["preload_docs"]), self.s["doc_size_kb"],
            lambda i: {"count": 0}, "hotspot",
        )  # fmt: skip
        coll = self.collection(self.coll_name)
        names = {ix["name"] for ix in coll.list_indexes()}
        if self.s.get("index_update"):
            if "_id_1_count_1" not in names:
                coll.create_index([("_id", 1), ("count", 1)], name="_id_1_count_1")
        elif "_id_1_count_1" in names:
            coll.drop_index("_id_1_count_1")
        return {"preload_reused": reused}

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)

        def op(rng, i, stats, idx):
            res, ok = timed_call(
                stats, "update", coll.update_one, {"_id": 0}, {"$inc": {"count": 1}}
            )
            if ok and res.matched_count != 1:
                stats.ops["update"] -= 1
                stats.error("update", RuntimeError("hot document not matched"))
            elif ok:
                stats.docs += 1

        self.loop(idx, nthreads, stats, stop, op)


@register("update_api")
class UpdateApiWorkload(TimedLoop):
    """updateOne vs findOneAndUpdate, upsert vs insert-on-miss, with a share of new keys.

    Settings: preload_docs, doc_size_kb, threads, total_ops, function
    (update_one | find_one_and_update), upsert, percent_new. A logical
    operation that misses without upsert is followed by an insert (its
    latency is part of the operation; the inserts are counted apart).
    """

    required = ("preload_docs", "doc_size_kb", "threads", "total_ops", "function", "percent_new")
    coll_name = "upsert"
    FUNCTIONS = ("update_one", "find_one_and_update")

    def prepare(self):
        if self.s["function"] not in self.FUNCTIONS:
            raise ValueError(
                f"function must be one of {self.FUNCTIONS}, not {self.s['function']!r}"
            )
        n = int(self.s["preload_docs"])
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        # Remove what earlier variants inserted, so every variant starts equal.
        removed = self.collection(self.coll_name).delete_many({"_id": {"$gte": n}}).deleted_count
        return {"preload_reused": reused, "removed_previous_inserts": removed}

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        n = int(self.s["preload_docs"])
        upsert = bool(self.s.get("upsert"))
        pct = float(self.s["percent_new"])
        fn = self.s["function"]
        factory = DocFactory(int(self.s["doc_size_kb"] * KB), "serial", seed=idx + 1)
        new_base = n * (idx + 1) + 10**9  # disjoint new keys per thread

        def op(rng, i, stats, idx):
            is_new = pct > 0 and rng.random() * 100 < pct
            key = new_base + i if is_new else rng.randrange(n)
            full = factory.make(_id=key)
            update = {"$inc": {"count": 1}, "$setOnInsert": full}
            t0 = time.perf_counter_ns()
            try:
                if fn == "update_one":
                    hit = coll.update_one({"_id": key}, update, upsert=upsert)
                    missed = hit.matched_count == 0 and hit.upserted_id is None
                else:
                    hit = coll.find_one_and_update(
                        {"_id": key}, update, upsert=upsert, return_document=ReturnDocument.AFTER
                    )
                    missed = hit is None
                if missed and not upsert:
                    coll.insert_one(full)
                    stats.counters["fallback_inserts"] += 1
                elif missed:
                    raise RuntimeError("upsert neither matched nor inserted")
            except PyMongoError as e:
                stats.error(fn, e)
                return
            stats.latency.record(fn, (time.perf_counter_ns() - t0) / 1000.0)
            stats.ops[fn] += 1
            stats.counters["new_keys" if is_new else "existing_keys"] += 1
            stats.docs += 1

        self.loop(idx, nthreads, stats, stop, op)


@register("update_fields")
class UpdateFieldsWorkload(TimedLoop):
    """`$inc` on N fields of random documents (UniBench's update test).

    Settings: preload_docs, doc_size_kb, threads, duration_s or total_ops,
    n_fields, doc_range (keys drawn from [0, doc_range): the cached or
    uncached working set), expressive (an aggregation-pipeline update),
    validation (a $jsonSchema validator on every field, verified to be
    enforced: UniBench's validator variant never applied it).
    """

    required = ("preload_docs", "doc_size_kb", "threads", "n_fields", "doc_range")
    coll_name = "updates"

    def _update(self):
        fields = [f"n{j}" for j in range(int(self.s["n_fields"]))]
        if self.s.get("expressive"):
            return [{"$set": {f: {"$add": [f"${f}", 1]} for f in fields}}]
        return {"$inc": dict.fromkeys(fields, 1)}

    def prepare(self):
        n = int(self.s["preload_docs"])
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        coll = self.collection(self.coll_name)
        sample = coll.find_one({"_id": 0})
        missing = [f for f in self._update_fields() if f not in sample]
        if missing:
            raise ValueError(f"documents of {self.s['doc_size_kb']} KB lack fields {missing[:3]}")
        self._set_validator(coll, sample)
        # Probe once: a server that rejects this kind of update fails the variant here.
        try:
            coll.update_one({"_id": 0}, self._update())
        except OperationFailure as e:
            raise RuntimeError(f"the server rejects this update ({self._kind()}): {e}") from None
        return {"preload_reused": reused, "update_kind": self._kind()}

    def _update_fields(self):
        return [f"n{j}" for j in range(int(self.s["n_fields"]))]

    def _kind(self):
        return "pipeline ($set/$add)" if self.s.get("expressive") else "$inc"

    def _set_validator(self, coll, sample):
        db = coll.database
        if not self.s.get("validation"):
            try:
                db.command("collMod", coll.name, validator={}, validationLevel="off")
            except OperationFailure:
                pass  # a server without collMod has no validator to remove
            return
        props = {k: {"bsonType": _bson_type(v)} for k, v in sample.items()}
        schema = {"bsonType": "object", "required": list(props), "properties": props}
        try:
            db.command(
                "collMod", coll.name, validator={"$jsonSchema": schema},
                validationLevel="strict", validationAction="error",
            )  # fmt: skip
        except OperationFailure as e:
            raise RuntimeError(f"cannot apply the validator (collMod): {e}") from None
        try:
            coll.insert_one({"_id": -1, "n0": "not an int"})
        except OperationFailure:
            return  # rejected: the validator is enforced
        coll.delete_one({"_id": -1})
        raise RuntimeError("the server accepted a document the validator forbids: not enforced")

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        update = self._update()
        rng_range = min(int(self.s["doc_range"]), int(self.s["preload_docs"]))

        def op(rng, i, stats, idx):
            res, ok = timed_call(
                stats, "update", coll.update_one, {"_id": rng.randrange(rng_range)}, update
            )
            if ok:
                if res.modified_count != 1:
                    stats.ops["update"] -= 1
                    stats.error("update", RuntimeError("document not modified"))
                else:
                    stats.docs += 1

        self.loop(idx, nthreads, stats, stop, op)


def _bson_type(value) -> str:
    import datetime

    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "long" if value.bit_length() > 31 or type(value).__name__ == "Int64" else "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime.datetime):
        return "date"
    return "object"


@register("replace")
class ReplaceWorkload(TimedLoop):
    """Whole-document replaces of random documents (the seed's "To Add": replace)."""

    required = ("preload_docs", "doc_size_kb", "threads", "doc_range")
    coll_name = "updates"

    def prepare(self):
        n = int(self.s["preload_docs"])
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        return {"preload_reused": reused}

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        factory = DocFactory(int(self.s["doc_size_kb"] * KB), "serial", seed=idx + 50)
        rng_range = min(int(self.s["doc_range"]), int(self.s["preload_docs"]))

        def op(rng, i, stats, idx):
            key = rng.randrange(rng_range)
            res, ok = timed_call(
                stats, "replace", coll.replace_one, {"_id": key}, factory.make(_id=key)
            )
            if ok:
                stats.docs += res.matched_count
                stats.bytes += factory.n_bytes * res.matched_count

        self.loop(idx, nthreads, stats, stop, op)


@register("update_indexed")
class UpdateIndexedWorkload(TimedLoop):
    """Updates that do or do not change indexed fields (the seed's "To Add")."""

    required = ("preload_docs", "doc_size_kb", "threads", "indexes", "update_indexed_fields")
    coll_name = "upd_indexed"

    def prepare(self):
        n = int(self.s["preload_docs"])
        k = int(self.s["indexes"])
        fields = lambda i: {f"x{j}": (i * 7919 + j) % 100_000 for j in range(max(k, 1))}  # noqa: E731
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], fields, f"x{k}")
        coll = self.collection(self.coll_name)
        have = {ix["name"] for ix in coll.list_indexes()}
        for j in range(k):
            if f"x{j}_1" not in have:
                coll.create_index([(f"x{j}", 1)], name=f"x{j}_1")
        return {"preload_reused": reused}

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        n = int(self.s["preload_docs"])
        k = max(int(self.s["indexes"]), 1)
        indexed = bool(self.s["update_indexed_fields"])

        def op(rng, i, stats, idx):
            if indexed:
                update = {"$set": {f"x{j}": rng.randrange(100_000) for j in range(k)}}
            else:
                update = {"$inc": {"n0": 1}}
            res, ok = timed_call(
                stats, "update", coll.update_one, {"_id": rng.randrange(n)}, update
            )
            if ok:
                stats.docs += res.modified_count

        self.loop(idx, nthreads, stats, stop, op)


@register("delete")
class DeleteWorkload(TimedLoop):
    """deleteOne by key or deleteMany by key range, each key deleted once."""

    required = ("preload_docs", "doc_size_kb", "threads", "docs_per_delete")
    coll_name = "deletes"

    def prepare(self):
        n = int(self.s["preload_docs"])
        # Deleting consumes the data: reload whenever a previous variant took some.
        self.db[META].delete_one({"_id": self.coll_name})
        load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        return {}

    def planned(self):
        return {"docs": int(self.s["preload_docs"])}

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        n = int(self.s["preload_docs"])
        per = int(self.s["docs_per_delete"])
        start = sum(split(n, nthreads, k) for k in range(idx))
        end = start + split(n, nthreads, idx)
        for lo in range(start, end, per):
            if stop.is_set():
                break
            hi = min(end, lo + per)
            if per == 1:
                res, ok = timed_call(stats, "delete_one", coll.delete_one, {"_id": lo})
            else:
                res, ok = timed_call(
                    stats, "delete_many", coll.delete_many, {"_id": {"$gte": lo, "$lt": hi}}
                )
            if ok:
                stats.docs += res.deleted_count
                if res.deleted_count != hi - lo:
                    stats.error(
                        "delete",
                        RuntimeError("fewer documents deleted than keys"),
                        hi - lo - res.deleted_count,
                    )


# Query templates: RANDINT(a,b) -> uniform integer in [a, b); RANDINTLIST(a,b,n) ->
# n distinct such integers. a and b are integers or names of settings (scaled sizes).
_RANDINT = re.compile(r"^RANDINT\((\w+),(\w+)\)$")
_RANDINTLIST = re.compile(r"^RANDINTLIST\((\w+),(\w+),(\d+)\)$")


def compile_template(template, settings: dict):
    """A function rng -> query for `template` (JSON-like with RANDINT strings)."""

    def bound(tok):
        if tok.isdigit():
            return int(tok)
        if tok not in settings:
            raise ValueError(f"query template names unknown setting {tok!r}")
        return int(settings[tok])

    def build(node):
        if isinstance(node, dict):
            parts = [(k, build(v)) for k, v in node.items()]
            return lambda rng: {k: f(rng) for k, f in parts}
        if isinstance(node, list):
            parts = [build(v) for v in node]
            return lambda rng: [f(rng) for f in parts]
        if isinstance(node, str):
            m = _RANDINT.match(node)
            if m:
                lo, hi = bound(m.group(1)), bound(m.group(2))
                if hi <= lo:
                    raise ValueError(f"{node}: empty range [{lo}, {hi})")
                return lambda rng: rng.randrange(lo, hi)
            m = _RANDINTLIST.match(node)
            if m:
                lo, hi, n = bound(m.group(1)), bound(m.group(2)), int(m.group(3))
                if hi - lo < n:
                    raise ValueError(f"{node}: fewer than {n} values in [{lo}, {hi})")
                return lambda rng: rng.sample(range(lo, hi), n)
        return lambda rng: node

    return build(template)


def query_fields(groups: int):
    """UniBench's query data: member k of group g has _id k*groups + g."""
    return lambda i: {"group": i % groups, "group_seq": i // groups, "group_seq_i": i // groups}


@register("query")
class QueryWorkload(TimedLoop):
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
        if plan == "COLLSCAN":
            self.log(f"warning: {self.s['query']} is a collection scan")
        warm = float(self.s.get("warmup_s") or 0)
        if warm:
            self._warmup(warm)
        return {"preload_reused": reused, "plan": plan, "warmup_s": warm}

    def _find(self, coll, rng):
        cursor = coll.find(
            self.make_query(rng), self.s.get("projection") or {"_id": 0, "nofieldsplease": 1}
        )
        if self.s.get("skip"):
            cursor = cursor.skip(int(self.s["skip"]))
        return cursor.limit(int(self.s["limit"]))

    def _plan(self, coll) -> str:
        try:
            explain = self._find(coll, random.Random(0)).explain()
        except OperationFailure:
            return "unknown"  # stand-ins have no explain
        text = str(explain.get("queryPlanner", explain))
        for stage in ("COLLSCAN", "IXSCAN", "IDHACK", "EXPRESS"):
            if stage in text:
                return stage
        return "other"

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

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        limit = int(self.s["limit"])
        expect_full = self.s.get("expect_full", True)

        def op(rng, i, stats, idx):
            def run():
                return sum(1 for _ in self._find(coll, rng))

            got, ok = timed_call(stats, "find", run)
            if not ok:
                return
            stats.docs += got
            if expect_full and got != limit:
                stats.ops["find"] -= 1
                stats.error("find", RuntimeError(f"{got} documents instead of {limit}"))

        self.loop(idx, nthreads, stats, stop, op)


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

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)

        def op(rng, i, stats, idx):
            def run():
                return sum(1 for _ in coll.aggregate(self.make_pipeline(rng)))

            got, ok = timed_call(stats, "aggregate", run)
            if ok:
                stats.docs += got

        self.loop(idx, nthreads, stats, stop, op)


@register("bucket")
class BucketWorkload(Workload):
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

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        size = int(self.s["bucket_size"])
        n = int(self.s["records"])
        start = sum(split(n, nthreads, k) for k in range(idx))
        for rec in range(start, start + split(n, nthreads, idx)):
            if stop.is_set():
                break
            atomic = {"seq": rec, "ts": time.time(), "v": rec % 97, "tag": f"t{rec % 13}"}
            if size:
                _, ok = timed_call(
                    stats, "push", coll.update_one, {"_id": rec // size},
                    {"$push": {"items": atomic}}, upsert=True,
                )  # fmt: skip
            else:
                _, ok = timed_call(stats, "insert", coll.insert_one, dict(atomic, _id=rec))
            if ok:
                stats.docs += 1

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
    """Seed 004: inserts and findOne by key at the same time, from separate threads."""

    required = ("preload_docs", "doc_size_kb", "group_size", "threads", "insert_threads")

    def __init__(self, db, settings, log=print):
        settings = dict(settings, query={"_id": "RANDINT(0,docs)"}, limit=1)
        super().__init__(db, settings, log)

    def prepare(self):
        facts = super().prepare()
        self.fresh("mixed_inserts")
        return facts

    def worker(self, idx, nthreads, stats, stop):
        if idx >= int(self.s["insert_threads"]):
            return super().worker(idx, nthreads, stats, stop)
        coll = self.collection("mixed_inserts")
        factory = DocFactory(int(self.s["doc_size_kb"] * KB), "objectid", seed=idx + 7)

        def op(rng, i, stats, idx):
            _, ok = timed_call(stats, "insert", coll.insert_one, factory.make())
            if ok:
                stats.docs += 1

        self.loop(idx, nthreads, stats, stop, op)


@register("regex_prefix")
class RegexPrefixWorkload(TimedLoop):
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

    def worker(self, idx, nthreads, stats, stop):
        coll = self.collection(self.coll_name)
        k = int(self.s["prefix_len"])
        limit = int(self.s["limit"])

        def op(rng, i, stats, idx):
            prefix = "".join(rng.choices(self.ALPHABET, k=k))

            def run():
                return sum(
                    1
                    for _ in coll.find({"name": {"$regex": f"^{prefix}"}}, {"name": 1}).limit(limit)
                )

            got, ok = timed_call(stats, "find", run)
            if ok:
                stats.docs += got

        self.loop(idx, nthreads, stats, stop, op)


class Zipfian:
    """YCSB's zipfian rank generator (Gray et al.), scrambled so hot keys scatter.

    zeta(n) is summed exactly up to 10^5 terms and by its integral beyond, so
    setting up 100 million keys takes milliseconds.
    """

    EXACT = 100_000

    def __init__(self, n: int, theta: float = 0.99):
        self.n, self.theta = n, theta
        m = min(n, self.EXACT)
        z = sum(1.0 / i**theta for i in range(1, m + 1))
        if n > m:
            z += (n ** (1 - theta) - m ** (1 - theta)) / (1 - theta)
        self.zetan = z
        self.half = 1 + 0.5**theta
        self.alpha = 1.0 / (1.0 - theta)
        self.eta = (1 - (2.0 / n) ** (1 - theta)) / (1 - self.half / z) if n > 2 else 1.0

    def rank(self, u: float) -> int:
        uz = u * self.zetan
        if uz < 1.0:
            return 0
        if uz < self.half:
            return 1 % self.n
        return min(self.n - 1, int(self.n * (self.eta * u - self.eta + 1) ** self.alpha))

    def key(self, u: float) -> int:
        # Fibonacci hashing scatters hot ranks over the key space like YCSB's
        # FNV scramble, at one multiplication instead of a Python byte loop; the
        # high bits of the 64-bit product pick the key (n need not be coprime).
        return (((self.rank(u) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) * self.n) >> 64

    def sampler(self, rand):
        """`lambda: self.key(rand())` as one closure over locals: the pipelined
        driver's per-operation path, where method calls and attribute look-ups count."""
        n, zetan, half, alpha, eta = self.n, self.zetan, self.half, self.alpha, self.eta
        one, last = 1 % n, n - 1

        def next_key():
            u = rand()
            uz = u * zetan
            if uz < 1.0:
                r = 0
            elif uz < half:
                r = one
            else:
                r = int(n * (eta * u - eta + 1) ** alpha)
                if r > last:
                    r = last
            return (((r * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) * n) >> 64

        return next_key


@register("read_update")
class ReadUpdateWorkload(TimedLoop):
    """YCSB-like reads and updates by key over 1 KB documents, zipfian keys.

    Settings: preload_docs, doc_size_kb, threads, duration_s or total_ops,
    read_proportion, driver (pymongo | pipelined), depth (requests per batch
    with the pipelined driver, two batches in flight per connection; its
    latencies include the wait inside the pipeline). The pipelined driver
    (mongobench.wire) connects to the URI's primary with its credentials and
    TLS settings; an operation succeeds when its reply says ok and one
    document was found (read) or matched without a write or write-concern
    error (update); anything else is counted as an error.
    """

    required = ("preload_docs", "doc_size_kb", "threads", "read_proportion", "driver")
    coll_name = "kv"

    def prepare(self):
        if self.s["driver"] not in ("pymongo", "pipelined"):
            raise ValueError(f"driver must be pymongo or pipelined, not {self.s['driver']!r}")
        n = int(self.s["preload_docs"])
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        return {"preload_reused": reused}

    def worker(self, idx, nthreads, stats, stop):
        zipf = Zipfian(int(self.s["preload_docs"]))
        reads = float(self.s["read_proportion"])
        if self.s["driver"] == "pipelined":
            return self._pipelined(idx, nthreads, stats, stop, zipf, reads)
        coll = self.collection(self.coll_name)

        def op(rng, i, stats, idx):
            key = zipf.key(rng.random())
            if rng.random() < reads:
                doc, ok = timed_call(stats, "read", coll.find_one, {"_id": key})
                if ok and doc is None:
                    stats.ops["read"] -= 1
                    stats.error("read", RuntimeError("document not found"))
                elif ok:
                    stats.docs += 1
            else:
                res, ok = timed_call(
                    stats, "update", coll.update_one, {"_id": key}, {"$set": {"n0": i}}
                )
                if ok:
                    stats.docs += res.matched_count

        self.loop(idx, nthreads, stats, stop, op)

    def _pipelined(self, idx, nthreads, stats, stop, zipf, reads):
        from mongobench import wire

        where = wire.options(self._uri())
        conn = wire.connect(where)  # the primary; authenticated; TLS per the URI
        db, coll = self.db.name, self.coll_name
        wc = self.s.get("write_concern")
        # The setting, else the URI's (as pymongo does for the other path).
        wc = {"w": int(wc) if str(wc).isdigit() else wc} if wc is not None else where.write_concern
        depth = int(self.s.get("depth") or 8)
        quota = self.s.get("total_ops")
        quota = split(int(quota), nthreads, idx) if quota else None
        t_end = (
            time.perf_counter() + float(self.s["duration_s"]) if self.s.get("duration_s") else None
        )
        rng = random.Random(idx + 1)
        key_s, value_s = 0x5EED5EED5EED0001, 0x5EED5EED5EED0002  # sentinels patched per op
        read_t = wire.Template(
            {
                "find": coll,
                "filter": {"_id": bson.Int64(key_s)},
                "limit": 1,
                "singleBatch": True,
                "$db": db,
            },
            [key_s],
        )
        update = {"q": {"_id": bson.Int64(key_s)}, "u": {"$set": {"n0": bson.Int64(value_s)}}}
        update_cmd = {"update": coll, "updates": [update], "$db": db}
        if wc:
            update_cmd["writeConcern"] = wc
        update_t = wire.Template(update_cmd, [key_s, value_s])
        # Every reply is checked; only replies whose bytes differ from a success
        # already seen (outside the returned document) are decoded.
        read_ok = wire.ReplyShapes("read", _found_one, inner=b"\x04firstBatch\x00")
        update_ok = wire.ReplyShapes("update", _updated_one)
        rand = rng.random
        next_key = zipf.sampler(rand)
        read_w, read_n = read_t.write, read_t.size
        update_w, update_n = update_t.write, update_t.size
        out = bytearray(depth * max(read_n, update_n))  # send() hands it all over: reused
        out_view = memoryview(out)
        record, ops = stats.latency.record, stats.ops
        done = 0

        def make_batch(n):
            first = rid = conn.ids(n)
            checks, pos = [], 0
            for _ in range(n):
                key = next_key()
                if rand() < reads:
                    read_w(out, pos, rid, key)
                    pos += read_n
                    checks.append(read_ok)
                else:
                    update_w(out, pos, rid, key, rid)  # n0 = request id: a real change
                    pos += update_n
                    checks.append(update_ok)
                rid += 1
            return first, checks, out_view[:pos]

        def account(checks, times, failures):
            bad = dict(failures)
            if bad:
                for i, (chk, secs) in enumerate(zip(checks, times, strict=True)):
                    if i in bad:
                        stats.error(chk.name, wire.WireError(bad[i][:200]))
                    else:
                        record(chk.name, secs * 1e6)
                        ops[chk.name] += 1
                        stats.docs += 1
                return
            for chk, secs in zip(checks, times, strict=True):
                record(chk.name, secs * 1e6)
            n_read = checks.count(read_ok)
            ops["read"] += n_read
            ops["update"] += len(checks) - n_read
            stats.docs += len(checks)

        in_flight = None  # (first id, checks, sent_at) of the batch whose replies are pending
        nxt = None
        try:
            while True:
                more = not stop.is_set() and (quota is None or done < quota)
                if more and t_end is not None and time.perf_counter() >= t_end:
                    more = False
                nxt = None
                if more:
                    n = depth if quota is None else min(depth, quota - done)
                    first, checks, data = make_batch(n)
                    nxt = (first, checks, conn.send(data))
                    done += n
                if in_flight:
                    account(in_flight[1], *conn.receive_checked(*in_flight))
                if nxt is None:
                    break
                in_flight = nxt
        except (OSError, wire.WireError) as e:
            # The connection's state is unknown: count what was in flight, stop this thread.
            for batch in (in_flight, nxt):
                for chk in batch[1] if batch else ():
                    stats.error(chk.name, e)
        finally:
            conn.close()

    def _uri(self) -> str:
        if not self.uri:
            raise RuntimeError("the pipelined driver needs the target URI (perftables passes it)")
        return self.uri


def _found_one(reply: dict) -> str | None:
    """A read by key succeeded: ok and exactly one document."""
    if not reply.get("ok"):
        return f"{reply.get('codeName', 'error')}: {reply.get('errmsg', reply)}"
    batch = (reply.get("cursor") or {}).get("firstBatch")
    if batch is None:
        return f"no cursor in the reply: {reply}"
    if len(batch) != 1:
        return "document not found" if not batch else f"{len(batch)} documents for one key"
    return None


def _updated_one(reply: dict) -> str | None:
    """An update by key succeeded: ok, acknowledged without write or write-concern
    error, one document matched."""
    if not reply.get("ok"):
        return f"{reply.get('codeName', 'error')}: {reply.get('errmsg', reply)}"
    if reply.get("writeErrors"):
        return f"write error: {reply['writeErrors'][0]}"
    if reply.get("writeConcernError"):
        return f"write concern error: {reply['writeConcernError']}"
    if reply.get("n") != 1:
        return "document not found" if not reply.get("n") else f"{reply['n']} documents matched"
    return None
