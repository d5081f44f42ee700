"""A MongoDB Atlas cluster as a benchmark target, through the Atlas Admin API.

Nothing is installed on a VM: this module drives mongobench.atlas.AtlasDeployment
from the PKB host. API credentials come from the environment only
(ATLAS_PROJECT_ID plus ATLAS_PUBLIC_KEY/ATLAS_PRIVATE_KEY, or ATLAS_CLIENT_ID/
ATLAS_CLIENT_SECRET for a service account). A database user with a fresh random
password is created for the run and deleted at cleanup; its connection string
goes to the client VM in a 0600 file (mongobench_pkb.vm.PushSecret), never on a
command line, in a log line or in a sample.

    deployment = mongobench_atlas.NewDeployment(run_uri, client_vms)
    uri = mongobench_atlas.Provision(deployment)
    for step in mongobench_atlas.Steps():          # the hardware matrix, or [None]
        metadata = mongobench_atlas.Apply(deployment, step)
    mongobench_atlas.AttachMeasurements(deployment, run)  # each variant's Resource Usage
    mongobench_atlas.Teardown(deployment)          # raises after trying every step

Leaks: the benchmark's Cleanup tears the deployment down; PKB skips Cleanup with
--run_stage=...,teardown (no cleanup), so this module also tears down whatever is left
when PKB's Teardown stage begins (events.before_phase, also for a spec unpickled by a
later `--run_stage=teardown`). The user and the access-list entries are temporary
(deleteAfterDate): Atlas deletes them itself if neither ever runs. A cluster has no such
date: a PKB process killed outright (SIGKILL, a lost host) leaves it billing.
"""

import logging

from absl import flags
from perfkitbenchmarker import errors, events, stages

from mongobench.deploy.atlas import api, cluster, measurements
from mongobench.deploy.atlas import deployment as atlas_deployment

_CLUSTER = flags.DEFINE_string(
    "mongobench_atlas_cluster",
    None,
    "Atlas cluster name (default pkb-<run_uri>). Created and deleted by the run unless"
    " --mongobench_atlas_reuse.",
)
_REUSE = flags.DEFINE_bool(
    "mongobench_atlas_reuse",
    False,
    "Use the existing cluster --mongobench_atlas_cluster: not created, not deleted; resized"
    " only for --mongobench_atlas_hardware, and given its original hardware back at cleanup.",
)
_KEEP = flags.DEFINE_bool(
    "mongobench_atlas_keep_cluster",
    False,
    "Do not delete the cluster the run created (it keeps billing: delete it yourself).",
)
_TIER = flags.DEFINE_string("mongobench_atlas_tier", "M30", "Tier of a created cluster (M10+).")
_DISK_GB = flags.DEFINE_float(
    "mongobench_atlas_disk_gb", None, "Disk size of a created cluster (default: Atlas')."
)
_DISK_IOPS = flags.DEFINE_integer(
    "mongobench_atlas_disk_iops", None, "Provisioned IOPS of a created cluster (AWS)."
)
_EBS = flags.DEFINE_enum(
    "mongobench_atlas_ebs_volume_type",
    None,
    ["STANDARD", "PROVISIONED"],
    "AWS volume type of a created cluster (PROVISIONED when --mongobench_atlas_disk_iops).",
)
_PROVIDER = flags.DEFINE_string("mongobench_atlas_provider", "AWS", "AWS, GCP or AZURE.")
_REGION = flags.DEFINE_string(
    "mongobench_atlas_region",
    "US_EAST_1",
    "Atlas region name (US_EAST_1, EUROPE_WEST_1, ...); put the client VMs in the same region.",
)
_VERSION = flags.DEFINE_string(
    "mongobench_atlas_mongodb_version", None, "MongoDB major version (8.0); default: Atlas'."
)
_HARDWARE = flags.DEFINE_string(
    "mongobench_atlas_hardware",
    None,
    "Hardware matrix: the run resizes the cluster to each step in turn and runs everything on"
    ' it, e.g. "M30;M40;M50" (instance size) or'
    ' "M40:disk_iops=3000;M40:disk_iops=6000,ebs_volume_type=PROVISIONED" (disk class).'
    " Keys: disk_gb, disk_iops, ebs_volume_type.",
)
_API_BASE = flags.DEFINE_string(
    "mongobench_atlas_api_base",
    api.API_BASE,
    "Atlas Admin API v2 base URL (e.g. Atlas for Government's).",
)
_CONNECTION = flags.DEFINE_enum(
    "mongobench_atlas_connection",
    "srv",
    ["srv", "standard"],
    "Which of the cluster's connection strings the clients use.",
)
_ACCESS_LIST = flags.DEFINE_bool(
    "mongobench_atlas_access_list",
    True,
    "Add the client VMs' public IPs to the project's IP access list for the run.",
)
_TIMEOUT = flags.DEFINE_integer(
    "mongobench_atlas_timeout_s",
    3600,
    "Seconds to wait for a create, resize or delete to finish.",
    lower_bound=1,
)
_POLL = flags.DEFINE_float(
    "mongobench_atlas_poll_s", 30, "Seconds between cluster state polls.", lower_bound=0
)
_TEMPORARY_H = flags.DEFINE_float(
    "mongobench_atlas_temporary_hours",
    48,
    "The run's database user and access-list entries are temporary: Atlas deletes them"
    " this many hours after Prepare even if no cleanup or teardown ever runs (Atlas allows"
    " at most one week). Make it longer than the run.",
    lower_bound=0.1,
    upper_bound=cluster.TEMPORARY_MAX_S / 3600,
)
_APPLY_TIMEOUT = flags.DEFINE_integer(
    "mongobench_atlas_apply_timeout_s",
    900,
    "Seconds to wait until Atlas has applied the new database user and access-list entries"
    " (cluster changeStatus APPLIED, entries ACTIVE) before the run connects.",
    lower_bound=1,
)
_ALLOW_REMOTE = flags.DEFINE_bool(
    "mongobench_atlas_allow_remote_clients",
    False,
    "Run although the client VMs are in another cloud or region than the Atlas cluster"
    " (--mongobench_atlas_provider/_region): the latency then includes that distance.",
)
# After Provision's wait: how long the engine retries an authentication failure on its
# first connection (a new user may reach the last member a little later).
AUTH_RETRY_S = 120
_GRANULARITY = flags.DEFINE_enum(
    "mongobench_atlas_metrics_granularity",
    "PT1M",
    sorted(measurements.GRANULARITIES),
    "Granularity of the Atlas process and disk measurements read for each variant (the"
    " seed's Resource Usage); PT10S needs a tier that keeps 10-second data.",
)
_METRICS_DELAY = flags.DEFINE_float(
    "mongobench_atlas_metrics_delay_s",
    90,
    "Seconds after the last variant ends before its Atlas measurements are read (Atlas"
    " publishes an interval's data point after the interval).",
    lower_bound=0,
)


