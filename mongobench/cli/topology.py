"""`mongobench topology up`: replica sets and shards initiated from a plan."""

from __future__ import annotations

import argparse
import json

from pymongo import MongoClient

from mongobench.cli.options import log, subcommand
from mongobench.deploy import topology


def add(subparsers) -> argparse.ArgumentParser:
    """`mongobench topology up --plan plan.json`."""
    tp = subcommand(
        subparsers,
        "topology",
        "initiate replica sets and shards from a plan (JSON)",
        "  mongobench topology up --plan plan.json --timeout 600\n",
    )
    tps = tp.add_subparsers(dest="action", required=True)
    up = subcommand(
        tps,
        "up",
        "initiate, wait for primaries, run mongos admin commands",
        "  mongobench topology up --plan plan.json\n",
    )
    up.add_argument(
        "--plan", required=True, help="plan file (see mongobench.deploy.topology.run_plan)"
    )
    up.add_argument("--timeout", type=float, default=300.0, help="seconds per replica set")
    up.set_defaults(func=cmd_up)
    return tp


def cmd_up(args) -> int:
    with open(args.plan) as f:
        plan = json.load(f)
    log(
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
