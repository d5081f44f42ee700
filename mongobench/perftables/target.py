"""The target of a Performance Tables run: the client to it, its first contact (topology,
version, credentials), whether it is still there, and why not, in one line without a secret."""

from __future__ import annotations

import ipaddress
import time

import pymongo
from pymongo import MongoClient
from pymongo.errors import (
    ConfigurationError,
    ConnectionFailure,
    NetworkTimeout,
    OperationFailure,
    ProtocolError,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from mongobench.core import redact
from mongobench.core.poll import PollTimeout, poll_until
from mongobench.driver import connection

# After a variant with errors, how long the server has to answer a ping before the
# remaining variants are failed without running (each would wait for server
# selection, 30 s by default, for a server that is gone).
PING_TIMEOUT_S = 5.0


# After the first contact (which gets the URI's, or pymongo's 30 s, server selection), the
# run's client waits this long for a server to select: a server that died mid-variant
# costs seconds, not 30 s per operation and again for the finish. A URI that sets
# serverSelectionTimeoutMS keeps its own.
RUN_SELECTION_MS = 5000


def reason(e: BaseException, uri: str = "", gone: bool = False) -> str:
    """One line saying why the target cannot be used, with no secret in it
    (`gone`: a connection failure means the server cannot be reached any more)."""
    if isinstance(e, NetworkTimeout) and not isinstance(e, ServerSelectionTimeoutError):
        why = f"no reply from the server: {str(e).split(' (configured timeouts', 1)[0]}"
    elif isinstance(e, ServerSelectionTimeoutError) or (gone and isinstance(e, ConnectionFailure)):
        # "host:port: [Errno 111] Connection refused (configured timeouts: ...), Timeout:
        # 30s, Topology Description: <...>": the first part is the reason.
        text = str(e).split(", Timeout:", 1)[0].split(" (configured timeouts", 1)[0]
        why = f"server unreachable: {text}"
    elif isinstance(e, ProtocolError):
        why = str(e)
    elif isinstance(e, OperationFailure) and e.code == 13:
        why = str(e)
    elif isinstance(e, OperationFailure) and (e.code == 18 or "auth" in str(e).lower()):
        why = f"authentication failed: {(e.details or {}).get('errmsg') or e}"
    elif isinstance(e, ConfigurationError):
        why = f"bad connection string: {e}"
    elif isinstance(e, ConnectionFailure):
        why = f"connection failed: {e}"
    else:
        why = f"{type(e).__name__}: {e}"
    return " ".join(redact.text(why, uri).split())[:200]


def reachable(client) -> str | None:
    """None when the server answers a ping within PING_TIMEOUT_S, else the reason.

    A pooled connection that broke says only that the server went away at some
    point (the multiplexed path leaves this client idle during the timed phase):
    the second ping opens a new connection and says whether it is there now."""
    for attempt in (1, 2):
        try:
            with pymongo.timeout(PING_TIMEOUT_S):
                client.admin.command("ping")
            return None
        except ServerSelectionTimeoutError as e:
            return reason(e)
        except ConnectionFailure as e:
            if attempt == 2:
                return reason(e, gone=True)
        except PyMongoError as e:
            return reason(e)
    return None


def connect(uri: str, app_name: str = "mongobench", **kwargs) -> MongoClient:
    # One connection per client thread, plus head-room for the monitor.
    return MongoClient(uri, appname=app_name, **kwargs)


def on_this_host(client) -> bool:
    """Whether every server the client found listens on a loopback address: the client
    then shares the server's host (the CLI against a local server, the test bed). PKB's
    benchmark decides it for VMs (mongodb_perftables_benchmark: the hosts' boot ids)."""
    hosts = [h for h, _ in client.nodes]
    if not hosts:
        return False
    for h in hosts:
        try:
            if not (h == "localhost" or ipaddress.ip_address(h).is_loopback):
                return False
        except ValueError:
            return False
    return True


def server_status(client) -> dict | None:
    try:
        return client.admin.command("serverStatus")
    except PyMongoError:
        return None


def topology(client) -> str:
    _first_contact(client)
    client.admin.command("ping")  # forces discovery
    return client.topology_description.topology_type_name


def _first_contact(client, timeout_s: float = 10.0) -> None:
    """Fails at once, in words, when every seed answered in another protocol (a URI
    naming an sshd or HTTP port): pymongo would retry for its server selection timeout,
    then say only "Got response id ..."."""

    def protocol_errors():
        seeds = list(client.topology_description.server_descriptions().values())
        if any(sd.server_type_name != "Unknown" for sd in seeds):
            return True, []  # one answered as MongoDB: the ping decides
        bad = [sd for sd in seeds if isinstance(sd.error, ProtocolError)]
        return bool(seeds) and len(bad) == len(seeds), bad

    try:
        bad = poll_until(protocol_errors, timeout=timeout_s, interval=0.1)
    except PollTimeout:
        return  # still trying (a slow or starting server): the ping says why, if anything
    if bad:
        where = ", ".join(f"{h}:{p}" for h, p in (sd.address for sd in bad))
        raise ProtocolError(
            f"{where} did not answer in MongoDB's wire protocol: not a MongoDB port?"
        )


def first_use(client, auth_retry_s: float = 0.0, log=print, sleep=time.sleep, clock=time.monotonic):
    """The deployment's topology and version, on the first connection. With `auth_retry_s`,
    an authentication failure (code 18) is retried for that long: a database user that was
    just created (Atlas applies users asynchronously) may not be known to every member yet."""
    deadline = clock() + auth_retry_s
    while True:
        try:
            return topology(client), client.server_info().get("version", "unknown")
        except OperationFailure as e:
            left = deadline - clock()
            if e.code != 18 or left <= 0:
                raise
            log(f"authentication failed; retrying for up to {left:.0f} s more (a new user"
                " may not be applied yet)")  # fmt: skip
            sleep(min(5.0, left))


def check_access(client, database: str, uri: str) -> None:
    """Fails once, before the first variant, when the server needs credentials the URI
    lacks (or the user may not use `database`), instead of every variant failing alone."""
    try:
        client[database].list_collection_names()
    except OperationFailure as e:
        if e.code in (13, 18) or "auth" in str(e).lower():
            has_user = bool(connection.options(uri).username)
            hint = "" if has_user else "; the URI names no user: add user:password@"
            raise OperationFailure(
                f"not authorized on database {database!r}: {e.details.get('errmsg', e)}{hint}",
                code=13,
            ) from None
        raise
