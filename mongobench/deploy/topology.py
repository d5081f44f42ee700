"""Replica sets and sharded clusters: command documents, status interpretation, URIs.

Pure functions plus one driver-facing helper (`initiate_replica_set`) that takes
any object with pymongo's `client.admin.command(...)` shape.

The test bed's stand-ins (mongo-java-server, FerretDB) cannot form replica sets
or sharded clusters, so this code is checked by the documents it generates and
by recorded `replSetGetStatus` outputs (tests/data/rs_status), not against a
live replica set.

Shapes follow the manual:
- replSetInitiate / replica set configuration:
  https://www.mongodb.com/docs/manual/reference/replica-configuration/
- replSetGetStatus: https://www.mongodb.com/docs/manual/reference/command/replSetGetStatus/
- addShard / enableSharding (shardCollection: core.shardkey):
  https://www.mongodb.com/docs/manual/reference/command/addShard/ (and siblings)
- Connection strings: https://www.mongodb.com/docs/manual/reference/connection-string/
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass, field

from mongobench.core.poll import PollTimeout, poll_until

# replSetGetStatus member states (members[].state / stateStr)
PRIMARY, SECONDARY, ARBITER = "PRIMARY", "SECONDARY", "ARBITER"
_HEALTHY = {PRIMARY, SECONDARY, ARBITER}
_STARTING = {"STARTUP", "STARTUP2", "RECOVERING"}

# Server error codes seen during initiation (error_codes.yml)
NOT_YET_INITIALIZED = 94
ALREADY_INITIALIZED = 23


def hostport(host: str, port: int) -> str:
    # IPv6 literals need brackets in host:port strings
    return (
        f"[{host}]:{int(port)}"
        if ":" in host and not host.startswith("[")
        else f"{host}:{int(port)}"
    )


# ---- replica sets ----------------------------------------------------------------


def replset_config(
    name: str,
    members: list[str],
    configsvr: bool = False,
    preferred_primary: int | None = 0,
) -> dict:
    """replSetInitiate document. The seed's default: 3 voting data-bearing members.

    `preferred_primary` gets priority 2 (others 1) so the same member wins the
    first election on every run, which keeps runs comparable.
    """
    if not members:
        raise ValueError("a replica set needs at least one member")
    if len(set(members)) != len(members):
        raise ValueError(f"duplicate replica set members: {members}")
    docs = []
    for i, host in enumerate(members):
        doc = {"_id": i, "host": host}
        if preferred_primary is not None and len(members) > 1:
            doc["priority"] = 2 if i == preferred_primary else 1
        docs.append(doc)
    cfg = {"_id": name, "members": docs}
    if configsvr:
        cfg["configsvr"] = True
    return cfg


def replset_initiate_command(cfg: dict) -> dict:
    return {"replSetInitiate": cfg}


@dataclass(frozen=True)
class ReplicaSetState:
    """What a replSetGetStatus document says about readiness."""

    state: str  # ready | electing | starting | degraded | uninitialized | error
    ready: bool
    primary: str | None = None
    members: dict = field(default_factory=dict)  # name -> stateStr
    message: str = ""


def wait_for_primary(status: dict, expected_members: int | None = None) -> ReplicaSetState:
    """Interprets one replSetGetStatus reply (or an error reply) for 'wait until usable'.

    Ready means: exactly one PRIMARY and every member healthy as PRIMARY,
    SECONDARY or ARBITER (so w:majority writes can be acknowledged by all
    data-bearing members, as the seed's default expects).
    """
    if not status.get("ok", 0):
        code = status.get("code")
        msg = status.get("errmsg", "replSetGetStatus failed")
        if code == NOT_YET_INITIALIZED or status.get("codeName") == "NotYetInitialized":
            return ReplicaSetState("uninitialized", False, message=msg)
        return ReplicaSetState("error", False, message=msg)
    members = status.get("members") or []
    named = [(m.get("name", f"#{m.get('_id')}"), m.get("stateStr", "?"), m) for m in members]
    states = {n: s for n, s, _ in named}
    primaries = [n for n, s, _ in named if s == PRIMARY]
    # health 0 comes with stateStr "(not reachable/healthy)"
    unhealthy = [n for n, s, m in named if m.get("health", 1) != 1 or s not in _HEALTHY]
    starting = [n for n, s, _ in named if s in _STARTING]
    if expected_members is not None and len(members) != expected_members:
        return ReplicaSetState(
            "starting",
            False,
            None,
            states,
            f"{len(members)} of {expected_members} members in the config",
        )
    if len(primaries) == 1 and not unhealthy:
        return ReplicaSetState(
            "ready", True, primaries[0], states, "primary elected, all members healthy"
        )
    if len(primaries) > 1:
        # transient after a partition heals; the older term steps down
        return ReplicaSetState("electing", False, None, states, f"several primaries: {primaries}")
    if starting:
        return ReplicaSetState(
            "starting", False, primaries[0] if primaries else None, states, f"starting: {starting}"
        )
    if not primaries:
        return ReplicaSetState("electing", False, None, states, "no primary yet")
    return ReplicaSetState(
        "degraded", False, primaries[0], states, f"unhealthy members: {unhealthy}"
    )


def initiate_replica_set(
    client,
    cfg: dict,
    timeout: float = 120.0,
    poll: float = 1.0,
    sleep=time.sleep,
    clock=time.monotonic,
) -> ReplicaSetState:
    """replSetInitiate on one member, then poll replSetGetStatus until ready.

    `client` must be connected directly to one member (directConnection=true,
    see direct_uri). Idempotent: an already initiated set is only waited for.
    Raises TimeoutError with the last state when the set is not ready in time.
    Not testable against the stand-ins (no replica sets there); unit tests use
    a fake client that replays recorded replSetGetStatus documents.
    """
    try:
        client.admin.command("replSetInitiate", cfg)
    except Exception as exc:  # pymongo OperationFailure (not imported here)
        if getattr(exc, "code", None) != ALREADY_INITIALIZED:
            raise

    def check():
        try:
            status = client.admin.command("replSetGetStatus")
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code is None:
                raise
            details = getattr(exc, "details", None) or {}
            status = {"ok": 0, "code": code, "errmsg": details.get("errmsg", str(exc))}
        state = wait_for_primary(status, expected_members=len(cfg["members"]))
        return state.ready, state

    try:
        return poll_until(check, timeout=timeout, interval=poll, sleep=sleep, clock=clock)
    except PollTimeout as t:
        last = t.last
        raise TimeoutError(
            f"replica set {cfg['_id']} not ready after {timeout:.0f}s: {last.state}: {last.message}"
            f" members={last.members}"
        ) from None


# ---- sharding --------------------------------------------------------------------


def add_shard_command(replset: str, members: list[str], name: str | None = None) -> dict:
    """addShard for a shard replica set. Shards must be replica sets since MongoDB 3.6:
    a 'standalone' shard is a one-member replica set here."""
    if not members:
        raise ValueError("a shard needs at least one member")
    doc = {"addShard": f"{replset}/{','.join(members)}"}
    if name:
        doc["name"] = name
    return doc


def enable_sharding_command(database: str) -> dict:
    # Optional since 6.0 (shardCollection enables it), harmless and needed before 6.0.
    return {"enableSharding": database}


# ---- connection strings (never with credentials) ---------------------------------


def _uri(hosts: list[str], database: str | None, options: dict) -> str:
    if not hosts:
        raise ValueError("no hosts")
    for h in hosts:
        if "@" in h or "/" in h:
            raise ValueError(f"host {h!r} looks like it carries credentials or a path")
    query = urllib.parse.urlencode({k: v for k, v in options.items() if v is not None})
    return f"mongodb://{','.join(hosts)}/{database or ''}" + (f"?{query}" if query else "")


def standalone_uri(host: str, port: int, database: str | None = None, **options) -> str:
    return _uri([hostport(host, port)], database, options)


def direct_uri(host: str, port: int) -> str:
    """One member, no discovery: for replSetInitiate before the set exists."""
    return _uri([hostport(host, port)], None, {"directConnection": "true"})


def replica_set_uri(
    members: list[str],
    replset: str,
    database: str | None = None,
    w: str | int = "majority",
    read_preference: str = "primary",
    **options,
) -> str:
    """The seed's default for replica sets: writes w:majority, reads from the primary.

    No user or password: credentials go in a separate 0600 file that the client
    reads (see mongobench.redact.read_uri), never on a command line.
    """
    opts = {"replicaSet": replset, "w": w, "readPreference": read_preference, **options}
    return _uri(members, database, opts)


def mongos_uri(
    mongos: list[str], database: str | None = None, w: str | int = "majority", **options
) -> str:
    """Sharded cluster through one or more mongos (the driver balances between them)."""
    return _uri(mongos, database, {"w": w, **options})


def run_plan(plan: dict, connect, timeout: float = 300.0, sleep=time.sleep) -> dict:
    """Brings up what `plan` describes, from a client that reaches every process.

    plan = {"replsets": [{"config": <replSetInitiate doc>, "seed": "host:port"}, ...],
            "mongos": "host:port" | None, "admin_commands": [<command doc>, ...]}
    `connect(uri)` returns a pymongo-like client. Replica sets are initiated
    (idempotently) and waited for; then the admin commands run on the mongos.
    Returns {"replsets": {name: primary}, "admin": [command names]}.
    """
    out = {"replsets": {}, "admin": []}
    for rs in plan.get("replsets", []):
        host, _, port = rs["seed"].rpartition(":")
        client = connect(direct_uri(host.strip("[]"), int(port)))
        try:
            state = initiate_replica_set(client, rs["config"], timeout=timeout, sleep=sleep)
        finally:
            client.close()
        out["replsets"][rs["config"]["_id"]] = state.primary
    if plan.get("admin_commands"):
        if not plan.get("mongos"):
            raise ValueError("admin commands need a mongos")
        client = connect(f"mongodb://{plan['mongos']}/")
        try:
            for cmd in plan["admin_commands"]:
                name = next(iter(cmd))
                client.admin.command(cmd)
                out["admin"].append(name)
        finally:
            client.close()
    return out
