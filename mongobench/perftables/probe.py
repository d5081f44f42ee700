"""What the server is and what it can do, asked once before the first variant.

`identity` names the server (see perftables.identity). `capabilities` tries, cheaply, on one
scratch collection of a few documents in the run's database, each feature some variant needs:
validators (collMod), pipeline updates, $lookup, $group with $avg/$max, w:0 (on its own
connection: FerretDB drops the connection after one), transactions (hello says whether the
deployment can have them), explain's format, serverStatus's sections and hostInfo's memory.
`requirements` says what a variant needs; a variant the server lacks a need of is not run and is
reported `n/a (server lacks $lookup)`, never FAILED.
"""

from __future__ import annotations

import pymongo
from pymongo.errors import PyMongoError

from mongobench.perftables import identity

PROBE_COLLECTION = "mongobench_probe"
PROBE_TIMEOUT_S = 10.0

# Feature names, as the n/a reason says them.
VALIDATORS = "collMod validators"
PIPELINE_UPDATES = "pipeline updates"
LOOKUP = "$lookup"
GROUP = "$group"
GROUP_ACCUMULATORS = "$group $avg/$max"
W0 = "w:0 writes"
TRANSACTIONS = "transactions"


def _stages(pipeline) -> set[str]:
    out = set()
    for stage in pipeline or ():
        if isinstance(stage, dict):
            out |= {k for k in stage if k.startswith("$")}
    return out


def _accumulators(pipeline) -> set[str]:
    out = set()
    for stage in pipeline or ():
        group = stage.get("$group") if isinstance(stage, dict) else None
        for value in (group or {}).values():
            if isinstance(value, dict):
                out |= {k for k in value if k.startswith("$")}
    return out


def requirements(settings: dict) -> list[str]:
    """The probed features a variant with these settings needs."""
    need = []
    if settings.get("validation"):
        need.append(VALIDATORS)
    if settings.get("expressive"):
        need.append(PIPELINE_UPDATES)
    stages = _stages(settings.get("pipeline"))
    if "$lookup" in stages:
        need.append(LOOKUP)
    if "$group" in stages:
        need.append(GROUP)
        if _accumulators(settings.get("pipeline")) & {"$avg", "$max", "$min"}:
            need.append(GROUP_ACCUMULATORS)
    if str(settings.get("write_concern")) == "0":
        need.append(W0)
    if settings.get("transactions"):
        need.append(TRANSACTIONS)
    return need


def _command(db, *args, **kwargs):
    with pymongo.timeout(PROBE_TIMEOUT_S):
        return db.command(*args, **kwargs)


def _try(fn) -> tuple[bool, str]:
    try:
        with pymongo.timeout(PROBE_TIMEOUT_S):
            fn()
        return True, ""
    except PyMongoError as e:
        return False, " ".join(str(getattr(e, "details", None) and e.details.get("errmsg") or e)
                               .split())[:200]  # fmt: skip


def gather(client) -> dict:
    """buildInfo, serverStatus and hello as the server answered them (None: it did not)."""
    out = {}
    for key, cmd in (("build_info", "buildInfo"), ("status", "serverStatus"), ("hello", "hello")):
        try:
            out[key] = _command(client.admin, cmd)
        except PyMongoError:
            out[key] = None
    if out["hello"] is None:  # older servers and some stand-ins know only isMaster
        try:
            out["hello"] = _command(client.admin, "isMaster")
        except PyMongoError:
            pass
    return out


def server_identity(client, answers: dict | None = None) -> dict:
    answers = answers or gather(client)
    hosts = [h for h, _ in client.topology_description.server_descriptions()]
    return identity.identify(answers["build_info"], answers["status"], answers["hello"], hosts)


def explain_format(explain: dict | None) -> str:
    """`mongod` (queryPlanner.winningPlan), `FerretDB/SQLite`, `FerretDB/PostgreSQL`, else
    `unknown`."""
    qp = (explain or {}).get("queryPlanner") or {}
    if "winningPlan" in qp:
        return "mongod"
    backend = identity.backend_from_explain(explain)
    return f"FerretDB/{backend}" if backend else "unknown"


