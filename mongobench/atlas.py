"""Atlas Admin API v2 client for cluster lifecycle (create, resize, delete), stdlib only.

Documented API (https://www.mongodb.com/docs/api/doc/atlas-admin-api-v2/):
- base https://cloud.mongodb.com/api/atlas/v2, clusters under /groups/{groupId}/clusters
  (POST create, GET /{name}, PATCH /{name}, DELETE /{name} -> 202, then 404)
- every request names a resource version in `Accept: application/vnd.atlas.<date>+json`;
  we use 2024-08-05, where disk size sits in each replicationSpecs[].regionConfigs[]
  .electableSpecs (diskSizeGB, diskIOPS, ebsVolumeType, instanceSize, nodeCount)
- auth: HTTP Digest with a programmatic API key (public key = user, private key =
  password; realm "MMS Public API"), or a service account (OAuth2 client credentials
  at /api/oauth/token, then Bearer)
- cluster stateName: IDLE, CREATING, UPDATING, DELETING, REPAIRING
- errors: {"error": <status>, "errorCode": "...", "detail": "...", "reason": "..."}

Secrets come from the environment only and appear in no log line, exception
text or repr: log lines carry the method, path and status.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import email.utils
import hashlib
import json
import logging
import os
import random
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

API_BASE = "https://cloud.mongodb.com/api/atlas/v2"
API_VERSION = "2024-08-05"
ENV_PUBLIC_KEY = "ATLAS_PUBLIC_KEY"
ENV_PRIVATE_KEY = "ATLAS_PRIVATE_KEY"
ENV_PROJECT_ID = "ATLAS_PROJECT_ID"
ENV_CLIENT_ID = "ATLAS_CLIENT_ID"  # service account
ENV_CLIENT_SECRET = "ATLAS_CLIENT_SECRET"

log = logging.getLogger(__name__)

# Approximate on-demand USD per hour of a 3-node replica set, AWS us-east-1
# (N. Virginia), as listed on https://www.mongodb.com/pricing around mid-2025.
# Not re-read from a live page when written (no web access): ballparks for
# cost-per-result, always flagged approximate; update with the date read.
PRICES_AS_OF = "2025-06 (approximate, not re-verified)"
PRICES_SOURCE = "https://www.mongodb.com/pricing (AWS us-east-1, 3-node replica set)"
_PRICES = {
    ("AWS", "US_EAST_1"): {
        "M10": 0.08,
        "M20": 0.20,
        "M30": 0.54,
        "M40": 1.04,
        "M50": 2.00,
        "M60": 3.95,
        "M80": 7.30,
    }
}
_DEFAULT_REGION = {"AWS": "US_EAST_1"}


def price_per_hour(tier: str, provider: str = "AWS", region: str | None = None) -> float | None:
    """Approximate USD/hour of a cluster tier (see PRICES_AS_OF), None when unknown."""
    provider = provider.upper()
    region = (region or _DEFAULT_REGION.get(provider, "")).upper().replace("-", "_")
    return _PRICES.get((provider, region), {}).get(tier.upper())


def price_metadata(tier: str, provider: str = "AWS", region: str | None = None) -> dict:
    price = price_per_hour(tier, provider, region)
    if price is None:
        return {}
    return {
        "atlas_price_per_hour_usd": price,
        "atlas_price_approximate": True,
        "atlas_price_as_of": PRICES_AS_OF,
        "atlas_price_source": PRICES_SOURCE,
    }


class AtlasError(Exception):
    """An Admin API error; carries status and errorCode, never credentials.

    status None is a network error. `attempts` counts the tries made (retries on 429,
    5xx and network errors, see AtlasClient).
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        error_code: str | None = None,
        attempts: int = 1,
    ):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.attempts = attempts


def transient(status: int | None) -> bool:
    """Worth retrying: network error (None), rate limit (429) or a server error (5xx)."""
    return status is None or status == 429 or status >= 500


class AtlasAuthError(AtlasError):
    pass


class AtlasConflict(AtlasError):
    pass


class AtlasNotFound(AtlasError):
    pass


class AtlasTimeout(AtlasError):
    pass


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    instance_size: str  # M10, M30, ...
    disk_size_gb: float | None = None
    disk_iops: int | None = None
    ebs_volume_type: str | None = None  # STANDARD | PROVISIONED (AWS)
    provider: str = "AWS"
    region: str = "US_EAST_1"
    mongodb_major_version: str | None = None  # "8.0"
    node_count: int = 3
    backup: bool = False


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")


