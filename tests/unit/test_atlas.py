"""Atlas Admin API client and AtlasDeployment against the local fake (tests/atlas_fake.py)."""

import copy
import json
import logging
import re
import socket
import time

import pytest
from atlas_fake import CLIENT_ID, CLIENT_SECRET, CLOSE, PRIVATE, PROJECT, PUBLIC, serve

from mongobench.core import pricing
from mongobench.deploy.atlas import api
from mongobench.deploy.atlas import cluster as atlas_cluster
from mongobench.deploy.atlas import deployment as atlas_deployment


@pytest.fixture
def fake():
    with serve() as state:
        yield state


def client(fake, **kw):
    kw.setdefault("sleep", no_sleep)  # retries do not wait in tests
    retry = {
        k: kw.pop(k) for k in ("max_attempts", "backoff", "max_backoff", "retry_budget") if k in kw
    }
    return api.AtlasClient(
        PROJECT,
        api.Credentials(PUBLIC, PRIVATE),
        base_url=fake.base,
        retry=api.Retry(**retry),
        **kw,
    )


def no_sleep(_):
    pass


def sent(fake, method, part):
    """Requests that reached the API (authenticated: not the first contact's 401)."""
    return [r for r in fake.requests if r[0] == method and part in r[1] and "Authorization" in r[2]]


class Clock:
    """An injected clock and sleep: sleeping moves the clock, and is recorded."""

    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


SPEC = atlas_cluster.ClusterSpec("bench-m30", "M30", disk_size_gb=100, mongodb_major_version="8.0")


def test_digest_response_matches_rfc_2617_example():
    # RFC 2617 section 3.5: Mufasa / "Circle Of Life"
    challenge = {
        "realm": "testrealm@host.com",
        "qop": "auth,auth-int",
        "nonce": "dcd98b7102dd2f0e8b11d0f600bfb0c093",
        "opaque": "5ccc069c403ebaf9f0171e9517f40e41",
    }
    header = api.digest_authorization(
        challenge, "Mufasa", "Circle Of Life", "GET", "/dir/index.html", 1, "0a4f113b"
    )
    assert 'response="6629fae49393a05397450978507c4ef1"' in header
    assert (
        "qop=auth" in header
        and "nc=00000001" in header
        and 'opaque="5ccc069c403ebaf9f0171e9517f40e41"' in header
    )
    parsed = api.parse_challenge(
        'Digest realm="MMS Public API", domain="", nonce="n1", algorithm=MD5, qop="auth", stale=false'
    )
    assert parsed == {
        "realm": "MMS Public API",
        "domain": "",
        "nonce": "n1",
        "algorithm": "MD5",
        "qop": "auth",
        "stale": "false",
    }
    with pytest.raises(api.AtlasAuthError):
        api.parse_challenge('Basic realm="x"')


def test_cluster_body_follows_the_2024_08_05_schema():
    body = atlas_cluster.cluster_body(
        atlas_cluster.ClusterSpec("bench-1", "m40", 200, 3000, region="us-east-1")
    )
    assert body == {
        "name": "bench-1",
        "clusterType": "REPLICASET",
        "backupEnabled": False,
        "replicationSpecs": [
            {
                "regionConfigs": [
                    {
                        "providerName": "AWS",
                        "regionName": "US_EAST_1",
                        "priority": 7,
                        "electableSpecs": {
                            "instanceSize": "M40",
                            "nodeCount": 3,
                            "diskSizeGB": 200.0,
                            "diskIOPS": 3000,
                            "ebsVolumeType": "PROVISIONED",
                        },
                    }
                ]
            }
        ],
    }
    assert atlas_cluster.cluster_body(SPEC)["mongoDBMajorVersion"] == "8.0"
    with pytest.raises(ValueError, match="dedicated"):
        atlas_cluster.cluster_body(atlas_cluster.ClusterSpec("x", "M0"))
    with pytest.raises(ValueError, match="name"):
        atlas_cluster.cluster_body(atlas_cluster.ClusterSpec("bad name!", "M10"))
    with pytest.raises(ValueError, match="AWS"):
        atlas_cluster.cluster_body(
            atlas_cluster.ClusterSpec("x", "M30", ebs_volume_type="STANDARD", provider="GCP")
        )


