"""`mongobench report` and `mongobench compare`: markdown tables and plots from results."""

from __future__ import annotations

import argparse
import os
import sys

from mongobench.cli.options import log, subcommand
from mongobench.core import files
from mongobench.core.pairs import parse_pairs
from mongobench.reports import loader, report, sections
from mongobench.reports import runs as report_runs
from mongobench.reports.compare import compare


def _add_results(parser, more: str) -> None:
    parser.add_argument(
        "--results",
        "--pkb-results",
        dest="results",
        nargs="+",
        required=True,
        metavar="FILE",
        help="results files, one run or more each: PKB's (perfkitbenchmarker_results.json),"
        " `perftables run --out` or --samples, `sweep run --out`" + more,
    )


def add_report(subparsers) -> argparse.ArgumentParser:
    """`mongobench report --results F ... [--out report.md]`."""
    rp = subcommand(
        subparsers,
        "report",
        "markdown tables (the seed's layout) and plots from PKB results or the engine's --out files",
        "  mongobench report --results runs/*/perfkitbenchmarker_results.json --out report.md\n"
        "  mongobench report --results perftables-results.json     # tables on stdout, no plots\n"
        "  mongobench report --results sweep-results.json --out sweep.md\n",
    )
    _add_results(rp, "; with several, the tables get a Run column and rows per run")
    rp.add_argument("--out", help="markdown file (default: stdout)")
    rp.add_argument("--plots-dir", help="PNG plots (default: plots/ beside --out; none on stdout)")
    rp.set_defaults(func=cmd_report)
    return rp


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
            log(f"wrote {args.out}")
        else:
            print(text)
    except (OSError, ValueError) as e:
        why = f"{args.out}: {e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
        raise SystemExit(f"mongobench report: {why}") from None
    return 0


def add_compare(subparsers) -> argparse.ArgumentParser:
    """`mongobench compare --results F1 F2 ... --out report.md`."""
    p = subcommand(
        subparsers,
        "compare",
        "one markdown report with plots comparing several results files",
        "  mongobench compare --results a.json b.json --out report.md\n"
        "  mongobench compare --results a.json b.json --label a.json=before \\\n"
        "      --label b.json=after --baseline before --price n2-standard-4=0.19 --out report.md\n",
    )
    _add_results(p, "")
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