def capabilities(client, database: str, answers: dict | None = None, uri: str = "") -> dict:
    """{"lacks": {feature: why}, "explain_format", "status_sections", "host_memory_mb",
    "backend"}. Leaves no collection behind."""
    answers = answers or gather(client)
    db = client[database]
    coll = db[PROBE_COLLECTION]
    lacks: dict[str, str] = {}
    out: dict = {"lacks": lacks}
    try:
        with pymongo.timeout(PROBE_TIMEOUT_S):
            coll.drop()
            coll.insert_many([{"_id": i, "g": i % 2, "x": i} for i in range(4)])
    except PyMongoError as e:
        out["error"] = f"probe collection: {e}"[:200]
        return out
    try:
        checks = {
            VALIDATORS: lambda: db.command(
                "collMod", PROBE_COLLECTION, validator={"x": {"$exists": True}}
            ),
            PIPELINE_UPDATES: lambda: coll.update_one({"_id": 0}, [{"$set": {"y": "$x"}}]),
            LOOKUP: lambda: list(
                coll.aggregate(
                    [
                        {
                            "$lookup": {
                                "from": PROBE_COLLECTION,
                                "localField": "g",
                                "foreignField": "g",
                                "as": "m",
                            }
                        },
                    ]
                )
            ),  # fmt: skip
            GROUP: lambda: list(coll.aggregate([{"$group": {"_id": "$g", "n": {"$sum": 1}}}])),
            GROUP_ACCUMULATORS: lambda: list(
                coll.aggregate(
                    [{"$group": {"_id": "$g", "a": {"$avg": "$x"}, "m": {"$max": "$x"}}}]
                )
            ),
        }
        for feature, fn in checks.items():
            ok, why = _try(fn)
            if not ok:
                lacks[feature] = why
        try:
            out["explain"] = _command(db, "explain", {"find": PROBE_COLLECTION, "filter": {"x": 1}})
        except PyMongoError:
            out["explain"] = None
        out["explain_format"] = explain_format(out["explain"])
        out["backend"] = identity.backend_from_explain(out["explain"])
        if uri:
            ok, why = _w0(uri, database)
            if not ok:
                lacks[W0] = why
    finally:
        try:
            with pymongo.timeout(PROBE_TIMEOUT_S):
                coll.drop()
        except PyMongoError:
            pass
    hello = answers.get("hello") or {}
    if not (hello.get("setName") or hello.get("msg") == "isdbgrid"):
        lacks[TRANSACTIONS] = "not a replica set or mongos"
    status = answers.get("status") or {}
    out["status_sections"] = sorted(
        k for k in ("wiredTiger", "opcounters", "opLatencies", "connections") if k in status
    )
    try:
        host = _command(client.admin, "hostInfo")
        out["host_memory_mb"] = (host.get("system") or {}).get("memSizeMB")
    except PyMongoError:
        out["host_memory_mb"] = None
    return out


def _w0(uri: str, database: str) -> tuple[bool, str]:
    """An unacknowledged insert on a connection of its own, then a ping on that connection:
    a server that drops the connection after a w:0 write (FerretDB) fails the ping."""
    try:
        with pymongo.MongoClient(
            uri, maxPoolSize=1, socketTimeoutMS=int(PROBE_TIMEOUT_S * 1000),
            serverSelectionTimeoutMS=int(PROBE_TIMEOUT_S * 1000), retryReads=False,
            retryWrites=False,
        ) as c:  # fmt: skip
            coll = c[database].get_collection(
                PROBE_COLLECTION, write_concern=pymongo.WriteConcern(w=0)
            )
            coll.insert_one({"_id": "w0"})
            c.admin.command("ping")
            return True, ""
    except PyMongoError as e:
        return False, f"the connection broke after a w:0 write ({type(e).__name__})"


def lacking(settings: dict, caps: dict | None) -> list[str]:
    """The features this variant needs that the server lacks (none when the user asked to
    run it anyway: `run_unsupported`)."""
    if settings.get("run_unsupported"):
        return []
    lacks = (caps or {}).get("lacks") or {}
    return [f for f in requirements(settings) if f in lacks]
