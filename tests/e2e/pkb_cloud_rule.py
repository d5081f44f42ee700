"""./pkb.py with PKB's rule for cloud VMs at Cleanup, for the test bed's static VMs.

PKB always calls a benchmark's Cleanup when a VM is static, but on cloud VMs only when
the benchmark set `benchmark_spec.always_call_cleanup` (pkb.DoCleanupPhase, and the
error branch of pkb.RunBenchmark). The test bed has static VMs only, so it would hide a
benchmark that forgets the flag. Run from a PKB checkout like pkb.py:

    python tests/e2e/pkb_cloud_rule.py --benchmarks=... (cwd: the PKB checkout)

PKB's own DoCleanupPhase runs, with every VM seen as a cloud VM while it decides.
"""

import os
import sys

sys.path.insert(0, os.getcwd())  # the PKB checkout, as for ./pkb.py

from absl import app
from perfkitbenchmarker import pkb

_pkb_cleanup = pkb.DoCleanupPhase


def DoCleanupPhase(spec, timer):
    static = [vm for vm in spec.vms if vm.is_static]
    for vm in static:
        vm.is_static = False  # an instance attribute over the class's True
    try:
        _pkb_cleanup(spec, timer)
    finally:
        for vm in static:
            del vm.is_static


pkb.DoCleanupPhase = DoCleanupPhase

if __name__ == "__main__":
    app.run(pkb.Main, flags_parser=pkb.ParseArgs)
