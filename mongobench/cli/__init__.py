"""`mongobench`: the engine's command line, no PKB needed.

mongobench perftables list
mongobench perftables run --uri-file F [--experiments a,b] [--scale smoke] [--out r.json]
mongobench report --results perfkitbenchmarker_results.json [...] [--out report.md]

One module a command (perftables, sweep, reports, topology), each with its parser (`add`)
and its actions; what they share is in options.
"""

from __future__ import annotations

import argparse
import os
import sys

from mongobench.cli import perftables, reports, sweep, topology
from mongobench.cli.options import Formatter
from mongobench.core import interrupt
from mongobench.remote import provenance

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


class _Version(argparse.Action):
    """--version: the package version (+g<commit> in a git checkout), computed when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kw):
        kw.setdefault("help", "print mongobench's version and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"mongobench {provenance.version_string(provenance.build_info())}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mongobench",
        description=__doc__.splitlines()[0],
        formatter_class=Formatter,
        epilog=EXAMPLES,
        allow_abbrev=False,
    )
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)
    perftables.add(sub)
    reports.add_report(sub)
    topology.add(sub)
    reports.add_compare(sub)
    sweep.add(sub)
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
