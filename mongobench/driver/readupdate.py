"""The 50/50 read/update workload (zipfian keys), with its pymongo and pipelined paths."""

from __future__ import annotations

import random
import time

from mongobench.core.split import share
from mongobench.driver import connection, protocol
from mongobench.driver.base import (
    TimedLoop,
    load_serial,
    register,
    timed_call,
)
from mongobench.driver.ops import Tmpl, find_tmpl, sentinel


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

        where = connection.options(self._uri())
        conn = connection.connect(where)  # the primary; authenticated; TLS per the URI
        db, coll = self.db.name, self.coll_name
        wc = self.s.get("write_concern")
        # The setting, else the URI's (as pymongo does for the other path).
        wc = {"w": int(wc) if str(wc).isdigit() else wc} if wc is not None else where.write_concern
        depth = int(self.s.get("depth") or 8)
        quota = self.s.get("total_ops")
        quota = share(int(quota), nthreads, idx) if quota else None
        rng = random.Random(idx + 1)
        key_s, value_s = sentinel(0), sentinel(1)  # patched per op
        read_t = find_tmpl(db, coll, {"_id": key_s}, [key_s], limit=1, single=True)
        update = {"q": {"_id": key_s}, "u": {"$set": {"n0": value_s}}}
        update_cmd = {"update": coll, "updates": [update], "$db": db}
        if wc:
            update_cmd["writeConcern"] = wc
        update_t = Tmpl(update_cmd, [key_s, value_s])
        # Every reply is checked; only replies whose bytes differ from a success
        # already seen (outside the returned document) are decoded.
        read_ok = protocol.ReplyShapes("read", _found_one, inner=b"\x04firstBatch\x00")
        update_ok = protocol.ReplyShapes("update", _updated_one)
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
            ops["read"] += n_read
            ops["update"] += len(checks) - n_read
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
