"""The run's Atlas deployment: provision, resize between steps, tear down what it made."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request

from mongobench.deploy.atlas.api import AtlasClient, AtlasError, AtlasNotFound, _users
from mongobench.deploy.atlas.cluster import (
    ClusterSpec,
    Hardware,
    access_list_entry,
    access_list_value,
    cluster_hardware,
    database_user_body,
)

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
