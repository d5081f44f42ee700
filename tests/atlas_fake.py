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
- POST .../databaseUsers -> 201 (409 USER_ALREADY_EXISTS), GET and DELETE
  .../databaseUsers/{db}/{user} -> 200 / 204 (404 USERNAME_NOT_FOUND)
- POST .../accessList (a list) -> 201, GET and DELETE .../accessList/{entryValue} -> 200 /
  204 (404 ATLAS_NETWORK_PERMISSION_ENTRY_NOT_FOUND)
- changes apply asynchronously, as in Atlas: a new database user reaches the cluster
  (`on_user`) and an access-list entry turns ACTIVE only `apply_delay_s` after the POST;
  until then GET .../clusters/{name}/status says changeStatus PENDING (then APPLIED) and
  GET .../accessList/{entryValue}/status says STATUS PENDING (then ACTIVE). A
  deleteAfterDate must lie in the future and at most a week ahead (400 otherwise)
- GET .../processes (paged: pageNum, itemsPerPage): a cluster's three replica-set members
  once it is IDLE (REPLICA_PRIMARY first); .../processes/{processId}/disks (partition
  "data"); .../processes/{processId}/measurements and .../disks/{partitionName}/measurements
  with granularity, start, end and repeated m: one data point per interval in [start, end),
  values from `measure(process_id, name, t)`, null from `published_until` on