def test_lifecycle_create_wait_resize_delete(fake):
    c = client(fake)
    created = c.create_cluster(SPEC)
    assert created["stateName"] == "CREATING"
    with pytest.raises(api.AtlasError, match="no standardSrv"):
        atlas_deployment.connection_string(created)
    idle = c.wait_for_idle("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    assert idle["stateName"] == "IDLE"
    assert atlas_deployment.connection_string(idle) == "mongodb+srv://bench-m30.ab1cd.mongodb.net"
    meta = atlas_cluster.cluster_hardware(idle)
    assert meta["atlas_tier"] == "M30" and meta["atlas_disk_size_gb"] == 100.0
    assert meta["atlas_price_per_hour_usd"] == 0.54 and meta["atlas_price_approximate"] is True

    updating = c.resize("bench-m30", instance_size="M40", disk_iops=4000)
    assert updating["stateName"] == "UPDATING"
    method, path, headers, raw = fake.requests[-1]
    assert (method, path) == ("PATCH", f"/api/atlas/v2/groups/{PROJECT}/clusters/bench-m30")
    hw = json.loads(raw)["replicationSpecs"][0]["regionConfigs"][0]["electableSpecs"]
    assert hw == {
        "instanceSize": "M40",
        "nodeCount": 3,
        "diskSizeGB": 100.0,
        "diskIOPS": 4000,
        "ebsVolumeType": "PROVISIONED",
    }
    assert json.loads(raw)["replicationSpecs"][0]["id"] == "spec0"  # the shard keeps its id
    resized = c.wait_for_idle("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    assert atlas_cluster.cluster_hardware(resized)["atlas_tier"] == "M40"

    c.delete_cluster("bench-m30")
    assert fake.requests[-1][0] == "DELETE"
    with pytest.raises(api.AtlasError, match="being deleted"):
        c.wait_for_idle("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    c.wait_until_deleted("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    with pytest.raises(api.AtlasNotFound) as exc:
        c.get_cluster("bench-m30")
    assert exc.value.status == 404 and exc.value.error_code == "CLUSTER_NOT_FOUND"


def test_every_request_is_versioned_and_digest_authenticated(fake):
    c = client(fake)
    c.create_cluster(SPEC)
    c.get_cluster("bench-m30")
    c.get_cluster("bench-m30")
    media = "application/vnd.atlas.2024-08-05+json"
    authed = [r for r in fake.requests if "Authorization" in r[2]]
    assert all(r[2]["Accept"] == media for r in fake.requests)
    assert fake.requests[0][3] and fake.requests[0][2]["Content-Type"] == media
    # one challenge, then the nonce is reused with a growing nonce count
    assert len(fake.requests) == 4 and len(authed) == 3
    assert [re.search(r"nc=(\w+)", r[2]["Authorization"]).group(1) for r in authed] == [
        "00000001",
        "00000002",
        "00000003",
    ]


def test_stale_nonce_is_answered_once(fake):
    c = client(fake)
    c.create_cluster(SPEC)
    fake.nonces.clear()  # the server forgets its nonces (restart, expiry)
    assert c.get_cluster("bench-m30")["name"] == "bench-m30"


def test_wrong_key_duplicate_name_bad_version(fake):
    bad = api.AtlasClient(PROJECT, api.Credentials(PUBLIC, "wrong-" + PRIVATE), base_url=fake.base)
    with pytest.raises(api.AtlasAuthError) as exc:
        bad.get_cluster("x")
    assert exc.value.status == 401
    c = client(fake)
    c.create_cluster(SPEC)
    with pytest.raises(api.AtlasConflict) as exc:
        c.create_cluster(SPEC)
    assert exc.value.status == 409 and exc.value.error_code == "DUPLICATE_CLUSTER_NAME"
    assert "already present" in str(exc.value)
    old = client(fake, api_version="2019-01-01")
    with pytest.raises(api.AtlasError) as exc:
        old.get_cluster("bench-m30")
    assert exc.value.status == 406


def test_waiting_for_idle_times_out_with_a_clear_error(fake):
    fake.polls_to_idle = 10**9  # never becomes IDLE
    c = client(fake)
    c.create_cluster(SPEC)
    now = [0.0]

    def sleep(s):
        now[0] += s

    with pytest.raises(
        api.AtlasTimeout, match=r"bench-m30 still CREATING after 90s waiting for IDLE"
    ):
        c.wait_for_idle("bench-m30", timeout=90, poll=30, sleep=sleep, clock=lambda: now[0])
    assert now[0] == 90


def test_network_errors_are_reported_without_secrets():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    c = api.AtlasClient(
        PROJECT, api.Credentials(PUBLIC, PRIVATE),
        base_url=f"http://127.0.0.1:{port}/api/atlas/v2", timeout=2,
        sleep=no_sleep,
    )  # fmt: skip
    with pytest.raises(api.AtlasError, match="network error.*gave up after 5 attempts") as exc:
        c.get_cluster("x")
    assert PRIVATE not in str(exc.value) and exc.value.status is None


def test_private_key_never_in_logs_errors_or_repr(fake, caplog):
    caplog.set_level(logging.DEBUG)
    texts = []
    c = client(fake)
    texts.append(repr(c))
    texts.append(str(vars(c)))
    c.create_cluster(SPEC)
    c.wait_for_idle("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    for call in (
        lambda: c.create_cluster(SPEC),
        lambda: c.get_cluster("nope"),
        lambda: api.AtlasClient(
            PROJECT, api.Credentials(PUBLIC, PRIVATE + "x"), base_url=fake.base
        ).get_cluster("x"),
        lambda: client(fake, api_version="1999-01-01").get_cluster("x"),
    ):
        with pytest.raises(api.AtlasError) as exc:
            call()
        texts += [str(exc.value), repr(exc.value)]
    texts += [r.getMessage() for r in caplog.records]
    assert any("bench-m30" in t for t in texts)  # the logs do say what happened
    for text in texts:
        assert PRIVATE not in text and PRIVATE[:12] not in text
    # nor does the key travel in any request, only the digest of it
    for _, path, headers, raw in fake.requests:
        assert PRIVATE not in path and PRIVATE.encode() not in raw
        assert all(PRIVATE not in v for v in headers.values())


def test_service_account_token_flow(fake):
    c = api.AtlasClient(
        PROJECT,
        api.Credentials(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
        base_url=fake.base,
    )
    c.create_cluster(SPEC)
    c.get_cluster("bench-m30")
    token_calls = [r for r in fake.requests if r[1] == "/api/oauth/token"]
    assert len(token_calls) == 1  # cached
    assert all(
        r[2]["Authorization"].startswith("Bearer ")
        for r in fake.requests
        if r[1] != "/api/oauth/token"
    )
    fake.tokens.clear()  # revoked / expired server-side: one refresh
    assert c.get_cluster("bench-m30")["name"] == "bench-m30"
    assert CLIENT_SECRET not in repr(c)
    bad = api.AtlasClient(
        PROJECT, api.Credentials(client_id=CLIENT_ID, client_secret="nope"), base_url=fake.base
    )
    with pytest.raises(api.AtlasAuthError, match="token request refused"):
        bad.get_cluster("x")


def test_from_env():
    env = {"ATLAS_PROJECT_ID": PROJECT, "ATLAS_PUBLIC_KEY": PUBLIC, "ATLAS_PRIVATE_KEY": PRIVATE}
    c = api.AtlasClient.from_env(env)
    assert c.project_id == PROJECT and PRIVATE not in repr(c)
    with pytest.raises(ValueError, match="ATLAS_PROJECT_ID"):
        api.AtlasClient.from_env({})
    with pytest.raises(ValueError, match="ATLAS_PRIVATE_KEY") as exc:
        api.AtlasClient.from_env({"ATLAS_PROJECT_ID": PROJECT, "ATLAS_PUBLIC_KEY": PUBLIC})
    assert PUBLIC not in str(exc.value)
    sa = api.AtlasClient.from_env(
        {"ATLAS_PROJECT_ID": PROJECT, "ATLAS_CLIENT_ID": "i", "ATLAS_CLIENT_SECRET": "s"}
    )
    assert "service-account" in repr(sa)
    with pytest.raises(ValueError, match="24 hexadecimal"):
        api.AtlasClient("not-a-project", api.Credentials(PUBLIC, PRIVATE))


def test_connection_string_never_carries_credentials():
    cluster = {
        "name": "c",
        "connectionStrings": {"standardSrv": "mongodb+srv://u:p@c.ab1cd.mongodb.net"},
    }
    assert atlas_deployment.connection_string(cluster) == "mongodb+srv://c.ab1cd.mongodb.net"
    cluster["connectionStrings"]["standard"] = "mongodb://h1:27017,h2:27017/?ssl=true"
    assert (
        atlas_deployment.connection_string(cluster, srv=False)
        == "mongodb://h1:27017,h2:27017/?ssl=true"
    )


def test_resize_body_keeps_the_rest_and_needs_a_change():
    cluster = {
        "replicationSpecs": [
            {
                "id": "s0",
                "zoneId": "z",
                "regionConfigs": [
                    {
                        "providerName": "AWS",
                        "regionName": "US_EAST_1",
                        "priority": 7,
                        "electableSpecs": {
                            "instanceSize": "M30",
                            "nodeCount": 3,
                            "diskSizeGB": 40.0,
                        },
                        "readOnlySpecs": {"instanceSize": "M30", "nodeCount": 0},
                        "effectiveElectableSpecs": {"instanceSize": "M30"},
                    }
                ],
            }
        ]
    }
    body = atlas_cluster.resize_body(cluster, disk_size_gb=80)
    rc = body["replicationSpecs"][0]["regionConfigs"][0]
    assert rc["electableSpecs"] == {"instanceSize": "M30", "nodeCount": 3, "diskSizeGB": 80.0}
    # one storage for every node type, also for read-only nodes that do not exist yet
    assert rc["readOnlySpecs"] == {"instanceSize": "M30", "nodeCount": 0, "diskSizeGB": 80.0}
    assert "effectiveElectableSpecs" not in rc and "zoneId" not in body["replicationSpecs"][0]
    assert (
        cluster["replicationSpecs"][0]["regionConfigs"][0]["electableSpecs"]["diskSizeGB"] == 40.0
    )
    with pytest.raises(ValueError, match="nothing to change"):
        atlas_cluster.resize_body(cluster)
    with pytest.raises(ValueError, match="ebsVolumeType"):
        atlas_cluster.resize_body(cluster, ebs_volume_type="gp3")


def _three_node_types(provider="AWS"):
    """A cluster document as GET returns it: electable, read-only (none) and analytics
    nodes in one region, storage in every spec (2024-08-05)."""
    disk = {"diskSizeGB": 100.0, "diskIOPS": 3000, "ebsVolumeType": "STANDARD"}
    if provider != "AWS":
        disk = {"diskSizeGB": 100.0}
    return {
        "name": "c",
        "replicationSpecs": [
            {
                "id": "s0",
                "zoneId": "z0",
                "regionConfigs": [
                    {
                        "providerName": provider,
                        "regionName": "US_EAST_1",
                        "priority": 7,
                        "electableSpecs": {"instanceSize": "M30", "nodeCount": 3, **disk},
                        "readOnlySpecs": {"instanceSize": "M30", "nodeCount": 0, **disk},
                        "analyticsSpecs": {"instanceSize": "M30", "nodeCount": 1, **disk},
                        "effectiveReadOnlySpecs": {"instanceSize": "M30", "nodeCount": 0},
                    }
                ],
            }
        ],
    }


def test_resize_moves_every_node_type_to_one_size_and_one_disk():
    # A hardware-matrix step changes tier and disk class: every node type follows, as the
    # Admin API wants (base nodes share an instance size, all nodes share the storage).
    body = atlas_cluster.resize_body(
        _three_node_types(), "M40", disk_iops=6000, ebs_volume_type="PROVISIONED"
    )
    rc = body["replicationSpecs"][0]["regionConfigs"][0]
    want = {"instanceSize": "M40", "diskSizeGB": 100.0, "diskIOPS": 6000}
    for kind, nodes in (("electableSpecs", 3), ("readOnlySpecs", 0), ("analyticsSpecs", 1)):
        assert rc[kind] == {**want, "ebsVolumeType": "PROVISIONED", "nodeCount": nodes}, kind
    atlas_cluster.check_uniform(body["replicationSpecs"])
    assert not [k for k in rc if k.startswith("effective")]
    # a spec that lagged behind (an earlier body changed electable nodes only) is evened out
    lagging = _three_node_types()
    lagging["replicationSpecs"][0]["regionConfigs"][0]["analyticsSpecs"]["diskSizeGB"] = 40.0
    with pytest.raises(ValueError, match="node types differ"):
        atlas_cluster.check_uniform(lagging["replicationSpecs"])
    evened = atlas_cluster.resize_body(lagging, "M50")
    atlas_cluster.check_uniform(evened["replicationSpecs"])
    # provider rules: EBS volume types on AWS only, no diskIOPS on GCP
    with pytest.raises(ValueError, match="AWS regions only"):
        atlas_cluster.resize_body(_three_node_types("AZURE"), ebs_volume_type="PROVISIONED")
    with pytest.raises(ValueError, match="GCP"):
        atlas_cluster.resize_body(_three_node_types("GCP"), disk_iops=5000)


def test_fake_refuses_a_resize_that_mixes_node_types(fake):
    # the fake checks what the API checks: a PATCH leaving node types apart is a 400
    c = client(fake)
    c.create_cluster(SPEC)
    c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)
    doc = c.get_cluster("bench-m30")
    mixed = copy.deepcopy(doc["replicationSpecs"])
    for rs in mixed:
        rs.pop("zoneId")
        for rc in rs["regionConfigs"]:
            for k in [k for k in rc if k.startswith("effective")]:
                rc.pop(k)
            rc["readOnlySpecs"] = {"instanceSize": "M30", "nodeCount": 0, "diskSizeGB": 100.0}
            rc["electableSpecs"]["instanceSize"] = "M40"
    with pytest.raises(api.AtlasError, match="HTTP 400"):
        c.update_cluster("bench-m30", {"replicationSpecs": mixed})
    c.resize("bench-m30", "M40")  # the project's body passes


def test_prices():
    assert pricing.price_per_hour("M10") == 0.08
    assert pricing.price_per_hour("m80", "aws", "us-east-1") == 7.30
    assert (
        pricing.price_per_hour("M30", "AWS", "EU_WEST_1") is None
    )  # other regions cost more: unknown
    assert pricing.price_per_hour("M30", "GCP") is None
    assert pricing.price_per_hour("M200") is None
    prices = [pricing.price_per_hour(t) for t in ("M10", "M20", "M30", "M40", "M50", "M60", "M80")]
    assert prices == sorted(prices)
    assert pricing.price_metadata("M40")["atlas_price_as_of"] == pricing.PRICES_AS_OF
    assert pricing.price_metadata("M40", "AZURE") == {}


def test_hardware_steps_parse_and_label():
    steps = atlas_cluster.parse_hardware_steps(
        "M30; m40:disk_iops=6000,ebs_volume_type=provisioned ;disk_gb=200;"
    )
    assert steps == [
        atlas_cluster.Hardware("M30"),
        atlas_cluster.Hardware("M40", disk_iops=6000, ebs_volume_type="provisioned"),
        atlas_cluster.Hardware(None, disk_size_gb=200.0),
    ]
    assert steps[1].label() == "M40, 6000 IOPS, provisioned"
    assert atlas_cluster.parse_hardware_steps(None) == []
    for bad, msg in [
        ("M30:iops=5", "not one of"),
        ("M30:disk_iops=lots", "bad value"),
        ("t3.large", "not an Atlas tier"),
        ("M30:ebs_volume_type=gp3", "ebsVolumeType"),
    ]:
        with pytest.raises(ValueError, match=msg):
            atlas_cluster.parse_hardware_steps(bad)
    labels = atlas_cluster.step_labels(
        {
            "atlas_tier": "M40",
            "atlas_disk_size_gb": 80.0,
            "atlas_disk_iops": 3000,
            "atlas_price_per_hour_usd": 1.04,
        }
    )
    assert labels == {
        "instance_type": "Atlas M40",
        "disk_type": "STANDARD 80 GB",
        "disk_iops": 3000,
        "price_per_hour": 1.04,
    }


def test_with_credentials_encodes_and_adds_auth_source():
    uri = atlas_deployment.with_credentials(
        "mongodb+srv://c.ab1cd.mongodb.net", "pkb-u", "p@ss/w:rd"
    )
    assert uri == "mongodb+srv://pkb-u:p%40ss%2Fw%3Ard@c.ab1cd.mongodb.net/?authSource=admin"
    uri = atlas_deployment.with_credentials(
        "mongodb://h1:1,h2:2/db?ssl=true&authSource=x", "u", "p"
    )
    assert uri == "mongodb://u:p@h1:1,h2:2/db?ssl=true&authSource=x"
    with pytest.raises(ValueError, match="without credentials"):
        atlas_deployment.with_credentials("mongodb://a:b@h/", "u", "p")


def deployment(fake, spec=SPEC, **kw):
    kw.setdefault("username", "pkb-run1")
    options = atlas_deployment.DeploymentOptions(poll=1, **kw)
    return atlas_deployment.AtlasDeployment(client(fake), spec, options, sleep=no_sleep)


def test_deployment_creates_resizes_and_removes_everything(fake):
    d = deployment(fake, access_list=["203.0.113.7", "198.51.100.0/24", "203.0.113.7"])
    uri = d.provision()
    password = fake.users["pkb-run1"]["password"]
    assert len(password) >= 32
    assert uri == f"mongodb+srv://pkb-run1:{password}@bench-m30.ab1cd.mongodb.net/?authSource=admin"
    user = fake.users["pkb-run1"]
    assert user["roles"] == [
        {"roleName": "readWriteAnyDatabase", "databaseName": "admin"},
        {"roleName": "clusterMonitor", "databaseName": "admin"},  # serverStatus
    ]
    assert user["scopes"] == [{"name": "bench-m30", "type": "CLUSTER"}]
    assert set(fake.access_list) == {"203.0.113.7", "198.51.100.0/24"}

    assert d.apply(None)["atlas_tier"] == "M30"
    meta = d.apply(atlas_cluster.Hardware("M40", disk_iops=4000))
    assert meta["atlas_tier"] == "M40" and meta["atlas_disk_iops"] == 4000
    assert meta["atlas_price_per_hour_usd"] == 1.04
    patches = [r for r in fake.requests if r[0] == "PATCH"]
    d.apply(atlas_cluster.Hardware("M40", disk_iops=4000))  # unchanged: no resize
    assert len([r for r in fake.requests if r[0] == "PATCH"]) == len(patches) == 1

    assert d.teardown() == []
    assert fake.users == {} and fake.access_list == {} and fake.clusters == {}
    # the CIDR entry is deleted by its URL-encoded value
    assert any(r[1].endswith("/accessList/198.51.100.0%2F24") for r in fake.requests)


def test_deployment_reuses_and_restores_an_existing_cluster(fake):
    c = client(fake)
    c.create_cluster(SPEC)
    c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)
    d = deployment(fake, reuse=True, srv=False)
    assert d.provision().startswith("mongodb://pkb-run1:")
    d.apply(atlas_cluster.Hardware("M50"))
    assert d.teardown() == []
    cluster = c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)
    assert atlas_cluster.cluster_hardware(cluster)["atlas_tier"] == "M30"  # back to what it was
    assert "bench-m30" in fake.clusters and fake.users == {}


def test_deployment_teardown_goes_on_after_a_failure_and_reports_it(fake):
    d = deployment(fake)
    d.provision()
    # Atlas fails the delete on every retry
    fake.faults += [("DELETE", "/databaseUsers/", 500, False)] * 5
    failures = d.teardown()
    assert len(failures) == 1 and "delete database user pkb-run1" in failures[0]
    assert "HTTP 500" in failures[0] and "gave up after 5 attempts" in failures[0]
    assert fake.clusters == {}  # the cluster was still deleted
    assert d.teardown() == [] and fake.users == {}  # a second teardown finishes the job


def test_deployment_teardown_counts_what_is_gone_as_undone_and_runs_once(fake):
    d = deployment(fake)
    d.provision()
    del fake.users["pkb-run1"]  # somebody deleted the user by hand: nothing is left behind
    assert d.teardown() == []
    assert (fake.clusters, fake.users, fake.access_list) == ({}, {}, {})
    before = len(fake.requests)
    assert d.teardown() == [] and len(fake.requests) == before  # nothing left to undo


def test_provision_refused_user_leaves_nothing_behind(fake):
    # The cluster and the access list exist when the user is refused: teardown removes them.
    fake.faults.append(("POST", "/databaseUsers", 400, False))
    d = deployment(fake, access_list=["203.0.113.7"])
    with pytest.raises(api.AtlasError, match="HTTP 400"):
        d.provision()
    assert fake.clusters and fake.access_list  # made before the refusal
    assert d.teardown() == []
    assert (fake.clusters, fake.users, fake.access_list) == ({}, {}, {})
    assert not [r for r in fake.requests if r[0] == "DELETE" and "/databaseUsers/" in r[1]]


def test_provision_lost_reply_is_undone_too(fake):
    # A 5xx (or a network error) may hide a request that took effect: undo it anyway.
    # The first try creates the user, every retry fails too: the outcome stays unknown.
    fake.faults.append(("POST", "/databaseUsers", 503, True))
    fake.faults += [("POST", "/databaseUsers", 503, False)] * 4
    d = deployment(fake, access_list=["203.0.113.7"])
    with pytest.raises(api.AtlasError, match="HTTP 503"):
        d.provision()
    assert "pkb-run1" in fake.users  # the user exists although the reply was an error
    assert d.teardown() == []
    assert (fake.clusters, fake.users, fake.access_list) == ({}, {}, {})


def test_deployment_never_deletes_a_cluster_it_did_not_create(fake):
    c = client(fake)
    c.create_cluster(SPEC)
    d = deployment(fake)  # not reuse: creating the same name fails
    with pytest.raises(api.AtlasConflict):
        d.provision()
    assert d.teardown() == []
    assert "bench-m30" in fake.clusters
    with pytest.raises(api.AtlasNotFound):
        deployment(fake, atlas_cluster.ClusterSpec("missing", "M30"), reuse=True).provision()


def test_deployment_secret_stays_out_of_logs_and_errors(fake, caplog):
    caplog.set_level(logging.DEBUG)
    d = deployment(fake)
    d.provision()
    password = fake.users["pkb-run1"]["password"]
    d.teardown()
    assert all(password not in r.getMessage() for r in caplog.records)
    assert password not in repr(d.__dict__.get("client"))


def test_pickled_client_holds_no_secret_and_reads_the_environment_again(fake, monkeypatch):
    # PKB pickles the benchmark spec (with the run's AtlasDeployment) into its run directory
    import pickle

    env = {"ATLAS_PROJECT_ID": PROJECT, "ATLAS_PUBLIC_KEY": PUBLIC, "ATLAS_PRIVATE_KEY": PRIVATE}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    d = atlas_deployment.AtlasDeployment(
        api.AtlasClient.from_env(base_url=fake.base),
        SPEC,
        atlas_deployment.DeploymentOptions(username="u", poll=1),
        sleep=no_sleep,
    )
    d.provision()
    blob = pickle.dumps(d)
    assert PRIVATE.encode() not in blob
    restored = pickle.loads(blob)  # e.g. PKB's --run_stage=cleanup in a later process
    assert restored.teardown() == [] and fake.clusters == {}
    sa = api.AtlasClient(
        PROJECT,
        api.Credentials(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
        base_url=fake.base,
    )
    blob = pickle.dumps(sa)
    assert CLIENT_SECRET.encode() not in blob
    monkeypatch.delenv("ATLAS_PRIVATE_KEY")
    assert pickle.loads(pickle.dumps(d.client))._secret.reveal() is None


# ---- retries: 429, 5xx and network errors ------------------------------------------


def test_429_is_retried_after_a_backoff_and_logged_without_secrets(fake, caplog):
    caplog.set_level(logging.INFO, logger="mongobench.atlas")
    clock = Clock()
    c = client(fake, sleep=clock.sleep, clock=clock)
    c.create_cluster(SPEC)
    fake.faults.append(("GET", "/clusters/bench-m30", 429, False))
    assert c.get_cluster("bench-m30")["name"] == "bench-m30"
    assert len(clock.sleeps) == 1 and 1.0 <= clock.sleeps[0] <= 2.0  # backoff 2 s, jittered
    assert len(sent(fake, "GET", "/clusters/bench-m30")) == 2
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 1 and "/clusters/bench-m30: HTTP 429, retry 2 of 5" in retries[0]
    assert all(PRIVATE not in r.getMessage() for r in caplog.records)
    assert caplog.records[-2].levelno == logging.INFO


def test_503_honours_retry_after_capped_at_max_backoff(fake):
    clock = Clock()
    c = client(fake, sleep=clock.sleep, clock=clock, max_backoff=30)
    c.create_cluster(SPEC)
    c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)
    fake.faults.append(("PATCH", "/clusters/bench-m30", 503, False, {"Retry-After": "7"}))
    fake.faults.append(("PATCH", "/clusters/bench-m30", 503, False, {"Retry-After": "3600"}))
    assert c.resize("bench-m30", instance_size="M40")["stateName"] == "UPDATING"
    assert clock.sleeps == [7.0, 30.0]
    assert len(sent(fake, "PATCH", "/clusters/bench-m30")) == 3


def test_a_dropped_connection_is_retried(fake):
    fake.faults.append(("POST", "/clusters", CLOSE, False))  # nothing done, no reply
    c = client(fake)
    assert c.create_cluster(SPEC)["stateName"] == "CREATING"
    assert len(sent(fake, "POST", "/clusters")) == 2
    assert list(fake.clusters) == ["bench-m30"]


def test_exhausted_retries_name_the_attempts(fake):
    clock = Clock()
    c = client(fake, sleep=clock.sleep, clock=clock)
    c.create_cluster(SPEC)
    fake.faults += [("GET", "/clusters/bench-m30", 502, False)] * 5
    with pytest.raises(api.AtlasError) as exc:
        c.get_cluster("bench-m30")
    assert exc.value.status == 502 and exc.value.attempts == 5
    assert "HTTP 502" in str(exc.value) and "gave up after 5 attempts" in str(exc.value)
    assert len(sent(fake, "GET", "/clusters/bench-m30")) == 5
    # exponential: 2, 4, 8, 16 s, each jittered into its upper half
    assert len(clock.sleeps) == 4
    for sleep, full in zip(clock.sleeps, (2, 4, 8, 16), strict=True):
        assert full / 2 <= sleep <= full
    # network errors too, with the same count
    fake.faults += [("GET", "/clusters/bench-m30", CLOSE, False)] * 5
    with pytest.raises(api.AtlasError, match=r"network error.*gave up after 5 attempts") as exc:
        c.get_cluster("bench-m30")
    assert exc.value.status is None


def test_retries_stop_at_the_time_budget(fake, monkeypatch):
    monkeypatch.setattr(api.random, "uniform", lambda a, b: b)  # no jitter: 2, 4, 8 s
    clock = Clock()
    c = client(fake, sleep=clock.sleep, clock=clock, max_attempts=10, retry_budget=10)
    fake.faults += [("GET", "/clusters/x", 500, False)] * 10
    with pytest.raises(api.AtlasError, match="gave up after 3 attempts") as exc:
        c.get_cluster("x")
    assert exc.value.attempts == 3 and clock.sleeps == [2, 4]  # a 4th try: after 14 s


def test_4xx_other_than_429_is_not_retried(fake):
    clock = Clock()
    c = client(fake, sleep=clock.sleep, clock=clock)
    fake.faults.append(("POST", "/clusters", 400, False))
    with pytest.raises(api.AtlasError, match="HTTP 400") as exc:
        c.create_cluster(SPEC)
    assert exc.value.attempts == 1 and clock.sleeps == []
    assert len(sent(fake, "POST", "/clusters")) == 1 and not fake.clusters
    with pytest.raises(api.AtlasNotFound):
        c.get_cluster("nope")
    assert clock.sleeps == []


def test_lost_reply_create_then_409_is_ours_and_torn_down(fake):
    # The first POSTs take effect but their replies are lost (503, dropped connection);
    # the retries get 409: the cluster and the user are this run's, and teardown removes them.
    fake.faults.append(("POST", "/clusters", 503, True))
    fake.faults.append(("POST", "/databaseUsers", CLOSE, True))
    d = deployment(fake, access_list=["203.0.113.7"])
    assert d.provision().startswith("mongodb+srv://pkb-run1:")
    assert d.created and d.user_created
    # each created once, then 409 on the retry
    assert len(sent(fake, "POST", "/clusters")) == len(sent(fake, "POST", "/databaseUsers")) == 2
    assert d.teardown() == []
    assert (fake.clusters, fake.users, fake.access_list) == ({}, {}, {})


def test_409_after_a_refusal_is_someone_elses_cluster(fake):
    # A 429 is a refusal (nothing done): a 409 on its retry is a cluster that was there.
    c = client(fake)
    c.create_cluster(SPEC)
    fake.faults.append(("POST", "/clusters", 429, False))
    with pytest.raises(api.AtlasConflict, match="already present") as exc:
        c.create_cluster(SPEC)
    assert not exc.value.after_unknown
    # A deployment looks before it creates: an existing cluster is refused up front.
    d = deployment(fake)
    posts = len(sent(fake, "POST", "/clusters"))
    with pytest.raises(api.AtlasConflict, match="exists already and was not made by this run"):
        d.provision()
    assert not d.created and len(sent(fake, "POST", "/clusters")) == posts
    assert d.teardown() == [] and "bench-m30" in fake.clusters


def test_delete_retried_after_a_lost_reply_counts_404_as_done(fake):
    c = client(fake, max_attempts=3)
    c.create_cluster(SPEC)
    c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)
    fake.polls_to_gone = 0  # gone at once: the retry gets 404
    fake.faults.append(("DELETE", "/clusters/bench-m30", 502, True))
    assert c.delete_cluster("bench-m30") is None
    assert len(sent(fake, "DELETE", "/clusters/bench-m30")) == 2
    with pytest.raises(api.AtlasNotFound):  # without a lost reply, 404 is still an error
        c.delete_cluster("bench-m30")


