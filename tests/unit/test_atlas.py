"""Atlas Admin API client against a local fake that follows the documented API.

The fake (http.server on 127.0.0.1, port 0, a thread) implements what
https://www.mongodb.com/docs/api/doc/atlas-admin-api-v2/ documents for clusters:
- HTTP Digest (realm "MMS Public API", qop=auth, MD5): 401 + WWW-Authenticate
  without or with wrong credentials; or OAuth2 client credentials (service
  accounts) at /api/oauth/token, then Bearer
- versioned media type in Accept (application/vnd.atlas.YYYY-MM-DD+json), 406 otherwise
- POST /api/atlas/v2/groups/{groupId}/clusters -> 201, stateName CREATING; then IDLE
- PATCH .../clusters/{name} -> 200, UPDATING; then IDLE
- DELETE .../clusters/{name} -> 202, DELETING; then 404 CLUSTER_NOT_FOUND
- duplicate name -> 409 DUPLICATE_CLUSTER_NAME; errors as {error, errorCode, detail, reason}
"""

import base64
import copy
import hashlib
import json
import logging
import re
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mongobench import atlas

PROJECT = "5f0c1a2b3c4d5e6f7a8b9c0d"
PUBLIC = "abcdefgh"
PRIVATE = "1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"  # must never leak
CLIENT_ID = "mdb_sa_id_0123456789abcdef01234567"
CLIENT_SECRET = "mdb_sa_sk_SECRETSECRETSECRETSECRET"
REALM = "MMS Public API"
VERSIONS = {"2023-01-01", "2023-02-01", "2024-08-05", "2024-10-23"}


def md5(s):
    return hashlib.md5(s.encode()).hexdigest()


class FakeAtlas:
    """State shared by the handler threads."""

    def __init__(self, polls_to_idle=2, polls_to_gone=2):
        self.clusters = {}
        self.polls = {}
        self.polls_to_idle = polls_to_idle
        self.polls_to_gone = polls_to_gone
        self.nonces = set()
        self.seen_nc = {}
        self.tokens = set()
        self.requests = []  # (method, path, headers, body)
        self.lock = threading.Lock()

    def challenge(self, stale=False):
        nonce = secrets.token_hex(16)
        self.nonces.add(nonce)
        return (
            f'Digest realm="{REALM}", domain="", nonce="{nonce}", algorithm=MD5, qop="auth",'
            f" stale={'true' if stale else 'false'}"
        )

    def check_digest(self, method, header):
        """None if valid; else 'stale' or 'bad'."""
        if not header or not header.startswith("Digest "):
            return "bad"
        f = {k: a or b for k, a, b in re.findall(r'(\w+)=(?:"([^"]*)"|([^,\s]*))', header[7:])}
        if f.get("username") != PUBLIC or f.get("realm") != REALM:
            return "bad"
        if f.get("nonce") not in self.nonces:
            return "stale"
        ha1 = md5(f"{PUBLIC}:{REALM}:{PRIVATE}")
        ha2 = md5(f"{method}:{f['uri']}")
        want = md5(f"{ha1}:{f['nonce']}:{f['nc']}:{f['cnonce']}:auth:{ha2}")
        if f.get("response") != want or f.get("qop") != "auth":
            return "bad"
        nc = int(f["nc"], 16)
        if nc <= self.seen_nc.get(f["nonce"], 0):  # replayed
            return "bad"
        self.seen_nc[f["nonce"]] = nc
        return None

    def advance(self, name):
        """One GET = one poll; states move on after a few polls, like the real service."""
        doc = self.clusters[name]
        self.polls[name] = self.polls.get(name, 0) + 1
        if doc["stateName"] in ("CREATING", "UPDATING") and self.polls[name] >= self.polls_to_idle:
            doc["stateName"] = "IDLE"
            host = f"{name.lower()}.ab1cd.mongodb.net"
            doc["connectionStrings"] = {
                "standardSrv": f"mongodb+srv://{host}",
                "standard": f"mongodb://{name}-shard-00-00.ab1cd.mongodb.net:27017/?ssl=true",
            }
        if doc["stateName"] == "DELETING" and self.polls[name] >= self.polls_to_gone:
            del self.clusters[name]
            return None
        return doc


