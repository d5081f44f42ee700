"""The stand-in's mongos mode (--mongos): a config server replica set, two shard replica sets
and a mongos, brought up with the engine's topology plan and driven through pymongo, the
perftables CLI and the Java driver (YCSB binding). The mongos keeps all data itself: these tests
check deployment plumbing, not data distribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pymongo
import pytest
from pymongo.errors import OperationFailure
from standin_helpers import built_workdir

from mongobench.core import shardkey
from mongobench.deploy import placement, topology
from mongobench.remote import javabuild, tlscerts
from mongobench.ycsb import properties as ycsb
from testbed import bed as testbed

pytestmark = pytest.mark.integration

TIMEOUT_MS = 5000
PASSWORD = "M0ngos:pa55/Secret!"  # distinctive, so any occurrence in a log is a leak


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return built_workdir(tmp_path_factory, "standin-mongos")


def _client(uri: str, **kwargs) -> pymongo.MongoClient:
    return pymongo.MongoClient(uri, serverSelectionTimeoutMS=TIMEOUT_MS, **kwargs)


def _connect(**kwargs):
    return lambda uri: _client(uri, **kwargs)


def _start(workdir, specs: dict[str, dict]) -> dict[str, testbed.Server]:
    """Starts stand-ins in parallel: name -> start_server options. All or none."""
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {
            name: pool.submit(testbed.start_server, str(workdir / name), **options)
            for name, options in specs.items()
        }
    started = {n: f.result() for n, f in futures.items() if not f.exception()}
    errors = [f.exception() for f in futures.values() if f.exception()]
    if errors:
        for s in started.values():
            s.stop()
        raise errors[0]
    return started


def _hp(srv: testbed.Server) -> str:
    return topology.hostport("127.0.0.1", srv.port)


def _fails(run) -> dict:
    with pytest.raises(OperationFailure) as exc:
        run()
    return exc.value.details


@pytest.fixture(scope="module")
def cluster(workdir):
    """cfg (config servers), shard0 and shard1 (one member each), an uninitiated member of
    'shard2' and a mongos, brought up as the perftables benchmark does it."""
    servers = _start(
        workdir,
        {
            "cfg": {"replset": "cfg"},
            "shard0": {"replset": "shard0"},
            "shard1": {"replset": "shard1"},
            "spare": {"replset": "shard2"},
        },
    )
    try:
        cfg = topology.replset_config("cfg", [_hp(servers["cfg"])], configsvr=True)
        servers["mongos"] = testbed.start_server(
            str(workdir / "mongos"), mongos=True, config_db=placement.config_db_string_of(cfg)
        )
        replsets = [{"config": cfg, "seed": _hp(servers["cfg"])}]
        admin = []
        for name in ("shard0", "shard1"):
            members = [_hp(servers[name])]
            replsets.append({"config": topology.replset_config(name, members), "seed": members[0]})
            admin.append(topology.add_shard_command(name, members, name=name))
        admin.append(topology.enable_sharding_command("mb_sharded"))
        plan = {"replsets": replsets, "mongos": _hp(servers["mongos"]), "admin_commands": admin}
        out = topology.run_plan(plan, _connect(), timeout=15, sleep=lambda _: None)
        assert out["admin"] == ["addShard", "addShard", "enableSharding"]
        assert out["replsets"] == {n: _hp(servers[n]) for n in ("cfg", "shard0", "shard1")}
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.fixture
def mongos(cluster):
    with _client(cluster["mongos"].uri) as c:
        yield c


def test_drivers_see_a_mongos(cluster, mongos):
    hello = mongos.admin.command("hello")
    assert hello["msg"] == "isdbgrid"
    assert hello["ismaster"] is True and hello["isWritablePrimary"] is True
    assert not {"setName", "hosts", "isreplicaset", "secondary"} & set(hello)
    mongos.admin.command("ping")
    assert mongos.topology_description.topology_type_name == "Sharded"
    assert mongos.is_mongos
    # A mongos has no replication commands.
    assert _fails(lambda: mongos.admin.command("replSetGetStatus"))["code"] == 59
    # replSetInitiate kept configsvr: true, and the member says so as mongod does.
    with _client(topology.direct_uri("127.0.0.1", cluster["cfg"].port)) as c:
        assert c.admin.command("hello")["configsvr"] == 2
        assert c.admin.command("replSetGetConfig")["config"]["configsvr"] is True
    with _client(topology.direct_uri("127.0.0.1", cluster["shard0"].port)) as c:
        assert "configsvr" not in c.admin.command("hello")
        # Sharding commands belong to a mongos, as on mongod.
        assert _fails(lambda: c.admin.command("listShards"))["code"] == 59


def test_list_shards_and_add_shard_again(cluster, mongos):
    expected = [
        {"_id": name, "host": f"{name}/{_hp(cluster[name])}", "state": 1}
        for name in ("shard0", "shard1")
    ]
    assert mongos.admin.command("listShards")["shards"] == expected
    assert list(mongos.config.shards.find()) == expected
    # The same shard again is fine (name defaults to the set's name)...
    again = mongos.admin.command(topology.add_shard_command("shard0", [_hp(cluster["shard0"])]))
    assert again["shardAdded"] == "shard0"
    # ...another set under a taken name, or a set under a second name, is not.
    other = topology.add_shard_command("shard1", [_hp(cluster["shard1"])], name="shard0")
    assert _fails(lambda: mongos.admin.command(other))["codeName"] == "IllegalOperation"
    twice = topology.add_shard_command("shard1", [_hp(cluster["shard1"])], name="second")
    details = _fails(lambda: mongos.admin.command(twice))
    assert (
        details["code"] == 20
        and "already a member of the existing shard shard1" in (details["errmsg"])
    )
    assert mongos.admin.command("listShards")["shards"] == expected


def test_add_shard_checks_the_set(cluster, mongos):
    shard0, spare = _hp(cluster["shard0"]), _hp(cluster["spare"])
    dead = f"127.0.0.1:{testbed.free_port()}"

    def add(spec: str, **options) -> dict:
        return _fails(lambda: mongos.admin.command({"addShard": spec, **options}))

    wrong = add(f"other/{shard0}")
    assert wrong["code"] == 96 and wrong["codeName"] == "OperationFailed"
    assert f"{shard0}: a member of replica set shard0" in wrong["errmsg"]
    unreachable = add(f"shard9/{dead}")
    assert unreachable["code"] == 96 and f"{dead}: cannot connect" in unreachable["errmsg"]
    uninitiated = add(f"shard2/{dead},{spare}", name="shard2")
    assert uninitiated["code"] == 96
    assert f"{spare}: a replica set member that is not initiated yet" in uninitiated["errmsg"]
    config = add(f"cfg/{_hp(cluster['cfg'])}")
    assert config["code"] == 96 and "config server replica set" in config["errmsg"]
    standalone = add(shard0)
    assert standalone["code"] == 96 and "setName/host:port" in standalone["errmsg"]
    not_admin = _fails(lambda: mongos.mb.command({"addShard": f"shard0/{shard0}"}))
    assert not_admin["code"] == 13
    assert [s["_id"] for s in mongos.admin.command("listShards")["shards"]] == [
        "shard0",
        "shard1",
    ]


def test_shard_collection_checks_the_key(mongos):
    db = mongos.mb_keys
    db.drop_collection("c")

    def shard(key, **options) -> dict:
        return mongos.admin.command({"shardCollection": "mb_keys.c", "key": key, **options})

    for key, options, needle in [
        ({"a": -1}, {}, "must be 1 or 'hashed'"),
        ({"a": "text"}, {}, "must be 1 or 'hashed'"),
        ({"a": "hashed", "b": "hashed"}, {}, "at most one 'hashed' field"),
        ({"a": "hashed"}, {"unique": True}, "cannot be declared unique"),
        ({}, {}, "must not be empty"),
    ]:
        details = _fails(lambda key=key, options=options: shard(key, **options))
        assert details["code"] == 2 and needle in details["errmsg"], (key, details)
    assert (
        _fails(lambda: mongos.admin.command("shardCollection", "nodot", key={"a": 1}))["codeName"]
        == "InvalidNamespace"
    )

    assert shard({"a": 1, "b": 1}, unique=True) == {"collectionsharded": "mb_keys.c", "ok": 1.0}
    assert "c" in db.list_collection_names()  # created by shardCollection
    assert shard({"a": 1.0, "b": 1}, unique=True)["ok"] == 1  # the same key again
    other = _fails(lambda: shard({"b": 1, "a": 1}, unique=True))  # field order matters
    assert other["code"] == 23 and "sharding already enabled" in other["errmsg"]
    recorded = mongos.config.collections.find_one({"_id": "mb_keys.c"})
    assert recorded["key"] == {"a": 1, "b": 1} and recorded["unique"] is True
    assert mongos.config.databases.find_one({"_id": "mb_keys"})["partitioned"] is True

    db.drop_collection("c")  # forgets the sharding: the next shardCollection starts afresh
    assert mongos.config.collections.find_one({"_id": "mb_keys.c"}) is None
    assert shard({"b": "hashed"})["ok"] == 1
    mongos.drop_database("mb_keys")
    assert mongos.config.collections.find_one({"_id": "mb_keys.c"}) is None
    assert mongos.config.databases.find_one({"_id": "mb_keys"}) is None


def test_perftables_through_the_mongos(cluster, mongos, tmp_path):
    """Workload.fresh drops and shards its collection for each variant; the data stays on the
    mongos (no routing), and the run reports no error."""
    out = tmp_path / "run.json"
    cmd = [
        sys.executable, "-m", "mongobench", "perftables", "run",
        "--uri", cluster["mongos"].uri, "--database", "mb_sharded",
        "--experiments", "insert_docsize", "--variants", "1;4", "--scale", "smoke",
        "--set", "sharded=true", "--set", "shard_key=_id:hashed",
        "--os-path", "none", "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads(out.read_text())
    assert [(r["label"], r["status"]) for r in run["results"]] == [("1", "ok"), ("4", "ok")]
    for r in run["results"]:
        assert not r["errors"] and r["docs"] == r["planned"]["docs"] > 0, r
    sharded = list(mongos.config.collections.find({"_id": {"$regex": "^mb_sharded\\."}}))
    assert [(c["key"], c["unique"]) for c in sharded] == [({"_id": "hashed"}, False)]
    coll = sharded[0]["_id"].split(".", 1)[1]
    assert mongos.mb_sharded[coll].count_documents({}) == run["results"][-1]["docs"]
    with _client(topology.direct_uri("127.0.0.1", cluster["shard0"].port)) as c:
        assert "mb_sharded" not in c.list_database_names()  # the mongos does not route


def test_sharding_needs_a_shard(workdir):
    srv = testbed.start_server(str(workdir / "lone-mongos"), mongos=True)
    try:
        with _client(srv.uri) as c:
            assert c.admin.command("listShards")["shards"] == []
            for cmd in (
                topology.enable_sharding_command("mb"),
                shardkey.shard_collection_command("mb.c", "_id:hashed"),
            ):
                details = _fails(lambda cmd=cmd: c.admin.command(cmd))
                assert details["code"] == 70 and details["codeName"] == "ShardNotFound"
                assert "No shards found" in details["errmsg"]
            assert "c" not in c.mb.list_collection_names()
    finally:
        srv.stop()


def test_config_db_is_checked(cluster, workdir):
    cfg, shard0, spare = (_hp(cluster[n]) for n in ("cfg", "shard0", "spare"))
    dead = f"127.0.0.1:{testbed.free_port()}"
    routers = _start(
        workdir,
        {
            "mongos-wrong-name": {"mongos": True, "config_db": f"other/{cfg}"},
            "mongos-not-configsvr": {"mongos": True, "config_db": f"shard0/{shard0}"},
            "mongos-no-config": {"mongos": True, "config_db": f"cfg/{dead},{spare}"},
        },
    )
    try:
        add = topology.add_shard_command("shard1", [_hp(cluster["shard1"])])
        expected = {
            "mongos-wrong-name": (96, f"{cfg} belongs to replica set cfg, not to other"),
            "mongos-not-configsvr": (96, "not initiated with configsvr: true"),
            "mongos-no-config": (133, f"{dead}: cannot connect"),
        }
        for name, (code, needle) in expected.items():
            with _client(routers[name].uri) as c:
                for run in (lambda: c.admin.command(add), lambda: c.admin.command("listShards")):
                    details = _fails(run)
                    assert details["code"] == code and needle in details["errmsg"], details
                if name == "mongos-no-config":
                    assert "not initiated yet" in details["errmsg"]
    finally:
        for s in routers.values():
            s.stop()
    with pytest.raises(RuntimeError, match="setName/host:port"):
        testbed.start_server(str(workdir / "bad-config-db"), mongos=True, config_db=cfg)


def test_start_server_option_errors(tmp_path):
    with pytest.raises(ValueError, match="exclude"):
        testbed.start_server(str(tmp_path), mongos=True, replset="rs0")
    with pytest.raises(ValueError, match="config_db needs mongos"):
        testbed.start_server(str(tmp_path), config_db="cfg/127.0.0.1:1")
    with pytest.raises(ValueError, match="mongos"):
        testbed.start_server(str(tmp_path), kind="mongod", mongos=True)


def test_secure_cluster_with_the_java_driver(workdir, tmp_path):
    """SCRAM + TLS on every process: the mongos asks the shard and config members over TLS,
    unauthenticated sharding commands are refused, and YCSB (Java driver) loads through it."""
    tls = tlscerts.generate(str(workdir / "tls"), ["127.0.0.1", "localhost"], days=2)
    users = workdir / "users.json"
    users.write_text(json.dumps([{"user": "admin", "password": PASSWORD}]))
    os.chmod(users, 0o600)
    secure = {"users_file": str(users), "tls_pem": tls.server_pem}
    servers = _start(
        workdir,
        {"scfg": {"replset": "scfg", **secure}, "sshard": {"replset": "sshard", **secure}},
    )
    try:
        cfg = topology.replset_config("scfg", [_hp(servers["scfg"])], configsvr=True)
        servers["smongos"] = testbed.start_server(
            str(workdir / "smongos"),
            mongos=True,
            config_db=placement.config_db_string_of(cfg),
            **secure,
        )
        login = {"username": "admin", "password": PASSWORD, "tls": True, "tlsCAFile": tls.ca_cert}
        add = topology.add_shard_command("sshard", [_hp(servers["sshard"])])
        plan = {
            "replsets": [
                {"config": cfg, "seed": _hp(servers["scfg"])},
                {
                    "config": topology.replset_config("sshard", [_hp(servers["sshard"])]),
                    "seed": _hp(servers["sshard"]),
                },
            ]
        }
        topology.run_plan(plan, _connect(**login), timeout=15, sleep=lambda _: None)
        mongos_uri = servers["smongos"].uri
        with _client(mongos_uri, tlsCAFile=tls.ca_cert) as c:
            assert _fails(lambda: c.admin.command(add))["code"] == 13
        with _client(mongos_uri, username="admin", password=PASSWORD, tlsCAFile=tls.ca_cert) as c:
            assert c.admin.command(add)["shardAdded"] == "sshard"
            c.admin.command(shardkey.shard_collection_command("jsh.usertable", "_id:hashed"))

        urlfile = tmp_path / "uri"
        pw = urllib.parse.quote_plus(PASSWORD)
        urlfile.write_text(
            f"mongodb://admin:{pw}@{_hp(servers['smongos'])}/jsh?authSource=admin&tls=true\n"
        )
        os.chmod(urlfile, 0o600)
        props = tmp_path / "load.properties"
        props.write_text(
            ycsb.Workload(
                recordcount=50,
                urlfile=str(urlfile),
                fieldcount=2,
                extra={ycsb.TLS_CA_FILE_PROPERTY: tls.ca_cert},
            ).text()
        )
        cmd = ycsb.ycsb_command(javabuild.ycsb_classpath(), "load", str(props))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "[INSERT], Return=OK, 50" in proc.stdout, proc.stdout[-3000:]
        assert PASSWORD not in proc.stdout + proc.stderr
        with _client(mongos_uri, username="admin", password=PASSWORD, tlsCAFile=tls.ca_cert) as c:
            assert c.jsh.usertable.count_documents({}) == 50
            assert c.config.collections.find_one({"_id": "jsh.usertable"})["key"] == {
                "_id": "hashed"
            }
    finally:
        for s in servers.values():
            s.stop()
    for name in servers:
        log = (workdir / name / "server.log").read_text(errors="replace")
        assert PASSWORD not in log, f"the password reached {name}'s log"
