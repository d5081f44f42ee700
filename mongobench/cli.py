"""`mongobench`: the engine's command line, no PKB needed.

mongobench perftables list
mongobench perftables run --uri-file F [--experiments a,b] [--scale smoke] [--out r.json]
mongobench report --pkb-results perfkitbenchmarker_results.json [...] [--out report.md]
mongobench testbed up|down|status [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from mongobench import experiments as exp_mod
from mongobench import redact


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _overrides(pairs: list[str] | None) -> dict:
    """--set key=value, typed and range-checked by the settings schema."""
    try:
        return exp_mod.parse_overrides(pairs, "--set")
    except exp_mod.ExperimentError as e:
        raise SystemExit(f"mongobench: {e}") from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_perftables_list(args) -> int:
    catalog = exp_mod.load(args.experiments_file or exp_mod.PERFTABLES_FILE)
    for name, e in catalog.items():
        labels = [v.label for v in e.resolve(args.scale)]
        print(f"{name}: {e.title} [{e.workload}] variants: {', '.join(labels)}")
    return 0


def cmd_perftables_run(args) -> int:
    from mongobench import perftables, report, results

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
    os_path = False if args.os_path == "none" else args.os_path
    try:
        run = perftables.run(
            uri,
            _csv(args.experiments),
            args.scale,
            args.out,
            database=args.database,
            variants=[v.strip() for v in (args.variants or "").split(";") if v.strip()] or None,
            overrides=_overrides(args.set),
            log=_log,
            os_path=os_path,
            max_seconds=args.max_seconds,
            experiments_file=args.experiments_file,
            skip=args.skip,
        )
    except (exp_mod.ExperimentError, redact.TargetError) as e:
        # One last line on stderr: PKB's module makes it the run's status detail.
        raise SystemExit(f"mongobench: {e}") from None
    samples = results.to_samples(run)
    if args.samples:
        perftables.write_json_atomic(args.samples, samples)
    print(report.render(samples, exp_mod.load(args.experiments_file or exp_mod.PERFTABLES_FILE)))
    bad = results.failed(run)
    for r in bad:
        _log(f"FAILED {r['experiment']} [{r['label']}]: {r['error']}")
    if run.get("unreachable"):
        _log(f"mongobench: {run['unreachable']}")
    return 1 if bad else 0


def cmd_report(args) -> int:
    from mongobench import report

    samples = []
    try:
        for path in args.pkb_results:
            samples += report.load_pkb_results(path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench report: {e}") from None
    plots = args.plots_dir
    if plots is None and args.out:
        plots = os.path.join(os.path.dirname(os.path.abspath(args.out)), "plots")
    ref = (
        os.path.relpath(plots, os.path.dirname(os.path.abspath(args.out)))
        if plots and args.out
        else plots
    )
    text = report.render(samples, plots_dir=plots, plots_ref=ref)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        _log(f"wrote {args.out}")
    else:
        print(text)
    return 0


def cmd_testbed(args) -> int:
    from mongobench import testbed

    if args.action == "up":
        try:
            state = testbed.up(args.dir, with_ssh=not args.no_ssh, server=args.server)
        except testbed.PreflightError as e:
            raise SystemExit(f"mongobench: {e}") from None
        print(json.dumps(testbed.public_state(state), indent=1))
    elif args.action == "down":
        testbed.down(args.dir)
    else:
        print(json.dumps(testbed.public_state(testbed.status(args.dir)), indent=1))
    return 0


def cmd_topology_up(args) -> int:
    from pymongo import MongoClient

    from mongobench import topology

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
    p = argparse.ArgumentParser(prog="mongobench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    pt = sub.add_parser("perftables", help="MongoDB Performance Tables experiments")
    pts = pt.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--scale", default="smoke", help=f"{', '.join(exp_mod.SCALES)} or a factor")
    common.add_argument("--experiments-file", help="experiment declarations (YAML)")
    ls = pts.add_parser("list", parents=[common], help="experiments and their variants")
    ls.set_defaults(func=cmd_perftables_list)
    run = pts.add_parser("run", parents=[common], help="run experiments against a URI")
    target = run.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--uri-file", help="file holding the connection string (keeps secrets off argv)"
    )
    target.add_argument("--uri-env", help="environment variable holding the connection string")
    target.add_argument("--uri", help="connection string (visible in the process list)")
    run.add_argument("--experiments", help="comma-separated names (default: all)")
    run.add_argument("--variants", help="variant labels separated by ';' (default: all)")
    run.add_argument("--skip", help="variants to leave out: 'experiment/label;experiment/label'")
    run.add_argument("--database", default="mongobench", help="database the experiments own")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting")
    run.add_argument("--out", default="perftables-results.json", help="raw results (JSON)")
    run.add_argument("--samples", help="also write the samples (JSON)")
    run.add_argument(
        "--os-path",
        default=None,
        help="sample OS metrics of the disk holding this path on this host ('none': off)",
    )
    run.add_argument(
        "--max-seconds", type=_positive_seconds, help="cap on each timed phase (seconds > 0)"
    )
    run.set_defaults(func=cmd_perftables_run)

    rp = sub.add_parser("report", help="markdown tables from PKB results files")
    rp.add_argument("--pkb-results", nargs="+", required=True)
    rp.add_argument("--out", help="markdown file (default: stdout)")
    rp.add_argument("--plots-dir", help="PNG plots (default: plots/ beside --out; none on stdout)")
    rp.set_defaults(func=cmd_report)

    tb = sub.add_parser("testbed", help="local stand-in server + sshd static VM")
    tb.add_argument("action", choices=("up", "down", "status"))
    tb.add_argument("--dir", default=None, help="state directory (default: under the temp dir)")
    tb.add_argument("--no-ssh", action="store_true", help="only the MongoDB server")
    tb.add_argument(
        "--server",
        choices=("auto", "mongod", "standin"),
        default="auto",
        help="auto: mongod when on PATH, else the stand-in",
    )
    tb.set_defaults(func=cmd_testbed)
    tp = sub.add_parser("topology", help="initiate replica sets and shards from a plan (JSON)")
    tps = tp.add_subparsers(dest="action", required=True)
    up = tps.add_parser("up", help="initiate, wait for primaries, run mongos admin commands")
    up.add_argument("--plan", required=True, help="plan file (see mongobench.topology.run_plan)")
    up.add_argument("--timeout", type=float, default=300.0, help="seconds per replica set")
    up.set_defaults(func=cmd_topology_up)
    for module in ("compare", "sweep"):  # subcommands wired in their own modules
        __import__(f"mongobench.{module}", fromlist=["add_parser"]).add_parser(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
