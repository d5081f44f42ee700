"""Deployment functions take their options as one frozen dataclass (issue 24: no function takes
more than 8 parameters for run options), and what they write is byte for byte what the loose
parameters wrote: tests/data/deploy_options/ holds the outputs of the old signatures, recorded
before the change, for the same inputs."""

import dataclasses
import inspect
import json
from pathlib import Path

import pytest

from mongobench.deploy import mongod, placement
from mongobench.deploy.atlas import api, cluster
from mongobench.deploy.atlas import deployment as atlas_deployment
from mongobench.remote import processes

PROJECT = "0123456789abcdef01234567"
OLD = Path(__file__).resolve().parents[1] / "data" / "deploy_options"


def _old(name):
    return json.loads((OLD / f"{name}.json").read_text())


def _params(fn):
    return [p for p in inspect.signature(fn).parameters if p != "self"]


@pytest.mark.parametrize(
    "fn",
    [
        mongod.mongod_config,
        mongod.instance_config,
        processes.background_command,
        placement.sharded_cluster_plan,
        placement._sharded_plan,
        atlas_deployment.AtlasDeployment.__init__,
        api.AtlasClient.__init__,
    ],
)
def test_at_most_eight_parameters(fn):
    assert len(_params(fn)) <= 8, (fn.__qualname__, _params(fn))


def test_options_are_frozen_dataclasses():
    for cls in (
        mongod.InstanceOptions,
        processes.Launch,
        placement.Sharding,
        atlas_deployment.DeploymentOptions,
        api.Credentials,
        api.Retry,
    ):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls


def test_instance_config_writes_what_the_old_signature_wrote():
    Opts = mongod.InstanceOptions
    new = [
        mongod.instance_config(
            3, Opts(cache_gb=2.33, bind_ip="0.0.0.0"), base_dir="/data/mb/", version="7.0.14"
        ),
        mongod.instance_config(
            0,
            Opts(
                cache_gb=1,
                tls_certificate_key_file="/d/server.pem",
                extra={"net": {"maxIncomingConnections": 2000}},
            ),
            base_dir="/d",
            version="8.0.0",
        ),
        mongod.instance_config(
            2,
            Opts(role="shardsvr", replset="shard0", cache_gb=2),
            base_dir="/w",
            version="8.0.4",
            port=30000,
        ),
        mongod.instance_config(
            1, Opts(role="configsvr", replset="cfg"), base_dir="/w", version="6.0", first_port=28000
        ),
        mongod.instance_config(
            4,
            Opts(
                role="mongos",
                config_db="cfg/h:1,h:2",
                tls_certificate_key_file="/w/s.pem",
                bind_ip="10.0.0.1",
            ),
            base_dir="/w",
            version="8.0",
        ),
    ]
    assert new == _old("mongod")["instance_config"]


def test_mongod_config_writes_what_the_old_signature_wrote():
    Opts = mongod.InstanceOptions
    new = [
        mongod.mongod_config(
            2,
            27019,
            "/data/db2",
            "/data/log/m2.log",
            Opts(cache_gb=1.5, bind_ip="127.0.0.1,10.0.0.5"),
            version="8.0",
        ),
        mongod.mongod_config(
            0,
            27018,
            "/d",
            "/l",
            Opts(cache_gb=2, bind_ip="0.0.0.0", replset="shard0", role="shardsvr"),
            version="8.0",
        ),
        mongod.mongod_config(
            0,
            1,
            "/d",
            "/l",
            Opts(cache_gb=1, bind_ip="h", extra={"net": {"maxIncomingConnections": 9}}),
            version="8.0",
            tls=mongod.tls_settings("/w/tls/server.pem"),
        ),
    ]
    assert [mongod.render_config(c) for c in new] == _old("mongod")["mongod_config"]


def test_background_command_writes_what_the_old_signature_wrote():
    Launch = processes.Launch
    new = [
        processes.background_command(["sleep", "60"], Launch(pid_file="/t/p", stdout="/t/o")),
        processes.background_command(
            ["mongod", "--config", "/x y/c"],
            Launch(
                pid_file="/t/p",
                stdout="/t/o",
                stderr="/t/e",
                rc_file="/t/rc",
                sudo=True,
                run_as="mongodb",
                nofile=64000,
                nproc=64000,
                env={"A": "1 2", "B": "x"},
                wait_s=5,
            ),
        ),
        processes.background_command(
            ["a"], Launch(pid_file="/t/p", stdout="/t/o", rc_file="/t/rc", nofile=10)
        ),
    ]
    assert new == _old("processes")["background_command"]


