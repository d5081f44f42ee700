#!/usr/bin/env python3
"""Client CPU per operation of the multiplexed driver, against a stand-in it starts.

Reads by key, updates by key ($set, the kv_read_update workload with
read_proportion 1 and 0) and 1 KB bulk inserts, each with 1 and 2 worker
processes; prints the client CPU per operation (per document for inserts) as
the workers measure it over their timed phase (user + system time), and the
throughput. Targets (issue 12): <= 20 us/op for single operations, <= 2 us per
1 KB document in bulk inserts. The server shares this machine's cores: compare
runs made together (the pymongo path is printed as a reference), and repeat them.

    .venv/bin/python scripts/bench_multiplex.py [--records 20000] [--seconds 10]
        [--clients 16] [--processes 1,2]
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import tempfile
import threading
import time

from pymongo import MongoClient

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # testbed/
from bench_driver import run_main

from mongobench.driver import procs, sources
from mongobench.driver.base import ThreadStats
from mongobench.driver.catalog import WORKLOADS
from testbed import bed as testbed

DB = "benchmx"
SINGLE_US, BULK_US_PER_KB = 20.0, 2.0


def run(uri, workload, settings, clients, processes, seconds=None, total=None):
    make = functools.partial(sources.make, workload, settings, DB, {"w": 1})
    res = procs.run(uri, make, clients, processes, procs.Phase(total=total, duration=seconds))
    if res.stats.errors:
        raise RuntimeError(f"{workload}: errors {dict(res.stats.errors)}")
    return res


def pymongo_reference(uri, settings, threads, seconds):
    """The pymongo path (the workload's threads in this process): CPU us/op, ops/s."""
    with MongoClient(uri, maxPoolSize=threads + 4) as client:
        w = WORKLOADS["read_update"](client[DB], dict(settings, duration_s=seconds))
        stats, stop = [ThreadStats() for _ in range(threads)], threading.Event()
        ts = [threading.Thread(target=w.worker, args=(i, threads, stats[i], stop))
              for i in range(threads)]  # fmt: skip
        cpu0, t0 = time.process_time(), time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    n = sum(sum(s.ops.values()) for s in stats)
    return cpu * 1e6 / n, n / wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--processes", default="1,2")
    ap.add_argument("--insert-docs", type=int, default=200_000)
    args = ap.parse_args()
    counts = [int(p) for p in args.processes.split(",")]
    srv = testbed.start_server(tempfile.mkdtemp(prefix="bench-multiplex-"))
    ok = True
    try:
        kv = {
            "preload_docs": args.records, "doc_size_kb": 1, "threads": args.clients,
            "read_proportion": 1.0, "driver": "pymongo",
        }  # fmt: skip
        with MongoClient(srv.uri) as client:
            WORKLOADS["read_update"](client[DB], kv, log=lambda m: None).prepare()
        print(f"server: {srv.kind}; {args.records} x 1 KB records; {args.clients} clients")
        for name, reads in (("read", 1.0), ("update", 0.0)):
            for p in counts:
                res = run(srv.uri, "read_update", dict(kv, read_proportion=reads),
                          args.clients, p, seconds=args.seconds)  # fmt: skip
                n = sum(res.stats.ops.values())
                us = res.cpu_s * 1e6 / n
                ok &= us <= SINGLE_US
                print(
                    f"{name:6s} {p} process(es): {us:6.1f} us/op client CPU,"
                    f" {n / res.wall_s:8.0f} ops/s (target <= {SINGLE_US:g} us/op)"
                )
            ref_us, ref_rate = pymongo_reference(
                srv.uri, dict(kv, read_proportion=reads), args.clients, args.seconds
            )
            print(f"{name:6s} pymongo path (reference, 1 process): {ref_us:6.1f} us/op,"
                  f" {ref_rate:8.0f} ops/s")  # fmt: skip
        ins = {
            "doc_size_kb": 1, "total_docs": args.insert_docs, "batch_size": 1000,
            "threads": 4, "id_type": "objectid",
        }  # fmt: skip
        for p in counts:
            with MongoClient(srv.uri) as client:
                WORKLOADS["insert"](client[DB], ins, log=lambda m: None).prepare()
            res = run(srv.uri, "insert", ins, 4, p)
            us = res.cpu_s * 1e6 / res.stats.docs
            ok &= us <= BULK_US_PER_KB
            print(
                f"insert {p} process(es): {us:6.2f} us/doc client CPU (1 KB documents,"
                f" batches of 1000), {res.stats.docs / res.wall_s:8.0f} docs/s"
                f" (target <= {BULK_US_PER_KB:g} us/doc)"
            )
    finally:
        srv.stop()
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
