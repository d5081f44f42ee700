"""`mongobench`: the engine's command line, no PKB needed.

mongobench perftables list
mongobench perftables run --uri-file F [--experiments a,b] [--scale smoke] [--out r.json]
mongobench report --results perfkitbenchmarker_results.json [...] [--out report.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from mongobench.core import files, interrupt, names, redact
from mongobench.core.markdown import md_table
from mongobench.core.pairs import parse_pairs
from mongobench.core.units import MB, MiB
from mongobench.deploy import topology
from mongobench.perftables import checks, coordination, progress, runner
from mongobench.perftables import estimate as estimate_mod
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun
from mongobench.remote import javabuild, provenance
from mongobench.reports import caption, loader, report, results, sections
from mongobench.reports import runs as report_runs
from mongobench.reports.compare import compare
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


def _overrides(pairs: list[str] | None) -> dict:
    """--set key=value, typed and range-checked by the settings schema."""
    try:
        return exp_mod.parse_overrides(pairs, "--set")
    except exp_mod.ExperimentError as e:
        raise SystemExit(f"mongobench: {e}") from None


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (the test bed's command line uses it too)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _seconds_or_zero(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return value


def _add_target(parser, with_uri: bool = False) -> None:
    """The target connection string: exactly one of a file, an environment variable or
    (visible to other users, so only where a one-off run may want it) the string itself."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--uri-file", help="file holding the connection string (keeps secrets off argv)"
    )
    target.add_argument("--uri-env", help="environment variable holding the connection string")
    if with_uri:
        target.add_argument("--uri", help="connection string (visible in the process list)")


def _add_rates(parser) -> None:
    parser.add_argument(
        "--rates",
        choices=tuple(estimate_mod.DEFAULT_RATES),
        default="mongod",
        help="rate table of the estimate when no earlier run against the target"
        " recorded one (standin: the test bed's stand-in)",
    )


EXAMPLES = """examples:
  mongobench --version
  mongobench perftables list --scale smoke
  mongobench perftables run --uri-file target.uri --experiments insert_docsize --scale smoke
  mongobench report --results perfkitbenchmarker_results.json --out report.md
  mongobench report --results perftables-results.json --out report.md
  mongobench sweep run --uri-file target.uri --sizes 1,2 --out results.json
  mongobench compare --results a.json b.json --out report.md

In a checkout, mongobench is .venv/bin/mongobench (scripts/setup makes it).
`mongobench COMMAND --help` shows each command's options and examples."""


def _add_processes(parser, default: int | None = None) -> None:
    parser.add_argument(
        "--processes",
        type=positive_int,
        default=default,
        help="worker processes of the multiplexed path (default: this machine's CPUs)",
    )


def _log(msg: str) -> None:
    # Through tqdm: with a progress bar on the terminal, lines print above it.
    progress.write(msg)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help with each option's default (unless its text already names one, or it has none)
    and the examples epilog as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (
            "(default" in text
            or action.default in (None, False, argparse.SUPPRESS)
            or action.required
            or not (action.option_strings or action.nargs in ("?", "*"))
        ):
            return text
        return text + " (default: %(default)s)"


class _Version(argparse.Action):
    """--version: the package version (+g<commit> in a git checkout), computed when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kw):
        kw.setdefault("help", "print mongobench's version and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"mongobench {provenance.version_string(provenance.build_info())}")
        parser.exit()


def _sub(subparsers, name: str, help: str, examples: str = "", **kw) -> argparse.ArgumentParser:
    """A sub-command with the project's help format and an examples epilog."""
    epilog = "examples:\n" + examples.strip("\n") if examples else None
    # No abbreviations: `--experiments` was taken for `--experiments-file` where only the
    # latter existed, and a prefix of today's option would change meaning with tomorrow's.
    return subparsers.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=_Formatter,
        allow_abbrev=False,
        **kw,
    )


