"""MongoDB Performance Tables: insert, update and query speed, variant by variant.

Reproduces the experiments of John Page's "MongoDB Performance Tables": each
experiment is a set of variants (document size, batch size, key type, ...)
declared in mongobench/experiments/perftables.yaml. A client VM runs the
engine's driver against the target; every variant yields samples with
metadata `experiment`, `variant` and the variant's settings.

Targets (--mongodb_perftables_deployment):
  - uri: any deployment given by connection string (file or environment
    variable; the secret never reaches a command line, a log or a sample);
  - standalone: one mongod installed on the `servers` VM
    (mongobench_pkb.mongod: MongoDB's repositories, a tarball,
    preinstalled binaries, or the stand-in on test beds), with the OS metrics
    of that VM sampled during every timed phase;
  - replset: a replica set (the seed's default: 3 members, writes w:majority,
    reads from the primary) over the `servers` VMs, initiated from the client
    and waited for;
  - sharded: a config-server replica set, N shard replica sets and a mongos on
    the client VM; every collection an experiment creates is sharded with the
    experiment's shard key (or --mongodb_perftables_shard_key);
  - atlas: a cluster created (or reused) through the Atlas Admin API; with
    --mongobench_atlas_hardware the run resizes it between steps, which turns
    the seed's instance-size and disk-class tables into one PKB run.
"""

import dataclasses
import json
import logging
import os
from typing import Any

from absl import flags
from perfkitbenchmarker import benchmark_spec as bm_spec
from perfkitbenchmarker import configs, errors, sample, vm_util

from mongobench.core import interrupt, shardkey
from mongobench.core import series as core_series
from mongobench.deploy.atlas import api, cluster
from mongobench.measure import bottleneck, ossampler
from mongobench.perftables import estimate as estimate_mod
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun
from mongobench.remote import shipping
from mongobench.reports import results
from mongobench_pkb import atlas as mongobench_atlas
from mongobench_pkb import engine as mongobench_engine
from mongobench_pkb import host as mongobench_host
from mongobench_pkb import mongod as mongobench_mongod
from mongobench_pkb import stages, target
from mongobench_pkb import topology as mongobench_topology

BENCHMARK_NAME = "mongodb_perftables"
BENCHMARK_CONFIG = """
mongodb_perftables:
  description: >
    MongoDB Performance Tables: insert/update/query speed per variant.
    Give the target with --mongodb_perftables_uri_file or _uri_env.
  vm_groups:
    clients:
      vm_spec: *default_dual_core
      vm_count: 1
    servers:
      vm_spec: *default_dual_core
      disk_spec: *default_500_gb
      vm_count: 1
  flags:
    # MongoDB's production notes: XFS for WiredTiger data (PKB formats the data disk)
    disk_fs_type: xfs
"""

DEPLOYMENTS = ("auto", "uri", "standalone", "replset", "sharded", "atlas")
NO_SERVER_VMS = ("uri", "atlas")


@dataclasses.dataclass
class State:
    """What Prepare leaves for Run and Cleanup (`benchmark_spec.mongobench`; PKB pickles it
    between stages). Fields stay at their defaults for what Prepare did not get to."""

    servers: mongobench_topology.Servers  # the servers VMs, what starting them recorded
    request: PerftablesRun | None = None  # the run options, checked in CheckPrerequisites
    workdir: str | None = None  # the engine's on the first client VM
    uri_file: str | None = None  # target.uri there
    follower_workdirs: dict = dataclasses.field(default_factory=dict)  # client VMs 1..K-1
    server_workdirs: dict = dataclasses.field(default_factory=dict)  # the OS samplers'
    labels: dict = dataclasses.field(default_factory=dict)  # hardware labels of the servers
    atlas: Any = None  # mongobench_atlas's deployment, for deployment atlas
    steps: list = dataclasses.field(default_factory=lambda: [None])  # Atlas hardware steps
    failed: list | None = None  # set by Run (one line per failed variant); None: it stopped


