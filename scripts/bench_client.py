#!/usr/bin/env python3
"""Client cost of every experiment on the multiplexed path, against YCSB, in one run.

Against a test-bed server it starts (issue 12, item 4):
1. YCSB (the project's binding) on reads and on updates by key: 1 KB records,
   zipfian keys, `--threads` threads, steady state (its JIT warm-up excluded):
   client CPU per operation.
2. Every experiment's timed phase at smoke scale on the multiplexed path, run
   by perftables as a PKB run does (variants the stand-in cannot run are left
   out): client CPU per operation (workers + the perftables process), per
   document for bulk inserts. Count-based variants run at least --min-ops
   operations and bulk inserts load at least --min-mb MB (smoke's data,
   clients and mix; enough operations for a steady state). YCSB and the experiments alternate, round by round (--rounds).
3. Scaling: 50/50 reads and updates by key with `--clients` virtual clients
   over 1 process and over 2: client CPU used, in cores of the capacity
   (one core per process), and throughput.
4. The floor: a bare loop with 4 and with 32 connections sending pre-encoded finds
   by key and reading the replies, nothing checked or counted.
5. What a wake-up costs here after 0.5, 5 and 50 ms idle (a process blocked in
   epoll, woken by a byte), in Python and in C. Each variant also prints how busy
   its client was (client CPU over its capacity): a variant whose server is slow
   keeps its clients idle and pays about one such wake-up per reply.
6. The native floor of each multiplexed variant (first round; needs a C compiler,
   --no-native skips it): the variant runs again with its requests recorded, and
   native_floor.c replays them from the variant's prepared state over as many
   connections and processes, replies read and nothing checked. What any client
   pays here for those requests and replies; the bench prints the client's cost
   over it and the variants whose target lies below it.

Targets: every single-operation variant <= 0.5 x YCSB's mean us/op (read and
update), bulk inserts <= 2 us per 1 KB document. The server shares this
machine's cores: read the ratios, not the absolute figures, and repeat runs.
Exits 1 when a target is missed. `--json FILE` writes
{"ycsb_us_per_op": {"read": r, "update": u}, "experiments": {"<experiment>/<variant>":
{"client_us_per_op": x, "bulk": false}}} (bulk inserts: "bulk": true and
"client_us_per_doc"; with the native floor "native_floor_us_per_op" or
"native_floor_us_per_doc"), plus "scaling", "bare_loop_us_per_op",
"wake_us_after_idle", "native_wake_us_after_idle" and
"native_floor_above_target" (the variants whose target is below their floor).

    .venv/bin/python scripts/bench_client.py [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import shutil
import socket
import statistics
import sys
import tempfile
import time

from pymongo import MongoClient

# The sibling script measures YCSB and starts its server for both: one way to do each.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import native_floor
from bench_driver import start_loaded_server, ycsb_round

from mongobench.driver import multiplex, ops
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import runner as perftables
from mongobench.testbed import bed as testbed

SINGLE_RATIO, BULK_US_PER_KB = 0.5, 2.0
DELETE_DOCS = 20_000  # documents the delete variants start with (smoke: 200)
WAKE_IDLE_S = (0.0005, 0.005, 0.05)  # idle times before the wake-ups the bench prices
BARE_LOOP_CLIENTS, BARE_LOOP_OPS = (4, 32), 30_000


def is_bulk(res: dict) -> bool:
    return res["workload"] == "insert" and int(res["settings"]["batch_size"]) > 1


def _run(uri: str, work: str, name: str, label: str, overrides, processes) -> dict:
    """One variant at smoke scale, as a PKB run does it; its result."""
    run = perftables.run(
        uri, [name], "smoke", os.path.join(work, "variant.json"), database="bench_client",
        variants=[label], overrides=overrides, log=lambda m: None, os_path=False,
        processes=processes,
    )  # fmt: skip
    return run["results"][0]


def experiment_costs(
    uri: str, work: str, processes: int | None, min_ops: int, min_mb: float, native: str | None
):
    """Client CPU per op (per document for bulk inserts) of every variant at smoke scale;
    count-based variants run at least `min_ops` operations, bulk inserts load at least
    `min_mb` MB. With `native` (the compiled native_floor), each multiplexed variant's
    native floor too."""
    catalog = exp_mod.load()
    plans = exp_mod.plan(catalog, None, "smoke", skip=testbed.STANDIN_UNSUPPORTED)
    out = {}
    for experiment, variants in plans:
        for v in variants:
            s, more = v.settings, None
            if s.get("total_ops") and s["total_ops"] < min_ops:
                more = {"total_ops": min_ops}
            elif experiment.workload == "delete" and s["preload_docs"] < DELETE_DOCS:
                # Each key is deleted once: the data bounds the operations.
                more = {"preload_docs": DELETE_DOCS}
            elif experiment.workload == "insert" and int(s["batch_size"]) > 1:
                least = int(min_mb * 1024 / float(s["doc_size_kb"]))
                if s["total_docs"] < least:
                    more = {"total_docs": least}
            res = _run(uri, work, experiment.name, v.label, more, processes)
            key = f"{res['experiment']}/{res['label']}"
            if res["status"] != "ok" or res["errors"]:
                raise RuntimeError(f"{key}: {res.get('error') or res['errors']}")
            cpu_us = res["client_process_cpu_s"] * 1e6
            entry = {
                "bulk": is_bulk(res),
                "client_path": res["client_path"],
                "doc_kb": res["settings"].get("doc_size_kb"),
                "ops": sum(res["ops"].values()),
                # The client's share of its capacity: low when the server is the limit.
                "client_busy": res["client_process_cpu_s"]
                / (res["duration_s"] * res["client_cores"]),
            }
            if entry["bulk"]:
                entry["client_us_per_doc"] = cpu_us / res["docs"]
            else:
                entry["client_us_per_op"] = cpu_us / entry["ops"]
            if native and res["client_path"] == "multiplexed":
                # A second run, its requests recorded (the first is timed untouched).
                rec = tempfile.mkdtemp(dir=work)
                with native_floor.recording(rec):
                    again = _run(uri, work, experiment.name, v.label, more, processes)
                floor = native_floor.floor(native, uri, rec, again, "bench_client")
                shutil.rmtree(rec)
                entry["native"] = floor["us_per_doc" if entry["bulk"] else "us_per_op"]
            out[key] = entry
    return out


def wake_cost_us(idle_s: float, wakes: int) -> float:
    """CPU (user + system) of one wake-up of a process blocked in epoll, woken by a
    byte another process sends every `idle_s`: what a reply costs a client that
    waited that long, before any protocol work."""
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the sender
        a.close()
        for _ in range(wakes):
            time.sleep(idle_s)
            b.send(b"x")
        os._exit(0)
    b.close()
    ep = select.epoll()
    ep.register(a.fileno(), select.EPOLLIN)
    r0, n = resource.getrusage(resource.RUSAGE_SELF), 0
    while n < wakes and ep.poll(5.0):
        n += len(a.recv(64))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    os.waitpid(pid, 0)
    ep.close()
    a.close()
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return cpu * 1e6 / max(1, n)


def bare_loop_us(uri: str, key: str, clients: int, n_ops: int) -> float:
    """Client CPU per operation of the least a multiplexed client does: `clients`
    connections in one process, each sending a pre-encoded find of one YCSB record by
    `key` and reading the reply, with no check and no accounting. The floor under every
    variant's figure on this machine."""
    socks = multiplex.open_sockets(uri, clients)
    tmpl = ops.find_tmpl("ycsb", "usertable", {"_id": key}, [], limit=1, single=True)
    ep, conns = select.epoll(), {}
    for i, sock in enumerate(socks):
        req = tmpl.buffer()
        tmpl.write(req, i + 1)
        conns[sock.fileno()] = [sock, bytes(req), bytearray(1 << 16), 0]
        ep.register(sock.fileno(), select.EPOLLIN)
    r0, done = resource.getrusage(resource.RUSAGE_SELF), 0
    try:
        for sock, req, _, _ in conns.values():
            sock.send(req)
        while done < n_ops:
            for fd, _ in ep.poll(5.0) or [(None, None)]:
                if fd is None:
                    raise RuntimeError("bare loop: no reply in 5 s")
                c = conns[fd]
                sock, req, buf, got = c
                got += sock.recv_into(memoryview(buf)[got:])
                if got >= 4 and got >= int.from_bytes(buf[:4], "little"):
                    c[3] = 0
                    done += 1
                    sock.send(req)
                else:
                    c[3] = got
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        ep.close()
        for sock in socks:
            sock.close()
    return (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e6 / done


def scaling(client, uri: str, clients: int, seconds: float, processes: int) -> dict:
    """50/50 reads and updates by key over `processes` processes: cores used, ops/s."""
    e = exp_mod.load()["kv_read_update"]
    [v] = [x for x in e.resolve("smoke") if x.settings["driver"] == "pymongo"]
    v.settings.update(preload_docs=20000, threads=clients, duration_s=seconds, total_ops=None)
    res = perftables.run_variant(
        client, "bench_client", e, v, log=lambda m: None, os_path=False, uri=uri,
        processes=processes,
    )  # fmt: skip
    ops = sum(res["ops"].values())
    if res["errors"] or not ops:
        raise RuntimeError(f"scaling run: {res['errors']}")
    return {
        "processes": res["client_processes"],
        "capacity_cores": res["client_cores"],
        "cores_used": res["client_process_cpu_s"] / res["duration_s"],
        "ops_per_s": ops / res["duration_s"],
        "client_us_per_op": res["client_process_cpu_s"] * 1e6 / ops,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000, help="YCSB records (1 KB)")
    ap.add_argument("--threads", type=int, default=4, help="YCSB threads")
    ap.add_argument("--seconds", type=float, default=10, help="each YCSB / scaling window")
    ap.add_argument("--warmup", type=float, default=20, help="YCSB JIT warm-up (s)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=32, help="virtual clients when scaling")
    ap.add_argument("--processes", type=int, default=None, help="experiments' processes")
    ap.add_argument(
        "--min-ops",
        type=int,
        default=2000,
        help="count-based variants run at least this many operations (smoke scale gives"
        " some 64 over 32 fresh connections, whose first requests cost several times the"
        " steady state); 0: smoke scale as it is",
    )
    ap.add_argument(
        "--min-mb",
        type=float,
        default=50,
        help="bulk-insert variants load at least this many MB (smoke scale sends a few"
        " messages per client, whose fixed costs dominate); 0: smoke scale as it is",
    )
    ap.add_argument(
        "--no-native",
        action="store_true",
        help="skip the native floors (C replays of each variant's requests)",
    )
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    work, srv, uri_file = start_loaded_server("bench-client-", args.records)
    native = None if args.no_native else native_floor.build(work)
    ok = True
    try:
        print(f"server: {srv.kind}; YCSB {args.records} x 1 KB records, {args.threads} threads")
        ycsb_us = {"read": [], "update": []}
        costs: dict[str, list[dict]] = {}
        for r in range(args.rounds):  # interleaved: YCSB, then every experiment
            for name, reads in (("read", 1.0), ("update", 0.0)):
                us, rate = ycsb_round(
                    uri_file, work, args.records, args.threads, args.seconds, args.warmup, reads
                )
                ycsb_us[name].append(us)
                print(f"round {r + 1}: YCSB {name}: {us:6.1f} us/op ({rate:6.0f} ops/s)")
            found = experiment_costs(  # the native floors once, in the first round
                srv.uri, work, args.processes, args.min_ops, args.min_mb, native if r == 0 else None
            )
            for key, entry in found.items():
                costs.setdefault(key, []).append(entry)
        ycsb_mean = {k: statistics.mean(v) for k, v in ycsb_us.items()}
        limit = SINGLE_RATIO * statistics.mean(ycsb_mean.values())
        print(
            f"YCSB: read {ycsb_mean['read']:.1f} us/op, update {ycsb_mean['update']:.1f} us/op;"
            f" single-operation target <= {limit:.1f} us/op ({SINGLE_RATIO:g} x their mean)"
        )
        experiments, worst_single, worst_bulk = {}, 0.0, 0.0
        over_floor, floor_above_target = [], []
        for key, entries in costs.items():
            first = entries[0]
            busy = statistics.mean(e["client_busy"] for e in entries)
            entry = {
                "bulk": first["bulk"],
                "client_path": first["client_path"],
                "client_busy": busy,
            }
            floor = first.get("native")
            if first["bulk"]:
                us = statistics.mean(e["client_us_per_doc"] for e in entries)
                per_kb = us / max(1.0, float(first["doc_kb"]))
                entry["client_us_per_doc"] = us
                met = per_kb <= BULK_US_PER_KB
                worst_bulk = max(worst_bulk, per_kb)
                what = f"{us:7.2f} us/doc ({per_kb:5.2f} us per KB, target <= {BULK_US_PER_KB:g})"
                if floor is not None:
                    entry["native_floor_us_per_doc"] = floor
                    unreachable = floor / max(1.0, float(first["doc_kb"])) > BULK_US_PER_KB
            else:
                us = statistics.mean(e["client_us_per_op"] for e in entries)
                entry["client_us_per_op"] = us
                met = us <= limit
                worst_single = max(worst_single, us / limit * SINGLE_RATIO)
                what = f"{us:7.1f} us/op  ({us / limit * SINGLE_RATIO:4.2f} x YCSB)"
                if floor is not None:
                    entry["native_floor_us_per_op"] = floor
                    unreachable = floor > limit
            if floor is not None:
                what += f" native {floor:7.1f} ({us / floor:4.2f} x)"
                over_floor.append(us / floor)
                if unreachable:
                    floor_above_target.append(key)
            ok &= met
            experiments[key] = entry
            print(
                f"{'  ' if met else '! '}{key:58s} {what} busy {busy:4.0%} [{first['client_path']}]"
            )
        print(
            f"worst single-operation variant: {worst_single:.2f} x YCSB (target <= {SINGLE_RATIO});"
            f" worst bulk insert: {worst_bulk:.2f} us per KB (target <= {BULK_US_PER_KB:g})"
        )
        if over_floor:
            print(
                f"native floor: the client costs {min(over_floor):.2f}-{max(over_floor):.2f} x"
                f" (median {statistics.median(over_floor):.2f}) what a C loop pays for the same"
                f" requests and replies; for {len(floor_above_target)} of {len(over_floor)}"
                " variants that floor alone is above the target"
            )
        with MongoClient(srv.uri, maxPoolSize=args.clients + 10) as client:
            scale = [scaling(client, srv.uri, args.clients, args.seconds, p) for p in (1, 2)]
        for s in scale:
            print(
                f"scaling: {s['processes']} process(es): client CPU {s['cores_used']:.2f} of"
                f" {s['capacity_cores']} core(s), {s['ops_per_s']:8.0f} ops/s,"
                f" {s['client_us_per_op']:5.1f} us/op"
            )
        print(
            f"scaling: 2 processes / 1 = {scale[1]['ops_per_s'] / scale[0]['ops_per_s']:.2f} x"
            " throughput (the server shares this machine's cores)"
        )
        with MongoClient(srv.uri) as c:
            key = c["ycsb"]["usertable"].find_one()["_id"]
        floor = {str(n): bare_loop_us(srv.uri, key, n, BARE_LOOP_OPS) for n in BARE_LOOP_CLIENTS}
        print(
            "floor: a bare loop (pre-encoded finds by key, replies read, nothing checked or"
            " counted) with "
            + ", ".join(f"{n} clients costs {us:.1f} us/op" for n, us in floor.items())
            + f" ({min(floor.values()) / (limit / SINGLE_RATIO):.2f}-"
            f"{max(floor.values()) / (limit / SINGLE_RATIO):.2f} x YCSB)"
        )
        wakes = {f"{idle * 1e3:g} ms": wake_cost_us(idle, int(1 / idle)) for idle in WAKE_IDLE_S}
        print(
            "a wake-up after "
            + ", ".join(f"{k} idle costs {us:.0f} us" for k, us in wakes.items())
            + " of CPU here: a variant whose server is slow (low busy) pays one per reply"
        )
        native_wakes = {}
        if native:
            native_wakes = {
                f"{idle * 1e3:g} ms": native_floor.wake_us(native, idle, int(1 / idle))
                for idle in WAKE_IDLE_S
            }
            print(
                "the same wake-ups in C: "
                + ", ".join(f"{us:.0f} us" for us in native_wakes.values())
            )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(
                    {
                        "ycsb_us_per_op": ycsb_mean,
                        "experiments": experiments,
                        "scaling": scale,
                        "wake_us_after_idle": wakes,
                        "native_wake_us_after_idle": native_wakes,
                        "native_floor_above_target": floor_above_target,
                        "bare_loop_us_per_op": floor,
                    },
                    f,
                    indent=1,
                )
    finally:
        srv.stop()
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
