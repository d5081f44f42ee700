"""The stand-in's authentication (SCRAM-SHA-256), TLS and replica-set simulation, through real
clients: pymongo, the engine's helpers and the Java driver (YCSB binding)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import subprocess
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pymongo
import pytest
from bson.binary import Binary
from pymongo.errors import NotPrimaryError, OperationFailure
from standin_helpers import built_workdir, write_users_file

from mongobench.core.poll import poll_until
from mongobench.deploy import topology
from mongobench.remote import javabuild
from mongobench.ycsb import properties as ycsb
from testbed import bed as testbed

pytestmark = pytest.mark.integration

# Distinctive, so any occurrence in a log is a leak. The second password needs SASLprep: a soft
# hyphen (mapped to nothing) and ROMAN NUMERAL NINE (NFKC: "IX").
ADMIN_PW = "Adm1n:pa55/Secret!"
PREP_PW_STORED = "pre\u00adp\u2168"
PREP_PW_LOGIN = "prepIX"
USERS = [
    {"user": "alice", "password": ADMIN_PW},
    {"user": "bob", "password": PREP_PW_STORED, "db": "app"},
]
TIMEOUT_MS = 5000


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return built_workdir(tmp_path_factory, "standin-features")


def _users_file(directory) -> str:
    return write_users_file(directory, USERS)


@pytest.fixture(scope="module")
def auth_server(workdir):
    srv = testbed.start_server(str(workdir / "auth"), users_file=_users_file(workdir))
    yield srv
    srv.stop()
    log = (workdir / "auth" / "server.log").read_text(errors="replace")
    assert ADMIN_PW not in log and "pwd" not in log, "a password reached the stand-in's log"


def test_bad_users_file_fails_without_quoting_it(workdir):
    bad = workdir / "bad-users.json"
    bad.write_text('[{"user": "u", "password": Leak3dSecret}]')  # not JSON: an unquoted token
    with pytest.raises(RuntimeError, match="not a JSON list") as exc:
        testbed.start_server(str(workdir / "bad-users"), users_file=str(bad))
    assert "Leak3dSecret" not in str(exc.value)


def test_standin_options_are_refused_for_mongod(tmp_path):
    with pytest.raises(ValueError, match="replset"):
        testbed.start_server(str(tmp_path), kind="mongod", replset="rs0")


def _client(uri: str, **kwargs) -> pymongo.MongoClient:
    return pymongo.MongoClient(uri, serverSelectionTimeoutMS=TIMEOUT_MS, **kwargs)


# ---- authentication --------------------------------------------------------------------------


def test_login_and_commands(auth_server):
    with _client(auth_server.uri, username="alice", password=ADMIN_PW) as c:
        c.t.c.insert_one({"_id": 1})
        assert c.t.c.find_one() == {"_id": 1}
        status = c.admin.command("connectionStatus")
        assert status["authInfo"]["authenticatedUsers"] == [{"user": "alice", "db": "admin"}]


def test_wrong_password_fails_with_code_18(auth_server):
    with _client(auth_server.uri, username="alice", password="not-it") as c:
        with pytest.raises(OperationFailure) as exc:
            c.t.c.find_one()
    assert exc.value.code == 18


def test_unauthenticated_commands_fail_with_code_13(auth_server):
    with _client(auth_server.uri) as c:
        assert c.admin.command("ping")["ok"] == 1  # handshake-era commands stay open
        assert c.admin.command("buildInfo")["ok"] == 1
        for run in (lambda: c.t.c.find_one(), lambda: c.list_database_names()):
            with pytest.raises(OperationFailure) as exc:
                run()
            assert exc.value.code == 13
            assert exc.value.details["codeName"] == "Unauthorized"
            assert exc.value.details["errmsg"].endswith("requires authentication")
        # users exist, so no localhost exception
        with pytest.raises(OperationFailure) as exc:
            c.admin.command("createUser", "mallory", pwd="x", roles=[])
        assert exc.value.code == 13


def test_saslprep_applies_to_stored_passwords(auth_server):
    # pymongo SASLprep's the login password too, so both spellings log in.
    for pw in (PREP_PW_LOGIN, PREP_PW_STORED):
        with _client(auth_server.uri, username="bob", password=pw, authSource="app") as c:
            assert c.app.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [
                {"user": "bob", "db": "app"}
            ]
    with _client(auth_server.uri, username="bob", password="prep", authSource="app") as c:
        with pytest.raises(OperationFailure):
            c.app.c.find_one()


def test_create_user_then_login_and_drop(auth_server):
    with _client(auth_server.uri, username="alice", password=ADMIN_PW) as admin:
        admin.app.command("createUser", "carol", pwd="carol-pw", roles=["readWrite"])
        with pytest.raises(OperationFailure) as exc:
            admin.app.command("createUser", "carol", pwd="other", roles=[])
        assert exc.value.code == 51003
        with _client(auth_server.uri, username="carol", password="carol-pw", authSource="app") as c:
            c.app.c.insert_one({"by": "carol"})
        info = admin.app.command("usersInfo", "carol")["users"]
        assert [(u["user"], u["db"], u["roles"]) for u in info] == [("carol", "app", ["readWrite"])]
        admin.app.command("dropUser", "carol")
        with _client(auth_server.uri, username="carol", password="carol-pw", authSource="app") as c:
            with pytest.raises(OperationFailure) as exc:
                c.app.c.find_one()
            assert exc.value.code == 18


def test_localhost_exception_creates_the_first_user(workdir):
    empty = workdir / "no-users.json"
    empty.write_text("[]")
    srv = testbed.start_server(str(workdir / "no-users"), users_file=str(empty))
    try:
        with _client(srv.uri) as c:
            with pytest.raises(OperationFailure) as exc:
                c.t.c.find_one()  # auth is on even without users
            assert exc.value.code == 13
            c.admin.command("createUser", "root", pwd="root-pw", roles=["root"])
            with pytest.raises(OperationFailure) as exc:  # the exception closes with the first user
                c.admin.command("createUser", "second", pwd="x", roles=[])
            assert exc.value.code == 13
        with _client(srv.uri, username="root", password="root-pw") as c:
            c.admin.command("createUser", "second", pwd="x", roles=[])
    finally:
        srv.stop()


def _scram_login(client, db, user, password, *, speculative, skip_empty_exchange):
    """A SCRAM-SHA-256 client conversation by hand, so both server paths pymongo does not choose
    between (saslStart vs hello's speculativeAuthenticate; with and without the empty third
    round trip) are exercised. `client` must have a single connection."""
    nonce = base64.b64encode(os.urandom(24))
    first_bare = b"n=" + user.encode() + b",r=" + nonce
    start = {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Binary(b"n,," + first_bare)}
    if skip_empty_exchange:
        start["options"] = {"skipEmptyExchange": True}
    if speculative:
        reply = client[db].command({"isMaster": 1, "speculativeAuthenticate": {**start, "db": db}})
        res = reply["speculativeAuthenticate"]
    else:
        res = client[db].command(start)
    assert res["done"] is False
    server_first = bytes(res["payload"])
    fields = dict(kv.split(b"=", 1) for kv in server_first.split(b","))
    assert fields[b"r"].startswith(nonce) and int(fields[b"i"]) == 15000
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(fields[b"s"]), int(fields[b"i"])
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = b"c=biws,r=" + fields[b"r"]
    auth_msg = b",".join((first_bare, server_first, without_proof))
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_msg, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    res = client[db].command(
        "saslContinue",
        1,
        conversationId=res["conversationId"],
        payload=Binary(without_proof + b",p=" + proof),
    )
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    assert bytes(res["payload"]) == b"v=" + base64.b64encode(
        hmac.digest(server_key, auth_msg, "sha256")
    )
    assert res["done"] is skip_empty_exchange
    if not res["done"]:
        res = client[db].command(
            "saslContinue", 1, conversationId=res["conversationId"], payload=Binary(b"")
        )
        assert res["done"] is True


@pytest.mark.parametrize("speculative", [False, True], ids=["saslStart", "speculative"])
@pytest.mark.parametrize("skip_empty", [True, False], ids=["skipEmptyExchange", "emptyExchange"])
def test_scram_conversation_variants(auth_server, speculative, skip_empty):
    with _client(auth_server.uri, maxPoolSize=1) as c:
        c.admin.command("ping")
        with pytest.raises(OperationFailure):
            c.t.c.find_one()
        _scram_login(
            c, "admin", "alice", ADMIN_PW, speculative=speculative, skip_empty_exchange=skip_empty
        )
        assert c.t.list_collection_names() is not None  # the same connection is now logged in
        assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]


def test_hello_lists_scram_sha_256(auth_server):
    with _client(auth_server.uri) as c:
        reply = c.admin.command("isMaster", saslSupportedMechs="admin.alice")
        assert reply["saslSupportedMechs"] == ["SCRAM-SHA-256"]
        assert reply["ismaster"] is True and reply["maxWireVersion"] >= 6


def _run_ycsb_load(
    uri: str, tmp_path, records: int = 50, extra: dict | None = None
) -> subprocess.CompletedProcess:
    urlfile = tmp_path / "uri"
    urlfile.write_text(uri + "\n")
    os.chmod(urlfile, 0o600)
    props = tmp_path / "load.properties"
    props.write_text(
        ycsb.Workload(recordcount=records, urlfile=str(urlfile), fieldcount=2, extra=extra).text()
    )
    cmd = ycsb.ycsb_command(javabuild.ycsb_classpath(), "load", str(props))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def test_java_driver_logs_in(auth_server, tmp_path):
    host_port = auth_server.uri.split("//", 1)[1].rstrip("/")
    uri = f"mongodb://alice:{urllib.parse.quote_plus(ADMIN_PW)}@{host_port}/jv?authSource=admin"
    proc = _run_ycsb_load(uri, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ADMIN_PW not in proc.stdout + proc.stderr
    assert "[INSERT], Return=OK, 50" in proc.stdout
    with _client(auth_server.uri, username="alice", password=ADMIN_PW) as c:
        assert c.jv.usertable.count_documents({}) == 50
    bad = uri.replace("Secret", "Wrong")
    proc = _run_ycsb_load(bad, tmp_path)
    assert proc.returncode != 0 or "Return=OK" not in proc.stdout
    assert "Exception authenticating" in proc.stdout + proc.stderr


# ---- TLS -------------------------------------------------------------------------------------


def _openssl(*args, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(workdir):
    """A throwaway CA and a server certificate for 127.0.0.1/localhost, as PKCS#8 and PKCS#1 PEMs."""
    if not shutil.which("openssl"):
        pytest.skip("the openssl CLI is needed to make test certificates")
    d = workdir / "certs"
    d.mkdir()
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=mongobench test CA", cwd=d,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost", cwd=d,
    )  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=d,
    )  # fmt: skip
    _openssl("rsa", "-in", "server.key", "-traditional", "-out", "server.rsa.key", cwd=d)
    cert = (d / "server.crt").read_text()
    pkcs8 = (d / "server.key").read_text()
    pkcs1 = (d / "server.rsa.key").read_text()
    assert "BEGIN PRIVATE KEY" in pkcs8 and "BEGIN RSA PRIVATE KEY" in pkcs1
    (d / "pkcs8.pem").write_text(cert + pkcs8)
    (d / "pkcs1.pem").write_text(cert + pkcs1)
    return d