def _hardware(
    instance_size: str | None,
    disk_size_gb: float | None,
    disk_iops: int | None,
    ebs_volume_type: str | None,
    node_count: int | None = None,
) -> dict:
    spec: dict = {}
    if instance_size:
        spec["instanceSize"] = instance_size.upper()
    if node_count is not None:
        spec["nodeCount"] = int(node_count)
    if disk_size_gb is not None:
        spec["diskSizeGB"] = float(disk_size_gb)
    if disk_iops is not None:
        spec["diskIOPS"] = int(disk_iops)
        if ebs_volume_type is None:
            ebs_volume_type = (
                "PROVISIONED"  # AWS only honors diskIOPS above the default when provisioned
            )
    if ebs_volume_type:
        if ebs_volume_type.upper() not in ("STANDARD", "PROVISIONED"):
            raise ValueError(
                f"ebsVolumeType must be STANDARD or PROVISIONED, not {ebs_volume_type!r}"
            )
        spec["ebsVolumeType"] = ebs_volume_type.upper()
    return spec


def cluster_body(spec: ClusterSpec) -> dict:
    """POST body of a single-region replica set (resource version 2024-08-05)."""
    if not _NAME.match(spec.name):
        raise ValueError(f"invalid cluster name {spec.name!r} (letters, digits, hyphens; <= 64)")
    tier = re.fullmatch(r"M(\d+)(_NVME)?", spec.instance_size.upper())
    if not tier or int(tier.group(1)) < 10:
        # M0/M2/M5 are shared (tenant/Flex) clusters with another API shape
        raise ValueError(f"dedicated tiers only (M10 and up), not {spec.instance_size!r}")
    electable = _hardware(
        spec.instance_size, spec.disk_size_gb, spec.disk_iops, spec.ebs_volume_type, spec.node_count
    )
    if spec.provider.upper() != "AWS" and "ebsVolumeType" in electable:
        raise ValueError("ebsVolumeType applies to AWS clusters only")
    body = {
        "name": spec.name,
        "clusterType": "REPLICASET",
        "backupEnabled": bool(spec.backup),
        "replicationSpecs": [
            {
                "regionConfigs": [
                    {
                        "providerName": spec.provider.upper(),
                        "regionName": spec.region.upper().replace("-", "_"),
                        "priority": 7,
                        "electableSpecs": electable,
                    }
                ]
            }
        ],
    }
    if spec.mongodb_major_version:
        body["mongoDBMajorVersion"] = spec.mongodb_major_version
    return body


def resize_body(
    cluster: dict,
    instance_size: str | None = None,
    disk_size_gb: float | None = None,
    disk_iops: int | None = None,
    ebs_volume_type: str | None = None,
) -> dict:
    """PATCH body that changes tier/disk/IOPS of every region of every shard.

    Starts from the cluster's current replicationSpecs (ids kept, read-only
    effective*Specs dropped) so that nothing else changes.
    """
    change = _hardware(instance_size, disk_size_gb, disk_iops, ebs_volume_type)
    if not change:
        raise ValueError(
            "nothing to change: give instance_size, disk_size_gb, disk_iops or ebs_volume_type"
        )
    specs = copy.deepcopy(cluster.get("replicationSpecs") or [])
    if not specs:
        raise ValueError("cluster document has no replicationSpecs")
    for rs in specs:
        rs.pop("zoneId", None)
        for rc in rs.get("regionConfigs", []):
            for k in [k for k in rc if k.startswith("effective")]:
                rc.pop(k)
            for kind in ("electableSpecs", "readOnlySpecs", "analyticsSpecs"):
                hw = rc.get(kind)
                if hw and (kind == "electableSpecs" or hw.get("nodeCount")):
                    hw.update(change)
    return {"replicationSpecs": specs}


def cluster_hardware(cluster: dict) -> dict:
    """Tier/disk/IOPS/version/region of the first region of the first shard (for metadata)."""
    try:
        rc = cluster["replicationSpecs"][0]["regionConfigs"][0]
    except (KeyError, IndexError, TypeError):
        return {}
    hw = rc.get("electableSpecs") or {}
    out = {
        "atlas_cluster": cluster.get("name"),
        "atlas_tier": hw.get("instanceSize"),
        "atlas_disk_size_gb": hw.get("diskSizeGB"),
        "atlas_disk_iops": hw.get("diskIOPS"),
        "atlas_ebs_volume_type": hw.get("ebsVolumeType"),
        "atlas_provider": rc.get("providerName"),
        "atlas_region": rc.get("regionName"),
        "atlas_mongodb_version": cluster.get("mongoDBVersion"),
    }
    out = {k: v for k, v in out.items() if v is not None}
    if out.get("atlas_tier") and out.get("atlas_provider"):
        out.update(
            price_metadata(out["atlas_tier"], out["atlas_provider"], out.get("atlas_region"))
        )
    return out


_USERINFO = re.compile(r"^(mongodb(?:\+srv)?://)[^@/]*@", re.IGNORECASE)