Shared by the unit tests and the PKB end-to-end test (where the cluster's
connection string points at a stand-in server and a created database user
becomes a real user of that server through `on_user`).
"""

import base64
import contextlib
import copy
import hashlib
import json
import re
import secrets
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROJECT = "5f0c1a2b3c4d5e6f7a8b9c0d"
PUBLIC = "abcdefgh"
PRIVATE = "1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"  # must never leak
CLIENT_ID = "mdb_sa_id_0123456789abcdef01234567"
CLIENT_SECRET = "mdb_sa_sk_SECRETSECRETSECRETSECRET"
REALM = "MMS Public API"
VERSIONS = {"2023-01-01", "2023-02-01", "2024-08-05", "2024-10-23"}


CLOSE = "close"  # a fault status: the connection is dropped instead of answered

GRANULARITY_S = {"PT10S": 10, "PT1M": 60, "PT5M": 300, "PT1H": 3600}
MEASUREMENT_UNITS = {
    "SYSTEM_NORMALIZED_CPU_USER": "PERCENT",
    "SYSTEM_NORMALIZED_CPU_KERNEL": "PERCENT",
    "SYSTEM_NORMALIZED_CPU_IOWAIT": "PERCENT",
    "OP_EXECUTION_TIME_WRITES": "MILLISECONDS",
    "OP_EXECUTION_TIME_READS": "MILLISECONDS",
}
DISK_UNITS = {
    "DISK_PARTITION_IOPS_TOTAL": "SCALAR_PER_SECOND",
    "DISK_PARTITION_THROUGHPUT_WRITE": "BYTES_PER_SECOND",
    "DISK_PARTITION_THROUGHPUT_READ": "BYTES_PER_SECOND",
}
# Per metric: the primary's value, and a secondary's (it applies the writes, less busy).
DEFAULT_VALUES = {
    "SYSTEM_NORMALIZED_CPU_USER": (40.0, 12.0),
    "SYSTEM_NORMALIZED_CPU_KERNEL": (10.0, 3.0),
    "SYSTEM_NORMALIZED_CPU_IOWAIT": (5.0, 1.0),
    "OP_EXECUTION_TIME_WRITES": (0.8, 0.2),
    "OP_EXECUTION_TIME_READS": (0.1, 0.1),
    "DISK_PARTITION_IOPS_TOTAL": (3000.0, 1200.0),
    "DISK_PARTITION_THROUGHPUT_WRITE": (50 * 2**20, 20 * 2**20),
    "DISK_PARTITION_THROUGHPUT_READ": (2 * 2**20, 2**20),
}


def iso_time(text):
    """Epoch seconds of an ISO 8601 UTC time ("2026-11-23T21:00:00Z"); ValueError otherwise."""
    if not text.endswith("Z"):
        raise ValueError(text)
    return datetime.fromisoformat(text[:-1] + "+00:00").timestamp()


def md5(s):
    return hashlib.md5(s.encode()).hexdigest()


class FakeAtlas:
    """State shared by the handler threads."""

    def __init__(self, polls_to_idle=2, polls_to_gone=2, apply_delay_s=0.5):
        self.apply_delay_s = apply_delay_s
        self.pending = []  # (due monotonic time, what, callable) of changes not yet applied
        self.entry_status = {}  # access-list entry value -> PENDING | ACTIVE
        self.clusters = {}
        self.polls = {}
        self.polls_to_idle = polls_to_idle
        self.polls_to_gone = polls_to_gone
        self.nonces = set()
        self.seen_nc = {}
        self.tokens = set()
        self.requests = []  # (method, path, headers, body)
        self.lock = threading.Lock()
        self.users = {}  # username -> POST body
        self.access_list = {}  # entry value -> entry
        self.connection_strings = None  # replaces the made-up hosts when set
        self.on_user = None  # called with ("create"|"delete", username, password)
        # Injected failures: (method, path part, status, done[, headers]) entries, each used
        # once; done=True means the request takes effect but its reply is the error (a lost
        # reply). status CLOSE closes the connection without any reply (a network error).
        self.faults = []
        self.processes = {}  # cluster name -> its process documents
        self.published_until = None  # data points at or after this time are null (not yet)

        def measure(process_id, name, t):
            primary = self.process_types().get(process_id) == "REPLICA_PRIMARY"
            return DEFAULT_VALUES[name][0 if primary else 1]

        self.measure = measure  # (process id, metric name, interval start) -> value

    def later(self, what, apply):
        """A change Atlas applies asynchronously, `apply_delay_s` from now."""
        self.pending.append((time.monotonic() + self.apply_delay_s, what, apply))

    def settle(self):
        """Applies the changes that are due (called by the fake's own thread and before
        every request)."""
        now = time.monotonic()
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, _, apply in due:
            apply()

    def process_types(self):
        return {p["id"]: p["typeName"] for ps in self.processes.values() for p in ps}

    def add_processes(self, name):
        """The replica set members of an IDLE cluster, as GET /processes lists them."""
        if name in self.processes:
            return
        members = []
        for i in range(3):
            alias = f"{name.lower()}-shard-00-0{i}.ab1cd.mongodb.net"
            host = f"atlas-{secrets.token_hex(3)}-shard-00-0{i}.ab1cd.mongodb.net"
            members.append(
                {
                    "id": f"{host}:27017",
                    "hostname": host,
                    "port": 27017,
                    "userAlias": alias,
                    "typeName": "REPLICA_PRIMARY" if i == 0 else "REPLICA_SECONDARY",
                    "replicaSetName": f"atlas-{name.lower()}-shard-0",
                    "groupId": PROJECT,
                    "version": "8.0.4",
                }
            )
        self.processes[name] = members

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
            doc["connectionStrings"] = self.connection_strings or {
                "standardSrv": f"mongodb+srv://{host}",
                "standard": f"mongodb://{name}-shard-00-00.ab1cd.mongodb.net:27017/?ssl=true",
            }
            self.add_processes(name)
        if doc["stateName"] == "DELETING" and self.polls[name] >= self.polls_to_gone:
            del self.clusters[name]
            return None
        return doc


def node_types_apart(replication_specs):
    """What the Admin API (2024-08-05) refuses in a cluster body: electable and read-only
    nodes of a region with different instance sizes, or node types (and shards) with
    different storage (diskSizeGB, diskIOPS, ebsVolumeType). None when it is fine."""
    disks = {}
    for rs in replication_specs:
        for rc in rs.get("regionConfigs", []):
            e, r = rc.get("electableSpecs") or {}, rc.get("readOnlySpecs") or {}
            if e and r and e.get("instanceSize") != r.get("instanceSize"):
                return "electableSpecs and readOnlySpecs need the same instanceSize"
            for kind in ("electableSpecs", "readOnlySpecs", "analyticsSpecs"):
                for key in ("diskSizeGB", "diskIOPS", "ebsVolumeType"):
                    if key in (rc.get(kind) or {}):
                        disks.setdefault(key, set()).add(rc[kind][key])
    apart = sorted(k for k, v in disks.items() if len(v) > 1)
    return f"storage must be the same for every node type and shard: {apart}" if apart else None


def make_handler(fake):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output quiet
            pass

        def reply(self, status, doc=None, headers=None):
            fault, self.fault = getattr(self, "fault", None), None
            if fault and 200 <= status < 300:
                return self.fail(*fault)
            body = json.dumps(doc).encode() if doc is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.atlas.2024-08-05+json")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def fail(self, status, headers=None):
            """An injected failure: an error reply, or a dropped connection."""
            if status == CLOSE:
                self.close_connection = True
                return None
            return self.error(status, "UNEXPECTED_ERROR", "injected failure", headers)

        def error(self, status, code, detail, headers=None):
            self.reply(
                status,
                {
                    "error": status,
                    "errorCode": code,
                    "detail": detail,
                    "reason": self.responses[status][0],
                },
                headers,
            )

        def handle_any(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            with fake.lock:
                fake.settle()
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
            for f in list(fake.faults):
                f_method, part, status, done, *headers = f
                if f_method == method and part in self.path:
                    fake.faults.remove(f)
                    if not done:
                        return self.fail(status, *headers)
                    self.fault = (status, *headers)
                    break
            group = f"/api/atlas/v2/groups/{PROJECT}"
            if self.path.startswith(f"{group}/databaseUsers"):
                return self.users(method, raw, self.path[len(group) + len("/databaseUsers") :])
            if self.path.startswith(f"{group}/accessList"):
                return self.access(method, raw, self.path[len(group) + len("/accessList") :])
            if self.path.startswith(f"{group}/processes"):
                return self.monitoring(method, self.path[len(group) + len("/processes") :])
            base = f"{group}/clusters"
            if not self.path.startswith(base):
                return self.error(404, "RESOURCE_NOT_FOUND", self.path)
            name = self.path[len(base) + 1 :] or None
            if method == "GET" and name and name.endswith("/status"):
                name = name[: -len("/status")]
                if name not in fake.clusters:
                    return self.error(404, "CLUSTER_NOT_FOUND", name)
                change = "PENDING" if fake.pending else "APPLIED"
                return self.reply(200, {"changeStatus": change})
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
                        # GET shows every node type, those without nodes with the
                        # electable nodes' size and storage
                        for kind in ("readOnlySpecs", "analyticsSpecs"):
                            rc.setdefault(kind, dict(rc["electableSpecs"], nodeCount=0))
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
                mixed = node_types_apart(body.get("replicationSpecs", []))
                if mixed:
                    return self.error(400, "INVALID_ATTRIBUTE", mixed)
                doc.update(body)
                doc["stateName"] = "UPDATING"
                fake.polls[name] = 0
                return self.reply(200, doc)
            if method == "DELETE":
                fake.clusters[name]["stateName"] = "DELETING"
                fake.polls[name] = 0
                if fake.polls_to_gone == 0:  # gone at once
                    del fake.clusters[name]
                return self.reply(202)
            return self.error(405, "METHOD_NOT_ALLOWED", method)

        def users(self, method, raw, rest):
            if method == "POST" and not rest:
                body = json.loads(raw)
                missing = {"databaseName", "username", "password", "roles"} - set(body)
                if missing or body["databaseName"] != "admin":
                    return self.error(400, "INVALID_ATTRIBUTE", f"bad user: {sorted(missing)}")
                if body["username"] in fake.users:
                    return self.error(409, "USER_ALREADY_EXISTS", body["username"])
                for scope in body.get("scopes", []):
                    if scope.get("type") == "CLUSTER" and scope.get("name") not in fake.clusters:
                        return self.error(400, "INVALID_CLUSTER_SCOPE", scope.get("name"))
                if not self.valid_delete_after(body):
                    return self.error(400, "INVALID_ATTRIBUTE", "deleteAfterDate")
                fake.users[body["username"]] = body
                if fake.on_user:
                    user, password = body["username"], body["password"]
                    fake.later(
                        f"user {user}",
                        lambda: user in fake.users and fake.on_user("create", user, password),
                    )
                shown = {k: v for k, v in body.items() if k != "password"}
                return self.reply(201, shown)
            parts = [urllib.parse.unquote(p) for p in rest.strip("/").split("/")]
            if method in ("GET", "DELETE") and len(parts) == 2:
                db, user = parts
                if db != "admin" or user not in fake.users:
                    return self.error(404, "USERNAME_NOT_FOUND", user)
                if method == "GET":
                    shown = {k: v for k, v in fake.users[user].items() if k != "password"}
                    return self.reply(200, shown)
                del fake.users[user]
                if fake.on_user:
                    fake.on_user("delete", user, None)
                return self.reply(204)
            return self.error(405, "METHOD_NOT_ALLOWED", method)

        def access(self, method, raw, rest):
            if method == "POST" and not rest:
                entries = json.loads(raw)
                if not isinstance(entries, list):
                    return self.error(400, "INVALID_JSON", "a list of entries")
                for e in entries:
                    value = e.get("cidrBlock") or e.get("ipAddress")
                    if not value:
                        return self.error(400, "INVALID_ATTRIBUTE", "ipAddress or cidrBlock")
                    if not self.valid_delete_after(e):
                        return self.error(400, "INVALID_ATTRIBUTE", "deleteAfterDate")
                for e in entries:
                    value = e.get("cidrBlock") or e.get("ipAddress")
                    fake.access_list[value] = e
                    fake.entry_status[value] = "PENDING"
                    fake.later(
                        f"entry {value}", lambda v=value: fake.entry_status.update({v: "ACTIVE"})
                    )
                return self.reply(201, {"results": list(fake.access_list.values())})
            value = urllib.parse.unquote(rest.strip("/"))
            status = value.endswith("/status")
            value = value.removesuffix("/status")
            if value and value not in fake.access_list and method in ("GET", "DELETE"):
                return self.error(404, "ATLAS_NETWORK_PERMISSION_ENTRY_NOT_FOUND", value)
            if method == "GET" and value:
                if status:
                    return self.reply(200, {"STATUS": fake.entry_status.get(value, "ACTIVE")})
                return self.reply(200, fake.access_list[value])
            if method == "DELETE" and value and not status:
                del fake.access_list[value]
                fake.entry_status.pop(value, None)
                return self.reply(204)
            return self.error(405, "METHOD_NOT_ALLOWED", method)

        def valid_delete_after(self, body):
            """A deleteAfterDate, when given, lies in the future and at most a week ahead."""
            if "deleteAfterDate" not in body:
                return True
            try:
                t = iso_time(body["deleteAfterDate"])
            except (TypeError, ValueError):
                return False
            return time.time() < t <= time.time() + 7 * 24 * 3600

        def monitoring(self, method, rest):
            """GET /processes, .../{processId}/disks, .../measurements (process or disk)."""
            if method != "GET":
                return self.error(405, "METHOD_NOT_ALLOWED", method)
            path, _, query = rest.partition("?")
            params = urllib.parse.parse_qs(query)
            parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
            processes = {p["id"]: p for ps in fake.processes.values() for p in ps}
            if not parts:
                return self.paged(list(processes.values()), params)
            if parts[0] not in processes:
                return self.error(404, "PROCESS_NOT_FOUND", parts[0])
            pid = parts[0]
            if parts[1:] == ["disks"]:
                return self.paged([{"partitionName": "data", "links": []}], params)
            if parts[1:] == ["measurements"]:
                return self.measurements(pid, None, params, MEASUREMENT_UNITS)
            if len(parts) == 4 and parts[1] == "disks" and parts[3] == "measurements":
                if parts[2] != "data":
                    return self.error(404, "PARTITION_NOT_FOUND", parts[2])
                return self.measurements(pid, parts[2], params, DISK_UNITS)
            return self.error(404, "RESOURCE_NOT_FOUND", self.path)

        def paged(self, items, params):
            page = int(params.get("pageNum", ["1"])[0])
            per = int(params.get("itemsPerPage", ["100"])[0])
            if not 1 <= per <= 500 or page < 1:
                return self.error(400, "INVALID_QUERY_PARAMETER", "pageNum/itemsPerPage")
            chunk = items[(page - 1) * per : page * per]
            return self.reply(200, {"results": chunk, "totalCount": len(items), "links": []})

        def measurements(self, pid, partition, params, units):
            granularity = params.get("granularity", [None])[0]
            names = params.get("m", [])
            if granularity not in GRANULARITY_S:
                return self.error(400, "INVALID_QUERY_PARAMETER", f"granularity {granularity}")
            try:
                start, end = (iso_time(params[k][0]) for k in ("start", "end"))
            except (KeyError, ValueError):
                return self.error(400, "INVALID_QUERY_PARAMETER", "start and end: ISO 8601 UTC")
            if end <= start or any(n not in units for n in names):
                return self.error(400, "INVALID_QUERY_PARAMETER", f"window or m: {names}")
            step = GRANULARITY_S[granularity]
            times = range(int(start // step * step), int(end), step)
            stamp = "%Y-%m-%dT%H:%M:%SZ"
            doc = {
                "groupId": PROJECT,
                "hostId": pid,
                "processId": pid,
                "granularity": granularity,
                "start": params["start"][0],
                "end": params["end"][0],
                "links": [],
                "measurements": [
                    {
                        "name": n,
                        "units": units[n],
                        "dataPoints": [
                            {
                                "timestamp": datetime.fromtimestamp(t, timezone.utc).strftime(
                                    stamp
                                ),
                                "value": None
                                if fake.published_until is not None and t >= fake.published_until
                                else fake.measure(pid, n, t),
                            }
                            for t in times
                        ],
                    }
                    for n in names or units
                ],
            }
            if partition:
                doc["partitionName"] = partition
            return self.reply(200, doc)

        def do_GET(self):
            self.handle_any("GET")

        def do_POST(self):
            self.handle_any("POST")

        def do_PATCH(self):
            self.handle_any("PATCH")

        def do_DELETE(self):
            self.handle_any("DELETE")

    return Handler


@contextlib.contextmanager
def serve(**kwargs):
    """A FakeAtlas on a free loopback port, in a thread; `.base` is its API base URL."""
    state = FakeAtlas(**kwargs)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    stop = threading.Event()

    def settle():  # Atlas applies changes whether or not anyone asks
        while not stop.wait(0.05):
            with state.lock:
                state.settle()

    threading.Thread(target=settle, daemon=True).start()
    state.base = f"http://127.0.0.1:{srv.server_address[1]}/api/atlas/v2"
    try:
        yield state
    finally:
        stop.set()
        srv.shutdown()
        srv.server_close()
