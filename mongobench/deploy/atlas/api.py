"""The Atlas Admin API v2 client: digest or service-account auth, retries, clusters and users."""

from __future__ import annotations

import base64
import contextlib
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
from dataclasses import dataclass, field

from mongobench.core.poll import PollTimeout, poll_until
from mongobench.deploy.atlas.cluster import (
    ClusterSpec,
    access_list_value,
    cluster_body,
    resize_body,
)

API_BASE = "https://cloud.mongodb.com/api/atlas/v2"
API_VERSION = "2024-08-05"
ENV_PUBLIC_KEY = "ATLAS_PUBLIC_KEY"
ENV_PRIVATE_KEY = "ATLAS_PRIVATE_KEY"
ENV_PROJECT_ID = "ATLAS_PROJECT_ID"
ENV_CLIENT_ID = "ATLAS_CLIENT_ID"  # service account
ENV_CLIENT_SECRET = "ATLAS_CLIENT_SECRET"

log = logging.getLogger("mongobench.atlas")  # one logger for all of Atlas, as before the move


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


@dataclass(frozen=True)
class Credentials:
    """An API key pair (digest) or a service account (client id and secret). The secrets
    never show in a repr; `secret_env`/`client_secret_env` name the environment variables
    they came from (a pickled client keeps only those names)."""

    public_key: str | None = None
    private_key: str | None = field(default=None, repr=False)
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    secret_env: str | None = None
    client_secret_env: str | None = None


@dataclass(frozen=True)
class Retry:
    """At most `max_attempts` tries, exponential backoff from `backoff` seconds (with jitter,
    capped at `max_backoff`, which also caps Retry-After), and no retry that would end later
    than `retry_budget` seconds after the first try."""

    max_attempts: int = 5
    backoff: float = 2.0
    max_backoff: float = 60.0
    retry_budget: float = 300.0


class AtlasClient:
    """Clusters of one Atlas project. Credentials: API key pair (digest) or service account."""

    def __init__(
        self,
        project_id: str,
        credentials: Credentials,
        *,
        base_url: str = API_BASE,
        api_version: str = API_VERSION,
        timeout: float = 60.0,
        retry: Retry = Retry(),
        sleep=time.sleep,
        clock=time.monotonic,
    ):
        cred = credentials
        if not re.fullmatch(r"[0-9a-fA-F]{24}", project_id or ""):
            raise ValueError("project id must be 24 hexadecimal digits")
        if not ((cred.public_key and cred.private_key) or (cred.client_id and cred.client_secret)):
            raise ValueError("need an API key pair or a service account (client id and secret)")
        self.project_id = project_id
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self.timeout = timeout
        self._user = cred.public_key
        self._secret = _Secret(cred.private_key, cred.secret_env)
        self._client_id = cred.client_id
        self._client_secret = _Secret(cred.client_secret, cred.client_secret_env)
        self._challenge: dict | None = None
        self._nc = 0
        self._token: str | None = None
        self._token_expiry = 0.0
        # Retries: see Retry
        if retry.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.max_attempts = retry.max_attempts
        self.backoff, self.max_backoff = retry.backoff, retry.max_backoff
        self.retry_budget = retry.retry_budget
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
        credentials = Credentials(
            pub or None, priv or None, cid or None, csec or None,
            secret_env=ENV_PRIVATE_KEY, client_secret_env=ENV_CLIENT_SECRET,
        )  # fmt: skip
        return cls(project, credentials, **kwargs)

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

        def check():
            try:
                cluster = self.get_cluster(name)
            except AtlasNotFound:
                cluster = None
            except AtlasError as e:
                if not transient(e.status):
                    raise
                # a poll only reads: after its own retries, keep polling until the deadline
                log.info("atlas: polling cluster %s failed (%s); polling on", name, e)
                return False, f"unknown ({e})"
            done, value = settled(cluster)
            return done, value if done else cluster.get("stateName")

        try:
            return poll_until(check, timeout=timeout, interval=poll, sleep=sleep, clock=clock)
        except PollTimeout as t:
            raise AtlasTimeout(
                f"cluster {name} still {t.last} after {timeout:.0f}s waiting for {waiting_for}"
            ) from None

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

    def change_status(self, name: str) -> str:
        """changeStatus of every change made to cluster `name` (database users, access
        list, configuration): PENDING until Atlas has applied them all, then APPLIED
        (GET /groups/{groupId}/clusters/{name}/status)."""
        doc = self.request("GET", f"{self._clusters(name)}/status") or {}
        return str(doc.get("changeStatus") or "unknown")

    def access_list_entry(self, address: str) -> dict | None:
        """The project's access-list entry for `address` (an IP or CIDR block), or None."""
        try:
            return self.request("GET", _access_list(self, address))
        except AtlasNotFound:
            return None

    def access_list_status(self, address: str) -> str:
        """PENDING, ACTIVE or FAILED (GET /groups/{groupId}/accessList/{entryValue}/status)."""
        doc = self.request("GET", f"{_access_list(self, address)}/status") or {}
        return str(doc.get("STATUS") or doc.get("status") or "unknown")

    def wait_until_applied(
        self,
        name: str,
        addresses: list[str] = (),
        timeout: float = 600,
        poll: float = 5,
        sleep=time.sleep,
        clock=time.monotonic,
    ) -> None:
        """Polls until the cluster's changes (a new database user) are APPLIED and every
        access-list entry of `addresses` is ACTIVE: both apply asynchronously, and a client
        that connects before gets "authentication failed" or no connection at all. A FAILED
        entry raises at once; AtlasTimeout names what was still pending."""

        def check():
            pending = []
            for address in addresses:
                status = self.access_list_status(address)
                if status == "FAILED":
                    raise AtlasError(f"access-list entry {address}: Atlas reports FAILED")
                if status != "ACTIVE":
                    pending.append(f"access-list entry {address} {status}")
            change = self.change_status(name)
            if change != "APPLIED":
                pending.append(f"cluster {name} changes {change}")
            return not pending, "; ".join(pending)

        try:
            poll_until(check, timeout=timeout, interval=poll, sleep=sleep, clock=clock)
        except PollTimeout as t:
            raise AtlasTimeout(f"still pending after {timeout:.0f}s: {t.last}") from None

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


def _access_list(client: AtlasClient, address: str) -> str:
    return f"/groups/{client.project_id}/accessList/{access_list_value(address)}"


def _users(client: AtlasClient, db: str | None = None, user: str | None = None) -> str:
    base = f"/groups/{client.project_id}/databaseUsers"
    if db is None:
        return base
    return f"{base}/{urllib.parse.quote(db, safe='')}/{urllib.parse.quote(user, safe='')}"