def connection_string(cluster: dict, srv: bool = True) -> str:
    """The cluster's standard SRV string (mongodb+srv://host), without credentials."""
    cs = cluster.get("connectionStrings") or {}
    value = cs.get("standardSrv" if srv else "standard")
    if not value:
        raise AtlasError(
            f"cluster {cluster.get('name')!r} has no {'standardSrv' if srv else 'standard'}"
            f" connection string yet (state {cluster.get('stateName')})"
        )
    return _USERINFO.sub(r"\1", value)


# ---- HTTP Digest (RFC 7616, qop=auth) ----------------------------------------------


def parse_challenge(header: str) -> dict:
    """'Digest realm="MMS Public API", nonce="x", qop="auth"' -> dict (keys lowercased)."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "digest":
        raise AtlasAuthError(f"unsupported authentication scheme {scheme!r}", 401)
    pairs = re.findall(r'(\w+)=(?:"([^"]*)"|([^,\s]*))', rest)
    return {k.lower(): quoted or bare for k, quoted, bare in pairs}


def _hash(algorithm: str):
    algo = algorithm.upper().removesuffix("-SESS")
    if algo == "MD5":
        return lambda s: hashlib.md5(s.encode()).hexdigest()  # MD5: mandated by the API
    if algo in ("SHA-256", "SHA256"):
        return lambda s: hashlib.sha256(s.encode()).hexdigest()
    raise AtlasAuthError(f"unsupported digest algorithm {algorithm!r}", 401)


def digest_authorization(
    challenge: dict, user: str, password: str, method: str, uri: str, nc: int, cnonce: str
) -> str:
    """The Authorization header answering `challenge` (qop=auth or none)."""
    algorithm = challenge.get("algorithm", "MD5")
    h = _hash(algorithm)
    realm, nonce = challenge.get("realm", ""), challenge["nonce"]
    ha1 = h(f"{user}:{realm}:{password}")
    if algorithm.upper().endswith("-SESS"):
        ha1 = h(f"{ha1}:{nonce}:{cnonce}")
    ha2 = h(f"{method}:{uri}")
    qops = [q.strip() for q in challenge.get("qop", "").split(",") if q.strip()]
    fields = {"username": user, "realm": realm, "nonce": nonce, "uri": uri, "algorithm": algorithm}
    if "auth" in qops:
        ncv = f"{nc:08x}"
        fields.update(qop="auth", nc=ncv, cnonce=cnonce)
        fields["response"] = h(f"{ha1}:{nonce}:{ncv}:{cnonce}:auth:{ha2}")
    elif qops:
        raise AtlasAuthError(f"unsupported digest qop {challenge.get('qop')!r}", 401)
    else:
        fields["response"] = h(f"{ha1}:{nonce}:{ha2}")
    if "opaque" in challenge:
        fields["opaque"] = challenge["opaque"]
    unquoted = {"qop", "nc", "algorithm"}
    parts = [f"{k}={v}" if k in unquoted else f'{k}="{v}"' for k, v in fields.items()]
    return "Digest " + ", ".join(parts)


class _Secret:
    """Holds a credential; its repr never shows it (vars()/__dict__ dumps stay clean).

    Pickled (PKB pickles the benchmark spec into its run directory) it keeps only
    the name of the environment variable it came from, and reads it again when
    unpickled: the value never reaches a file.
    """

    __slots__ = ("_value", "_env")

    def __init__(self, value: str | None, env: str | None = None):
        self._value = value
        self._env = env

    def reveal(self) -> str | None:
        return self._value

    def __getstate__(self):
        return {"env": self._env}

    def __setstate__(self, state):
        self._env = state.get("env")
        self._value = os.environ.get(self._env, "").strip() or None if self._env else None

    def __repr__(self) -> str:
        return "<secret>" if self._value else "<unset>"


class AtlasClient:
    """Clusters of one Atlas project. Credentials: API key pair (digest) or service account."""

    def __init__(
        self,
        project_id: str,
        public_key: str | None = None,
        private_key: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        base_url: str = API_BASE,
        api_version: str = API_VERSION,
        timeout: float = 60.0,
        secret_env: str | None = None,
        client_secret_env: str | None = None,
        max_attempts: int = 5,
        backoff: float = 2.0,
        max_backoff: float = 60.0,
        retry_budget: float = 300.0,
        sleep=time.sleep,
        clock=time.monotonic,
    ):
        if not re.fullmatch(r"[0-9a-fA-F]{24}", project_id or ""):
            raise ValueError("project id must be 24 hexadecimal digits")
        if not ((public_key and private_key) or (client_id and client_secret)):
            raise ValueError("need an API key pair or a service account (client id and secret)")
        self.project_id = project_id
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self.timeout = timeout
        self._user = public_key
        self._secret = _Secret(private_key, secret_env)
        self._client_id = client_id
        self._client_secret = _Secret(client_secret, client_secret_env)
        self._challenge: dict | None = None
        self._nc = 0
        self._token: str | None = None
        self._token_expiry = 0.0
        # Retries: at most max_attempts tries, exponential backoff from `backoff` seconds
        # (with jitter, capped at max_backoff, which also caps Retry-After), and no retry
        # that would end later than retry_budget seconds after the first try.
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.max_attempts = max_attempts
        self.backoff, self.max_backoff, self.retry_budget = backoff, max_backoff, retry_budget
        self._sleep, self._clock = sleep, clock

    def __repr__(self) -> str:
        auth = "service-account" if self._client_id else "api-key"
        return f"AtlasClient(project={self.project_id}, auth={auth}, base={self.base_url})"

    def __getstate__(self):
        # a bearer token is a secret too; digest state is per connection anyway
        return {**self.__dict__, "_token": None, "_token_expiry": 0.0, "_challenge": None}

    @classmethod
    def from_env(cls, env=None, **kwargs) -> AtlasClient:
        """ATLAS_PROJECT_ID plus ATLAS_PUBLIC_KEY/ATLAS_PRIVATE_KEY or ATLAS_CLIENT_ID/_SECRET."""
        env = os.environ if env is None else env
        project = env.get(ENV_PROJECT_ID, "").strip()
        if not project:
            raise ValueError(f"{ENV_PROJECT_ID} is empty or unset")
        pub, priv = env.get(ENV_PUBLIC_KEY, "").strip(), env.get(ENV_PRIVATE_KEY, "").strip()
        cid, csec = env.get(ENV_CLIENT_ID, "").strip(), env.get(ENV_CLIENT_SECRET, "").strip()
        if not (pub and priv) and not (cid and csec):
            raise ValueError(
                f"set {ENV_PUBLIC_KEY} and {ENV_PRIVATE_KEY} (API key) or"
                f" {ENV_CLIENT_ID} and {ENV_CLIENT_SECRET} (service account)"
            )
        return cls(
            project, pub or None, priv or None, cid or None, csec or None,
            secret_env=ENV_PRIVATE_KEY, client_secret_env=ENV_CLIENT_SECRET, **kwargs,
        )  # fmt: skip

    # -- transport --

    def _media_type(self) -> str:
        return f"application/vnd.atlas.{self.api_version}+json"

    def _send(self, method: str, url: str, body: bytes | None, headers: dict):
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers or {}), err.read()
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise AtlasError(
                f"{method} {urllib.parse.urlsplit(url).path}: network error: {reason}"
            ) from None

    def _bearer(self) -> str:
        if self._token and time.monotonic() < self._token_expiry:
            return self._token
        parts = urllib.parse.urlsplit(self.base_url)
        url = f"{parts.scheme}://{parts.netloc}/api/oauth/token"
        basic = base64.b64encode(
            f"{self._client_id}:{self._client_secret.reveal()}".encode()
        ).decode()
        status, _, raw = self._send(
            "POST",
            url,
            b"grant_type=client_credentials",
            {
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
        log.debug("atlas POST /api/oauth/token -> %s", status)
        if transient(status):
            raise AtlasError(f"POST /api/oauth/token: HTTP {status}", status)
        if status != 200:
            raise AtlasAuthError(f"service account token request refused (HTTP {status})", status)
        doc = json.loads(raw)
        self._token = doc["access_token"]
        self._token_expiry = time.monotonic() + max(60, int(doc.get("expires_in", 3600)) - 60)
        return self._token

    def _exchange(self, method, url, digest_uri, body, headers):
        """One try: (status, headers, raw), answering one 401 challenge. An AtlasError
        raised here has `.sent` False when the API request itself never went out."""
        retried = False
        while True:
            hdrs = dict(headers)
            if self._client_id:
                try:
                    hdrs["Authorization"] = f"Bearer {self._bearer()}"
                except AtlasError as e:
                    e.sent = False
                    raise
            elif self._challenge:
                self._nc += 1
                hdrs["Authorization"] = digest_authorization(
                    self._challenge, self._user, self._secret.reveal(), method, digest_uri, self._nc,
                    secrets.token_hex(8),
                )  # fmt: skip
            status, resp_headers, raw = self._send(method, url, body, hdrs)
            log.debug("atlas %s %s -> %s", method, urllib.parse.urlsplit(url).path, status)
            # First contact, a stale nonce or an expired token: answer once, then give up.
            if status == 401 and not retried:
                retried = True
                if self._client_id:
                    self._token = None
                    continue
                challenge = {k.lower(): v for k, v in resp_headers.items()}.get("www-authenticate")
                if challenge:
                    self._challenge, self._nc = parse_challenge(challenge), 0
                    continue
            return status, resp_headers, raw

    def _retry_delay(self, attempt: int, status: int | None, headers: dict) -> float:
        """Retry-After (seconds or an HTTP date) on 429/503 when given, else exponential
        backoff with jitter (half fixed, half random: retries of many runs spread out)."""
        if status in (429, 503):
            value = {k.lower(): v for k, v in headers.items()}.get("retry-after", "").strip()
            wait = None
            if value:
                try:
                    wait = float(value)
                except ValueError:
                    with contextlib.suppress(TypeError, ValueError):
                        wait = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            if wait is not None:
                return min(max(wait, 0.0), self.max_backoff)
        delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return delay / 2 + random.uniform(0, delay / 2)

    def request(self, method: str, path: str, payload: dict | None = None) -> dict | None:
        """One API call, retried on 429, 5xx and network errors; returns the decoded JSON
        (None for empty bodies).

        After a try whose outcome is unknown (5xx or network error: Atlas may have done
        it), a DELETE answered 404 is done, and a POST answered 409 raises AtlasConflict
        with `.after_unknown` True, so that the caller can check whether it was its own
        first try that created the resource (see create_cluster).
        """
        url = f"{self.base_url}{path}"
        uri = urllib.parse.urlsplit(url)
        digest_uri = uri.path + (f"?{uri.query}" if uri.query else "")
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {"Accept": self._media_type()}
        if body is not None:
            headers["Content-Type"] = self._media_type()
        start = self._clock()
        unknown = False  # an earlier try may have taken effect
        attempt = 0
        while True:
            attempt += 1
            error, resp_headers = None, {}
            try:
                status, resp_headers, raw = self._exchange(method, url, digest_uri, body, headers)
            except AtlasError as e:
                if not transient(e.status):
                    raise
                error, status = e, e.status
            if error is None and not transient(status):
                break
            what = "network error" if status is None else f"HTTP {status}"
            delay = self._retry_delay(attempt, status, resp_headers)
            elapsed = self._clock() - start
            if attempt >= self.max_attempts or elapsed + delay > self.retry_budget:
                suffix = f" (gave up after {attempt} attempts in {elapsed:.0f}s)"
                if error is not None:
                    raise type(error)(
                        f"{error}{suffix}", error.status, error.error_code, attempt
                    ) from None
                try:
                    self._result(method, uri.path, status, raw)
                except AtlasError as e:
                    raise type(e)(f"{e}{suffix}", e.status, e.error_code, attempt) from None
            if status != 429 and getattr(error, "sent", True):
                unknown = True  # a 429 is a refusal; a 5xx or a lost reply may hide a success
            log.info(
                "atlas %s %s: %s, retry %d of %d in %.1fs",
                method, uri.path, what, attempt + 1, self.max_attempts, delay,
            )  # fmt: skip
            self._sleep(delay)
        if unknown and method == "DELETE" and status == 404:
            log.info("atlas DELETE %s: 404 after a lost reply: already deleted", uri.path)
            return None
        try:
            return self._result(method, uri.path, status, raw)
        except AtlasError as e:
            e.attempts = attempt
            e.after_unknown = unknown
            raise

    @staticmethod
    def _result(method: str, path: str, status: int, raw: bytes) -> dict | None:
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        if 200 <= status < 300:
            return doc
        doc = doc if isinstance(doc, dict) else {}
        code = doc.get("errorCode")
        detail = doc.get("detail") or doc.get("reason") or ""
        msg = f"{method} {path}: HTTP {status} {code or ''} {detail}".strip()
        cls = {
            401: AtlasAuthError,
            403: AtlasAuthError,
            404: AtlasNotFound,
            409: AtlasConflict,
        }.get(status, AtlasError)
        if code and "DUPLICATE" in code:
            cls = AtlasConflict
        if cls is AtlasAuthError:
            msg += (
                " (check the API key or service account, its project role and the API access list)"
            )
        raise cls(msg, status, code)

    # -- clusters --

    def _clusters(self, name: str | None = None) -> str:
        base = f"/groups/{self.project_id}/clusters"
        return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base

    def create_cluster(self, spec: ClusterSpec) -> dict:
        log.info("atlas: creating cluster %s (%s)", spec.name, spec.instance_size)
        try:
            return self.request("POST", self._clusters(), cluster_body(spec))
        except AtlasConflict as e:
            # A retry answered 409 after a try whose outcome is unknown: that try most
            # likely created the cluster (run names are unique per run, so nobody else
            # made it in between). Only then is it ours, to wait for and delete; a 409 on
            # the first try is someone else's cluster and stays an error.
            if not getattr(e, "after_unknown", False):
                raise
            log.info("atlas: cluster %s exists after a lost reply: created by this run", spec.name)
            return self.get_cluster(spec.name)

    def create_database_user(self, body: dict) -> dict | None:
        """POST a database user; a 409 after a lost reply is the user this call created
        (same reasoning as create_cluster), checked with a GET."""
        try:
            return self.request("POST", _users(self), body)
        except AtlasConflict as e:
            if not getattr(e, "after_unknown", False):
                raise
            log.info("atlas: database user %s exists after a lost reply", body.get("username"))
            return self.request("GET", _users(self, body["databaseName"], body["username"]))

    def get_cluster(self, name: str) -> dict:
        return self.request("GET", self._clusters(name))

    def update_cluster(self, name: str, body: dict) -> dict:
        return self.request("PATCH", self._clusters(name), body)

    def resize(
        self,
        name: str,
        instance_size: str | None = None,
        disk_size_gb: float | None = None,
        disk_iops: int | None = None,
        ebs_volume_type: str | None = None,
    ) -> dict:
        """Changes tier/disk/IOPS (between variants); wait_for_idle afterwards."""
        current = self.get_cluster(name)
        body = resize_body(current, instance_size, disk_size_gb, disk_iops, ebs_volume_type)
        log.info("atlas: resizing cluster %s", name)
        return self.update_cluster(name, body)

    def delete_cluster(self, name: str) -> None:
        log.info("atlas: deleting cluster %s", name)
        self.request("DELETE", self._clusters(name))

    def _poll(self, name, settled, waiting_for, timeout, poll, sleep, clock):
        """Polls the cluster until `settled(cluster or None)` returns (done, value)."""
        deadline = clock() + timeout
        state = "unknown"
        while True:
            try:
                cluster, failed = self.get_cluster(name), None
            except AtlasNotFound:
                cluster, failed = None, None
            except AtlasError as e:
                if not transient(e.status):
                    raise
                cluster, failed = None, e
            if failed:
                # a poll only reads: after its own retries, keep polling until the deadline
                log.info("atlas: polling cluster %s failed (%s); polling on", name, failed)
                state = f"unknown ({failed})"
            else:
                done, value = settled(cluster)
                if done:
                    return value
                state = cluster.get("stateName")
            if clock() >= deadline:
                raise AtlasTimeout(
                    f"cluster {name} still {state} after {timeout:.0f}s waiting for {waiting_for}"
                )
            sleep(poll)

    def wait_for_idle(
        self,
        name: str,
        timeout: float = 3600,
        poll: float = 30,
        sleep=time.sleep,
        clock=time.monotonic,
    ) -> dict:
        """Polls until stateName is IDLE; AtlasTimeout names the state it was stuck in."""

        def settled(cluster):
            if cluster is None:
                raise AtlasNotFound(f"cluster {name} does not exist", 404, "CLUSTER_NOT_FOUND")
            if cluster.get("stateName") == "DELETING":
                raise AtlasError(f"cluster {name} is being deleted, it will not become IDLE")
            return cluster.get("stateName") == "IDLE", cluster

        what = "IDLE; check the Atlas UI (it keeps billing while it exists)"
        return self._poll(name, settled, what, timeout, poll, sleep, clock)

    def wait_until_deleted(
        self,
        name: str,
        timeout: float = 3600,
        poll: float = 30,
        sleep=time.sleep,
        clock=time.monotonic,
    ) -> None:
        self._poll(name, lambda c: (c is None, None), "deletion", timeout, poll, sleep, clock)


# ---- database users and the IP access list ----------------------------------------
# POST /groups/{groupId}/databaseUsers, DELETE .../databaseUsers/{databaseName}/{username}
# POST /groups/{groupId}/accessList (a list), DELETE .../accessList/{entryValue}


def _users(client: AtlasClient, db: str | None = None, user: str | None = None) -> str:
    base = f"/groups/{client.project_id}/databaseUsers"
    if db is None:
        return base
    return f"{base}/{urllib.parse.quote(db, safe='')}/{urllib.parse.quote(user, safe='')}"


def database_user_body(username: str, password: str, cluster: str | None) -> dict:
    """A SCRAM user in admin that can read and write every database (the benchmark drops
    and creates its own), scoped to the benchmark's cluster when one is named."""
    body = {
        "databaseName": "admin",
        "username": username,
        "password": password,
        "roles": [{"roleName": "readWriteAnyDatabase", "databaseName": "admin"}],
    }
    if cluster:
        body["scopes"] = [{"name": cluster, "type": "CLUSTER"}]
    return body