@pytest.mark.parametrize("key_format", ["pkcs8", "pkcs1"])
def test_tls_only(workdir, certs, key_format):
    srv = testbed.start_server(
        str(workdir / f"tls-{key_format}"), tls_pem=str(certs / f"{key_format}.pem")
    )
    try:
        assert "tls=true" in srv.uri
        with _client(f"{srv.uri}&tlsCAFile={certs / 'ca.pem'}") as c:
            c.t.c.insert_one({"_id": "over tls"})
            assert c.t.c.find_one()["_id"] == "over tls"
        if key_format == "pkcs1":
            return  # the key format only matters for loading; the checks below are the same
        plain = f"mongodb://127.0.0.1:{srv.port}/"
        with pymongo.MongoClient(plain, serverSelectionTimeoutMS=500) as c:
            with pytest.raises(pymongo.errors.ServerSelectionTimeoutError):
                c.admin.command("ping")
        # and the certificate is really checked: without the CA the client refuses it
        with pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=500) as c:
            with pytest.raises(pymongo.errors.ServerSelectionTimeoutError, match="CERTIFICATE"):
                c.admin.command("ping")
    finally:
        srv.stop()


# ---- replica-set simulation ------------------------------------------------------------------


def _start_members(workdir, name: str, count: int, **options) -> list[testbed.Server]:
    with ThreadPoolExecutor(count) as pool:
        futures = [
            pool.submit(testbed.start_server, str(workdir / f"{name}-{i}"), replset=name, **options)
            for i in range(count)
        ]
        errors = [f.exception() for f in futures if f.exception()]
        members = [f.result() for f in futures if not f.exception()]
    if errors:
        for m in members:
            m.stop()
        raise errors[0]
    return members