def make_handler(fake):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output quiet
            pass

        def reply(self, status, doc=None, headers=None):
            body = json.dumps(doc).encode() if doc is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.atlas.2024-08-05+json")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, status, code, detail):
            self.reply(
                status,
                {
                    "error": status,
                    "errorCode": code,
                    "detail": detail,
                    "reason": self.responses[status][0],
                },
            )

        def handle_any(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            with fake.lock:
                fake.requests.append((method, self.path, dict(self.headers), raw))
                if self.path == "/api/oauth/token":
                    return self.token(raw)
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Bearer "):
                    if auth[7:] not in fake.tokens:
                        return self.reply(401, {"error": 401, "errorCode": "INVALID_TOKEN"})
                else:
                    verdict = fake.check_digest(method, auth)
                    if verdict:
                        return self.reply(
                            401,
                            {
                                "error": 401,
                                "errorCode": None,
                                "detail": "You are not authorized for this resource.",
                                "reason": "Unauthorized",
                            },
                            {"WWW-Authenticate": fake.challenge(stale=verdict == "stale")},
                        )
                m = re.fullmatch(
                    r"application/vnd\.atlas\.(\d{4}-\d{2}-\d{2})\+json",
                    self.headers.get("Accept", ""),
                )
                if not m or m.group(1) not in VERSIONS:
                    return self.error(
                        406,
                        "INVALID_VERSION_DATE",
                        "The version in the Accept header is not supported.",
                    )
                if raw and self.headers.get("Content-Type") != self.headers.get("Accept"):
                    return self.error(
                        415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type must name the same version."
                    )
                return self.route(method, raw)

        def token(self, raw):
            basic = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            if (
                self.headers.get("Authorization") != f"Basic {basic}"
                or raw != b"grant_type=client_credentials"
            ):
                return self.reply(401, {"error": "invalid_client"})
            tok = secrets.token_hex(16)
            fake.tokens.add(tok)
            return self.reply(
                200, {"access_token": tok, "expires_in": 3600, "token_type": "Bearer"}
            )

        def route(self, method, raw):
            base = f"/api/atlas/v2/groups/{PROJECT}/clusters"
            if not self.path.startswith(base):
                return self.error(404, "RESOURCE_NOT_FOUND", self.path)
            name = self.path[len(base) + 1 :] or None
            if method == "POST" and name is None:
                body = json.loads(raw)
                if "diskSizeGB" in body:  # top-level in 2023-02-01, per regionConfig in 2024-08-05
                    return self.error(
                        400, "INVALID_ATTRIBUTE", "diskSizeGB belongs in electableSpecs"
                    )
                if body["name"] in fake.clusters:
                    return self.error(
                        409,
                        "DUPLICATE_CLUSTER_NAME",
                        f"A cluster named {body['name']} is already present.",
                    )
                doc = copy.deepcopy(body)
                doc.update(
                    id=secrets.token_hex(12),
                    groupId=PROJECT,
                    stateName="CREATING",
                    mongoDBVersion="8.0.4",
                )
                for i, rs in enumerate(doc["replicationSpecs"]):
                    rs["id"] = f"spec{i}"
                    rs["zoneId"] = "zone0"
                    for rc in rs["regionConfigs"]:
                        rc["effectiveElectableSpecs"] = dict(rc["electableSpecs"])
                fake.clusters[doc["name"]] = doc
                fake.polls[doc["name"]] = 0
                return self.reply(201, doc)
            if name not in fake.clusters:
                return self.error(
                    404, "CLUSTER_NOT_FOUND", f"No cluster named {name} exists in group {PROJECT}."
                )
            if method == "GET":
                doc = fake.advance(name)
                if doc is None:
                    return self.error(
                        404,
                        "CLUSTER_NOT_FOUND",
                        f"No cluster named {name} exists in group {PROJECT}.",
                    )
                return self.reply(200, doc)
            if method == "PATCH":
                body = json.loads(raw)
                doc = fake.clusters[name]
                for rs in body.get("replicationSpecs", []):
                    if "zoneId" in rs or any(
                        k.startswith("effective") for rc in rs["regionConfigs"] for k in rc
                    ):
                        return self.error(
                            400, "INVALID_ATTRIBUTE", "read-only attribute in request"
                        )
                doc.update(body)
                doc["stateName"] = "UPDATING"
                fake.polls[name] = 0
                return self.reply(200, doc)
            if method == "DELETE":
                fake.clusters[name]["stateName"] = "DELETING"
                fake.polls[name] = 0
                return self.reply(202)
            return self.error(405, "METHOD_NOT_ALLOWED", method)

        def do_GET(self):
            self.handle_any("GET")

        def do_POST(self):
            self.handle_any("POST")

        def do_PATCH(self):
            self.handle_any("PATCH")

        def do_DELETE(self):
            self.handle_any("DELETE")

    return Handler


@pytest.fixture
def fake():
    state = FakeAtlas()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{srv.server_address[1]}/api/atlas/v2"
    yield state
    srv.shutdown()
    srv.server_close()


def client(fake, **kw):
    return atlas.AtlasClient(PROJECT, PUBLIC, PRIVATE, base_url=fake.base, **kw)


def no_sleep(_):
    pass


SPEC = atlas.ClusterSpec("bench-m30", "M30", disk_size_gb=100, mongodb_major_version="8.0")


def test_digest_response_matches_rfc_2617_example():
    # RFC 2617 section 3.5: Mufasa / "Circle Of Life"
    challenge = {
        "realm": "testrealm@host.com",
        "qop": "auth,auth-int",
        "nonce": "dcd98b7102dd2f0e8b11d0f600bfb0c093",
        "opaque": "5ccc069c403ebaf9f0171e9517f40e41",
    }
    header = atlas.digest_authorization(
        challenge, "Mufasa", "Circle Of Life", "GET", "/dir/index.html", 1, "0a4f113b"
    )
    assert 'response="6629fae49393a05397450978507c4ef1"' in header
    assert (
        "qop=auth" in header
        and "nc=00000001" in header
        and 'opaque="5ccc069c403ebaf9f0171e9517f40e41"' in header
    )
    parsed = atlas.parse_challenge(
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
    with pytest.raises(atlas.AtlasAuthError):
        atlas.parse_challenge('Basic realm="x"')


def test_cluster_body_follows_the_2024_08_05_schema():
    body = atlas.cluster_body(atlas.ClusterSpec("bench-1", "m40", 200, 3000, region="us-east-1"))
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
    assert atlas.cluster_body(SPEC)["mongoDBMajorVersion"] == "8.0"
    with pytest.raises(ValueError, match="dedicated"):
        atlas.cluster_body(atlas.ClusterSpec("x", "M0"))
    with pytest.raises(ValueError, match="name"):
        atlas.cluster_body(atlas.ClusterSpec("bad name!", "M10"))
    with pytest.raises(ValueError, match="AWS"):
        atlas.cluster_body(
            atlas.ClusterSpec("x", "M30", ebs_volume_type="STANDARD", provider="GCP")
        )


def test_lifecycle_create_wait_resize_delete(fake):
    c = client(fake)
    created = c.create_cluster(SPEC)
    assert created["stateName"] == "CREATING"
    with pytest.raises(atlas.AtlasError, match="no standardSrv"):
        atlas.connection_string(created)
    idle = c.wait_for_idle("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    assert idle["stateName"] == "IDLE"
    assert atlas.connection_string(idle) == "mongodb+srv://bench-m30.ab1cd.mongodb.net"
    meta = atlas.cluster_hardware(idle)
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
    assert atlas.cluster_hardware(resized)["atlas_tier"] == "M40"

    c.delete_cluster("bench-m30")
    assert fake.requests[-1][0] == "DELETE"
    with pytest.raises(atlas.AtlasError, match="being deleted"):
        c.wait_for_idle("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    c.wait_until_deleted("bench-m30", timeout=60, poll=1, sleep=no_sleep)
    with pytest.raises(atlas.AtlasNotFound) as exc:
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
    bad = atlas.AtlasClient(PROJECT, PUBLIC, "wrong-" + PRIVATE, base_url=fake.base)
    with pytest.raises(atlas.AtlasAuthError) as exc:
        bad.get_cluster("x")
    assert exc.value.status == 401
    c = client(fake)
    c.create_cluster(SPEC)
    with pytest.raises(atlas.AtlasConflict) as exc:
        c.create_cluster(SPEC)
    assert exc.value.status == 409 and exc.value.error_code == "DUPLICATE_CLUSTER_NAME"
    assert "already present" in str(exc.value)
    old = client(fake, api_version="2019-01-01")
    with pytest.raises(atlas.AtlasError) as exc:
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
        atlas.AtlasTimeout, match=r"bench-m30 still CREATING after 90s waiting for IDLE"
    ):
        c.wait_for_idle("bench-m30", timeout=90, poll=30, sleep=sleep, clock=lambda: now[0])
    assert now[0] == 90


def test_network_errors_are_reported_without_secrets():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    c = atlas.AtlasClient(
        PROJECT, PUBLIC, PRIVATE, base_url=f"http://127.0.0.1:{port}/api/atlas/v2", timeout=2
    )
    with pytest.raises(atlas.AtlasError, match="network error") as exc:
        c.get_cluster("x")
    assert PRIVATE not in str(exc.value)


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
        lambda: atlas.AtlasClient(PROJECT, PUBLIC, PRIVATE + "x", base_url=fake.base).get_cluster(
            "x"
        ),
        lambda: client(fake, api_version="1999-01-01").get_cluster("x"),
    ):
        with pytest.raises(atlas.AtlasError) as exc:
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
    c = atlas.AtlasClient(
        PROJECT, client_id=CLIENT_ID, client_secret=CLIENT_SECRET, base_url=fake.base
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
    bad = atlas.AtlasClient(PROJECT, client_id=CLIENT_ID, client_secret="nope", base_url=fake.base)
    with pytest.raises(atlas.AtlasAuthError, match="token request refused"):
        bad.get_cluster("x")


def test_from_env():
    env = {"ATLAS_PROJECT_ID": PROJECT, "ATLAS_PUBLIC_KEY": PUBLIC, "ATLAS_PRIVATE_KEY": PRIVATE}
    c = atlas.AtlasClient.from_env(env)
    assert c.project_id == PROJECT and PRIVATE not in repr(c)
    with pytest.raises(ValueError, match="ATLAS_PROJECT_ID"):
        atlas.AtlasClient.from_env({})
    with pytest.raises(ValueError, match="ATLAS_PRIVATE_KEY") as exc:
        atlas.AtlasClient.from_env({"ATLAS_PROJECT_ID": PROJECT, "ATLAS_PUBLIC_KEY": PUBLIC})
    assert PUBLIC not in str(exc.value)
    sa = atlas.AtlasClient.from_env(
        {"ATLAS_PROJECT_ID": PROJECT, "ATLAS_CLIENT_ID": "i", "ATLAS_CLIENT_SECRET": "s"}
    )
    assert "service-account" in repr(sa)
    with pytest.raises(ValueError, match="24 hexadecimal"):
        atlas.AtlasClient("not-a-project", PUBLIC, PRIVATE)


def test_connection_string_never_carries_credentials():
    cluster = {
        "name": "c",
        "connectionStrings": {"standardSrv": "mongodb+srv://u:p@c.ab1cd.mongodb.net"},
    }
    assert atlas.connection_string(cluster) == "mongodb+srv://c.ab1cd.mongodb.net"
    cluster["connectionStrings"]["standard"] = "mongodb://h1:27017,h2:27017/?ssl=true"
    assert atlas.connection_string(cluster, srv=False) == "mongodb://h1:27017,h2:27017/?ssl=true"


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
    body = atlas.resize_body(cluster, disk_size_gb=80)
    rc = body["replicationSpecs"][0]["regionConfigs"][0]
    assert rc["electableSpecs"] == {"instanceSize": "M30", "nodeCount": 3, "diskSizeGB": 80.0}
    assert rc["readOnlySpecs"] == {
        "instanceSize": "M30",
        "nodeCount": 0,
    }  # no read-only nodes: untouched
    assert "effectiveElectableSpecs" not in rc and "zoneId" not in body["replicationSpecs"][0]
    assert (
        cluster["replicationSpecs"][0]["regionConfigs"][0]["electableSpecs"]["diskSizeGB"] == 40.0
    )
    with pytest.raises(ValueError, match="nothing to change"):
        atlas.resize_body(cluster)
    with pytest.raises(ValueError, match="ebsVolumeType"):
        atlas.resize_body(cluster, ebs_volume_type="gp3")


def test_prices():
    assert atlas.price_per_hour("M10") == 0.08
    assert atlas.price_per_hour("m80", "aws", "us-east-1") == 7.30
    assert (
        atlas.price_per_hour("M30", "AWS", "EU_WEST_1") is None
    )  # other regions cost more: unknown
    assert atlas.price_per_hour("M30", "GCP") is None
    assert atlas.price_per_hour("M200") is None
    prices = [atlas.price_per_hour(t) for t in ("M10", "M20", "M30", "M40", "M50", "M60", "M80")]
    assert prices == sorted(prices)
    assert atlas.price_metadata("M40")["atlas_price_as_of"] == atlas.PRICES_AS_OF
    assert atlas.price_metadata("M40", "AZURE") == {}