_EXPERIMENTS = flags.DEFINE_list(
    "mongodb_perftables_experiments",
    ["all"],
    'Experiments to run (names in mongobench/experiments/perftables.yaml), or "all".',
)
_VARIANTS = flags.DEFINE_string(
    "mongodb_perftables_variants",
    None,
    'Only these variant labels, separated by ";" (labels may contain commas),'
    ' e.g. "1;4" for document sizes; default all.',
)
_SKIP = flags.DEFINE_string(
    "mongodb_perftables_skip",
    None,
    'Variants to leave out, "experiment/label;experiment/label", e.g. for a'
    " server that lacks a feature.",
)
_SCALE = flags.DEFINE_string(
    "mongodb_perftables_scale",
    "full",
    "Size of every experiment: full (the seed sizes, e.g. 24 GB loads),"
    " tenth, hundredth, small, smoke, or a factor in (0, 1].",
)
_TARGET = target.DefineUriFlags(BENCHMARK_NAME)
_DATABASE = flags.DEFINE_string(
    "mongodb_perftables_database",
    "mongobench",
    "Database the experiments create and drop collections in.",
)
_SET = flags.DEFINE_list(
    "mongodb_perftables_set",
    [],
    "Setting overrides for every variant, key=value (e.g. threads=32); they win over the"
    " variants' own values. Keys and value ranges are checked (an unknown key is an error"
    " that lists the known ones).",
)
_MAX_SECONDS = flags.DEFINE_float(
    "mongodb_perftables_max_seconds",
    None,
    "Cap on each timed phase in seconds, > 0 (the variant stops early and says so in its"
    " metadata).",
)
_REPLY_TIMEOUT = flags.DEFINE_float(
    "mongodb_perftables_reply_timeout",
    None,
    "Seconds any call waits for the server's reply before its variant fails (prepare,"
    " serverStatus, finish, and no reply from any client in a timed phase); default: the"
    " URI's timeoutMS or socketTimeoutMS, else 300.",
)
_CLIENT_PROCESSES = flags.DEFINE_integer(
    "mongodb_perftables_client_processes",
    None,
    "Worker processes the client VM spreads each variant's clients over (each runs its"
    " share as virtual clients on one event loop); default: the client VM's vCPUs.",
    lower_bound=1,
)
_CLIENT_PATH = flags.DEFINE_enum(
    "mongodb_perftables_client_path",
    "multiplexed",
    ("multiplexed", "pymongo"),
    "Client of the timed phases: multiplexed (virtual clients over processes) or pymongo"
    " (the reference path: one thread per client in one process).",
)
_INTERVAL = flags.DEFINE_float(
    "mongodb_perftables_interval_s",
    core_series.DEFAULT_INTERVAL_S,
    "Seconds of each interval of the per-variant time series (throughput, errors and"
    " latency percentiles per interval, on the client VMs' common clock), published as PKB"
    " time-series samples; 0: none.",
    lower_bound=0.0,
)
_REPEATS = flags.DEFINE_integer(
    "mongodb_perftables_repeats",
    1,
    "Runs of each variant, interleaved across variants (rounds alternate direction so a"
    " drift favours none); samples carry the mean with repeats, stdev, ci95_low and"
    " ci95_high (t-distribution).",
    lower_bound=1,
)
_RATE_STEPS = flags.DEFINE_string(
    "mongodb_perftables_rate_steps",
    None,
    "A latency-versus-throughput curve of each single-operation variant: it runs closed"
    " loop, then in an open loop (target_ops_per_s) at each step's rate: 'auto' (0.1..1.2"
    " of the closed loop's throughput), fractions of it (0.25,0.5,1,1.5) or rates"
    " (100/s,400/s). Multi-operation and bulk variants are refused.",
)
FLAGS = flags.FLAGS


