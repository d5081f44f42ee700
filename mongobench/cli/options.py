"""What the `mongobench` commands share: argument types, the target's options and its
connection string, the help format, the confirmation of long runs, a request file."""

from __future__ import annotations

import argparse
import sys

from mongobench.core import redact
from mongobench.perftables import estimate as estimate_mod
from mongobench.perftables import progress


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (the test bed's command line uses it too)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _seconds(text: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 <= value if zero else 0 < value) or value == float("inf"):
        bound = ">= 0" if zero else "> 0"
        raise argparse.ArgumentTypeError(f"must be a number of seconds {bound}, not {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    return _seconds(text, zero=False)


def seconds_or_zero(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    return _seconds(text, zero=True)


def add_target(parser, with_uri: bool = False) -> None:
    """The target connection string: exactly one of a file, an environment variable or
    (visible to other users, so only where a one-off run may want it) the string itself."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--uri-file", help="file holding the connection string (keeps secrets off argv)"
    )
    target.add_argument("--uri-env", help="environment variable holding the connection string")
    if with_uri:
        target.add_argument("--uri", help="connection string (visible in the process list)")


def add_rates(parser) -> None:
    parser.add_argument(
        "--rates",
        choices=tuple(estimate_mod.DEFAULT_RATES),
        default="mongod",
        help="rate table of the estimate when no earlier run against the target"
        " recorded one (standin: the test bed's stand-in)",
    )


def add_processes(parser, default: int | None = None) -> None:
    parser.add_argument(
        "--processes",
        type=positive_int,
        default=default,
        help="worker processes of the multiplexed path (default: this machine's CPUs)",
    )


def log(msg: str) -> None:
    # Through tqdm: with a progress bar on the terminal, lines print above it.
    progress.write(msg)


class Formatter(argparse.RawDescriptionHelpFormatter):
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


def subcommand(
    subparsers, name: str, help: str, examples: str = "", **kw
) -> argparse.ArgumentParser:
    """A sub-command with the project's help format and an examples epilog."""
    epilog = "examples:\n" + examples.strip("\n") if examples else None
    # No abbreviations: `--experiments` was taken for `--experiments-file` where only the
    # latter existed, and a prefix of today's option would change meaning with tomorrow's.
    return subparsers.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=Formatter,
        allow_abbrev=False,
        **kw,
    )


def confirm(seconds: float, yes: bool, what: str) -> None:
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


def target_uri(args) -> str:
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
        log("warning: a URI on the command line is visible to other users; prefer --uri-file")
    return uri


def request_file(args, flags: dict[str, str], request_cls):
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
