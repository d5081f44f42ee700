"""Replica set / sharding documents, status interpretation and URIs.

No replica set can be formed here (no mongod; the stand-ins lack replica
sets), so initiation is tested by the documents it sends and by replaying
replSetGetStatus documents (tests/data/rs_status, shapes per
https://www.mongodb.com/docs/manual/reference/command/replSetGetStatus/).
"""

import pathlib

import pytest
from bson import json_util
from pymongo import uri_parser

from mongobench.core import shardkey
from mongobench.deploy import placement, topology

DATA = pathlib.Path(__file__).parent.parent / "data" / "rs_status"
HOSTS = [
    "mongod-0.bench.internal:27017",
    "mongod-1.bench.internal:27017",
    "mongod-2.bench.internal:27017",
]


def status(name):
    return json_util.loads((DATA / name).read_text())


def test_replset_config_matches_the_documented_shape():
    # https://www.mongodb.com/docs/manual/reference/replica-configuration/
    cfg = topology.replset_config("rs0", HOSTS)
    assert cfg == {
        "_id": "rs0",
        "members": [
            {"_id": 0, "host": HOSTS[0], "priority": 2},
            {"_id": 1, "host": HOSTS[1], "priority": 1},
            {"_id": 2, "host": HOSTS[2], "priority": 1},
        ],
    }
    assert topology.replset_initiate_command(cfg) == {"replSetInitiate": cfg}
    assert topology.replset_config("cfg", HOSTS, configsvr=True)["configsvr"] is True
    assert topology.replset_config("one", HOSTS[:1]) == {
        "_id": "one",
        "members": [{"_id": 0, "host": HOSTS[0]}],
    }
    assert (
        "priority" not in topology.replset_config("rs", HOSTS, preferred_primary=None)["members"][0]
    )
    with pytest.raises(ValueError, match="duplicate"):
        topology.replset_config("rs0", [HOSTS[0], HOSTS[0]])
    with pytest.raises(ValueError):
        topology.replset_config("rs0", [])


@pytest.mark.parametrize(
    "name,state,ready,primary",
    [
        ("7.0_pss_ready.json", "ready", True, HOSTS[0]),
        ("8.0_pss_ready.json", "ready", True, HOSTS[0]),
        ("8.0_configsvr_ready.json", "ready", True, "cfg-0.bench.internal:27019"),
        ("8.0_initial_sync_startup2.json", "starting", False, HOSTS[0]),
        ("7.0_no_primary_yet.json", "electing", False, None),
        ("8.0_member_down.json", "degraded", False, HOSTS[0]),
        ("not_yet_initialized.json", "uninitialized", False, None),
    ],
)
def test_status_interpretation_on_recorded_documents(name, state, ready, primary):
    res = topology.wait_for_primary(status(name))
    assert (res.state, res.ready, res.primary) == (state, ready, primary), res.message
    if name != "not_yet_initialized.json":
        assert len(res.members) == 3


def test_status_details():
    down = topology.wait_for_primary(status("8.0_member_down.json"))
    assert HOSTS[2] in down.message and down.members[HOSTS[2]] == "(not reachable/healthy)"
    sync = topology.wait_for_primary(status("8.0_initial_sync_startup2.json"))
    assert sync.members[HOSTS[2]] == "STARTUP2"
    assert (
        topology.wait_for_primary(status("8.0_pss_ready.json"), expected_members=4).state
        == "starting"
    )
    two = status("8.0_pss_ready.json")
    two["members"][1]["stateStr"] = "PRIMARY"
    assert topology.wait_for_primary(two).state == "electing"
    err = topology.wait_for_primary({"ok": 0, "code": 13, "errmsg": "not authorized"})
    assert err.state == "error" and "not authorized" in err.message


class OperationFailure(Exception):
    """Stands for pymongo.errors.OperationFailure (code + details)."""

    def __init__(self, code, errmsg):
        super().__init__(errmsg)
        self.code = code
        self.details = {"errmsg": errmsg, "code": code}


class FakeAdmin:
    """Replays replSetGetStatus replies; records every command sent."""

    def __init__(self, replies, initiate_error=None):
        self.replies = list(replies)
        self.initiate_error = initiate_error
        self.sent = []

    def command(self, name, *args):
        self.sent.append((name, *args))
        if name == "replSetInitiate":
            if self.initiate_error:
                raise self.initiate_error
            return {"ok": 1}
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply


