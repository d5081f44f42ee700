"""`python -m testbed up|down|status` (scripts/testbed): the local test bed's command line.

A development tool: it lives in the checkout, beside the package it tests, and the installed
`mongobench` has no such command (setup.py ships only `mongobench*` and the PKB hook).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from mongobench.cli.options import positive_int
from testbed import bed, ferretdb, fresh


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/testbed",
        description="local stand-in server + sshd static VM (docs/testbed.md)",
        epilog="examples:\n"
        "  scripts/testbed up --dir /tmp/tb      # prints uri, uri_file, ssh port, PKB configs\n"
        "  scripts/testbed status --dir /tmp/tb\n"
        "  scripts/testbed down --dir /tmp/tb",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument(
        "action",
        choices=("up", "down", "status"),
        help="up: start and print the state (JSON); down: stop what up started and remove"
        " its directory; status: print the state",
    )
    p.add_argument("--dir", default=None, help="state directory (default: under the temp dir)")
    p.add_argument("--no-ssh", action="store_true", help="only the MongoDB server")
    p.add_argument(
        "--server",
        choices=bed.SERVER_KINDS,
        default="auto",
        help="auto: mongod when on PATH, else the stand-in; ferretdb (SQLite) and"
        " ferretdb-postgresql (a private PostgreSQL cluster): the pinned FerretDB, built with Go",
    )
    p.add_argument(
        "--client-vms",
        type=positive_int,
        default=1,
        help="static client VMs in the perftables config (this host, separate work dirs)",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="a fresh Debian machine (network namespace, own root and sshd) per PKB VM: a"
        " server VM and the client VMs; needs root (see docs/testbed.md)",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        help="--fresh: where the Debian root tarball and the package cache are kept"
        " (default: ~/.cache/mongobench-testbed)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.action == "up":
        try:
            state = bed.up(
                args.dir,
                with_ssh=not args.no_ssh,
                server=args.server,
                client_vms=args.client_vms,
                fresh_machines=args.fresh,
                cache_dir=args.cache_dir,
            )
        except (bed.PreflightError, fresh.FreshBedError, ferretdb.GoMissing) as e:
            raise SystemExit(f"testbed: {e}") from None
        print(json.dumps(bed.public_state(state), indent=1))
    elif args.action == "down":
        bed.down(args.dir)
    else:
        print(json.dumps(bed.public_state(bed.status(args.dir)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