def test_polls_go_on_through_failures_until_the_deadline(fake):
    c = client(fake, max_attempts=2)
    c.create_cluster(SPEC)
    fake.faults += [("GET", "/clusters/bench-m30", 503, False)] * 5  # 2 polls fail, 1 retry each
    assert c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)["stateName"] == "IDLE"
    assert not fake.faults
    fake.polls_to_idle = 10**9
    c.resize("bench-m30", instance_size="M40")
    fake.faults += [("GET", "/clusters/bench-m30", 503, False)] * 100
    now = [0.0]

    def sleep(s):
        now[0] += s

    with pytest.raises(api.AtlasTimeout, match=r"still unknown \(.*HTTP 503.*\) after 3s"):
        c.wait_for_idle("bench-m30", timeout=3, poll=1, sleep=sleep, clock=lambda: now[0])


# ---- defect 2: wait until the new user and access-list entries are applied


def test_provision_returns_only_once_the_user_and_entries_are_applied():
    # Atlas applies a new database user and access-list entries asynchronously: the fake
    # keeps them PENDING for a while, and only then does the user reach the cluster.
    reached = []
    with serve(apply_delay_s=1.0) as fake:
        fake.on_user = lambda action, user, password: reached.append((action, user))
        d = atlas_deployment.AtlasDeployment(
            client(fake),
            SPEC,
            atlas_deployment.DeploymentOptions(
                username="pkb-run1", access_list=["203.0.113.7"], poll=0.05
            ),
        )
        d.provision()
        # a client connecting now authenticates: the cluster knows the user
        assert reached == [("create", "pkb-run1")]
        assert fake.entry_status["203.0.113.7"] == "ACTIVE"
        polled = [r[1] for r in fake.requests if r[0] == "GET"]
        assert any(p.endswith("/clusters/bench-m30/status") for p in polled)
        assert any(p.endswith("/accessList/203.0.113.7/status") for p in polled)
        assert d.teardown() == []