def Steps():
    """The hardware matrix (parsed), or [None]: one step on the cluster as it is."""
    try:
        return cluster.parse_hardware_steps(_HARDWARE.value) or [None]
    except ValueError as e:
        raise errors.Config.InvalidValue(f"--mongobench_atlas_hardware: {e}") from e


def CheckPrerequisites(benchmark_config=None):
    """API credentials present, flags valid, and the client VMs in the cluster's cloud and
    region, before anything is provisioned."""
    Steps()
    if benchmark_config is not None and not _REUSE.value:
        _CheckClientLocation(benchmark_config)
    if _REUSE.value and not _CLUSTER.value:
        raise errors.Config.InvalidValue(
            "--mongobench_atlas_reuse needs --mongobench_atlas_cluster"
        )
    if _REUSE.value and _KEEP.value:
        raise errors.Config.InvalidValue(
            "--mongobench_atlas_keep_cluster applies to created clusters, not with --mongobench_atlas_reuse"
        )
    try:
        api.AtlasClient.from_env(base_url=_API_BASE.value)
        if not _REUSE.value:
            cluster.cluster_body(_Spec("pkb-check"))
    except ValueError as e:
        raise errors.Config.InvalidValue(f"Atlas: {e}") from e


def _CheckClientLocation(benchmark_config):
    """Refuses (or, with --mongobench_atlas_allow_remote_clients, warns about) client VMs
    outside the created cluster's provider and region. Static VMs are not located."""
    groups = getattr(benchmark_config, "vm_groups", None) or {}
    located = [
        (g.cloud, getattr(g.vm_spec, "zone", None) or "")
        for g in groups.values()
        if not getattr(g, "static_vms", None)
    ]
    remote = cluster.remote_clients(_PROVIDER.value, _REGION.value, located)
    if not remote:
        return
    cloud, zone = located[0]
    region = cluster.atlas_region_of(cloud, zone)
    hint = (
        f"; --mongobench_atlas_provider={cluster.PKB_CLOUDS[cloud]}"
        f" --mongobench_atlas_region={region} puts the cluster there"
        if region and cloud in cluster.PKB_CLOUDS
        else ""
    )
    message = (
        f"the Atlas cluster would be in --mongobench_atlas_provider={_PROVIDER.value}"
        f" --mongobench_atlas_region={_REGION.value} but {', '.join(remote)}: the latency"
        f" would cross clouds or regions{hint}, or set --mongobench_atlas_allow_remote_clients"
    )
    if not _ALLOW_REMOTE.value:
        raise errors.Config.InvalidValue(message)
    logging.warning("mongobench: %s", message)