def access_list_entry(address: str, comment: str) -> dict:
    """An IP (as /32 or /128) or a CIDR block."""
    if "/" in address:
        return {"cidrBlock": address, "comment": comment}
    return {"ipAddress": address, "comment": comment}


def access_list_value(address: str) -> str:
    """The {entryValue} path segment: the address, or the CIDR block with '/' as %2F."""
    return urllib.parse.quote(address, safe="")


# ---- a benchmark's Atlas target: create or reuse, resize between steps, tear down -----


@dataclass(frozen=True)
class Hardware:
    """One step of a hardware matrix: tier and disk of the cluster while a step runs."""

    instance_size: str | None = None
    disk_size_gb: float | None = None
    disk_iops: int | None = None
    ebs_volume_type: str | None = None

    def label(self) -> str:
        parts = [self.instance_size or "current tier"]
        if self.disk_size_gb is not None:
            parts.append(f"{self.disk_size_gb:g} GB")
        if self.disk_iops is not None:
            parts.append(f"{self.disk_iops} IOPS")
        if self.ebs_volume_type:
            parts.append(self.ebs_volume_type)
        return ", ".join(parts)


_HW_KEYS = {
    "disk_gb": ("disk_size_gb", float),
    "disk_iops": ("disk_iops", int),
    "ebs_volume_type": ("ebs_volume_type", str),
}