def _hostport(srv: testbed.Server) -> str:
    return topology.hostport("127.0.0.1", srv.port)


def test_replset_member_before_initiation(workdir):
    (srv,) = _start_members(workdir, "lone", 1)
    try:
        me = _hostport(srv)
        with _client(srv.uri) as c:
            hello = c.admin.command("isMaster")
            assert hello["isreplicaset"] is True
            assert (hello["ismaster"], hello["isWritablePrimary"], hello["secondary"]) == (
                False,
                False,
                False,
            )
            assert hello["info"] == "Does not have a valid replica set config"
            assert "setName" not in hello

            with pytest.raises(OperationFailure) as exc:
                c.admin.command("replSetGetStatus")
            assert exc.value.code == topology.NOT_YET_INITIALIZED
            assert topology.wait_for_primary(exc.value.details).state == "uninitialized"
            with pytest.raises(NotPrimaryError) as exc:
                c.t.c.insert_one({})
            assert exc.value.details["code"] == 10107

            def initiate_fails(cfg) -> dict:
                with pytest.raises(OperationFailure) as exc:
                    c.admin.command("replSetInitiate", cfg)
                return exc.value.details

            wrong_name = initiate_fails(topology.replset_config("other", [me]))
            assert wrong_name["code"] == 93 and "other" in wrong_name["errmsg"]
            not_member = initiate_fails(topology.replset_config("lone", ["127.0.0.1:1"]))
            assert not_member["codeName"] == "NodeNotFound"
            dead = f"127.0.0.1:{testbed.free_port()}"
            unreachable = initiate_fails(topology.replset_config("lone", [me, dead]))
            assert unreachable["code"] == 74 and dead in unreachable["errmsg"]
            with pytest.raises(OperationFailure) as exc:  # nothing was installed
                c.admin.command("replSetGetStatus")
            assert exc.value.code == topology.NOT_YET_INITIALIZED

            # Like mongod, a member recognises itself under another name of its address.
            alias = f"localhost:{srv.port}"
            c.admin.command("replSetInitiate", topology.replset_config("lone", [alias]))
            hello = c.admin.command("isMaster")
            assert hello["setName"] == "lone" and hello["ismaster"] is True
            assert hello["hosts"] == [alias] and hello["primary"] == alias == hello["me"]
            c.t.c.insert_one({"now": "writable"})
    finally:
        srv.stop()