class FakeClient:
    def __init__(self, admin):
        self.admin = admin


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_initiate_then_wait_until_primary():
    not_yet = OperationFailure(94, "no replset config has been received")
    admin = FakeAdmin(
        [
            not_yet,
            status("7.0_no_primary_yet.json"),
            status("8.0_initial_sync_startup2.json"),
            status("8.0_pss_ready.json"),
        ]
    )
    clock = Clock()
    cfg = topology.replset_config("rs0", HOSTS)
    res = topology.initiate_replica_set(
        FakeClient(admin), cfg, timeout=60, poll=2, sleep=clock.sleep, clock=clock
    )
    assert res.ready and res.primary == HOSTS[0]
    assert admin.sent[0] == ("replSetInitiate", cfg)
    assert [s[0] for s in admin.sent[1:]] == ["replSetGetStatus"] * 4
    assert clock.now == 6  # three polls that were not ready


def test_initiate_is_idempotent_but_surfaces_other_errors():
    already = OperationFailure(23, "already initialized")
    admin = FakeAdmin([status("8.0_pss_ready.json")], initiate_error=already)
    assert topology.initiate_replica_set(
        FakeClient(admin), topology.replset_config("rs0", HOSTS)
    ).ready
    bad = FakeAdmin(
        [status("8.0_pss_ready.json")],
        initiate_error=OperationFailure(93, "InvalidReplicaSetConfig"),
    )
    with pytest.raises(OperationFailure):
        topology.initiate_replica_set(FakeClient(bad), topology.replset_config("rs0", HOSTS))


def test_initiate_times_out_with_the_last_state():
    admin = FakeAdmin([status("8.0_member_down.json")])
    clock = Clock()
    with pytest.raises(TimeoutError, match=r"rs0 not ready after 10s: degraded.*not reachable"):
        topology.initiate_replica_set(
            FakeClient(admin),
            topology.replset_config("rs0", HOSTS),
            timeout=10,
            poll=1,
            sleep=clock.sleep,
            clock=clock,
        )


def test_sharding_command_documents():
    # https://www.mongodb.com/docs/manual/reference/command/addShard/
    assert topology.add_shard_command("shard0", ["a:27018", "b:27018"], name="shard0") == {
        "addShard": "shard0/a:27018,b:27018",
        "name": "shard0",
    }
    assert topology.enable_sharding_command("bench") == {"enableSharding": "bench"}
    # https://www.mongodb.com/docs/manual/reference/command/shardCollection/
    assert shardkey.shard_collection_command("bench.usertable", "_id:hashed") == {
        "shardCollection": "bench.usertable",
        "key": {"_id": "hashed"},
    }
    assert shardkey.shard_collection_command("bench.c", {"a": 1, "b": 1}, unique=True) == {
        "shardCollection": "bench.c",
        "key": {"a": 1, "b": 1},
        "unique": True,
    }


@pytest.mark.parametrize(
    "spec,err",
    [
        ("a:hashed,b:hashed", "at most one hashed"),
        ("a:-1", "must be 1 or 'hashed'"),
        (":1", "empty"),
        ("", "empty"),
    ],
)
def test_bad_shard_keys(spec, err):
    with pytest.raises(ValueError, match=err):
        shardkey.parse_shard_key(spec)


def test_hashed_unique_and_bad_namespace_rejected():
    with pytest.raises(ValueError, match="unique"):
        shardkey.shard_collection_command("db.c", "_id:hashed", unique=True)
    with pytest.raises(ValueError, match="db.collection"):
        shardkey.shard_collection_command("nodot", "_id:1")
    assert shardkey.parse_shard_key("region, ts:1") == {"region": 1, "ts": 1}