def parse_hardware_steps(spec: str | None) -> list[Hardware]:
    """'M30;M40:disk_iops=6000,ebs_volume_type=PROVISIONED;M50' -> steps in order.

    A step is a tier, optionally followed by ':' and key=value pairs (disk_gb,
    disk_iops, ebs_volume_type); a step of only pairs keeps the tier.
    """
    steps = []
    for raw in (spec or "").split(";"):
        raw = raw.strip()
        if not raw:
            continue
        tier, _, rest = raw.partition(":")
        if "=" in tier:  # no tier, only settings
            tier, rest = "", raw
        kw: dict = {}
        for pair in filter(None, (p.strip() for p in rest.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or key.strip() not in _HW_KEYS:
                raise ValueError(
                    f"hardware step {raw!r}: {pair!r} is not one of"
                    f" {', '.join(k + '=...' for k in _HW_KEYS)}"
                )
            name, kind = _HW_KEYS[key.strip()]
            try:
                kw[name] = kind(value.strip())
            except ValueError:
                raise ValueError(f"hardware step {raw!r}: bad value in {pair!r}") from None
        tier = tier.strip().upper() or None
        if tier and not re.fullmatch(r"M\d+(_NVME)?", tier):
            raise ValueError(f"hardware step {raw!r}: {tier!r} is not an Atlas tier (M10, M30...)")
        hw = Hardware(tier, **kw)
        _hardware(hw.instance_size, hw.disk_size_gb, hw.disk_iops, hw.ebs_volume_type)  # checks
        steps.append(hw)
    return steps


def step_labels(hardware: dict) -> dict:
    """Settings that label the seed's disk-class and instance-size tables from what the
    cluster really has (read back after the resize, not what was asked)."""
    out = {}
    if hardware.get("atlas_tier"):
        out["instance_type"] = f"Atlas {hardware['atlas_tier']}"
    disk = hardware.get("atlas_ebs_volume_type") or "STANDARD"
    if hardware.get("atlas_disk_size_gb") is not None:
        disk += f" {hardware['atlas_disk_size_gb']:g} GB"
    out["disk_type"] = disk
    if hardware.get("atlas_disk_iops") is not None:
        out["disk_iops"] = hardware["atlas_disk_iops"]
    if hardware.get("atlas_price_per_hour_usd") is not None:
        out["price_per_hour"] = hardware["atlas_price_per_hour_usd"]
    return out


def with_credentials(uri: str, username: str, password: str, auth_source: str = "admin") -> str:
    """`mongodb[+srv]://host/...` with user:password (percent-encoded) and authSource."""
    m = re.match(r"^(mongodb(?:\+srv)?://)([^/?]*)(/?)([^?]*)(\??)(.*)$", uri)
    if not m or "@" in m.group(2):
        raise ValueError("expected a connection string without credentials")
    scheme, hosts, _, db, _, query = m.groups()
    q = urllib.parse.quote
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    if not any(k.lower() == "authsource" for k, _ in params):
        params.append(("authSource", auth_source))
    return (
        f"{scheme}{q(username, safe='')}:{q(password, safe='')}@{hosts}/{db}?"
        + urllib.parse.urlencode(params)
    )


class AtlasDeployment:
    """The target of one benchmark run on Atlas.

    provision(): creates the cluster (or checks an existing one when `reuse`), waits
    for IDLE, adds the client addresses to the project's access list, creates a
    database user with a fresh random password, and returns the connection string
    with those credentials (hand it on in a 0600 file: it is a secret).
    apply(step): resizes between the steps of a hardware matrix and returns the
    cluster's hardware as metadata.
    teardown(): undoes everything it did, in reverse, trying every step even when
    one fails: the user, the access-list entries, then the cluster (deleted when
    created here unless `keep`; an existing cluster gets its original hardware
    back). Returns the list of what failed, so the caller can report it.
    """

    def __init__(
        self,
        client: AtlasClient,
        spec: ClusterSpec,
        *,
        reuse: bool = False,
        keep: bool = False,
        username: str,
        access_list: list[str] = (),
        comment: str = "mongobench",
        srv: bool = True,
        timeout: float = 3600,
        poll: float = 30,
        sleep=time.sleep,
    ):
        self.client, self.spec = client, spec
        self.reuse, self.keep = reuse, keep
        self.username, self.comment, self.srv = username, comment, srv
        self.access_list = list(dict.fromkeys(access_list))
        self.timeout, self.poll, self.sleep = timeout, poll, sleep
        self.created = False
        self.user_created = False
        self.entries_added: list[str] = []
        self.original: Hardware | None = None
        self.current: Hardware | None = None
        self.cluster: dict | None = None

    def _wait(self) -> dict:
        self.cluster = self.client.wait_for_idle(
            self.spec.name, timeout=self.timeout, poll=self.poll, sleep=self.sleep
        )
        return self.cluster

    def provision(self) -> str:
        name = self.spec.name
        if self.reuse:
            self.client.get_cluster(name)  # AtlasNotFound names it when it is missing
        else:
            with self._undo_if_done("created"):
                self.client.create_cluster(self.spec)
        cluster = self._wait()
        hw = cluster_hardware(cluster)
        self.original = self.current = Hardware(
            hw.get("atlas_tier"),
            hw.get("atlas_disk_size_gb"),
            hw.get("atlas_disk_iops"),
            hw.get("atlas_ebs_volume_type"),
        )
        if self.access_list:
            entries = [access_list_entry(a, self.comment) for a in self.access_list]
            with self._undo_if_done("entries_added", list(self.access_list)):
                self.client.request("POST", f"/groups/{self.client.project_id}/accessList", entries)
        password = secrets.token_urlsafe(24)
        with self._undo_if_done("user_created"):
            self.client.create_database_user(database_user_body(self.username, password, name))
        return with_credentials(connection_string(cluster, srv=self.srv), self.username, password)

    @contextlib.contextmanager
    def _undo_if_done(self, attribute: str, value=True):
        """Marks `attribute` for teardown when the request succeeded, and also when its
        outcome is unknown (network error, 5xx: Atlas may have done it); a 4xx refusal
        did nothing, and undoing it could delete what another run owns."""
        try:
            yield
        except AtlasError as e:
            if e.status is None or e.status >= 500:
                setattr(self, attribute, value)
            raise
        setattr(self, attribute, value)

    def apply(self, step: Hardware | None) -> dict:
        """Resizes to `step` when it differs from the current hardware; returns metadata."""
        if step is not None and step != self.current:
            self.client.resize(
                self.spec.name,
                step.instance_size,
                step.disk_size_gb,
                step.disk_iops,
                step.ebs_volume_type,
            )
            self._wait()
            self.current = step
        return cluster_hardware(self.cluster or self._wait())

    def teardown(self) -> list[str]:
        """Undoes what provision and apply did; safe to call again (what is gone is not
        undone twice, and a 404 means it is already gone)."""
        failures = []

        def attempt(what, fn, *args):
            try:
                fn(*args)
            except AtlasNotFound:
                return True  # already gone: nothing left to undo
            except (AtlasError, ValueError, OSError) as e:  # keep going: later steps still run
                failures.append(f"{what}: {e}")
                return False
            return True

        if self.user_created and attempt(
            f"delete database user {self.username}",
            self.client.request,
            "DELETE",
            _users(self.client, "admin", self.username),
        ):
            self.user_created = False
        for address in list(self.entries_added):
            if attempt(
                f"delete access-list entry {address}",
                self.client.request,
                "DELETE",
                f"/groups/{self.client.project_id}/accessList/{access_list_value(address)}",
            ):
                self.entries_added.remove(address)
        name = self.spec.name
        if self.created and not self.keep:
            if attempt(f"delete cluster {name}", self.client.delete_cluster, name) and attempt(
                f"wait for deletion of cluster {name}",
                lambda: self.client.wait_until_deleted(
                    name, timeout=self.timeout, poll=self.poll, sleep=self.sleep
                ),
            ):
                self.created = False
        elif self.original and self.current != self.original:
            o = self.original
            if attempt(
                f"restore cluster {name} to {o.label()}",
                lambda: (
                    self.client.resize(
                        name, o.instance_size, o.disk_size_gb, o.disk_iops, o.ebs_volume_type
                    ),
                    self._wait(),
                ),
            ):
                self.current = o
        return failures