def test_waiting_for_apply_is_bounded_and_says_what_is_pending():
    with serve(apply_delay_s=3600) as fake:
        now = [0.0]

        def sleep(s):
            now[0] += s

        c = client(fake)
        c.create_cluster(SPEC)
        c.wait_for_idle("bench-m30", poll=1, sleep=no_sleep)
        c.request("POST", f"/groups/{PROJECT}/accessList", [{"ipAddress": "203.0.113.7"}])
        with pytest.raises(api.AtlasTimeout, match="access-list entry 203.0.113.7 PENDING"):
            c.wait_until_applied(
                "bench-m30", ["203.0.113.7"], timeout=60, poll=5, sleep=sleep,
                clock=lambda: now[0],
            )  # fmt: skip
        assert now[0] == 60
        fake.entry_status["203.0.113.7"] = "FAILED"
        with pytest.raises(api.AtlasError, match="FAILED"):
            c.wait_until_applied("bench-m30", ["203.0.113.7"], timeout=60, sleep=sleep)


def test_first_use_retries_authentication_failures_for_a_bounded_time():
    from pymongo.errors import OperationFailure

    from mongobench.perftables import target

    class Client:
        def __init__(self, failures):
            self.failures = failures

        def server_info(self):
            return {"version": "8.0.4"}

    calls, now, lines = [], [0.0], []

    def topology(client):
        calls.append(now[0])
        if client.failures:
            client.failures -= 1
            raise OperationFailure("Authentication failed.", code=18)
        return "ReplicaSetWithPrimary"

    orig = target.topology
    target.topology = topology
    try:

        def sleep(s):
            now[0] += s

        got = target.first_use(Client(2), 60, lines.append, sleep, lambda: now[0])
        assert got == ("ReplicaSetWithPrimary", "8.0.4") and calls == [0.0, 5.0, 10.0]
        assert "authentication failed; retrying" in lines[0]
        with pytest.raises(OperationFailure):  # bounded: gives up at the deadline
            target.first_use(Client(100), 12, lines.append, sleep, lambda: now[0])
        with pytest.raises(OperationFailure):  # without a retry time: at once
            target.first_use(Client(1), 0, lines.append, sleep, lambda: now[0])
    finally:
        target.topology = orig