_DEPLOYMENT = flags.DEFINE_enum(
    "mongodb_perftables_deployment",
    "auto",
    DEPLOYMENTS,
    "uri: a deployment given by connection string (no server VM); standalone: one"
    " mongod on the servers VM; replset: a replica set over the servers VMs; sharded: config"
    " servers, shards and a mongos on the client; atlas: an Atlas cluster through the Admin"
    " API (--mongobench_atlas_*); auto: uri when a URI flag is given, else standalone.",
)
_REPLSET_MEMBERS = flags.DEFINE_integer(
    "mongodb_perftables_replset_members",
    3,
    "Members of the replica set (deployment replset) or of each shard (sharded: see"
    " --mongodb_perftables_shard_members), placed round-robin over the servers VMs; members"
    " sharing a VM get consecutive ports. The servers group gets this many VMs unless the"
    " config names its own vm_count or static_vms.",
    lower_bound=1,
)
_SHARDS = flags.DEFINE_integer(
    "mongodb_perftables_shards", 2, "Shards of a sharded deployment.", lower_bound=1
)
_SHARD_MEMBERS = flags.DEFINE_integer(
    "mongodb_perftables_shard_members",
    1,
    "Members of each shard's replica set (1: single-member replica sets).",
    lower_bound=1,
)
_CONFIG_MEMBERS = flags.DEFINE_integer(
    "mongodb_perftables_config_members",
    1,
    "Members of the config server replica set.",
    lower_bound=1,
)
_SHARD_KEY = flags.DEFINE_string(
    "mongodb_perftables_shard_key",
    "_id:hashed",
    "Shard key of every collection an experiment creates unless the experiment declares its"
    ' own shard_key setting: "field:hashed" or "a:1,b:1".',
)
_TOPOLOGY_TIMEOUT = flags.DEFINE_integer(
    "mongodb_perftables_topology_timeout",
    300,
    "Seconds to wait for each replica set to elect a primary.",
    lower_bound=1,
)
_WRITE_CONCERN = flags.DEFINE_string(
    "mongodb_perftables_write_concern",
    "majority",
    "Default write concern (w) of replset and sharded deployments (the seed's: majority);"
    " experiments that set write_concern themselves keep theirs.",
)
_PORT = flags.DEFINE_integer(
    "mongodb_perftables_port",
    27017,
    "Port of the mongod on the servers VM.",
    lower_bound=1,
    upper_bound=65535,
)
_CACHE_GB = flags.DEFINE_float(
    "mongodb_perftables_cache_gb",
    None,
    "WiredTiger cache of the servers VM's mongod (default: mongod's own, 50 % of RAM - 1 GB).",
)
_HOST_SETTINGS = flags.DEFINE_bool(
    "mongodb_perftables_host_settings",
    True,
    "Apply MongoDB's production-notes host settings on the servers VM (restored at cleanup).",
)


def _Deployment(flag_values=None):
    """The deployment in force: flags given in the benchmark config count too."""
    values = dict(flag_values or {})
    kind = values.get("mongodb_perftables_deployment", _DEPLOYMENT.value)
    if kind != "auto":
        return kind
    return "uri" if _TARGET.Given(values) else "standalone"


def _ServerVmCount(kind):
    if kind == "replset":
        return _REPLSET_MEMBERS.value
    if kind == "sharded":
        return _SHARDS.value * _SHARD_MEMBERS.value
    return 1


def GetConfig(user_config: dict[str, Any]) -> dict[str, Any]:
    config = configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)
    kind = _Deployment(config.get("flags"))
    if kind in NO_SERVER_VMS:
        # The target exists already or is managed: provision no server VM.
        config["vm_groups"].pop("servers", None)
        return config
    user_servers = ((user_config or {}).get("vm_groups") or {}).get("servers") or {}
    if "vm_count" not in user_servers and "static_vms" not in user_servers:
        config["vm_groups"]["servers"]["vm_count"] = _ServerVmCount(kind)
    return config


# How this benchmark's flags name the engine's run options in one-line errors.
_FLAG_OF = {
    "overrides": "--mongodb_perftables_set",
    "processes": "--mongodb_perftables_client_processes",
}


def _FlagName(option):
    return _FLAG_OF.get(option, f"--mongodb_perftables_{option}")


_REQUESTS = {}  # flag values -> their request: validated and planned once per PKB process


