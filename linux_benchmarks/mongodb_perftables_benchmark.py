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
    (linux_packages/mongobench_mongod: MongoDB's repositories, a tarball,
    preinstalled binaries, or the stand-in on test beds), with the OS metrics
    of that VM sampled during every timed phase.
"""

import json
import logging
import os

from absl import flags
from perfkitbenchmarker import configs, errors, sample, vm_util
from perfkitbenchmarker.linux_packages import mongobench_client, mongobench_host, mongobench_mongod

from mongobench import deploy, ossampler, results
from mongobench import experiments as exp_mod

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
"""

DEPLOYMENTS = ("auto", "uri", "standalone")

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
_URI_FILE = flags.DEFINE_string(
    "mongodb_perftables_uri_file",
    None,
    "File (on the PKB host) holding the target connection string, mongodb:// or mongodb+srv://.",
)
_URI_ENV = flags.DEFINE_string(
    "mongodb_perftables_uri_env",
    None,
    "Environment variable (on the PKB host) holding the target connection string.",
)
_DATABASE = flags.DEFINE_string(
    "mongodb_perftables_database",
    "mongobench",
    "Database the experiments create and drop collections in.",
)
_SET = flags.DEFINE_list(
    "mongodb_perftables_set",
    [],
    "Setting overrides for every variant, key=value (e.g. threads=32).",
)
_MAX_SECONDS = flags.DEFINE_float(
    "mongodb_perftables_max_seconds",
    None,
    "Cap on each timed phase in seconds (the variant stops early and says so in its metadata).",
)
FLAGS = flags.FLAGS


_DEPLOYMENT = flags.DEFINE_enum(
    "mongodb_perftables_deployment",
    "auto",
    DEPLOYMENTS,
    "uri: a deployment given by connection string (no server VM); standalone: one"
    " mongod on the servers VM; auto: uri when a URI flag is given, else standalone.",
)
_PORT = flags.DEFINE_integer(
    "mongodb_perftables_port", 27017, "Port of the mongod on the servers VM.", lower_bound=1
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
    uri_given = values.get("mongodb_perftables_uri_file", _URI_FILE.value) or values.get(
        "mongodb_perftables_uri_env", _URI_ENV.value
    )
    return "uri" if uri_given else "standalone"


def GetConfig(user_config):
    config = configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)
    if _Deployment(config.get("flags")) == "uri":
        # The target exists already: provision no server VM.
        config["vm_groups"].pop("servers", None)
    return config


def _Overrides():
    out = {}
    for pair in _SET.value:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise errors.Config.InvalidValue(
                f"--mongodb_perftables_set takes key=value, not {pair!r}"
            )
        out[key] = value
    return out


def _Variants():
    return [v.strip() for v in (_VARIANTS.value or "").split(";") if v.strip()] or None


def _Plan():
    return exp_mod.plan(
        exp_mod.load(), _EXPERIMENTS.value, _SCALE.value, _Variants(), _Overrides(), _SKIP.value
    )


def CheckPrerequisites(benchmark_config):
    """Validates flags before anything is provisioned."""
    del benchmark_config
    try:
        _Plan()
    except exp_mod.ExperimentError as e:
        raise errors.Config.InvalidValue(str(e)) from e
    _Overrides()
    if _Deployment() != "uri":
        if _URI_FILE.value or _URI_ENV.value:
            raise errors.Config.InvalidValue(
                "a URI flag was given with --mongodb_perftables_deployment="
                f"{_DEPLOYMENT.value}: the target would be ambiguous"
            )
        return
    _ReadUri()


def _ReadUri():
    return mongobench_client.ReadTargetUri(BENCHMARK_NAME, _URI_FILE.value, _URI_ENV.value)


def _Servers(benchmark_spec):
    return benchmark_spec.vm_groups.get("servers") or []


def _StartStandalone(server_vm, state):
    """One mongod (or the stand-in) on the servers VM; returns its URI."""
    server_vm.Install("mongobench_mongod")
    server = mongobench_mongod.Deploy(server_vm)
    inst = mongobench_mongod.NewInstance(server, 0, host=server_vm.internal_ip, port=_PORT.value)
    config = mongobench_mongod.Config(server, inst, cache_gb=_CACHE_GB.value)
    if _HOST_SETTINGS.value and server.kind == "mongod":
        state["metadata"].update(
            mongobench_mongod.ApplyHostSettings(server_vm, server, server.instances_dir)
        )
        state["host_settings_applied"] = True
    mongobench_mongod.Start(server_vm, server, inst, config)
    state["metadata"].update(server.metadata())
    state["server"], state["instance"] = server, inst
    # The engine runs there too: it samples the server's OS during each phase.
    state["server_workdir"] = mongobench_client.Deploy(server_vm)
    state["server_data"] = inst.paths.dbpath
    return inst.uri(database="")


