"""MongoDB Performance Tables: insert, update and query speed, variant by variant.

Reproduces the experiments of John Page's "MongoDB Performance Tables": each
experiment is a set of variants (document size, batch size, key type, ...)
declared in mongobench/experiments/perftables.yaml. A client VM runs the
engine's driver against the target; every variant yields samples with
metadata `experiment`, `variant` and the variant's settings.

Targets: any deployment given by connection string (file or environment
variable; the secret never reaches a command line, a log or a sample).
"""

import json
import logging
import os

from absl import flags
from perfkitbenchmarker import configs, errors, sample, vm_util
from perfkitbenchmarker.linux_packages import mongobench_client, mongobench_host

from mongobench import deploy, redact, results
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
"""

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


def GetConfig(user_config):
    return configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)


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
    if bool(_URI_FILE.value) == bool(_URI_ENV.value):
        raise errors.Config.InvalidValue(
            "Give the target deployment with exactly one of"
            " --mongodb_perftables_uri_file or --mongodb_perftables_uri_env."
            " (MongoDB servers installed on PKB VMs are not implemented yet.)"
        )
    _ReadUri()


def _ReadUri():
    try:
        return redact.read_uri(uri_file=_URI_FILE.value, env=_URI_ENV.value)
    except (OSError, ValueError) as e:
        raise errors.Config.InvalidValue(f"mongodb_perftables target: {e}") from e


def Prepare(benchmark_spec):
    client = benchmark_spec.vm_groups["clients"][0]
    mongobench_host.ProtectStaticVm(client)
    client.Install("mongobench_client")
    workdir = mongobench_client.Deploy(client)
    uri_file = os.path.join(workdir, "target.uri")
    mongobench_client.PushSecret(client, uri_file, _ReadUri() + "\n")
    benchmark_spec.mongobench = {"workdir": workdir, "uri_file": uri_file}


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
    _, stderr = client.RobustRemoteCommand(command, ignore_failure=True)
    local_out = os.path.join(vm_util.GetTempDir(), "perftables-results.json")
    try:
        client.PullFile(local_out, remote_out)
    except errors.VirtualMachine.RemoteCommandError as e:
        raise errors.Benchmarks.RunError(
            f"mongodb_perftables produced no results file: {stderr[-2000:]}"
        ) from e
    with open(local_out) as f:
        run = json.load(f)
    logging.info("mongodb_perftables raw results saved to %s", local_out)

    out = [
        sample.Sample(s["metric"], s["value"], s["unit"], s["metadata"])
        for s in results.to_samples(run)
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
    mongobench_client.Remove(client)
    failed = getattr(benchmark_spec, "mongobench", {}).get("failed")
    if failed:
        raise errors.Benchmarks.RunError(
            f'{len(failed)} variant(s) failed (their samples are named "Variant'
            ' Failed"): ' + "; ".join(failed)
        )