def _Request():
    """The run options of this benchmark's flags as the engine's request
    (mongobench.perftables.request.PerftablesRun), validated and planned; its errors name
    the flags. Prepare adds the client VM's paths; the client VM's engine reads it as JSON."""
    key = repr(
        [
            f.value
            for f in (_EXPERIMENTS, _VARIANTS, _SKIP, _SCALE, _DATABASE, _SET, _MAX_SECONDS)
            + (_REPLY_TIMEOUT, _CLIENT_PROCESSES, _CLIENT_PATH, _INTERVAL, _REPEATS, _RATE_STEPS)
        ]
    )
    if key not in _REQUESTS:
        try:
            request = PerftablesRun(
                experiments=None if _EXPERIMENTS.value == ["all"] else list(_EXPERIMENTS.value),
                scale=_SCALE.value,
                variants=exp_mod.split_list(_VARIANTS.value, _FlagName("variants"), sep=";"),
                skip=_SKIP.value,
                database=_DATABASE.value,
                overrides=exp_mod.parse_overrides(_SET.value, _FlagName("overrides")),
                max_seconds=_MAX_SECONDS.value,
                reply_timeout=_REPLY_TIMEOUT.value,
                interval_s=_INTERVAL.value,
                client_path=_CLIENT_PATH.value,
                processes=_CLIENT_PROCESSES.value,
                repeats=_REPEATS.value,
                rate_steps=_RATE_STEPS.value,
            ).validate(_FlagName)
            request.plans  # noqa: B018 - planned here: a bad selection fails up front
        except ValueError as e:  # RequestError, ExperimentError
            raise errors.Config.InvalidValue(str(e)) from None
        _REQUESTS[key] = request
    return _REQUESTS[key]


def _ClientVmCount(benchmark_config):
    # PKB provisions vm_count VMs of a group (the first vm_count of its static VMs).
    group = (getattr(benchmark_config, "vm_groups", None) or {}).get("clients")
    return getattr(group, "vm_count", 1) or 1


def CheckPrerequisites(benchmark_config) -> None:
    """Validates flags before anything is provisioned."""
    if _ClientVmCount(benchmark_config) > 1 and _CLIENT_PATH.value != "multiplexed":
        raise errors.Config.InvalidValue(
            "several client VMs share timed phases on the multiplexed client path only, not"
            f" --mongodb_perftables_client_path={_CLIENT_PATH.value}"
        )
    request = _Request()  # every run option, and the plan
    kind = _Deployment()
    # the VMs' OS and architecture, against the support matrix (docs/platforms.md)
    mongobench_engine.CheckPrerequisites(benchmark_config)
    if kind != "uri" and _TARGET.Given():
        raise errors.Config.InvalidValue(
            "a URI flag was given with --mongodb_perftables_deployment="
            f"{_DEPLOYMENT.value}: the target would be ambiguous"
        )
    if kind == "uri":
        _ReadUri()
    elif kind == "atlas":
        mongobench_atlas.CheckPrerequisites(benchmark_config)
    elif kind == "sharded":
        try:
            shardkey.parse_shard_key(_SHARD_KEY.value)
        except ValueError as e:
            raise errors.Config.InvalidValue(f"--mongodb_perftables_shard_key: {e}") from e
    if kind in ("standalone", "replset", "sharded"):
        # version flags, and the servers' OS and architecture (docs/platforms.md)
        mongobench_mongod.CheckPrerequisites(benchmark_config)
    _LogEstimate(benchmark_config, request)


def _LogEstimate(benchmark_config, request):
    """The plan's data volume, wall time and cost, logged before anything is provisioned
    (PKB does not ask; the samples carry the engine's estimate as metadata)."""
    kind = _Deployment()
    uri = _ReadUri() if kind == "uri" else None
    est = estimate_mod.estimate(request.plans, estimate_mod.rates_for(uri), request.runs)
    vms = []
    for group in (getattr(benchmark_config, "vm_groups", None) or {}).values():
        if getattr(group, "static_vms", None):
            continue  # no bill
        vms.append((getattr(group.vm_spec, "machine_type", None), group.vm_count or 1))
    atlas = ()
    if kind == "atlas":
        f = flags.FLAGS
        atlas = (f.mongobench_atlas_tier, f.mongobench_atlas_provider, f.mongobench_atlas_region)
    cost = estimate_mod.cost(est.seconds, vms, *atlas)
    logging.info("mongodb_perftables plan: %s%s", est.summary(), f"; {cost}" if cost else "")


def _ReadUri():
    return _TARGET.Read()


def _SharedHost(clients, servers) -> bool:
    """Whether a client VM runs on a server VM's kernel (same boot id: the same host)."""

    def boot_ids(vms):
        return {vm.RemoteCommand("cat /proc/sys/kernel/random/boot_id")[0].strip() for vm in vms}

    return bool(servers) and bool(boot_ids(clients) & boot_ids(servers))


