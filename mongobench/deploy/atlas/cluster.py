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

import copy
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from mongobench.core.pricing import price_metadata


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


def database_user_body(username: str, password: str, cluster: str | None) -> dict:
    """A SCRAM user in admin that can read and write every database (the benchmark drops
    and creates its own) and run serverStatus (clusterMonitor: the WiredTiger counters and
    opLatencies of the seed's figures), scoped to the benchmark's cluster when one is named."""
    body = {
        "databaseName": "admin",
        "username": username,
        "password": password,
        "roles": [
            {"roleName": "readWriteAnyDatabase", "databaseName": "admin"},
            {"roleName": "clusterMonitor", "databaseName": "admin"},
        ],
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