def test_replset_advertise_and_default_config(workdir):
    (srv,) = _start_members(workdir, "adv", 1, advertise="node-a.invalid:27017")
    try:
        with _client(srv.uri) as c:
            with pytest.raises(OperationFailure) as exc:  # the bound address is not its name
                c.admin.command("replSetInitiate", topology.replset_config("adv", [_hostport(srv)]))
            assert exc.value.code == 74
            # Without a config, mongod initiates a one-member set of itself.
            c.admin.command("replSetInitiate")
            hello = c.admin.command("isMaster")
            assert hello["hosts"] == ["node-a.invalid:27017"] == [hello["me"]]
            assert hello["ismaster"] is True
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def replset(workdir):
    """Three members of rs0, initiated through the third; the first has the highest priority."""
    members = _start_members(workdir, "rs0", 3)
    try:
        hosts = [_hostport(m) for m in members]
        cfg = topology.replset_config("rs0", hosts, preferred_primary=0)
        with _client(topology.direct_uri("127.0.0.1", members[2].port)) as c:
            state = topology.initiate_replica_set(c, cfg, timeout=15, poll=0.2)
        yield members, hosts, cfg, state
    finally:
        for m in members:
            m.stop()


def test_replset_initiation_and_status(replset):
    members, hosts, cfg, state = replset
    assert state.ready and state.primary == hosts[0]
    for member, host in zip(members, hosts, strict=True):
        with _client(topology.direct_uri("127.0.0.1", member.port)) as c:
            status = c.admin.command("replSetGetStatus")
            parsed = topology.wait_for_primary(status, expected_members=3)
            assert parsed.ready and parsed.primary == hosts[0]
            assert parsed.members == {
                hosts[0]: "PRIMARY",
                hosts[1]: "SECONDARY",
                hosts[2]: "SECONDARY",
            }
            assert [m["name"] for m in status["members"] if m.get("self")] == [host]
            assert status["set"] == "rs0" and status["myState"] == (1 if host == hosts[0] else 2)
            config = c.admin.command("replSetGetConfig")["config"]
            assert config["_id"] == "rs0"
            assert [(m["_id"], m["host"], m["priority"]) for m in config["members"]] == [
                (m["_id"], m["host"], m["priority"]) for m in cfg["members"]
            ]
            with pytest.raises(OperationFailure) as exc:
                c.admin.command("replSetInitiate", cfg)
            assert exc.value.code == topology.ALREADY_INITIALIZED


