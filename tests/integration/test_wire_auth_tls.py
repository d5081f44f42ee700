"""The pipelined driver (mongobench/driver/connection.py) against the real stand-in: SCRAM-SHA-256
credentials, TLS with a throwaway CA, replica-set discovery, and exact error counting."""

from __future__ import annotations

import collections
import random
import shutil
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pymongo
import pytest
from standin_helpers import built_workdir, write_users_file

from mongobench.deploy import topology
from mongobench.driver import connection, protocol
from mongobench.driver.zipfian import Zipfian
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import variant
from mongobench.perftables.request import PerftablesRun
from mongobench.remote import tlscerts
from testbed import bed as testbed

pytestmark = pytest.mark.integration

# Distinctive, so any occurrence in an error, a result or a log is a leak.
PASSWORD = "Wire:pa55/Secr3t!"
APP_PW_STORED = "pre\u00adp\u2168"  # SASLprep: soft hyphen -> nothing, U+2168 -> "IX"
APP_PW_LOGIN = "prepIX"
USERS = [
    {"user": "alice", "password": PASSWORD},
    {"user": "bob", "password": APP_PW_STORED, "db": "app"},
]
DB = "mb_wire_auth"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return built_workdir(tmp_path_factory, "wire-auth-tls")


@pytest.fixture(scope="module")
def users_file(workdir):
    return write_users_file(workdir, USERS)


@pytest.fixture(scope="module")
def certs(workdir):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed for the throwaway CA")
    return tlscerts.generate(str(workdir / "tls"), ["127.0.0.1", "localhost"], days=2)


def _start(workdir, name, **options):
    srv = testbed.start_server(str(workdir / name), **options)
    return srv


