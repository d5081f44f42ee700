"""The insert workload: bulk inserts of fixed-size documents (the seed's insert tables)."""

from __future__ import annotations

from dataclasses import replace

from mongobench.core.units import KiB
from mongobench.driver import docgen, writes
from mongobench.driver.base import COLLECTION, ThreadStats, register
from mongobench.driver.docgen import DocFactory
from mongobench.driver.workload import Declared
from mongobench.driver.writes import Inserts


@register("insert")
class InsertWorkload(Declared):
    """Bulk inserts of fixed-size documents into an (optionally preloaded) collection.

    Settings: doc_size_kb, total_docs, batch_size, threads, id_type,
    secondary_indexes (random-integer fields i0.., one index each),
    preload_docs (loaded before the timed phase, untimed), write_concern.
    """

    required = ("doc_size_kb", "total_docs", "batch_size", "threads", "id_type")

    def __init__(self, db, settings, log=print):
        super().__init__(db, settings, log)
        self.doc_bytes = int(self.s["doc_size_kb"] * KiB)
        self.n_indexes = int(self.s.get("secondary_indexes") or 0)
        self.total_docs = int(self.s["total_docs"])
        self.preload_docs = int(self.s.get("preload_docs") or 0)
        self.declare()  # refuses a batch_size below 1
        if self.s["id_type"] == "business_id" and int(self.s["threads"]) >= docgen.LANES:
            # Each client writes business ids in its own lane (its seed); the preload in lane 0.
            raise ValueError(f"business ids allow at most {docgen.LANES - 1} threads")

    @classmethod
    def key_example(cls, settings: dict) -> str:
        return docgen.key_example(settings["id_type"])

    @classmethod
    def ran_as(cls, settings):
        # the most documents one client inserts (core.split.share): no batch is larger
        per_client = -(-int(settings["total_docs"]) // max(1, int(settings["threads"])))
        batch = int(settings["batch_size"])
        return {"batch_size": per_client} if 0 < per_client < batch else {}

    def factory(self, seed: int) -> DocFactory:
        return DocFactory(self.doc_bytes, self.s["id_type"], n_int_fields=self.n_indexes, seed=seed)

    def declare(self) -> Inserts:
        # serial _ids: the preload's 0.., then the timed phase's
        return Inserts(
            COLLECTION, lambda idx: self.factory(seed=idx + 1), int(self.s["batch_size"]),
            self.total_docs, first=self.preload_docs,
        )  # fmt: skip

    def prepare(self):
        coll = self.fresh()
        for i in range(self.n_indexes):
            coll.create_index([(f"i{i}", 1)], name=f"i{i}_1")
        if self.preload_docs:
            self.log(f"preloading {self.preload_docs} documents")
            stats, d = ThreadStats(), replace(self.declare(), total=self.preload_docs, first=0)
            one = writes.inserter(coll, self.factory(seed=0), d, stats)
            for lo, n in d.steps(0, 1):
                one(lo, n)
            if stats.errors:
                raise RuntimeError(f"preload failed: {dict(stats.errors)} {stats.error_samples}")
        return {"preload_docs": self.preload_docs}

    def planned(self):
        return {"docs": self.total_docs, "doc_bytes": self.doc_bytes}

    audit_check = "documents in the collection = before + acknowledged inserts"

    def audit_state(self):
        return self.db[COLLECTION].estimated_document_count()

    def audit_sample(self, stats):
        ids = stats.written_ids
        if not ids:
            return None
        found = self.db[COLLECTION].count_documents({"_id": {"$in": list(ids)}})
        return len(ids), max(0, len(ids) - found)