def _plain(plan):
    return json.loads(json.dumps(dataclasses.asdict(plan), default=str))


def test_sharded_plans_are_what_the_old_signatures_planned():
    Sharding = placement.Sharding
    plan = placement.sharded_cluster_plan
    new = [
        plan(
            ["c1", "c2", "c3"],
            [["s1"], ["s2", "s3"]],
            ["m1", "m1", "m2"],
            Sharding("db", "coll", "k"),
        ),
        plan(
            ["h"],
            [["h"], ["h"]],
            ["h"],
            Sharding("ycsb", None, None, 30000, 30000, 30000, "conf", "sh"),
            taken={"h": {30000}},
        ),
        plan(
            ["a"],
            [["a", "b"]],
            ["c"],
            Sharding("db", "usertable", {"_id": "hashed"}, 27119, 27118, 27117),
        ),
    ]
    old = _old("placement")
    assert [_plain(p) for p in new] == old["sharded_cluster_plan"]
    placed = [
        placement.placed_sharded_plan(
            ["h1", "h2", "h3"],
            "cl",
            shards=2,
            shard_members=3,
            config_members=3,
            port=27017,
            database="ycsb",
        ),
        placement.placed_sharded_plan(
            ["h1"], "cl", shards=3, shard_members=1, config_members=1, port=28000, database="db"
        ),
    ]
    assert [_plain(p) for p in placed] == old["placed_sharded_plan"]


def test_an_atlas_deployment_holds_what_the_old_signature_held():
    # its state decides every request it sends (and PKB pickles it between stages)
    client = api.AtlasClient(PROJECT, api.Credentials("pub", "priv"), base_url="http://x")
    spec = cluster.ClusterSpec("bench-m30", "M30")
    Options = atlas_deployment.DeploymentOptions
    new = [
        atlas_deployment.AtlasDeployment(client, spec, Options(username="pkb-run1")),
        atlas_deployment.AtlasDeployment(
            client,
            spec,
            Options(
                reuse=True,
                keep=True,
                username="u",
                access_list=["1.2.3.4", "5.6.7.0/24", "1.2.3.4"],
                comment="PKB run x",
                srv=False,
                timeout=10,
                poll=1,
                temporary_s=6 * 3600,
                apply_timeout=5,
            ),
        ),
    ]
    skip = ("client", "spec", "sleep", "clock")
    state = [{k: v for k, v in vars(d).items() if k not in skip} for d in new]
    assert state == _old("atlas")["AtlasDeployment"]


def _client_state(c):
    skip = ("_sleep", "_clock", "_secret", "_client_secret")
    state = {k: v for k, v in vars(c).items() if k not in skip}
    state["_secret"] = [c._secret.reveal(), c._secret._env]
    state["_client_secret"] = [c._client_secret.reveal(), c._client_secret._env]
    return {**state, "repr": repr(c)}


def test_an_atlas_client_holds_what_the_old_signature_held():
    # its state decides every request it sends: URL, version header, credentials, retries
    Credentials = api.Credentials
    new = [
        api.AtlasClient(PROJECT, Credentials("pub", "priv")),
        api.AtlasClient(
            PROJECT,
            Credentials(client_id="cid", client_secret="csec", client_secret_env="E2"),
            base_url="http://x/",
            api_version="2019-01-01",
            timeout=5,
            retry=api.Retry(max_attempts=3, backoff=1, max_backoff=30, retry_budget=10),
        ),
        api.AtlasClient(PROJECT, Credentials("pub", "priv", "cid", "csec", secret_env="E1")),
    ]
    assert [_client_state(c) for c in new] == _old("atlas")["AtlasClient"]
    # the secrets never show in a repr of the credentials either
    shown = repr(Credentials("pub", "priv", "cid", "csec"))
    assert "priv" not in shown and "csec" not in shown
