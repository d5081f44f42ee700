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
import time
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


NODE_SPECS = ("electableSpecs", "readOnlySpecs", "analyticsSpecs")
DISK_KEYS = ("diskSizeGB", "diskIOPS", "ebsVolumeType")


def resize_body(
    cluster: dict,
    instance_size: str | None = None,
    disk_size_gb: float | None = None,
    disk_iops: int | None = None,
    ebs_volume_type: str | None = None,
) -> dict:
    """PATCH body (resource version 2024-08-05) that moves the whole cluster to one tier
    and one disk: every region of every shard, and in each every node type present
    (electableSpecs, readOnlySpecs, analyticsSpecs, also those with nodeCount 0).

    The Admin API wants it so: electable and read-only nodes of a shard share one
    instance size, and the storage (diskSizeGB, and diskIOPS/ebsVolumeType on AWS) is the
    same for every node type and shard; a body that changes the electable nodes alone
    leaves the others on the old size and disk. Starts from the cluster's current
    replicationSpecs (ids and node counts kept, read-only zoneId and effective*Specs
    dropped) so that nothing else changes.
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
            provider = str(rc.get("providerName", "")).upper()
            if "ebsVolumeType" in change and provider != "AWS":
                raise ValueError(f"ebsVolumeType applies to AWS regions only, not {provider}")
            if "diskIOPS" in change and provider == "GCP":
                raise ValueError("diskIOPS cannot be set on GCP (Atlas sizes it with the disk)")
            base = rc.get("electableSpecs") or {}
            for kind in NODE_SPECS:
                hw = rc.get(kind)
                if hw is None:
                    continue
                hw.update(change)
                # a node type whose settings lag behind the electable nodes' (left by
                # an earlier resize) gets theirs: one storage for all node types
                for key in ("instanceSize", *DISK_KEYS):
                    if key not in change and key in base:
                        hw[key] = base[key]
    return {"replicationSpecs": specs}


def check_uniform(replication_specs: list) -> None:
    """ValueError unless every node type of every region and shard has the electable
    nodes' instance size and storage (what resize_body produces and the API wants)."""
    seen: dict[str, set] = {}
    for rs in replication_specs:
        for rc in rs.get("regionConfigs", []):
            for kind in NODE_SPECS:
                for key, value in (rc.get(kind) or {}).items():
                    if key in ("instanceSize", *DISK_KEYS):
                        seen.setdefault(key, set()).add(value)
    mixed = {k: sorted(map(str, v)) for k, v in seen.items() if len(v) > 1}
    if mixed:
        raise ValueError(f"node types differ in {mixed}")


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


def database_user_body(
    username: str, password: str, cluster: str | None, delete_after: str | None = None
) -> dict:
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
    if delete_after:  # a temporary user: Atlas deletes it then, even if the run never does
        body["deleteAfterDate"] = delete_after
    return body


def access_list_entry(address: str, comment: str, delete_after: str | None = None) -> dict:
    """An IP (as /32 or /128) or a CIDR block; with `delete_after` (ISO 8601 UTC) a
    temporary entry that Atlas deletes itself then."""
    entry = {"cidrBlock" if "/" in address else "ipAddress": address, "comment": comment}
    if delete_after:
        entry["deleteAfterDate"] = delete_after
    return entry


# Atlas accepts a deleteAfterDate in the future and at most one week ahead.
TEMPORARY_MAX_S = 7 * 24 * 3600


def delete_after_date(seconds: float, now: float) -> str:
    """The ISO 8601 UTC deleteAfterDate `seconds` after `now` (epoch seconds)."""
    if not 0 < seconds <= TEMPORARY_MAX_S:
        raise ValueError(
            f"Atlas deletes temporary entries between now and one week ahead, not in {seconds:g} s"
        )
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + seconds))


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


