"""The insert workload: bulk inserts of fixed-size documents (the seed's insert tables)."""

from __future__ import annotations

import time

from pymongo.errors import BulkWriteError, PyMongoError

from mongobench.core.split import share
from mongobench.core.units import KiB
from mongobench.driver import docgen
from mongobench.driver.base import COLLECTION, SAMPLE_IDS, ThreadStats, Workload, register
from mongobench.driver.docgen import DocFactory


@register("insert")
class InsertWorkload(Workload):
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
        if int(self.s["batch_size"]) < 1:
            raise ValueError("batch_size must be >= 1")
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

    def prepare(self):
        coll = self.fresh()
        for i in range(self.n_indexes):
            coll.create_index([(f"i{i}", 1)], name=f"i{i}_1")
        if self.preload_docs:
            self.log(f"preloading {self.preload_docs} documents")
            stats = ThreadStats()
            self._insert(coll, self.factory(seed=0), self.preload_docs, stats, None)
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

    def worker(self, idx, nthreads, stats, stop):
        quota = share(self.total_docs, nthreads, idx)
        coll, factory = self.collection(), self.factory(seed=idx + 1)
        batch = int(self.s["batch_size"])
        factory.prepare(min(batch, quota), quota % batch)  # the batch writers, untimed
        self.ready()
        self._insert(coll, factory, quota, stats, stop)

    def _insert(self, coll, factory, quota, stats, stop):
        batch = int(self.s["batch_size"])
        done, sampled = 0, 0
        while done < quota and not (stop and stop.is_set()):
            n = min(batch, quota - done)
            docs = factory.batch(n)
            done += n
            t0 = time.perf_counter_ns()
            try:
                if n == 1:
                    coll.insert_one(docs[0])
                else:
                    coll.insert_many(docs, ordered=False)
                ok = n
            except BulkWriteError as e:
                # Unordered: every document that failed has its write error.
                # nInserted alone is not trusted (mongo-java-server overstates it).
                failed = len(e.details.get("writeErrors", []))
                ok = min(e.details.get("nInserted", 0), n - failed)
                stats.error("insert", e, failed or n - ok)
            except PyMongoError as e:
                # Unknown how many landed: count none as throughput, all as errors.
                stats.error("insert", e, n)
                continue
            stats.latency.record("insert", (time.perf_counter_ns() - t0) / 1000.0)
            stats.ops["insert"] += 1
            stats.docs += ok
            stats.bytes += ok * factory.size
            if ok == n and sampled < SAMPLE_IDS:  # this client's first ones, for the audit
                stats.sample_id(docgen.first_id(docs[0].raw))
                sampled += 1