@pytest.fixture(scope="module")
def auth_server(workdir, users_file):
    srv = _start(workdir, "auth", users_file=users_file)
    yield srv
    srv.stop()
    assert PASSWORD not in (workdir / "auth" / "server.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def tls_server(workdir, users_file, certs):
    srv = _start(workdir, "tls", users_file=users_file, tls_pem=certs.server_pem)
    yield srv
    srv.stop()


def with_user(uri: str, user: str, password: str, **options) -> str:
    scheme, rest = uri.split("://", 1)
    auth = f"{urllib.parse.quote(user, safe='')}:{urllib.parse.quote(password, safe='')}@"
    uri = f"{scheme}://{auth}{rest}"
    if options:
        uri += ("&" if "?" in uri else "?") + urllib.parse.urlencode(options)
    return uri


def kv_pipelined(uri: str, total_ops=1000, database=DB, pymongo_uri=None, **settings) -> dict:
    """The kv_read_update experiment's pipelined variant, run as perftables runs it
    (pymongo, on `pymongo_uri` if given, prepares the data; the driver uses `uri`)."""
    e = exp_mod.load()["kv_read_update"]
    [v] = [x for x in e.resolve("smoke") if x.settings["driver"] == "pipelined"]
    v.settings.update(duration_s=None, total_ops=total_ops, **settings)
    with pymongo.MongoClient(pymongo_uri or uri, serverSelectionTimeoutMS=5000) as c:
        request = PerftablesRun(database=database, os_path="none")
        return variant.run_variant(c, e, v, request, uri, log=lambda m: None).to_dict()


# ---- authentication --------------------------------------------------------------------


def test_pipelined_workload_with_credentials(auth_server):
    res = kv_pipelined(with_user(auth_server.uri, "alice", PASSWORD))
    assert not res["errors"] and sum(res["ops"].values()) == 1000 == res["docs"]
    assert res["ops"]["read"] > 400 and res["ops"]["update"] > 400


def test_auth_source_and_saslprep(auth_server):
    # bob lives in "app"; his stored password needs SASLprep, so both spellings log in.
    for pw in (APP_PW_LOGIN, APP_PW_STORED):
        for uri in (
            with_user(auth_server.uri, "bob", pw, authSource="app"),
            with_user(auth_server.uri.rstrip("/") + "/app", "bob", pw),  # the URI's database
        ):
            with connection.connect(uri) as conn:
                status = conn.command({"connectionStatus": 1, "$db": "app"})
                assert status["authInfo"]["authenticatedUsers"] == [{"user": "bob", "db": "app"}]
                assert conn.command({"find": "c", "filter": {}, "$db": "app"})["ok"] == 1


def test_wrong_password_fails_clearly_without_the_password(auth_server):
    wrong = PASSWORD + "x"
    with pytest.raises(protocol.AuthError) as e:
        connection.connect(with_user(auth_server.uri, "alice", wrong))
    msg = str(e.value)
    assert "authentication of user 'alice' on admin (SCRAM-SHA-256) failed" in msg
    assert wrong not in msg and PASSWORD not in msg
    # Through the experiment: the variant fails with that reason, no password anywhere.
    with pytest.raises(RuntimeError, match="authentication of user 'alice'") as e:
        kv_pipelined(
            with_user(auth_server.uri, "alice", wrong),
            pymongo_uri=with_user(auth_server.uri, "alice", PASSWORD),
        )
    assert PASSWORD not in str(e.value)
    # Without credentials the server refuses the commands: counted as errors, not successes.
    with connection.connect(auth_server.uri) as conn:
        with pytest.raises(protocol.WireError, match="requires authentication"):
            conn.command({"find": "kv", "filter": {}, "$db": DB})
    # A mechanism the server does not offer: its refusal, clearly.
    with pytest.raises(protocol.AuthError, match="SCRAM-SHA-1"):
        connection.connect(
            with_user(auth_server.uri, "alice", PASSWORD, authMechanism="SCRAM-SHA-1")
        )


def test_errors_are_counted_exactly(auth_server):
    """Half of the keys are missing: exactly the operations on them are errors, although
    the replies of the other half take the driver's undecoded path."""
    uri = with_user(auth_server.uri, "alice", PASSWORD)
    n, total = 1000, 1500
    kv_pipelined(uri, total_ops=10, database="mb_wire_err", preload_docs=n)  # loads the data
    with pymongo.MongoClient(uri) as c:
        kv = c["mb_wire_err"]["kv"]
        assert kv.delete_many({"_id": {"$mod": [2, 1]}}).deleted_count == n // 2
        # Others in their place, so the preload marker still holds and nothing is reloaded.
        kv.insert_many([{"_id": -1 - i} for i in range(n // 2)])
    res = kv_pipelined(uri, total_ops=total, database="mb_wire_err", preload_docs=n, threads=1)
    # Replay the worker's draws (thread 0: Random(1); a key, then read-or-update).
    rng = random.Random(1)
    key = Zipfian(n).sampler(rng.random)
    missing = collections.Counter()
    for _ in range(total):
        k = key()
        kind = "read" if rng.random() < 0.5 else "update"
        missing[kind] += k % 2
    assert res["errors"] == {
        "read: WireError": missing["read"],
        "update: WireError": missing["update"],
    }
    assert sum(res["ops"].values()) == res["docs"] == total - sum(missing.values())
    assert res["error_samples"]["read: WireError"] == "document not found"
    assert res["prepared"] == {"preload_reused": True}


# ---- TLS ------------------------------------------------------------------------------


def test_tls_with_the_run_ca(tls_server, certs):
    uri = with_user(tls_server.uri, "alice", PASSWORD, tlsCAFile=certs.ca_cert)
    res = kv_pipelined(uri, total_ops=500)
    assert not res["errors"] and sum(res["ops"].values()) == 500
    with connection.connect(uri.replace("127.0.0.1", "localhost")) as conn:  # DNS name in the SANs
        assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")


def test_tls_failures_are_clear(tls_server, certs):
    creds = with_user(tls_server.uri, "alice", PASSWORD)
    with pytest.raises(protocol.WireError, match="CERTIFICATE_VERIFY_FAILED") as e:
        connection.connect(creds)  # the system CAs do not know the run's CA
    assert PASSWORD not in str(e.value)
    with connection.connect(creds + "&tlsAllowInvalidCertificates=true") as conn:
        assert conn.command({"ping": 1, "$db": "admin"})["ok"] == 1
    plain = with_user(f"mongodb://127.0.0.1:{tls_server.port}/", "alice", PASSWORD)
    with pytest.raises(protocol.WireError, match="found none: 127.0.0.1"):
        connection.connect(plain, timeout=5)


# ---- replica sets ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def replset(workdir):
    """Two simulated members of rsw; the second is the primary."""
    with ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(_start, workdir, f"rsw-{i}", replset="rsw", advertise=None) for i in (0, 1)
        ]
        members = [f.result() for f in futures]
    try:
        hosts = [topology.hostport("127.0.0.1", m.port) for m in members]
        cfg = topology.replset_config("rsw", hosts, preferred_primary=1)
        direct = topology.direct_uri("127.0.0.1", members[0].port)
        with pymongo.MongoClient(direct, serverSelectionTimeoutMS=5000) as c:
            state = topology.initiate_replica_set(c, cfg, timeout=15, poll=0.2)
        assert state.primary == hosts[1]
        yield members, hosts
    finally:
        for m in members:
            m.stop()


def test_replica_set_writes_go_to_the_primary(replset):
    members, hosts = replset
    seed_secondary = f"mongodb://{hosts[0]}/?replicaSet=rsw"
    with connection.connect(seed_secondary) as conn:
        assert conn.address == ("127.0.0.1", members[1].port)
    res = kv_pipelined(seed_secondary, total_ops=300)
    assert not res["errors"] and sum(res["ops"].values()) == 300
    # Never a secondary: with directConnection the driver refuses instead of following.
    with pytest.raises(protocol.WireError, match=f"{hosts[0]} is a secondary"):
        connection.connect(f"mongodb://{hosts[0]}/?directConnection=true")
    with pytest.raises(protocol.WireError, match="not a member of replica set other"):
        connection.connect(f"mongodb://{hosts[0]}/?replicaSet=other")
