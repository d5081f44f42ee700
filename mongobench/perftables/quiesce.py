"""Quiet between variants: before a variant, wait (bounded) until the server has no work left
from the previous one.

A client that gave up on a request (the reply timeout) does not stop the server: FerretDB
finished abandoned 2 MB inserts two minutes later, and every variant measured meanwhile ran
2-10x slow. So before each variant but the first the run asks, in this order:

- `currentOp`: active operations on the run's database (a real `currentOp` lists itself; an
  empty list, FerretDB's, says nothing and the next way is used);
- else `serverStatus.connections.current`: no more connections than before the previous
  variant's timed phase (plus the pymongo path's client connections, which stay pooled), or a
  count that stopped changing (held by live clients, not by work a gone client left);
- else a write probe: one small write to a scratch collection goes through (it waits behind
  a write still holding the lock, as on SQLite) and the database's contents (dbStats: objects,
  dataSize) are the same as at the previous probe (a server committing an abandoned batch in
  pieces lets single writes through between them); then the collection is dropped.

Each check is repeated every POLL_S until quiet or `bound_s`; the result says how long it took,
by which way, and whether the server was still busy at the bound (the caller warns).
"""

from __future__ import annotations

import time

import pymongo
from pymongo.errors import PyMongoError

from mongobench.core.poll import PollTimeout, poll_until

POLL_S = 0.5
# How long each single check may take (a server busy with leftovers answers slowly)
CHECK_S = 5.0
SCRATCH = "mongobench_quiesce"
# The connection count is settled when it stays the same this many checks in a row
STEADY_POLLS = 4


def _own(op: dict) -> bool:
    cmd = op.get("command") or {}
    return "currentOp" in cmd or any(
        isinstance(s, dict) and "$currentOp" in s for s in cmd.get("pipeline") or ()
    )


def run_ops(client, database: str) -> list[dict] | None:
    """The active operations on `database` (not currentOp's own); None when the server has no
    currentOp or its answer lists nothing, not even itself (FerretDB's is always empty)."""
    try:
        with pymongo.timeout(CHECK_S):
            inprog = client.admin.command({"currentOp": 1, "$all": True}).get("inprog")
    except PyMongoError:
        return None
    if not inprog:
        return None
    prefix = f"{database}."
    return [
        op
        for op in inprog
        if op.get("active", True) and str(op.get("ns", "")).startswith(prefix) and not _own(op)
    ]


def connections(client) -> int | None:
    """serverStatus.connections.current, or None."""
    try:
        with pymongo.timeout(CHECK_S):
            status = client.admin.command("serverStatus")
    except PyMongoError:
        return None
    current = (status.get("connections") or {}).get("current")
    return int(current) if isinstance(current, (int, float)) else None


def _contents(client, database: str):
    """dbStats' objects and dataSize (the probe's own document aside), or None."""
    try:
        with pymongo.timeout(CHECK_S):
            st = client[database].command("dbStats")
    except PyMongoError:
        return None
    return st.get("objects"), st.get("dataSize")


def wait(
    client, database: str, bound_s: float, conn_limit: int | None = None, clock=time.monotonic
) -> dict:
    """Waits at most `bound_s` until the server is quiet. `conn_limit`: the connection count
    that means quiet (None: that way is not used). Returns {"s", "by", "busy", "left"}:
    seconds waited, the way ("currentOp", "connections", "write probe", or "none" when the
    server answered none of them), whether it was still busy at the bound, and what was left
    then (operations, connections; 0 for the write probe)."""
    t0 = clock()

    def out(by, busy=False, left=0):
        return {"s": round(clock() - t0, 3), "by": by, "busy": busy, "left": left}

    ops = run_ops(client, database)
    if ops is not None:
        try:
            poll_until(
                lambda: (not (o := run_ops(client, database) or []), len(o)),
                timeout=bound_s, interval=POLL_S,
            )  # fmt: skip
            return out("currentOp")
        except PollTimeout as e:
            return out("currentOp", True, e.last)
    current = connections(client) if conn_limit is not None else None
    if current is not None:
        seen = []

        def settled():
            # At or below the limit; or steady for STEADY_POLLS checks: a client that is gone
            # has its connections closed within a second, so a count that stays put is held by
            # live clients (this run's pooled control connections), not by abandoned work.
            n = connections(client)
            seen.append(n)
            last = seen[-STEADY_POLLS:]
            steady = len(last) == STEADY_POLLS and len(set(last)) == 1
            return n is not None and (n <= conn_limit or steady), n

        try:
            poll_until(settled, timeout=bound_s, interval=POLL_S)
            return out("connections")
        except PollTimeout as e:
            return out("connections", True, (e.last or 0) - conn_limit)
    try:
        with pymongo.timeout(bound_s):
            client[database][SCRATCH].insert_one({"quiet": True})
    except PyMongoError as e:
        # timed out behind leftover work: busy; refused (no write access here): unknown
        return out("write probe", True) if e.timeout else out("none")
    # A server that commits an abandoned batch in pieces (FerretDB) lets the probe through
    # between them: quiet also needs the database's contents to stop changing.
    readings = []

    def unchanged():
        now = _contents(client, database)
        readings.append(now)
        return now is None or readings[-2:] == [now, now], now

    try:
        poll_until(unchanged, timeout=max(bound_s - (clock() - t0), 0.0), interval=POLL_S)
    except PollTimeout:
        return out("write probe", True)
    result = out("write probe")
    try:
        with pymongo.timeout(CHECK_S):
            client[database].drop_collection(SCRATCH)
    except PyMongoError:
        pass  # a scratch collection of one document, dropped by the next quiet
    return result


def line(q: dict, bound_s: float, name: str) -> str | None:
    """The log line for one wait: a warning when still busy, a note when it took a second or
    more, None when the server was quiet at once."""
    if q["busy"]:
        left = {
            "currentOp": f"{q['left']} operations of this run still active",
            "connections": f"{q['left']} more connections than before the previous variant",
            "write probe": "a small write did not go through",
        }.get(q["by"], "busy")
        return (
            f"warning: before {name}: the server was still busy after {bound_s:g} s ({left},"
            f" by {q['by']}); its figures may include the previous variant's leftover work"
            " (the samples say quiesce_busy)"
        )
    if q["s"] >= 2.0:
        return f"before {name}: waited {q['s']:.1f} s for the server to finish earlier work ({q['by']})"
    return None
