"""MongoDB stress: maximum throughput as mongod instances and YCSB clients grow.

Not implemented yet: the benchmark registers, validates its flags and then
fails in CheckPrerequisites with a clear message, before anything is
provisioned, so it can never publish a number it did not measure.
"""

from absl import flags
from perfkitbenchmarker import configs, errors

BENCHMARK_NAME = "mongodb_stress"
BENCHMARK_CONFIG = """
mongodb_stress:
  description: >
    Adds mongod instances and YCSB clients until throughput peaks (not
    implemented yet).
  vm_groups:
    servers:
      vm_spec: *default_dual_core
      vm_count: 1
    clients:
      vm_spec: *default_dual_core
      vm_count: 1
"""

_TARGET_OPS = flags.DEFINE_integer(
    "mongodb_stress_target_ops_per_client",
    25000,
    "Offered load of each YCSB process (ops/s).",
    lower_bound=1,
)
_DURATION = flags.DEFINE_integer(
    "mongodb_stress_step_seconds",
    180,
    "Duration of each step (seconds).",
    lower_bound=1,
)
_SLA_MS = flags.DEFINE_float(
    "mongodb_stress_read_p99_sla_ms",
    3.0,
    'Read p99 latency SLA (ms) for "Maximum Throughput for Latency SLA".',
    lower_bound=0.0,
)
_MAX_INSTANCES = flags.DEFINE_integer(
    "mongodb_stress_max_instances",
    None,
    "Cap on the number of mongod instances (default: what fits).",
    lower_bound=1,
)


def GetConfig(user_config):
    return configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)


def CheckPrerequisites(benchmark_config):
    del benchmark_config
    raise errors.Benchmarks.UnsupportedConfigError(
        "mongodb_stress is not implemented yet: its flags are accepted"
        f" (target {_TARGET_OPS.value} ops/s per client, {_DURATION.value} s"
        f" steps, read p99 SLA {_SLA_MS.value} ms) but no measurement exists."
    )


def Prepare(benchmark_spec):
    del benchmark_spec
    raise NotImplementedError("mongodb_stress is not implemented yet")


def Run(benchmark_spec):
    del benchmark_spec
    raise NotImplementedError("mongodb_stress is not implemented yet")


def Cleanup(benchmark_spec):
    del benchmark_spec