def test_replset_discovery_routes_writes_to_the_primary(replset):
    members, hosts, _, _ = replset
    uri = topology.replica_set_uri(hosts, "rs0")
    with _client(uri) as c:
        c.t.c.insert_one({"_id": "via discovery"})
        assert c.t.c.find_one({"_id": "via discovery"}) is not None
        assert c.primary == ("127.0.0.1", members[0].port)
        # pymongo's monitors find the secondaries on their own schedule (a loaded
        # machine can be behind the first write)
        want = {("127.0.0.1", m.port) for m in members[1:]}
        found = poll_until(lambda: (c.secondaries == want, c.secondaries), timeout=15, interval=0.1)
        assert found == want
    with _client(topology.direct_uri("127.0.0.1", members[1].port)) as c:
        hello = c.admin.command("isMaster")
        assert hello["secondary"] is True and hello["primary"] == hosts[0]
        assert hello["me"] == hosts[1] and hello["setName"] == "rs0"
        with pytest.raises(NotPrimaryError) as exc:
            c.t.c.insert_one({"_id": "direct to a secondary"})
        assert exc.value.details["code"] == 10107
        assert exc.value.details["codeName"] == "NotWritablePrimary"
    with _client(topology.direct_uri("127.0.0.1", members[0].port)) as c:
        # the simulation does not replicate: data stays where it was written
        assert c.t.c.find_one({"_id": "via discovery"}) is not None


def test_secure_replset_with_the_java_driver(workdir, certs, tmp_path):
    """Auth + TLS + replica set: initiation logs in to the other member as the initiating user
    over TLS; YCSB (Java driver) discovers the set and loads through the primary."""
    users = _users_file(workdir)
    members = _start_members(workdir, "rs1", 2, users_file=users, tls_pem=str(certs / "pkcs8.pem"))
    try:
        hosts = [_hostport(m) for m in members]
        cfg = topology.replset_config("rs1", hosts, preferred_primary=1)
        tls = {"tls": True, "tlsCAFile": str(certs / "ca.pem")}
        direct = topology.direct_uri("127.0.0.1", members[0].port)
        with _client(direct, **tls) as c:
            with pytest.raises(OperationFailure) as exc:
                c.admin.command("replSetInitiate", cfg)
            assert exc.value.code == 13
        with _client(direct, username="alice", password=ADMIN_PW, **tls) as c:
            state = topology.initiate_replica_set(c, cfg, timeout=15, poll=0.2)
        assert state.ready and state.primary == hosts[1]

        pw = urllib.parse.quote_plus(ADMIN_PW)
        uri = f"mongodb://alice:{pw}@{','.join(hosts)}/jrs?replicaSet=rs1&authSource=admin&tls=true"
        proc = _run_ycsb_load(uri, tmp_path, extra={ycsb.TLS_CA_FILE_PROPERTY: tls["tlsCAFile"]})
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "[INSERT], Return=OK, 50" in proc.stdout, proc.stdout[-3000:]
        with _client(
            topology.direct_uri("127.0.0.1", members[1].port),
            username="alice",
            password=ADMIN_PW,
            **tls,
        ) as c:
            assert c.jrs.usertable.count_documents({}) == 50
    finally:
        for m in members:
            m.stop()