def _confirm(seconds: float, yes: bool, what: str) -> None:
    """Above an hour, asks on a terminal; refuses without one unless --yes."""
    if yes or seconds <= estimate_mod.CONFIRM_ABOVE_S:
        return
    took = estimate_mod.human_seconds(seconds)
    if not sys.stdin.isatty():
        raise SystemExit(
            f"mongobench: {what} is estimated at {took}, over an hour, and stdin is not a"
            " terminal to ask: pass --yes to run it"
        )
    answer = input(f"{what} is estimated at {took}. Run it? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise SystemExit("mongobench: not run")


def cmd_perftables_list(args) -> int:
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


def _target_uri(args) -> str:
    """The connection string from --uri-file, --uri-env or --uri, checked; exits with one
    line that never holds the secret."""
    source = (
        f"--uri-file {args.uri_file}"
        if args.uri_file
        else f"--uri-env {args.uri_env}"
        if args.uri_env
        else "--uri"
    )
    try:
        uri = redact.check_uri(redact.read_uri(args.uri, args.uri_file, args.uri_env), source)
    except UnicodeDecodeError:
        raise SystemExit(f"mongobench: {source}: not a text file") from None
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench: {e}") from None
    if args.uri:
        _log("warning: a URI on the command line is visible to other users; prefer --uri-file")
    return uri


def cmd_perftables_follow(args) -> int:
    uri = _target_uri(args)
    try:
        with runner.connect(uri) as client:
            n = coordination.follow(
                client, uri, args.run_id, args.client_index, args.processes, log=_log,
                leader_wait_s=args.leader_wait_s,
            )  # fmt: skip
    except (PyMongoError, coordination.CoordinationError) as e:
        raise SystemExit(f"mongobench: {redact.text(str(e), uri)}") from None
    _log(f"client VM {args.client_index}: the leader is done after {n} timed phase(s)")
    return 0


_RUN_DEFAULTS = PerftablesRun()  # the flags' defaults: the request's
# The run options a `perftables run` flag gives; with --request the file gives them all.
_RUN_FLAGS = {
    f.name: ("set" if f.name == "overrides" else f.name) for f in dataclasses.fields(PerftablesRun)
}


def _request_file(args, flags: dict[str, str], request_cls):
    """The request in --request FILE (request_cls.read), refused beside any run-option flag
    given on the command line (`flags`: field -> argparse dest): the file holds them all."""
    defaults = args.run_flag_defaults
    given = [
        request_cls.default_name(field)
        for field, dest in flags.items()
        if getattr(args, dest) != defaults[dest]
    ]
    if given:
        raise ValueError(
            f"--request {args.request} holds every run option; leave out"
            f" {', '.join(given)} (or leave out --request)"
        )
    return request_cls.read(args.request)


def _run_request(args) -> PerftablesRun:
    """The run's request, validated: from --request FILE, else built from the flags (one
    line naming the option and the value, never a traceback)."""
    try:
        if args.request:
            return _request_file(args, _RUN_FLAGS, PerftablesRun)
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


def cmd_perftables_run(args) -> int:
    request = _run_request(args)
    uri = _target_uri(args)
    try:
        # the URI's write concern joins the overrides; then the one plan of this run
        request = request.for_target(uri, _log)
        planned = request.plans
    except ValueError as e:  # ExperimentError (the experiments file, skip, variants)
        raise SystemExit(f"mongobench: {e}") from None
    # rate steps run each variant once closed loop and once per step (at least as long)
    est = estimate_mod.estimate(planned, estimate_mod.rates_for(uri, args.rates), request.runs)
    _log(f"plan: {est.summary()}; scale {request.scale}; results to {request.out}")
    _confirm(est.seconds, args.yes, "this run")
    started = time.monotonic()
    try:
        run = runner.run(request, uri, log=_log, bar=sys.stderr.isatty(), estimate=est.metadata())
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
        _log(f"mongobench: stopped by {what}{kept}")
        return sig.exit_status
    wall = time.monotonic() - started
    estimate_mod.record(uri, run["results"], wall, args.rates)
    _log(
        f"took {estimate_mod.human_seconds(wall)} (estimated {estimate_mod.human_seconds(est.seconds)})"
    )
    samples = results.run_samples(run)  # failed and n/a variants too
    if request.samples:
        files.write_json_atomic(request.samples, samples)
    print(report.render(samples, request.catalog))
    bad = results.failed(run)
    for r in results.not_applicable(run):
        _log(f"n/a {r['experiment']} [{r['label']}]: {r['reason']}")
    for r in bad:
        _log(f"FAILED {r['experiment']} [{r['label']}]: {r['error']}")
    if run.get("unreachable"):
        _log(f"mongobench: {run['unreachable']}")
    return 1 if bad or run.get("unreachable") else 0


def cmd_report(args) -> int:
    try:
        loaded = [(path, loader.load(path)) for path in args.results]
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench report: {e}") from None
    samples = [s for _, got in loaded for s in got]
    sweeps = report_runs.sweep_runs(loaded)
    stresses = report_runs.stress_runs(loaded)
    perftables = report.group(samples) or report.rate_curves(samples)
    if not perftables and not sweeps and not stresses:
        # An empty report with exit status 0 looked like success.
        what = (
            f"{len(samples)} sample(s), none of them a Performance Tables, sweep or stress sample"
        )
        raise SystemExit(f"mongobench report: {' '.join(args.results)}: {what}")
    plots = args.plots_dir
    try:
        if args.out:
            files.check_output(args.out, "--out")
        if plots:
            files.check_output_dir(plots, "--plots-dir")
        elif args.out and files.is_regular_or_absent(args.out):
            # plots/ beside a report file; none beside /dev/stdout and friends
            plots = os.path.join(os.path.dirname(os.path.abspath(args.out)), "plots")
        ref = (
            os.path.relpath(plots, os.path.dirname(os.path.abspath(args.out)))
            if plots and args.out
            else plots
        )
        text = ""
        if perftables:
            text = report.render(samples, plots_dir=plots, plots_ref=ref)
        if sweeps or stresses:
            lines = sections.sweep_section(sweeps, plots, ref)[0] if sweeps else []
            lines += sections.stress_section(stresses, plots, ref)[0] if stresses else []
            heading = "# MongoDB dataset-size sweep" if not stresses else "# MongoDB stress"
            if sweeps and stresses:
                heading = "# YCSB"
            text = (text + "\n# YCSB\n") if text else heading + "\n"
            text += "\n" + "\n".join(lines)
        if args.out:
            files.write_text(args.out, text)
            _log(f"wrote {args.out}")
        else:
            print(text)
    except (OSError, ValueError) as e:
        why = f"{args.out}: {e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
        raise SystemExit(f"mongobench report: {why}") from None
    return 0


def cmd_topology_up(args) -> int:
    with open(args.plan) as f:
        plan = json.load(f)
    _log(
        f"topology: {len(plan.get('replsets', []))} replica set(s),"
        f" {len(plan.get('admin_commands', []))} admin command(s)"
    )
    # No credentials: self-managed deployments are started without auth.
    state = topology.run_plan(
        plan,
        lambda uri: MongoClient(uri, serverSelectionTimeoutMS=30000),
        timeout=args.timeout,
    )
    print(json.dumps(state))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mongobench",
        description=__doc__.splitlines()[0],
        formatter_class=_Formatter,
        epilog=EXAMPLES,
        allow_abbrev=False,
    )
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)

    pt = _sub(
        sub,
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
    ls = _sub(
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
    _add_rates(ls)
    ls.set_defaults(func=cmd_perftables_list)
    run = _sub(
        pts,
        "run",
        "run experiments against a URI (prints the plan, its data volume and estimated time first)",
        "  mongobench perftables run --uri-file target.uri --experiments insert_docsize\n"
        "  mongobench perftables run --uri-env MONGO_URI --scale small --out r.json \\\n"
        "      --samples samples.json --set threads=32\n"
        "  mongobench perftables run --uri-file target.uri --scale full --yes   # hours\n",
        parents=[common],
    )
    _add_target(run, with_uri=True)
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
        "--max-seconds", type=_positive_seconds, help="cap on each timed phase (seconds > 0)"
    )
    run.add_argument(
        "--reply-timeout",
        type=_positive_seconds,
        help="seconds any call waits for the server's reply before its variant fails"
        f" (default: the URI's timeoutMS or socketTimeoutMS, else {checks.DEFAULT_REPLY_TIMEOUT_S:g})",
    )
    run.add_argument(
        "--interval-s",
        type=_seconds_or_zero,
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
    _add_processes(run)
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
        type=_seconds_or_zero,
        default=_RUN_DEFAULTS.auth_retry_s,
        help="retry an authentication failure on the first connection for this many seconds"
        " (a database user created just before, e.g. on Atlas, may not be applied yet)",
    )
    run.add_argument(
        "--yes", action="store_true", help="run without asking when the estimate is over an hour"
    )
    _add_rates(run)
    run.set_defaults(
        func=cmd_perftables_run,
        run_flag_defaults={dest: run.get_default(dest) for dest in _RUN_FLAGS.values()},
    )
    fol = _sub(
        pts,
        "follow",
        "run this client VM's share of a leader's timed phases (run --client-vms K)",
        "  # on client VM 0:\n"
        "  mongobench perftables run --uri-file t.uri --client-vms 2 --run-id r1\n"
        "  # on client VM 1:\n"
        "  mongobench perftables follow --uri-file t.uri --run-id r1 --client-index 1\n",
    )
    _add_target(fol, with_uri=True)
    fol.add_argument("--run-id", required=True, help="the leader's --run-id")
    fol.add_argument(
        "--client-index", type=positive_int, required=True, help="this VM's index, 1..K-1"
    )
    _add_processes(fol, os.cpu_count() or 1)
    fol.add_argument(
        "--leader-wait-s",
        type=_positive_seconds,
        default=coordination.LEADER_WAIT_S,
        help="give up when no leader with --run-id has started within this many seconds"
        " (default: %(default)g)",
    )
    fol.set_defaults(func=cmd_perftables_follow)

    rp = _sub(
        sub,
        "report",
        "markdown tables (the seed's layout) and plots from PKB results or the engine's --out files",
        "  mongobench report --results runs/*/perfkitbenchmarker_results.json --out report.md\n"
        "  mongobench report --results perftables-results.json     # tables on stdout, no plots\n"
        "  mongobench report --results sweep-results.json --out sweep.md\n",
    )
    rp.add_argument(
        "--results",
        "--pkb-results",
        dest="results",
        nargs="+",
        required=True,
        metavar="FILE",
        help="results files: PKB's (perfkitbenchmarker_results.json), `perftables run --out`"
        " or --samples, `sweep run --out`; with several, the tables get a Run column and"
        " rows per run",
    )
    rp.add_argument("--out", help="markdown file (default: stdout)")
    rp.add_argument("--plots-dir", help="PNG plots (default: plots/ beside --out; none on stdout)")
    rp.set_defaults(func=cmd_report)

    tp = _sub(
        sub,
        "topology",
        "initiate replica sets and shards from a plan (JSON)",
        "  mongobench topology up --plan plan.json --timeout 600\n",
    )
    tps = tp.add_subparsers(dest="action", required=True)
    up = _sub(
        tps,
        "up",
        "initiate, wait for primaries, run mongos admin commands",
        "  mongobench topology up --plan plan.json\n",
    )
    up.add_argument(
        "--plan", required=True, help="plan file (see mongobench.deploy.topology.run_plan)"
    )
    up.add_argument("--timeout", type=float, default=300.0, help="seconds per replica set")
    up.set_defaults(func=cmd_topology_up)
    _add_compare(sub)
    _add_sweep(sub)
    return p


def cmd_compare(args) -> int:
    try:
        labels = parse_pairs(args.label, "--label")
        prices = parse_pairs(args.price, "--price", number=True)
        _, plots = compare(
            args.results,
            args.out,
            args.plots_dir,
            labels,
            prices,
            args.title,
            baseline=args.baseline,
        )
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench compare: {e}") from None
    print(f"wrote {args.out} and {len(plots)} plot(s)", file=sys.stderr)
    return 0


def _add_compare(subparsers) -> argparse.ArgumentParser:
    """`mongobench compare --results F1 F2 ... --out report.md`."""
    p = _sub(
        subparsers,
        "compare",
        "one markdown report with plots comparing several results files",
        "  mongobench compare --results a.json b.json --out report.md\n"
        "  mongobench compare --results a.json b.json --label a.json=before \\\n"
        "      --label b.json=after --baseline before --price n2-standard-4=0.19 --out report.md\n",
    )
    p.add_argument(
        "--results",
        "--pkb-results",
        dest="results",
        nargs="+",
        required=True,
        metavar="FILE",
        help="results files, one run or more each: PKB's (perfkitbenchmarker_results.json),"
        " `perftables run --out` or --samples, `sweep run --out`",
    )
    p.add_argument(
        "--label",
        action="append",
        metavar="FILE=NAME",
        help="name the run(s) of FILE (default: machine type / disk type / Atlas tier)",
    )
    p.add_argument(
        "--price",
        action="append",
        metavar="NAME=USD",
        help="hourly price of a run label, machine type or tier (ops per dollar)",
    )
    p.add_argument("--out", required=True, help="markdown report")
    p.add_argument("--plots-dir", help="PNG plots (default: <out stem>-plots beside --out)")
    p.add_argument("--title", default="MongoDB benchmark comparison", help="the report's heading")
    p.add_argument(
        "--baseline",
        metavar="LABEL",
        help="the run the others are compared with: adds their %% change against it",
    )
    p.set_defaults(func=cmd_compare)
    return p


# ----------------------------------------------------------------------------- CLI


_SWEEP_DEFAULTS = SweepRun()  # the flags' defaults: the request's
# The run options a `sweep run` flag gives (field -> argparse dest); with --request the
# file gives them all.
_SWEEP_FLAGS = {
    f.name: {"sizes_mb": "sizes", "operation_count": "operations"}.get(f.name, f.name)
    for f in dataclasses.fields(SweepRun)
}


def _sweep_request(args) -> SweepRun:
    """The sweep's request, validated: from --request FILE, else built from the flags (one
    line naming the option and the value, never a traceback)."""
    try:
        if args.request:
            return _request_file(args, _SWEEP_FLAGS, SweepRun)
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
    request = _sweep_request(args)
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
    _confirm(est.seconds, args.yes, "this sweep")
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


def _add_sweep(subparsers) -> argparse.ArgumentParser:
    """`mongobench sweep plan|run|drop`."""
    p = _sub(
        subparsers,
        "sweep",
        "YCSB dataset-size sweep (seed 002)",
        "  mongobench sweep plan --sizes 1,10,10000 --memory-mb 8192\n"
        "  mongobench sweep run --uri-file target.uri --sizes 1,2 --out results.json\n",
    )
    sub = p.add_subparsers(dest="action", required=True)
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
    pl = _sub(
        sub,
        "plan",
        "sizes, record counts, memory flags, data volume and estimated time",
        "  mongobench sweep plan\n  mongobench sweep plan --sizes 1,10,10000 --memory-mb 8192\n",
        parents=[sizes],
    )
    pl.add_argument(
        "--phases", default="all", help="load,read_only,update_only,read_update, or all"
    )
    _add_rates(pl)
    pl.set_defaults(func=cmd_plan)

    run = _sub(
        sub,
        "run",
        "run the sweep here against a URI (prints its data volume and estimated time first)",
        "  mongobench sweep run --uri-file target.uri --sizes 1,2 --out results.json\n"
        "  mongobench sweep run --uri-env MONGO_URI --phases read_only --raw-dir ycsb-out\n"
        "  mongobench sweep run --uri-file target.uri --yes           # the default sizes: hours\n",
        parents=[sizes],
    )
    _add_target(run)
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
    _add_rates(run)
    run.set_defaults(
        func=cmd_run,
        run_flag_defaults={dest: run.get_default(dest) for dest in _SWEEP_FLAGS.values()},
    )

    dr = _sub(
        sub,
        "drop",
        "drop the sweep's collection; print the server's memory (JSON)",
        "  mongobench sweep drop --uri-file target.uri --table usertable\n",
    )
    _add_target(dr)
    dr.add_argument("--table", default=_SWEEP_DEFAULTS.table, help="collection to drop")
    dr.set_defaults(func=cmd_drop)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with interrupt.installed():  # SIGTERM and SIGINT: stop in order, one line
            return args.func(args)
    except KeyboardInterrupt as e:
        sig = interrupt.of(e)
        print(f"mongobench: stopped by {sig.name}", file=sys.stderr)
        return sig.exit_status
    except BrokenPipeError:
        # the reader of stdout went away (`| head`): no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