def _Servers(benchmark_spec):
    return benchmark_spec.vm_groups.get("servers") or []


def _TopologySettings():
    return mongobench_topology.Settings(
        port=_PORT.value,
        cache_gb=_CACHE_GB.value,
        host_settings=_HOST_SETTINGS.value,
        replset_members=_REPLSET_MEMBERS.value,
        shards=_SHARDS.value,
        shard_members=_SHARD_MEMBERS.value,
        config_members=_CONFIG_MEMBERS.value,
        write_concern=_WRITE_CONCERN.value,
        database=_DATABASE.value,
        topology_timeout=_TOPOLOGY_TIMEOUT.value,
    )


def _HardwareLabels(benchmark_spec, kind):
    """instance_type / disk_type / disk_iops / disk_mb_s of the server VMs, from PKB's own
    specs: the seed's hardware tables, and the provisioned disk the bottleneck judgement
    compares against (the user's --mongodb_perftables_set wins)."""
    servers = _Servers(benchmark_spec)
    if kind in NO_SERVER_VMS or not servers:
        return {}
    vm = servers[0]
    out = {"instance_type": getattr(vm, "machine_type", None) or "unknown"}
    disks = getattr(vm, "scratch_disks", None) or []
    if disks:
        d = disks[0]
        out["disk_type"] = getattr(d, "disk_type", None) or "unknown"
        out.update(
            bottleneck.provisioned_disk(
                getattr(d, "provisioned_iops", None),
                getattr(d, "provisioned_throughput", None),
                getattr(d, "metadata", None),
                getattr(d, "num_striped_disks", None),
            )
        )
    return out