def _Spec(name):
    return cluster.ClusterSpec(
        name=name,
        instance_size=_TIER.value,
        disk_size_gb=_DISK_GB.value,
        disk_iops=_DISK_IOPS.value,
        ebs_volume_type=_EBS.value,
        provider=_PROVIDER.value,
        region=_REGION.value,
        mongodb_major_version=_VERSION.value,
    )


def NewDeployment(run_uri, client_vms):
    """The run's deployment, before anything exists: keep it where Cleanup finds it, then
    Provision it (Cleanup tears down whatever it records, also after a half-done Provision)."""
    name = _CLUSTER.value or f"pkb-{run_uri}"
    return atlas_deployment.AtlasDeployment(
        api.AtlasClient.from_env(base_url=_API_BASE.value),
        _Spec(name),
        atlas_deployment.DeploymentOptions(
            reuse=_REUSE.value,
            keep=_KEEP.value,
            username=f"pkb-{run_uri}",
            access_list=[vm.ip_address for vm in client_vms] if _ACCESS_LIST.value else [],
            comment=f"PKB run {run_uri}",
            srv=_CONNECTION.value == "srv",
            timeout=_TIMEOUT.value,
            poll=_POLL.value,
            temporary_s=_TEMPORARY_H.value * 3600,
            apply_timeout=_APPLY_TIMEOUT.value,
        ),
    )


def Provision(deployment):
    """Creates (or checks) the cluster, the access list entries and the database user.

    Returns the URI, which holds the user's password. On failure everything done so far
    is undone before the error propagates.
    """
    name = deployment.spec.name
    try:
        uri = deployment.provision()
    except (api.AtlasError, ValueError) as e:
        failures = deployment.teardown()
        raise errors.Resource.CreationError(
            f"Atlas cluster {name}: {e}"
            + (f"; cleanup also failed: {failures}" if failures else "")
        ) from e
    logging.info(
        "mongobench: Atlas cluster %s ready (%s)", name, "reused" if deployment.reuse else "created"
    )
    return uri


def Apply(deployment, step):
    """Resizes to `step` (None: as it is); returns the cluster's hardware as metadata."""
    if step is not None:
        logging.info("mongobench: Atlas cluster %s -> %s", deployment.spec.name, step.label())
    metadata = deployment.apply(step)
    metadata["atlas_reused"] = deployment.reuse
    return metadata


def Teardown(deployment):
    failures = deployment.teardown()
    if failures:
        raise errors.Resource.CleanupError(
            "Atlas cleanup incomplete (check the Atlas UI, a cluster keeps billing): "
            + "; ".join(failures)
        )


def AttachMeasurements(deployment, run):
    """Adds to each successful variant of the perftables run document `run` (results with
    `start` and `duration_s`) the Atlas process and disk measurements of its window:
    `atlas_server`, read by the report's Resource Usage columns. An API failure is logged
    and kept in the variant (`atlas_error`): those figures stay n/a, the run's other
    results are kept."""
    measurements.attach(
        run,
        deployment.client,
        deployment.cluster or {"name": deployment.spec.name},
        granularity=_GRANULARITY.value,
        settle_s=_METRICS_DELAY.value,
    )


def _TeardownLeftovers(sender, benchmark_spec=None, **_):
    """PKB's Teardown stage: tears down what the benchmark's Cleanup did not (skipped by
    --run_stage without cleanup, or failed). Never raises: PKB must go on deleting VMs."""
    del sender
    state = getattr(benchmark_spec, "mongobench", None)
    deployment = getattr(state, "atlas", None)  # a perftables State
    if deployment is None or not deployment.leftovers():
        return
    logging.warning(
        "mongobench: Atlas resources left at teardown: %s", ", ".join(deployment.leftovers())
    )
    failures = deployment.teardown()
    if failures:
        logging.error(
            "mongobench: Atlas teardown incomplete (check the Atlas UI, a cluster keeps"
            " billing): %s",
            "; ".join(failures),
        )


events.before_phase.connect(_TeardownLeftovers, stages.TEARDOWN, weak=False)