def test_sharded_cluster_plan():
    plan = placement.sharded_cluster_plan(
        config_hosts=["s0", "s1", "s2"],
        shard_hosts=[["s0", "s1", "s2"], ["s1", "s2", "s0"], ["s2"]],
        mongos_hosts=["c0", "c1", "c0"],
        sharding=placement.Sharding("bench", "usertable", "_id:hashed"),
    )
    assert plan.config_replset["configsvr"] is True
    assert [m["host"] for m in plan.config_replset["members"]] == [
        "s0:27019",
        "s1:27019",
        "s2:27019",
    ]
    assert placement.config_db_string(plan) == "cfg/s0:27019,s1:27019,s2:27019"
    # several shards share hosts: each shard gets its own port, never 27019 (config) or 27017
    assert [rs["_id"] for rs in plan.shard_replsets] == ["shard0", "shard1", "shard2"]
    assert [m["host"] for m in plan.shard_replsets[1]["members"]] == [
        "s1:27020",
        "s2:27020",
        "s0:27020",
    ]
    ports = {(i.host, i.port) for i in plan.instances}
    assert len(ports) == len(plan.instances)  # no two processes on one host:port
    assert plan.admin_commands == [
        {"addShard": "shard0/s0:27018,s1:27018,s2:27018", "name": "shard0"},
        {"addShard": "shard1/s1:27020,s2:27020,s0:27020", "name": "shard1"},
        {"addShard": "shard2/s2:27021", "name": "shard2"},  # a single-member replica set
        {"enableSharding": "bench"},
        {"shardCollection": "bench.usertable", "key": {"_id": "hashed"}},
    ]
    assert [m.address for m in plan.mongos] == ["c0:27017", "c1:27017"]
    roles = [i.role for i in plan.instances]
    assert (
        roles.count("configsvr") == 3
        and roles.count("shardsvr") == 7
        and roles.count("mongos") == 2
    )


def test_mongos_placement_and_client_uris():
    assert placement.mongos_placement("client", ["c0", "c1"], ["s0"]) == ["c0", "c1"]
    assert placement.mongos_placement("server", ["c0"], ["s0", "s1", "s0"]) == ["s0", "s1"]
    with pytest.raises(ValueError):
        placement.mongos_placement("edge", ["c0"], ["s0"])
    with pytest.raises(ValueError):
        placement.mongos_placement("client", [], ["s0"])
    assert (
        placement.client_uri_for("c0", "client", ["c0", "c1"])
        == "mongodb://127.0.0.1:27017/?w=majority"
    )
    assert (
        placement.client_uri_for("c0", "server", ["s0", "s1"])
        == "mongodb://s0:27017,s1:27017/?w=majority"
    )


def test_uris_carry_the_seed_defaults_and_no_credentials():
    uri = topology.replica_set_uri(HOSTS, "rs0", database="bench")
    assert uri == (
        "mongodb://mongod-0.bench.internal:27017,mongod-1.bench.internal:27017,"
        "mongod-2.bench.internal:27017/bench?replicaSet=rs0&w=majority&readPreference=primary"
    )
    parsed = uri_parser.parse_uri(uri)
    assert parsed["username"] is None and parsed["password"] is None
    assert parsed["options"]["replicaSet"] == "rs0"
    assert parsed["options"]["w"] == "majority"
    assert parsed["options"]["readPreference"] == "primary"
    assert topology.standalone_uri("h", 27017) == "mongodb://h:27017/"
    assert (
        topology.direct_uri("10.0.0.1", 27018) == "mongodb://10.0.0.1:27018/?directConnection=true"
    )
    assert uri_parser.parse_uri(topology.direct_uri("::1", 27017))["nodelist"] == [("::1", 27017)]
    assert (
        topology.mongos_uri(["a:1"], w=1, retryWrites="true")
        == "mongodb://a:1/?w=1&retryWrites=true"
    )
    with pytest.raises(ValueError, match="credentials"):
        topology.replica_set_uri(["user:pw@h:27017"], "rs0")


def test_pkb_sharded_plan_numbers_shards_then_config_then_mongos():
    # the e2e layout: static VMs that are one machine, two one-member shards
    plan = placement.placed_sharded_plan(
        ["127.0.0.1"],
        "127.0.0.1",
        shards=2,
        shard_members=1,
        config_members=1,
        port=100,
        database="bench",
    )
    got = [(i.role, i.replset, i.index, i.vm, i.address) for i in plan.instances]
    assert got == [
        ("configsvr", "cfg", 2, 0, "127.0.0.1:102"),
        ("shardsvr", "shard0", 0, 0, "127.0.0.1:100"),
        ("shardsvr", "shard1", 1, 0, "127.0.0.1:101"),
        ("mongos", None, 3, None, "127.0.0.1:103"),
    ]
    assert plan.admin_commands == [
        {"addShard": "shard0/127.0.0.1:100", "name": "shard0"},
        {"addShard": "shard1/127.0.0.1:101", "name": "shard1"},
        {"enableSharding": "bench"},
    ]
    assert placement.data_processes(plan.instances) == {"127.0.0.1": 3}
    assert placement.initiation(plan.config_replset)["seed"] == "127.0.0.1:102"
    # two VMs, a client of its own: shard members round-robin, config servers from VM 0
    plan = placement.placed_sharded_plan(
        ["a", "b"], "c", shards=2, shard_members=2, config_members=3, port=100, database="d"
    )
    got = [(i.replset, i.vm, i.address) for i in plan.instances]
    assert got == [
        ("cfg", 0, "a:102"),
        ("cfg", 1, "b:102"),
        ("cfg", 0, "a:103"),
        ("shard0", 0, "a:100"),
        ("shard0", 1, "b:100"),
        ("shard1", 0, "a:101"),
        ("shard1", 1, "b:101"),
        (None, None, "c:100"),
    ]


