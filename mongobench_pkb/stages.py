"""The Cleanup stage the three benchmarks share: once, diagnostics kept, every step undone.

    def Cleanup(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
        stages.Cleanup(benchmark_spec, BENCHMARK_NAME, undo, failure=..., incomplete=...)

- Once: PKB calls Cleanup again after a Cleanup that raised; the second call does nothing.
- Diagnostics: a failed run (the benchmark's own `failure`, a Prepare or Run that stopped
  half-way, `incomplete`, or a stage that raised, which PKB records in status_detail before it
  calls Cleanup) or --mongobench_keep_diagnostics makes `undo(keep=True)` pull them into PKB's
  run directory, after the processes are stopped and before anything is removed
  (`DiagnosticsStep`).
- Undo: every (description, function) step is tried, in order, even after one failed
  (`Undo`); Cleanup may follow a Prepare that stopped half-way, so each step undoes what
  exists and does nothing otherwise.
- Then one RunError names everything that could not be undone and the benchmark's failure.
- Not interrupted: SIGTERM and Ctrl-C during Cleanup are logged and held until it ends
  (`interrupt.held`), then raised as a KeyboardInterrupt (PKB stops, the run FAILED). A
  second SIGTERM used to end PKB half-way through Cleanup, the engine still running; a
  Ctrl-C skipped the rest of it (PKB's second call finds the once-guard set). A terminal's
  Ctrl-C no longer kills the ssh of a Cleanup command either (SIGINT blocked for them).
"""

import logging

from absl import flags
from perfkitbenchmarker import errors

from mongobench.core import interrupt
from mongobench_pkb import vm as mongobench_vm

_KEEP_DIAGNOSTICS = flags.DEFINE_bool(
    "mongobench_keep_diagnostics",
    False,
    "Keep the MongoDB benchmarks' diagnostics (mongod logs and diagnostic.data, YCSB outputs,"
    " the engine's raw results) in the run directory under diagnostics/<vm>/ after a"
    " successful run too; a failed run always keeps them. Secrets (connection strings,"
    " TLS keys, users files) are never copied.",
)


def KeepDiagnostics(benchmark_spec, failed):
    """Whether Cleanup pulls the diagnostics: after a failure (`failed`: the benchmark's
    own, e.g. a failed variant; or a stage that raised, which PKB records in status_detail
    before it calls Cleanup), else when --mongobench_keep_diagnostics asks."""
    stage_failed = bool(getattr(benchmark_spec, "status_detail", None))
    return stage_failed or bool(failed) or _KEEP_DIAGNOSTICS.value


def DiagnosticsStep(vm, paths_of):
    """The Undo step that pulls `paths_of(vm)` (computed when it runs) from `vm` into
    `<run directory>/diagnostics/<vm name>/` (vm.PullDiagnostics). Diagnostics that cannot
    be pulled are logged, not a cleanup problem: they never fail a good run."""

    def pull():
        try:
            mongobench_vm.PullDiagnostics(vm, paths_of(vm))
        except Exception as e:  # noqa: BLE001 -- the removal steps after it must still run
            logging.error("mongobench: could not keep the diagnostics of %s: %s", vm.name, e)

    return (f"keep the diagnostics of {vm.name}", pull)


def Undo(steps):
    """Runs every (description, function) step of a Cleanup, in order, even after one fails.
    Returns the descriptions of what could not be undone, with the reason."""
    problems = []
    for description, fn in steps:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- one failed step must not skip the others
            logging.error("cleanup: could not %s: %s", description, e)
            problems.append(f"could not {description}: {e}")
    return problems


def Cleanup(benchmark_spec, benchmark, undo, *, failure=None, incomplete=False):
    """The Cleanup stage of `benchmark` (see the module's docstring).

    undo: keep_diagnostics -> the problems of undoing what Prepare and Run did (a list of
    strings; usually `Undo(steps)`). failure: what failed in the run, one line, or None.
    incomplete: Prepare or Run stopped before the benchmark knew its failures."""
    guard = f"{benchmark}_cleaned_up"
    if getattr(benchmark_spec, guard, False):
        return
    setattr(benchmark_spec, guard, True)
    with interrupt.held(logging.warning, f"{benchmark}'s Cleanup"):
        keep = KeepDiagnostics(benchmark_spec, bool(failure) or incomplete)
        problems = list(undo(keep))
        if failure:
            problems.append(failure)
        if problems:
            raise errors.Benchmarks.RunError(" | ".join(problems))
