"""The run's Atlas deployment: provision, resize between steps, tear down what it made."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

from mongobench.deploy.atlas.api import (
    AtlasClient,
    AtlasConflict,
    AtlasError,
    AtlasNotFound,
    _access_list,
    _users,
    log,
)
from mongobench.deploy.atlas.cluster import (
    ClusterSpec,
    Hardware,
    access_list_entry,
    cluster_hardware,
    database_user_body,
    delete_after_date,
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


@dataclass(frozen=True)
class DeploymentOptions:
    """How an AtlasDeployment treats its cluster: `reuse` an existing one, `keep` it after
    the run, the database user's name, the client addresses for the access list, the
    comment on what it creates, an SRV (or standard) connection string, how long to wait
    for the cluster (`timeout`, polling every `poll` seconds) and for Atlas to apply the
    user and entries (`apply_timeout`), and how long those stay (`temporary_s`)."""

    username: str
    reuse: bool = False
    keep: bool = False
    access_list: Sequence[str] = ()
    comment: str = "mongobench"
    srv: bool = True
    timeout: float = 3600
    poll: float = 30
    temporary_s: float = 48 * 3600
    apply_timeout: float = 900


class AtlasDeployment:
    """The target of one benchmark run on Atlas (`options`: a DeploymentOptions).

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

    Leaks: what a request is about to create is recorded before the request goes out
    (a Ctrl-C or a lost reply during it still leaves it to teardown; a 4xx refusal
    clears it again), and what already existed (a cluster of that name, an access-list
    entry for a client address) is never created, so never deleted. The database user
    and the access-list entries are temporary (deleteAfterDate `temporary_s` ahead):
    Atlas removes them itself if no teardown ever runs. A cluster has no such date.
    Provision waits (`apply_timeout`) until Atlas has applied the user and the entries.
    """

    def __init__(
        self,
        client: AtlasClient,
        spec: ClusterSpec,
        options: DeploymentOptions,
        *,
        sleep=time.sleep,
        clock=time.time,
    ):
        o = options
        self.client, self.spec = client, spec
        self.temporary_s, self.apply_timeout, self.clock = o.temporary_s, o.apply_timeout, clock
        delete_after_date(o.temporary_s, 0)  # ValueError now, not after the cluster exists
        self.entries_preexisting: list[str] = []
        self.reuse, self.keep = o.reuse, o.keep
        self.username, self.comment, self.srv = o.username, o.comment, o.srv
        self.access_list = list(dict.fromkeys(o.access_list))
        self.timeout, self.poll, self.sleep = o.timeout, o.poll, sleep
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
            if self._exists(name):
                # never ours to delete: refused before anything is recorded for teardown
                raise AtlasConflict(
                    f"cluster {name} exists already and was not made by this run (benchmark"
                    " it with --mongobench_atlas_reuse, or choose another name)",
                    409,
                    "DUPLICATE_CLUSTER_NAME",
                )
            with self._intent("created"):
                self.client.create_cluster(self.spec)
        cluster = self._wait()
        hw = cluster_hardware(cluster)
        self.original = self.current = Hardware(
            hw.get("atlas_tier"),
            hw.get("atlas_disk_size_gb"),
            hw.get("atlas_disk_iops"),
            hw.get("atlas_ebs_volume_type"),
        )
        delete_after = delete_after_date(self.temporary_s, self.clock())
        new = []
        for address in self.access_list:
            if self.client.access_list_entry(address) is not None:
                # someone else's entry (or a permanent one): used, never changed or deleted
                log.info("atlas: access-list entry %s exists already: kept as it is", address)
                self.entries_preexisting.append(address)
            else:
                new.append(address)
        if new:
            entries = [access_list_entry(a, self.comment, delete_after) for a in new]
            with self._intent("entries_added", [*self.entries_added, *new]):
                self.client.request("POST", f"/groups/{self.client.project_id}/accessList", entries)
        password = secrets.token_urlsafe(24)
        body = database_user_body(self.username, password, name, delete_after)
        with self._intent("user_created"):
            self.client.create_database_user(body)
        log.info("atlas: waiting until the database user and access list are applied")
        self.client.wait_until_applied(
            name,
            new,
            timeout=self.apply_timeout,
            poll=min(self.poll, 5),
            sleep=self.sleep,
        )
        return with_credentials(connection_string(cluster, srv=self.srv), self.username, password)

    def _exists(self, name: str) -> bool:
        try:
            self.client.get_cluster(name)
        except AtlasNotFound:
            return False
        return True

    @contextlib.contextmanager
    def _intent(self, attribute: str, value=True):
        """Records `attribute` for teardown before the request goes out, so that an
        interrupt (Ctrl-C) or a lost reply during it still leaves it to teardown (which
        counts a 404 as undone). A 4xx refusal did nothing, and undoing it could delete what
        another run owns: the record is cleared again."""
        before = getattr(self, attribute)
        setattr(self, attribute, value)
        try:
            yield
        except AtlasError as e:
            if e.status is not None and e.status < 500 and not getattr(e, "after_unknown", False):
                setattr(self, attribute, before)
            raise

    def leftovers(self) -> list[str]:
        """What teardown still has to undo (empty when nothing is left)."""
        out = []
        if self.user_created:
            out.append(f"database user {self.username}")
        out += [f"access-list entry {a}" for a in self.entries_added]
        if self.created and not self.keep:
            out.append(f"cluster {self.spec.name}")
        elif self.original and self.current != self.original:
            out.append(f"cluster {self.spec.name} resized to {self.current.label()}")
        return out

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
                _access_list(self.client, address),
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