def Prepare(benchmark_spec):
    client = benchmark_spec.vm_groups["clients"][0]
    for vm in benchmark_spec.vms:
        mongobench_host.ProtectStaticVm(vm)
    state = {"metadata": {"deployment": _Deployment()}}
    benchmark_spec.mongobench = state
    if _Deployment() == "uri":
        uri = _ReadUri()
    else:
        servers = _Servers(benchmark_spec)
        if len(servers) != 1:
            raise errors.Config.InvalidValue(
                f"deployment standalone needs exactly one servers VM, not {len(servers)}"
            )
        uri = _StartStandalone(servers[0], state)
    client.Install("mongobench_client")
    workdir = mongobench_client.Deploy(client)
    uri_file = os.path.join(workdir, "target.uri")
    mongobench_client.PushSecret(client, uri_file, uri + "\n")
    state.update(workdir=workdir, uri_file=uri_file)


def Run(benchmark_spec):
    client = benchmark_spec.vm_groups["clients"][0]
    state = benchmark_spec.mongobench
    remote_out = os.path.join(state["workdir"], "perftables-results.json")
    client.RemoteCommand(f"rm -f {remote_out}")
    command = deploy.perftables_command(
        state["workdir"],
        state["uri_file"],
        remote_out,
        _EXPERIMENTS.value,
        _SCALE.value,
        _DATABASE.value,
        variants=_Variants(),
        overrides=_Overrides(),
        os_path=state["workdir"],
        max_seconds=_MAX_SECONDS.value,
        skip=_SKIP.value,
    )
    servers = _Servers(benchmark_spec) if "server_workdir" in state else []
    samplers = [
        (vm, mongobench_client.StartSampler(vm, state["server_workdir"], state["server_data"]))
        for vm in servers
    ]
    try:
        _, stderr = client.RobustRemoteCommand(command, ignore_failure=True)
    finally:
        readings = {}
        for vm, sampler in samplers:
            local = mongobench_client.StopSampler(vm, sampler, vm_util.GetTempDir())
            readings[vm.name] = ossampler.load(local)[1]
    local_out = os.path.join(vm_util.GetTempDir(), "perftables-results.json")
    try:
        client.PullFile(local_out, remote_out)
    except errors.VirtualMachine.RemoteCommandError as e:
        raise errors.Benchmarks.RunError(
            f"mongodb_perftables produced no results file: {stderr[-2000:]}"
        ) from e
    with open(local_out) as f:
        run = json.load(f)
    if readings:
        ossampler.attach_server_os(run, readings)
        with open(local_out, "w") as f:
            json.dump(run, f, indent=1)
    logging.info("mongodb_perftables raw results saved to %s", local_out)

    out = [
        sample.Sample(s["metric"], s["value"], s["unit"], s["metadata"])
        for s in results.to_samples(run, state["metadata"])
    ]
    failed = results.failed(run)
    for r in failed:
        out.append(
            sample.Sample(
                "Variant Failed",
                1,
                "count",
                {
                    "experiment": r["experiment"],
                    "variant": r["label"],
                    "error": r["error"][:1000],
                },
            )
        )
    expected = sum(len(variants) for _, variants in _Plan())
    if len(run["results"]) < expected:
        failed.append({"experiment": "?", "label": "?", "error": "run ended early"})
        logging.error(
            "mongodb_perftables: %d of %d variants ran; driver stderr: %s",
            len(run["results"]),
            expected,
            stderr[-2000:],
        )
    # Cleanup turns failures into a FAILED status after these samples are kept.
    benchmark_spec.mongobench["failed"] = [
        f"{r['experiment']} [{r['label']}]: {r['error'][:300]}" for r in failed
    ]
    return out


def Cleanup(benchmark_spec):
    client = benchmark_spec.vm_groups["clients"][0]
    state = getattr(benchmark_spec, "mongobench", {})
    for vm in _Servers(benchmark_spec):
        mongobench_mongod.StopAll(vm)
        mongobench_mongod.RemoveData(vm)
        if state.get("host_settings_applied"):
            mongobench_mongod.RestoreHostSettings(vm)
        mongobench_mongod.Remove(vm)
        mongobench_client.Remove(vm)
    mongobench_client.Remove(client)
    failed = state.get("failed")
    if failed:
        raise errors.Benchmarks.RunError(
            f'{len(failed)} variant(s) failed (their samples are named "Variant'
            ' Failed"): ' + "; ".join(failed)
        )