# SIGTERM to PKB is handled like Ctrl-C: Cleanup runs (PKB alone would end at once).
@interrupt.sigterm_as_ctrl_c()
def Prepare(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
    # PKB calls Cleanup on cloud VMs, and after a failed stage, only with this flag:
    # without it an Atlas cluster or a failed variant would go unnoticed and stay.
    benchmark_spec.always_call_cleanup = True
    clients = benchmark_spec.vm_groups["clients"]
    client = clients[0]
    for vm in benchmark_spec.vms:
        mongobench_host.ProtectStaticVm(vm)
    kind = _Deployment()
    servers = _Servers(benchmark_spec)
    state = State(mongobench_topology.Servers(servers, {"deployment": kind}))
    benchmark_spec.mongobench = state
    state.request = _Request()
    # Deploy installs the engine's prerequisites on each VM it serves, servers included.
    state.workdir = mongobench_engine.Deploy(client)
    # Client VMs 1..K-1 run their share of every timed phase (`perftables follow`).
    state.follower_workdirs = {vm.name: mongobench_engine.Deploy(vm) for vm in clients[1:]}
    if kind == "uri":
        uri = _ReadUri()
    elif kind == "atlas":
        state.atlas = mongobench_atlas.NewDeployment(FLAGS.run_uri, list(clients))
        uri = mongobench_atlas.Provision(state.atlas)
        state.steps = mongobench_atlas.Steps()
    elif kind == "standalone":
        uri = mongobench_topology.StartStandalone(state.servers, _TopologySettings())
    elif kind == "replset":
        uri = mongobench_topology.StartReplicaSet(
            state.servers, client, state.workdir, _TopologySettings()
        )
    else:
        uri = mongobench_topology.StartSharded(
            state.servers, client, state.workdir, _TopologySettings()
        )
    # The engine runs on the server VMs too: it samples their OS during each phase.
    state.server_workdirs = {vm.name: mongobench_engine.Deploy(vm) for vm in servers}
    state.labels = _HardwareLabels(benchmark_spec, kind)
    uri_file = os.path.join(state.workdir, "target.uri")
    mongobench_engine.PushSecret(client, uri_file, uri + "\n")
    state.uri_file = uri_file
    for vm in clients[1:]:
        path = os.path.join(state.follower_workdirs[vm.name], "target.uri")
        mongobench_engine.PushSecret(vm, path, uri + "\n")


def _RunStep(benchmark_spec, step_index, overrides, extra_metadata):
    """One engine run of every planned variant; returns (samples, failures)."""
    clients = benchmark_spec.vm_groups["clients"]
    client = clients[0]
    state = benchmark_spec.mongobench
    run_id = f"{FLAGS.run_uri}-{step_index or 0}"
    name = (
        "perftables-results.json" if step_index is None else f"perftables-results-{step_index}.json"
    )
    remote_out = os.path.join(state.workdir, name)
    client.RemoteCommand(f"rm -f {remote_out}")
    # The run's options as the engine's request, written beside target.uri (no long argv).
    request = state.request.replace(
        out=remote_out,
        os_path=state.workdir,
        overrides=overrides,
        processes=_CLIENT_PROCESSES.value or client.NumCpusForBenchmark(),
        client_vms=len(clients),
        run_id=run_id,
        # belt and braces after Provision's wait: a new Atlas user may reach a member late
        auth_retry_s=mongobench_atlas.AUTH_RETRY_S if state.atlas else 0.0,
    )
    request_file = mongobench_engine.PushRequest(
        client, state.workdir, name.replace("results", "request"), request.to_json()
    )
    command = shipping.perftables_command(state.workdir, state.uri_file, request_file)
    followers = mongobench_engine.StartFollowers(
        clients[1:], state.follower_workdirs, run_id, _CLIENT_PROCESSES.value
    )
    servers = _Servers(benchmark_spec)
    samplers = [
        (
            vm,
            mongobench_engine.StartSampler(
                vm, state.server_workdirs[vm.name], state.servers.data_paths.get(vm.name, "/")
            ),
        )
        for vm in servers
    ]
    try:
        # Detached and polled: each variant's [i/N] line reaches pkb.log as it ends.
        _, stderr = mongobench_engine.RunEngine(
            client,
            state.workdir,
            command,
            "perftables" if step_index is None else f"perftables-{step_index}",
        )
    finally:
        follower_failures = [
            {"experiment": "?", "label": "?", "error": e}
            for e in mongobench_engine.WaitFollowers(followers)
        ]
        readings = {}
        for vm, sampler in samplers:
            local = mongobench_engine.StopSampler(vm, sampler, vm_util.GetTempDir())
            readings[vm.name] = ossampler.load(local)[1]
    local_out = os.path.join(vm_util.GetTempDir(), name)
    last_line = _LastLine(stderr)
    try:
        client.PullFile(local_out, remote_out)
    except errors.VirtualMachine.RemoteCommandError:
        # The engine's last stderr line says why (e.g. "mongobench: <redacted target>:
        # server unreachable: ..."); it becomes the run's status detail.
        logging.error("mongodb_perftables: no results; driver stderr: %s", stderr[-2000:])
        return [], [{"experiment": "target", "label": "-", "error": last_line}]
    with open(local_out) as f:
        run = json.load(f)
    if readings:
        ossampler.attach_server_os(run, readings)
    # A client VM that is a server's host (the test bed): CPU then judges nothing.
    run["shared_host"] = bool(run.get("shared_host")) or _SharedHost(clients, servers)
    if state.atlas:  # the seed's Resource Usage figures, from the Admin API
        mongobench_atlas.AttachMeasurements(state.atlas, run)
    if readings or state.atlas:
        with open(local_out, "w") as f:
            json.dump(run, f, indent=1)
    logging.info("mongodb_perftables raw results saved to %s", local_out)

    metadata = dict(state.servers.metadata, **extra_metadata)
    # Each variant's samples are stamped with its start, not the end of Run.
    out = [mongobench_engine.ToSample(s) for s in results.to_samples(run, metadata)]
    failed = results.failed(run)
    out += [sample.Sample(**s) for s in results.failure_samples(run, extra_metadata)]
    expected = sum(len(variants) for _, variants in state.request.plans) * request.repeats
    if len(run["results"]) < expected:
        failed.append({"experiment": "?", "label": "?", "error": f"run ended early: {last_line}"})
        logging.error(
            "mongodb_perftables: %d of %d variants ran; driver stderr: %s",
            len(run["results"]),
            expected,
            stderr[-2000:],
        )
    return out, failed + follower_failures


def _LastLine(stderr):
    """The engine's last stderr line: its one-line reason when it gave up."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1][:1000] if lines else "the engine wrote nothing on stderr"


@interrupt.sigterm_as_ctrl_c()
def Run(benchmark_spec: bm_spec.BenchmarkSpec) -> list[sample.Sample]:
    state = benchmark_spec.mongobench
    user = state.request.overrides  # --mongodb_perftables_set
    engine = {}
    if state.servers.sharded:
        engine.update(sharded=True, shard_key=_SHARD_KEY.value)
    out, failed = [], []
    steps = state.steps
    for i, step in enumerate(steps):
        extra = {}
        if state.atlas:
            try:
                extra = mongobench_atlas.Apply(state.atlas, step)
            except (api.AtlasError, ValueError) as e:
                failed.append({"experiment": "?", "label": "?", "error": f"Atlas step {i}: {e}"})
                break
            labels = cluster.step_labels(extra)
        else:
            labels = dict(state.labels)
        if len(steps) > 1:
            extra.update(hardware_step=i, hardware_steps=len(steps))
        # shard settings and hardware labels go to the engine; the user's --set wins
        samples, step_failed = _RunStep(
            benchmark_spec, i if len(steps) > 1 else None, {**engine, **labels, **user}, extra
        )
        out += samples
        failed += step_failed
    if not out and failed and all(r["experiment"] == "target" for r in failed):
        # The engine gave up before any variant (target unreachable, refused, unparsable):
        # nothing to keep, and its one line is the clearest status detail PKB can show.
        raise errors.Benchmarks.RunError("; ".join(dict.fromkeys(r["error"] for r in failed)))
    # Cleanup turns failures into a FAILED status after these samples are kept.
    state.failed = [f"{r['experiment']} [{r['label']}]: {r['error'][:300]}" for r in failed]
    return out


def _DiagnosticPaths(vm):
    return mongobench_mongod.DiagnosticPaths(vm) + mongobench_engine.DiagnosticPaths(vm)


def Cleanup(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
    """Undoes what Prepare did, as far as it got (every step is tried), then fails the run
    when something could not be undone or a variant failed (stages.Cleanup: once)."""
    state = getattr(benchmark_spec, "mongobench", None)
    if state is None:  # Prepare never started
        return
    failed = state.failed
    failure = None
    if failed:
        failure = (
            f'{len(failed)} variant(s) failed (their samples are named "Variant'
            ' Failed"): ' + "; ".join(failed)
        )
    stages.Cleanup(
        benchmark_spec,
        BENCHMARK_NAME,
        lambda keep: stages.Undo(_CleanupSteps(benchmark_spec, state, keep)),
        failure=failure,
        incomplete=state.failed is None,  # Prepare or Run stopped half-way
    )


def _CleanupSteps(benchmark_spec, state, keep):
    clients = benchmark_spec.vm_groups["clients"]
    steps = []
    if state.atlas:
        steps.append(
            ("tear down the Atlas deployment", lambda: mongobench_atlas.Teardown(state.atlas))
        )
    for vm in [*_Servers(benchmark_spec), *clients]:
        # The engine and samplers run detached: PKB may have been stopped while they ran.
        steps.append(
            (f"stop the engine on {vm.name}", lambda vm=vm: mongobench_engine.StopEngine(vm))
        )
        steps.append((f"stop mongod on {vm.name}", lambda vm=vm: mongobench_mongod.StopAll(vm)))
        if keep:  # stopped first (complete logs), kept before anything is deleted
            steps.append(stages.DiagnosticsStep(vm, _DiagnosticPaths))
        steps.append(
            (f"remove mongod data on {vm.name}", lambda vm=vm: mongobench_mongod.RemoveData(vm))
        )
        if state.servers.host_settings_applied and vm in state.servers.vms:
            steps.append(
                (
                    f"restore host settings on {vm.name}",
                    lambda vm=vm: mongobench_mongod.RestoreHostSettings(vm),
                )
            )
        steps.append((f"remove mongod on {vm.name}", lambda vm=vm: mongobench_mongod.Remove(vm)))
        steps.append(
            (f"remove the engine on {vm.name}", lambda vm=vm: mongobench_engine.Remove(vm))
        )
    return steps
