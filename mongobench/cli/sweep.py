"""`mongobench sweep plan|run|drop`: the YCSB dataset-size sweep (seed 002)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

from mongobench.cli.options import (
    add_rates,
    add_target,
    confirm,
    positive_int,
    request_file,
    subcommand,
)
from mongobench.core import names, redact
from mongobench.core.markdown import md_table
from mongobench.core.pairs import parse_pairs
from mongobench.core.units import MB, MiB
from mongobench.perftables import estimate as estimate_mod
from mongobench.remote import javabuild
from mongobench.reports import caption
from mongobench.sweep import estimate as sweep_estimate
from mongobench.sweep import request as sweep_request
from mongobench.sweep.plan import SweepError
from mongobench.sweep.request import SweepRun
from mongobench.sweep.runner import (
    drop_collection,
    host_memory_bytes,
    run_sweep,
    server_facts,
    server_memory_bytes,
)
from mongobench.sweep.samples import failed, table_text, yes_no

_SWEEP_DEFAULTS = SweepRun()  # the flags' defaults: the request's
# The run options a `sweep run` flag gives (field -> argparse dest); with --request the
# file gives them all.
_SWEEP_FLAGS = {
    f.name: {"sizes_mb": "sizes", "operation_count": "operations"}.get(f.name, f.name)
    for f in dataclasses.fields(SweepRun)
}


def run_request(args) -> SweepRun:
    """The sweep's request, validated: from --request FILE, else built from the flags (one
    line naming the option and the value, never a traceback)."""
    try:
        if args.request:
            return request_file(args, _SWEEP_FLAGS, SweepRun)
        metadata = parse_pairs(args.metadata, "--metadata", form="key=value", require_value=False)
        return SweepRun(
            sizes_mb=sweep_request.sizes_option(args.sizes, "--sizes"),
            phases=sweep_request.phases_option(args.phases),
            operation_count=args.operations,
            threads=args.threads,
            memory_mb=args.memory_mb,
            max_seconds=args.max_seconds,
            phase_timeout=args.phase_timeout,
            load_batchsize=args.load_batchsize,
            table=args.table,
            keep_data=args.keep_data,
            repeats=args.repeats,
            status_interval_s=args.status_interval_s,
            out=args.out,
            raw_dir=args.raw_dir,
            metadata=metadata,
            run_uri=args.run_uri,
        ).validate()
    except ValueError as e:  # RequestError (a SweepError), OutputError, --metadata
        raise SystemExit(f"mongobench: {e}") from None


def cmd_plan(args) -> int:
    try:  # the options `sweep plan` shares with `sweep run`, checked as run checks them
        request = SweepRun(
            sizes_mb=sweep_request.sizes_option(args.sizes, "--sizes"),
            phases=sweep_request.phases_option(args.phases),
            operation_count=args.operations,
            memory_mb=args.memory_mb,
        ).validate()
    except ValueError as e:
        raise SystemExit(f"mongobench: {e}") from None
    memory, source = request.memory
    if memory is None:
        memory, source = host_memory_bytes(), "this host"
    steps = request.steps(memory, source)
    print(f"memory: {round(memory / MiB) if memory else 'unknown'} MiB ({source})")
    rows = [
        [s.label, s.records, s.operations, f"{s.dataset_bytes / MB:g}", yes_no(s.exceeds_memory)]
        for s in steps
    ]
    headers = ["Size", "Records", "Operations per run", "Dataset (MB)", "> memory"]
    print(md_table(headers, rows, ["--:", "--:", "--:", "--:", ":--"]))
    rates = sweep_estimate.rates_for(None, args.rates)
    print(f"plan: {sweep_estimate.estimate(steps, request.phase_list, rates).summary()}")
    return 0


def cmd_run(args) -> int:
    request = run_request(args)
    uri_file = args.uri_file
    tmp = None
    try:
        uri = redact.read_uri(uri_file=args.uri_file, env=args.uri_env)
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench: {e}") from None
    rates = sweep_estimate.rates_for(uri, args.rates)
    est = sweep_estimate.estimate(request.steps(), request.phase_list, rates, request.repeats)
    where = f"results to {request.out}" if request.out else "no results file (--out)"
    print(f"sweep: plan: {est.summary()}; {where}", file=sys.stderr)
    confirm(est.seconds, args.yes, "this sweep")
    try:  # a regular install has no jars yet: build them as the PKB path does
        javabuild.ensure_built(lambda line: print(line, file=sys.stderr))
    except RuntimeError as e:
        raise SystemExit(f"mongobench: {e}") from None
    if args.uri_env:
        fd, tmp = tempfile.mkstemp(prefix="mongobench-uri-")  # 0600: YCSB reads the URI here
        with os.fdopen(fd, "w") as f:
            f.write(uri + "\n")
        uri_file = tmp
    started = time.monotonic()
    try:
        samples = run_sweep(request, uri_file, extra_metadata=est.metadata())
    except (SweepError, OSError, ValueError) as e:
        raise SystemExit(f"mongobench: {e}") from None
    finally:
        if tmp:
            os.remove(tmp)
    wall = time.monotonic() - started
    sweep_estimate.record(uri, samples, wall)
    print(
        f"sweep: took {estimate_mod.human_seconds(wall)}"
        f" (estimated {estimate_mod.human_seconds(est.seconds)})",
        file=sys.stderr,
    )
    print(f"{table_text(samples)}\n\n{caption.sweep_line(samples)}")
    if request.out:
        print(f"wrote {request.out}", file=sys.stderr)
    return 1 if failed(samples) else 0


def cmd_drop(args) -> int:
    try:
        names.check_collection(args.table, "--table")
        uri = redact.read_uri(uri_file=args.uri_file, env=args.uri_env)
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench: {e}") from None
    drop_collection(uri, args.table)
    memory = server_memory_bytes(uri)
    result = {"dropped": args.table, "server_memory_mb": round(memory / MiB) if memory else None}
    print(json.dumps({**result, **server_facts(uri)}))
    return 0


def add(subparsers) -> argparse.ArgumentParser:
    """`mongobench sweep plan|run|drop`."""
    p = subcommand(
        subparsers,
        "sweep",
        "YCSB dataset-size sweep (seed 002)",
        "  mongobench sweep plan --sizes 1,10,10000 --memory-mb 8192\n"
        "  mongobench sweep run --uri-file target.uri --sizes 1,2 --out results.json\n",
    )
    actions = p.add_subparsers(dest="action", required=True)
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument(
        "--sizes",
        default=",".join(f"{s:g}" for s in _SWEEP_DEFAULTS.sizes_mb),
        help="dataset sizes in MB of 1 KB records (default: %(default)s)",
    )
    sizes.add_argument(
        "--operations", type=int, help="operations per workload (default: the record count)"
    )
    sizes.add_argument(
        "--memory-mb",
        type=float,
        help="memory (MiB) of the machine holding the data, for exceeds_memory (default, run:"
        " the server's hostInfo, else this host's; plan: this host's)",
    )
    pl = subcommand(
        actions,
        "plan",
        "sizes, record counts, memory flags, data volume and estimated time",
        "  mongobench sweep plan\n  mongobench sweep plan --sizes 1,10,10000 --memory-mb 8192\n",
        parents=[sizes],
    )
    pl.add_argument(
        "--phases", default="all", help="load,read_only,update_only,read_update, or all"
    )
    add_rates(pl)
    pl.set_defaults(func=cmd_plan)

    run = subcommand(
        actions,
        "run",
        "run the sweep here against a URI (prints its data volume and estimated time first)",
        "  mongobench sweep run --uri-file target.uri --sizes 1,2 --out results.json\n"
        "  mongobench sweep run --uri-env MONGO_URI --phases read_only --raw-dir ycsb-out\n"
        "  mongobench sweep run --uri-file target.uri --yes           # the default sizes: hours\n",
        parents=[sizes],
    )
    add_target(run)
    run.add_argument(
        "--request",
        metavar="FILE",
        help="the run options as JSON (a SweepRun: docs/sweep.md), instead of the run-option flags",
    )
    run.add_argument("--out", help="results file (PKB results format, one JSON sample a line)")
    run.add_argument("--phases", default="all", help="load,read_only,update_only,read_update")
    run.add_argument(
        "--threads", type=int, default=_SWEEP_DEFAULTS.threads, help="YCSB client threads"
    )
    run.add_argument("--max-seconds", type=int, help="cap on each phase (YCSB maxexecutiontime)")
    run.add_argument(
        "--phase-timeout",
        type=int,
        help="seconds before a phase's YCSB process is stopped and the phase failed (default:"
        f" --max-seconds + {sweep_request.LOCAL_GRACE_S}, else none)",
    )
    run.add_argument("--load-batchsize", type=int, help="insert batch size of the load")
    run.add_argument(
        "--table", default=_SWEEP_DEFAULTS.table, help="collection (dropped at each size)"
    )
    run.add_argument("--keep-data", action="store_true", help="leave the last size's data")
    run.add_argument("--raw-dir", help="keep every YCSB output (redacted) here")
    run.add_argument("--metadata", action="append", metavar="KEY=VALUE", help="add to every sample")
    run.add_argument("--run-uri", help="run id written into the results (default: random)")
    run.add_argument(
        "--repeats",
        type=positive_int,
        default=_SWEEP_DEFAULTS.repeats,
        help="run each size's run phases N times, interleaved (the load once); samples"
        " carry the mean, stdev and 95%% interval",
    )
    run.add_argument(
        "--status-interval-s",
        type=positive_int,
        default=_SWEEP_DEFAULTS.status_interval_s,
        help="seconds between YCSB's status lines (status.interval), the interval of each"
        " phase's time series (default %(default)s)",
    )
    run.add_argument(
        "--yes", action="store_true", help="run without asking when the estimate is over an hour"
    )
    add_rates(run)
    run.set_defaults(
        func=cmd_run,
        run_flag_defaults={dest: run.get_default(dest) for dest in _SWEEP_FLAGS.values()},
    )

    dr = subcommand(
        actions,
        "drop",
        "drop the sweep's collection; print the server's memory (JSON)",
        "  mongobench sweep drop --uri-file target.uri --table usertable\n",
    )
    add_target(dr)
    dr.add_argument("--table", default=_SWEEP_DEFAULTS.table, help="collection to drop")
    dr.set_defaults(func=cmd_drop)
    return p
