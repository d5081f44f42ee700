"""Update workloads over preloaded keys: hot document, update API, fields, replace, indexed, delete."""

from __future__ import annotations

import datetime

from pymongo.errors import OperationFailure

from mongobench.core.units import KiB
from mongobench.driver import ops
from mongobench.driver.base import META, UpdateAudit, load_serial, register
from mongobench.driver.docgen import DocFactory
from mongobench.driver.workload import Declared, KeyedDelete, KeyedUpsert, KeyedWrite


@register("hot_update")
class HotUpdateWorkload(Declared):
    """Many threads `$inc` one document (seed: hot documents and concurrency).

    Settings: preload_docs, doc_size_kb, threads, total_ops, index_update
    (index {_id: 1, count: 1}, so every update also moves an index entry).
    """

    required = ("preload_docs", "doc_size_kb", "threads", "total_ops")
    coll_name = "hotspot"

    @classmethod
    def key_example(cls, settings: dict) -> str:
        return "0"  # the hot document

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

    audit_check = "hot document's counter = before + acknowledged $inc"

    def audit_state(self):
        doc = self.db[self.coll_name].find_one({"_id": 0}, {"count": 1}) or {}
        return int(doc.get("count") or 0)

    def declare(self):
        return KeyedWrite(
            "update", self.coll_name, {"_id": 0}, {"$inc": {"count": 1}},
            expect=(1, "hot document not matched"),
        )  # fmt: skip


@register("update_api")
class UpdateApiWorkload(Declared):
    """updateOne vs findOneAndUpdate, upsert vs insert-on-miss, with a share of new keys.

    Settings: preload_docs, doc_size_kb, threads, total_ops, function
    (update_one | find_one_and_update), upsert, percent_new. A logical
    operation that misses without upsert is followed by an insert (its
    latency is part of the operation; the inserts are counted apart).
    """

    required = ("preload_docs", "doc_size_kb", "threads", "total_ops", "function", "percent_new")
    coll_name = "upsert"

    def prepare(self):
        self.declare()  # refuses an unknown function
        n = int(self.s["preload_docs"])
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        # Remove what earlier variants inserted, so every variant starts equal.
        removed = self.collection(self.coll_name).delete_many({"_id": {"$gte": n}}).deleted_count
        return {"preload_reused": reused, "removed_previous_inserts": removed}

    audit_check = "documents = before + acknowledged operations on new keys (upserts, inserts)"

    def audit_state(self):
        return self.db[self.coll_name].estimated_document_count()

    def audit_expected(self, baseline, stats):
        return baseline + int(stats.counters.get("new_keys", 0))

    def declare(self):
        size = int(self.s["doc_size_kb"] * KiB)
        return KeyedUpsert(
            self.s["function"], self.coll_name, int(self.s["preload_docs"]),
            float(self.s["percent_new"]), bool(self.s.get("upsert")),
            doc=lambda idx: DocFactory(size, "serial", seed=idx + 1),
            update=lambda doc: {"$inc": {"count": 1}, "$setOnInsert": doc},
        )  # fmt: skip


@register("update_fields")
class UpdateFieldsWorkload(UpdateAudit, Declared):
    """`$inc` on N fields of random documents (UniBench's update test).

    Settings: preload_docs, doc_size_kb, threads, duration_s or total_ops,
    n_fields, doc_range (keys drawn from [0, doc_range): the cached or
    uncached working set), expressive (an aggregation-pipeline update),
    validation (a $jsonSchema validator on every field, verified to be
    enforced: UniBench's validator variant never applied it).
    """

    required = ("preload_docs", "doc_size_kb", "threads", "n_fields", "doc_range")
    coll_name = "updates"
    audit_inc = "n0"  # every update adds 1 to n0..n{n_fields-1}

    def audit_range(self):
        return min(int(self.s["doc_range"]), int(self.s["preload_docs"]))

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

    def declare(self):
        k0, r = ops.sentinel(0), min(int(self.s["doc_range"]), int(self.s["preload_docs"]))
        return KeyedWrite(
            "update", self.coll_name, {"_id": k0}, self._update(), (k0,), None, "nModified",
            (1, "document not modified"), keys=r,
        )  # fmt: skip


def _bson_type(value) -> str:

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
class ReplaceWorkload(UpdateAudit, Declared):
    """Whole-document replaces of random documents (the seed's "To Add": replace)."""

    required = ("preload_docs", "doc_size_kb", "threads", "doc_range")
    coll_name = "updates"

    def prepare(self):
        n = int(self.s["preload_docs"])
        reused = load_serial(self, self.coll_name, n, self.s["doc_size_kb"], lambda i: {}, "plain")
        return {"preload_reused": reused}

    def declare(self):
        k0, r = ops.sentinel(0), min(int(self.s["doc_range"]), int(self.s["preload_docs"]))
        size = int(self.s["doc_size_kb"] * KiB)
        return KeyedWrite(
            "replace", self.coll_name, {"_id": k0}, None, (k0,), keys=r,
            doc=lambda idx: DocFactory(size, "serial", seed=idx + 50),
        )  # fmt: skip


@register("update_indexed")
class UpdateIndexedWorkload(UpdateAudit, Declared):
    """Updates that do or do not change indexed fields (the seed's "To Add")."""

    required = ("preload_docs", "doc_size_kb", "threads", "indexes", "update_indexed_fields")
    coll_name = "upd_indexed"

    @property
    def audit_inc(self):  # the updates that change no indexed field: $inc n0
        return None if self.s["update_indexed_fields"] else "n0"

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

    def declare(self):
        n, k = int(self.s["preload_docs"]), max(int(self.s["indexes"]), 1)
        slots = tuple(ops.sentinel(j) for j in range(k + 1))
        if not self.s["update_indexed_fields"]:
            return KeyedWrite(
                "update", self.coll_name, {"_id": slots[0]}, {"$inc": {"n0": 1}}, slots[:1],
                counted="nModified", keys=n,
            )  # fmt: skip

        def values(rng):  # the new values first, then the key
            new = [rng.randrange(100_000) for _ in range(k)]
            return (rng.randrange(n), *new)

        update = {"$set": {f"x{j}": slots[j + 1] for j in range(k)}}
        ranges = (*((j + 1, 0, 100_000) for j in range(k)), (0, 0, n))  # as values draws
        return KeyedWrite(
            "update",
            self.coll_name,
            {"_id": slots[0]},
            update,
            slots,
            values,
            "nModified",
            ranges=ranges,
        )


@register("delete")
class DeleteWorkload(Declared):
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

    audit_check = "documents = before - acknowledged deletions (deleted documents gone)"

    def audit_state(self):
        return self.db[self.coll_name].estimated_document_count()

    def audit_expected(self, baseline, stats):
        return baseline - stats.docs

    def audit_lost(self, expected, found):
        return max(0, found - expected)  # deletions acknowledged whose documents remain

    def declare(self):
        return KeyedDelete(self.coll_name, int(self.s["preload_docs"]),
                           int(self.s["docs_per_delete"]))  # fmt: skip
