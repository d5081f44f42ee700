"""The read/update workload (zipfian keys, workload.KeyedMix), and its pipelined executor."""

from __future__ import annotations

import random
import time

from mongobench.core.split import share
from mongobench.driver import connection, protocol
from mongobench.driver.base import load_serial, register
from mongobench.driver.ops import sentinel, write_concern
from mongobench.driver.workload import Declared, KeyedMix
from mongobench.driver.zipfian import Zipfian


@register("read_update")
class ReadUpdateWorkload(Declared):
    """YCSB-like reads and updates by key over 1 KB documents, zipfian keys.

    Settings: preload_docs, doc_size_kb, threads, duration_s or total_ops,
    read_proportion, driver (pymongo | pipelined), depth (requests per batch
    with the pipelined driver, two batches in flight per connection; its
    latencies include the wait inside the pipeline). The pipelined driver
    (driver.connection) connects to the URI's primary with its credentials and
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

    def declare(self):
        k0, k1 = sentinel(0), sentinel(1)
        return KeyedMix(
            self.coll_name, Zipfian(int(self.s["preload_docs"])),
            float(self.s["read_proportion"]), {"_id": k0}, {"$set": {"n0": k1}}, (k0, k1),
        )  # fmt: skip

    def worker(self, idx, nthreads, stats, stop):
        if self.s["driver"] != "pipelined":
            return super().worker(idx, nthreads, stats, stop)
        where = connection.options(self._uri())
        conn = connection.connect(where)  # the primary; authenticated; TLS per the URI
        # The setting, else the URI's (as pymongo does for the other path).
        wc = write_concern(self.s.get("write_concern"), where.write_concern)
        try:
            self._pipelined(conn, self.declare(), wc, idx, nthreads, stats, stop)
        finally:
            conn.close()

    def _pipelined(self, conn, d: KeyedMix, wc, idx, nthreads, stats, stop):
        """KeyedMix's pipelined executor: `depth` requests a batch, two batches in flight."""
        depth = int(self.s.get("depth") or 8)
        quota = self.s.get("total_ops")
        quota = share(int(quota), nthreads, idx) if quota else None
        rng = random.Random(idx + 1)
        read_t, update_t = d.templates(self.db.name, wc)
        reads, read, update = d.reads, d.READ, d.UPDATE
        # Every reply is checked; only replies whose bytes differ from a success
        # already seen (outside the returned document) are decoded.
        read_ok = protocol.ReplyShapes(read, _found_one, inner=b"\x04firstBatch\x00")
        update_ok = protocol.ReplyShapes(update, _updated_one)
        rand = rng.random
        next_key = d.keys.sampler(rand)  # d.keys.key(rand()) as one closure
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
                    read_w(out_view[pos:], rid, key)
                    pos += read_n
                    checks.append(read_ok)
                else:
                    update_w(out_view[pos:], rid, key, rid)  # n0 = request id: a real change
                    pos += update_n
                    checks.append(update_ok)
                rid += 1
            return first, checks, out_view[:pos]

        def account(checks, times, failures):
            bad = dict(failures)
            if bad:
                for i, (chk, secs) in enumerate(zip(checks, times, strict=True)):
                    if i in bad:
                        stats.error(chk.name, protocol.WireError(bad[i][:200]))
                    else:
                        record(chk.name, secs * 1e6)
                        ops[chk.name] += 1
                        stats.docs += 1
                return
            for chk, secs in zip(checks, times, strict=True):
                record(chk.name, secs * 1e6)
            n_read = checks.count(read_ok)
            ops[read] += n_read
            ops[update] += len(checks) - n_read
            stats.docs += len(checks)

        in_flight = None  # (first id, checks, sent_at) of the batch whose replies are pending
        nxt = None
        self.ready()
        t_end = (
            time.perf_counter() + float(self.s["duration_s"]) if self.s.get("duration_s") else None
        )
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
        except (OSError, protocol.WireError) as e:
            # The connection's state is unknown: count what was in flight, stop this thread.
            for batch in (in_flight, nxt):
                for chk in batch[1] if batch else ():
                    stats.error(chk.name, e)

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