# ---- defect 8: nothing leaks, nothing that existed before is deleted


def test_an_interrupt_during_create_still_leaves_the_cluster_to_teardown(fake, monkeypatch):
    # Ctrl-C while the create request is out: Atlas made the cluster, the reply is lost.
    c = client(fake)
    real = c._send

    def send(method, url, body, headers):
        out = real(method, url, body, headers)
        if method == "POST" and url.endswith("/clusters") and out[0] == 201:
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(c, "_send", send)
    d = atlas_deployment.AtlasDeployment(
        c, SPEC, atlas_deployment.DeploymentOptions(username="pkb-run1", poll=1), sleep=no_sleep
    )
    with pytest.raises(KeyboardInterrupt):
        d.provision()
    assert "bench-m30" in fake.clusters and d.leftovers() == ["cluster bench-m30"]
    assert d.teardown() == [] and fake.clusters == {}


def test_temporary_user_and_entries_and_entries_that_existed_stay(fake):
    # An entry that was there before the run (e.g. the office's permanent address) is used
    # as it is: not posted again, not given a deleteAfterDate, not deleted at teardown.
    fake.access_list["203.0.113.7"] = {"ipAddress": "203.0.113.7", "comment": "office"}
    d = deployment(fake, access_list=["203.0.113.7", "198.51.100.9"], temporary_s=6 * 3600)
    d.provision()
    assert d.entries_preexisting == ["203.0.113.7"] and d.entries_added == ["198.51.100.9"]
    assert fake.access_list["203.0.113.7"] == {"ipAddress": "203.0.113.7", "comment": "office"}
    for doc in (fake.access_list["198.51.100.9"], fake.users["pkb-run1"]):
        left = iso_seconds(doc["deleteAfterDate"]) - time.time()
        assert 6 * 3600 - 120 < left <= 6 * 3600  # Atlas removes it even if no teardown runs
    assert sorted(d.leftovers()) == [
        "access-list entry 198.51.100.9", "cluster bench-m30", "database user pkb-run1",
    ]  # fmt: skip
    assert d.teardown() == [] and d.leftovers() == []
    assert fake.access_list == {"203.0.113.7": {"ipAddress": "203.0.113.7", "comment": "office"}}
    with pytest.raises(ValueError, match="one week"):
        deployment(fake, temporary_s=8 * 24 * 3600)


def iso_seconds(text):
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