# ---- where the clients are: the Atlas region of a PKB cloud and zone ------------------
# Atlas names regions its own way (Admin API regionName; "Cloud Providers and Regions"
# pages of the Atlas docs): AWS us-east-1 -> US_EAST_1; GCP's older regions have names
# of their own (us-central1 -> CENTRAL_US), newer ones follow us-east4 -> US_EAST_4;
# Azure's are reordered (eastus2 -> US_EAST_2, westeurope -> EUROPE_WEST).
PKB_CLOUDS = {"AWS": "AWS", "GCP": "GCP", "Azure": "AZURE"}
_GCP_NAMED = {
    "us-central1": "CENTRAL_US",
    "us-east1": "EASTERN_US",
    "us-west1": "WESTERN_US",
    "europe-west1": "WESTERN_EUROPE",
    "asia-east1": "EASTERN_ASIA_PACIFIC",
    "asia-northeast1": "NORTHEASTERN_ASIA_PACIFIC",
    "asia-southeast1": "SOUTHEASTERN_ASIA_PACIFIC",
}
_AZURE = {
    "eastus": "US_EAST",
    "eastus2": "US_EAST_2",
    "centralus": "US_CENTRAL",
    "northcentralus": "US_NORTH_CENTRAL",
    "southcentralus": "US_SOUTH_CENTRAL",
    "westus": "US_WEST",
    "westus2": "US_WEST_2",
    "westus3": "US_WEST_3",
    "westcentralus": "US_WEST_CENTRAL",
    "canadacentral": "CANADA_CENTRAL",
    "canadaeast": "CANADA_EAST",
    "brazilsouth": "BRAZIL_SOUTH",
    "northeurope": "EUROPE_NORTH",
    "westeurope": "EUROPE_WEST",
    "uksouth": "UK_SOUTH",
    "ukwest": "UK_WEST",
    "francecentral": "FRANCE_CENTRAL",
    "germanywestcentral": "GERMANY_WEST_CENTRAL",
    "swedencentral": "SWEDEN_CENTRAL",
    "switzerlandnorth": "SWITZERLAND_NORTH",
    "norwayeast": "NORWAY_EAST",
    "eastasia": "ASIA_EAST",
    "southeastasia": "ASIA_SOUTH_EAST",
    "japaneast": "JAPAN_EAST",
    "koreacentral": "KOREA_CENTRAL",
    "centralindia": "INDIA_CENTRAL",
    "australiaeast": "AUSTRALIA_EAST",
}


def atlas_region_of(cloud: str, zone: str) -> str | None:
    """The Atlas regionName of PKB's `cloud` and `zone` (us-east-1a, us-central1-b,
    eastus-1), or None when it cannot be told."""
    zone = (zone or "").strip().lower()
    if not zone:
        return None
    if cloud == "AWS":
        m = re.fullmatch(r"([a-z]+(?:-gov)?-[a-z]+-\d+)[a-z]?", zone)
        return m.group(1).upper().replace("-", "_") if m else None
    if cloud == "GCP":
        m = re.fullmatch(r"([a-z]+-[a-z]+\d+)(?:-[a-z])?", zone)
        if not m:
            return None
        region = m.group(1)
        if region in _GCP_NAMED:
            return _GCP_NAMED[region]
        return re.sub(r"(\d+)$", r"_\1", region).upper().replace("-", "_")
    if cloud == "Azure":
        return _AZURE.get(zone.split("-")[0])
    return None


def remote_clients(provider: str, region: str, clients: list[tuple[str, str]]) -> list[str]:
    """One line per client VM group ((PKB cloud, zone)) that is not in the cluster's
    provider and region: its latency to the cluster would cross clouds or regions."""
    want = (provider.upper(), region.upper().replace("-", "_"))
    out = []
    for cloud, zone in clients:
        where = (PKB_CLOUDS.get(cloud), atlas_region_of(cloud, zone))
        if where == want:
            continue
        if where[0] is None:
            out.append(f"clients on {cloud} (not an Atlas provider)")
        elif where[1] is None:
            out.append(f"clients in {cloud} zone {zone or '(none)'}: Atlas region unknown")
        else:
            out.append(f"clients in {cloud} {zone} (Atlas {where[0]} {where[1]})")
    return out