def test_replica_set_plan_places_members_round_robin():
    plan = placement.replica_set_plan(["h1", "h2"], 3, 27017)
    got = [(i.index, i.vm, i.role, i.replset, i.address) for i in plan.instances]
    assert got == [
        (0, 0, "mongod", "rs0", "h1:27017"),
        (1, 1, "mongod", "rs0", "h2:27017"),
        (2, 0, "mongod", "rs0", "h1:27018"),
    ]
    assert plan.config == topology.replset_config("rs0", ["h1:27017", "h2:27017", "h1:27018"])
    assert placement.initiation(plan.config) == {"config": plan.config, "seed": "h1:27017"}
    assert placement.data_processes(plan.instances) == {"h1": 2, "h2": 1}


def test_round_robin_placement_gives_shared_hosts_consecutive_ports():
    # three VMs: one member each, all on the base port
    assert placement.place_round_robin(3, ["10.0.0.1", "10.0.0.2", "10.0.0.3"], 27017) == [
        (0, 27017),
        (1, 27017),
        (2, 27017),
    ]
    # one VM (or static VMs that are one machine): consecutive ports
    assert placement.place_round_robin(3, ["10.0.0.1"], 27017) == [
        (0, 27017),
        (0, 27018),
        (0, 27019),
    ]
    assert placement.place_round_robin(3, ["h", "h"], 100) == [(0, 100), (1, 101), (0, 102)]
    # a later group on the same hosts skips the ports already taken
    taken = {}
    shards = placement.place_round_robin(4, ["a", "b"], 27017, taken)
    config = placement.place_round_robin(1, ["a", "b"], 27017, taken)
    assert shards == [(0, 27017), (1, 27017), (0, 27018), (1, 27018)]
    assert config == [(0, 27019)]
    with pytest.raises(ValueError):
        placement.place_round_robin(0, ["a"], 1)
    with pytest.raises(ValueError):
        placement.place_round_robin(1, [], 1)


def test_default_cache_is_mongods_own_shared_between_processes():
    gib = 1024 * 1024  # kB
    assert placement.default_cache_gb(16 * gib) == 7.5  # 50 % of (16 - 1)
    assert placement.default_cache_gb(16 * gib, 3) == 2.5
    assert placement.default_cache_gb(1 * gib) == 0.25  # the floor
    assert placement.default_cache_gb(int(7.5 * gib), 0) == 3.25  # 0 processes counts as 1


def test_run_plan_initiates_every_set_then_runs_admin_commands_on_mongos():
    ready = status("8.0_pss_ready.json")
    connected, clients = [], []

    def connect(uri):
        connected.append(uri)
        c = FakeClient(FakeAdmin([ready]))
        c.close = lambda: None
        clients.append(c)
        return c

    cfg = topology.replset_config("rs0", HOSTS)
    plan = {
        "replsets": [{"config": cfg, "seed": HOSTS[0]}],
        "mongos": "10.0.0.9:27017",
        "admin_commands": [
            topology.add_shard_command("rs0", HOSTS),
            topology.enable_sharding_command("db"),
        ],
    }
    out = topology.run_plan(plan, connect, sleep=lambda s: None)
    assert out == {"replsets": {"rs0": HOSTS[0]}, "admin": ["addShard", "enableSharding"]}
    assert connected == [
        "mongodb://mongod-0.bench.internal:27017/?directConnection=true",
        "mongodb://10.0.0.9:27017/",
    ]
    assert clients[0].admin.sent[0] == ("replSetInitiate", cfg)
    assert [s[0] for s in clients[1].admin.sent] == plan["admin_commands"]
    with pytest.raises(ValueError, match="mongos"):
        topology.run_plan({"admin_commands": [{"ping": 1}]}, connect)
