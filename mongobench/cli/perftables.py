"""`mongobench perftables list|run|follow`: the MongoDB Performance Tables experiments."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from pymongo.errors import PyMongoError

from mongobench.cli.options import (
    add_processes,
    add_rates,
    add_target,
    confirm,
    log,
    positive_int,
    positive_seconds,
    request_file,
    seconds_or_zero,
    subcommand,
    target_uri,
)
from mongobench.core import files, interrupt, redact
from mongobench.perftables import checks, coordination, runner, target
from mongobench.perftables import estimate as estimate_mod
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import report, results

_RUN_DEFAULTS = PerftablesRun()  # the flags' defaults: the request's
# The run options a `perftables run` flag gives; with --request the file gives them all.
_RUN_FLAGS = {
    f.name: ("set" if f.name == "overrides" else f.name) for f in dataclasses.fields(PerftablesRun)
}


def add(subparsers) -> argparse.ArgumentParser:
    """`mongobench perftables list|run|follow`."""
    pt = subcommand(
        subparsers,
        "perftables",
        "MongoDB Performance Tables experiments",
        "  mongobench perftables list\n"
        "  mongobench perftables run --uri-file target.uri --experiments insert_docsize\n",
    )
    pts = pt.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--scale", default=_RUN_DEFAULTS.scale, help=f"{', '.join(exp_mod.SCALES)} or a factor"
    )
    common.add_argument("--experiments-file", help="experiment declarations (YAML)")
    # Not `common`: list's scale defaults to the seed's full sizes (the labels it
    # prints as text are the same at every scale).
    ls = subcommand(
        pts,
        "list",
        "experiments and their variants: labels, nominal data volume and estimated time",
        "  mongobench perftables list                     # at the seed's full sizes\n"
        "  mongobench perftables list --scale smoke --experiments update_fields,replace\n"
        "  mongobench perftables list --format json --scale small > plan.json\n",
    )
    ls.add_argument("--scale", default="full", help=f"{', '.join(exp_mod.SCALES)} or a factor")
    ls.add_argument("--experiments-file", help="experiment declarations (YAML)")
    ls.add_argument(
        "--experiments", help="comma-separated experiment names (default: all), as run takes"
    )
    ls.add_argument(
        "--format", choices=("text", "json"), default="text",
        help="json: every variant's resolved settings at --scale, key_example, deviations",
    )  # fmt: skip
    add_rates(ls)
    ls.set_defaults(func=cmd_list)
    run = subcommand(
        pts,
        "run",
        "run experiments against a URI (prints the plan, its data volume and estimated time first)",
        "  mongobench perftables run --uri-file target.uri --experiments insert_docsize\n"
        "  mongobench perftables run --uri-env MONGO_URI --scale small --out r.json \\\n"
        "      --samples samples.json --set threads=32\n"
        "  mongobench perftables run --uri-file target.uri --scale full --yes   # hours\n",
        parents=[common],
    )
    add_target(run, with_uri=True)
    run.add_argument(
        "--request",
        metavar="FILE",
        help="the run options as JSON (a PerftablesRun: docs/perftables.md), instead of the"
        " run-option flags below; PKB writes one beside target.uri",
    )
    run.add_argument("--experiments", help="comma-separated names (default: all)")
    run.add_argument("--variants", help="variant labels separated by ';' (default: all)")
    run.add_argument("--skip", help="variants to leave out: 'experiment/label;experiment/label'")
    run.add_argument(
        "--database", default=_RUN_DEFAULTS.database, help="database the experiments own"
    )
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting")
    run.add_argument("--out", default=_RUN_DEFAULTS.out, help="raw results (JSON)")
    run.add_argument("--samples", help="also write the samples (JSON)")
    run.add_argument(
        "--os-path",
        default=None,
        help="sample OS metrics of the disk holding this path on this host ('none': off)",
    )
    run.add_argument(
        "--max-seconds", type=positive_seconds, help="cap on each timed phase (seconds > 0)"
    )
    run.add_argument(
        "--reply-timeout",
        type=positive_seconds,
        help="seconds any call waits for the server's reply before its variant fails"
        f" (default: the URI's timeoutMS or socketTimeoutMS, else {checks.DEFAULT_REPLY_TIMEOUT_S:g})",
    )
    run.add_argument(
        "--interval-s",
        type=seconds_or_zero,
        default=_RUN_DEFAULTS.interval_s,
        help="throughput, errors and latency percentiles of each timed phase per interval of"
        " this many seconds, on the clients' common clock (0: none; default: %(default)g)",
    )
    run.add_argument(
        "--client-path",
        choices=checks.CLIENT_PATHS,
        default=_RUN_DEFAULTS.client_path,
        help="client of the timed phases: multiplexed (virtual clients over --processes"
        " processes) or pymongo (the reference path: one thread per client, one process)",
    )
    add_processes(run)
    run.add_argument(
        "--client-vms",
        type=positive_int,
        default=_RUN_DEFAULTS.client_vms,
        help="client VMs sharing each timed phase: this one (the leader) and K-1 running"
        " 'perftables follow' with the same --run-id (multiplexed path only)",
    )
    run.add_argument("--run-id", help="names the run for its followers (with --client-vms)")
    run.add_argument(
        "--repeats",
        type=positive_int,
        default=_RUN_DEFAULTS.repeats,
        help="run each variant N times, interleaved across variants (rounds alternate"
        " direction); samples carry the mean, stdev and 95%% interval (t-distribution)",
    )
    run.add_argument(
        "--rate-steps",
        metavar="STEPS",
        help="a latency-versus-throughput curve of each (single-operation) variant: it runs"
        " closed loop, then in an open loop at each step's rate: 'auto' (0.1..1.2 of the"
        " closed loop's throughput), fractions of it ('0.25,0.5,1,1.5') or rates ('100/s,400/s')",
    )
    run.add_argument(
        "--auth-retry-s",
        type=seconds_or_zero,
        default=_RUN_DEFAULTS.auth_retry_s,
        help="retry an authentication failure on the first connection for this many seconds"
        " (a database user created just before, e.g. on Atlas, may not be applied yet)",
    )
    run.add_argument(
        "--yes", action="store_true", help="run without asking when the estimate is over an hour"
    )
    add_rates(run)
    run.set_defaults(
        func=cmd_run,
        run_flag_defaults={dest: run.get_default(dest) for dest in _RUN_FLAGS.values()},
    )
    fol = subcommand(
        pts,
        "follow",
        "run this client VM's share of a leader's timed phases (run --client-vms K)",
        "  # on client VM 0:\n"
        "  mongobench perftables run --uri-file t.uri --client-vms 2 --run-id r1\n"
        "  # on client VM 1:\n"
        "  mongobench perftables follow --uri-file t.uri --run-id r1 --client-index 1\n",
    )
    add_target(fol, with_uri=True)
    fol.add_argument("--run-id", required=True, help="the leader's --run-id")
    fol.add_argument(
        "--client-index", type=positive_int, required=True, help="this VM's index, 1..K-1"
    )
    add_processes(fol, os.cpu_count() or 1)
    fol.add_argument(
        "--leader-wait-s",
        type=positive_seconds,
        default=coordination.LEADER_WAIT_S,
        help="give up when no leader with --run-id has started within this many seconds"
        " (default: %(default)g)",
    )
    fol.set_defaults(func=cmd_follow)
    return pt


def _overrides(pairs: list[str] | None) -> dict:
    """--set key=value, typed and range-checked by the settings schema."""
    try:
        return exp_mod.parse_overrides(pairs, "--set")
    except exp_mod.ExperimentError as e:
        raise SystemExit(f"mongobench: {e}") from None


def cmd_list(args) -> int:
    try:
        catalog = exp_mod.load(args.experiments_file or exp_mod.PERFTABLES_FILE)
        chosen = exp_mod.select(catalog, exp_mod.split_list(args.experiments, "--experiments"))
        catalog = {e.name: e for e in chosen}
        planned = [(e, e.resolve(args.scale)) for e in catalog.values()]
        doc = exp_mod.listing(catalog, args.scale) if args.format == "json" else None
    except exp_mod.ExperimentError as e:
        raise SystemExit(f"mongobench: {e}") from None
    est = estimate_mod.estimate(planned, estimate_mod.rates_for(None, args.rates))
    if doc is not None:
        # everything of the listing, plus each variant's estimate and the total
        per = iter(est.variants)
        for e in doc["experiments"]:
            for v in e["variants"]:
                ve = next(per)
                v["nominal_data_bytes"] = round(ve.volume_bytes)
                v["estimated_seconds"] = round(ve.seconds, 1)
        doc["estimate"] = est.metadata()
        print(json.dumps(doc, indent=2))
        return 0
    by_exp: dict[str, list] = {}
    for v in est.variants:
        by_exp.setdefault(v.experiment, []).append(v)
    for e, resolved in planned:
        print(f"{e.name}: {e.title} [{e.workload}]")
        for v, rv in zip(by_exp.get(e.name, []), resolved, strict=True):
            labels = ", ".join(
                f"{k}={val!r}"
                if isinstance(val, str) and "," in val
                else f"{k}={exp_mod.ran_as_text(rv.settings, k, val)}"
                for k, val in v.labels.items()
            )
            # a setting the scale changed that is not in the label (insert_docsize's batches)
            labels += "".join(
                f", {k[len(exp_mod.RAN_AS) :]} ran as {real}"
                for k, real in rv.settings.items()
                if k.startswith(exp_mod.RAN_AS) and k[len(exp_mod.RAN_AS) :] not in v.labels
            )
            size = estimate_mod.human_bytes(v.volume_bytes)
            took = estimate_mod.human_seconds(v.seconds)
            print(f"  {labels:<58} {size:>9}  ~{took}")
    print(f"total at scale {args.scale}: {est.summary()}")
    return 0


def cmd_follow(args) -> int:
    uri = target_uri(args)
    try:
        with target.connect(uri) as client:
            n = coordination.follow(
                client, uri, args.run_id, args.client_index, args.processes, log=log,
                leader_wait_s=args.leader_wait_s,
            )  # fmt: skip
    except (PyMongoError, coordination.CoordinationError) as e:
        raise SystemExit(f"mongobench: {redact.text(str(e), uri)}") from None
    log(f"client VM {args.client_index}: the leader is done after {n} timed phase(s)")
    return 0


def run_request(args) -> PerftablesRun:
    """The run's request, validated: from --request FILE, else built from the flags (one
    line naming the option and the value, never a traceback)."""
    try:
        if args.request:
            return request_file(args, _RUN_FLAGS, PerftablesRun)
        return PerftablesRun(
            experiments=exp_mod.split_list(args.experiments, "--experiments"),
            scale=args.scale,
            experiments_file=args.experiments_file,
            variants=exp_mod.split_list(args.variants, "--variants", sep=";"),
            skip=args.skip,
            database=args.database,
            overrides=_overrides(args.set),
            out=args.out,
            samples=args.samples,
            os_path=args.os_path,
            max_seconds=args.max_seconds,
            reply_timeout=args.reply_timeout,
            interval_s=args.interval_s,
            client_path=args.client_path,
            processes=args.processes,
            client_vms=args.client_vms,
            run_id=args.run_id,
            repeats=args.repeats,
            rate_steps=args.rate_steps,
            auth_retry_s=args.auth_retry_s,
        ).validate()
    except ValueError as e:  # RequestError, ExperimentError, OutputError
        raise SystemExit(f"mongobench: {e}") from None


def cmd_run(args) -> int:
    request = run_request(args)
    uri = target_uri(args)
    try:
        # the URI's write concern joins the overrides; then the one plan of this run
        request = request.for_target(uri, log)
        planned = request.plans
    except ValueError as e:  # ExperimentError (the experiments file, skip, variants)
        raise SystemExit(f"mongobench: {e}") from None
    # rate steps run each variant once closed loop and once per step (at least as long)
    est = estimate_mod.estimate(planned, estimate_mod.rates_for(uri, args.rates), request.runs)
    log(f"plan: {est.summary()}; scale {request.scale}; results to {request.out}")
    confirm(est.seconds, args.yes, "this run")
    started = time.monotonic()
    try:
        run = runner.run(request, uri, log=log, bar=sys.stderr.isatty(), estimate=est.metadata())
    except (exp_mod.ExperimentError, redact.TargetError) as e:
        # One last line on stderr: PKB's module makes it the run's status detail.
        raise SystemExit(f"mongobench: {e}") from None
    except KeyboardInterrupt as e:  # SIGTERM or SIGINT: the partial results are written
        run = getattr(e, "run", None)
        if run is not None and request.samples:
            files.write_json_atomic(request.samples, results.run_samples(run))
        sig = interrupt.of(e)
        what = (run or {}).get("interrupted") or sig.name
        kept = f"; {len(run['results'])} variant result(s) in {request.out}" if run else ""
        log(f"mongobench: stopped by {what}{kept}")
        return sig.exit_status
    wall = time.monotonic() - started
    estimate_mod.record(uri, run["results"], wall, args.rates)
    log(
        f"took {estimate_mod.human_seconds(wall)} (estimated {estimate_mod.human_seconds(est.seconds)})"
    )
    samples = results.run_samples(run)  # failed and n/a variants too
    if request.samples:
        files.write_json_atomic(request.samples, samples)
    print(report.render(samples, request.catalog))
    bad = results.failed(run)
    for r in results.not_applicable(run):
        log(f"n/a {r['experiment']} [{r['label']}]: {r['reason']}")
    for r in bad:
        log(f"FAILED {r['experiment']} [{r['label']}]: {r['error']}")
    if run.get("unreachable"):
        log(f"mongobench: {run['unreachable']}")
    return 1 if bad or run.get("unreachable") else 0
