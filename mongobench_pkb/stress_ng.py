"""stress-ng holding memory on a PKB VM, started and stopped by PID.

The PKB package `mongobench_stress_ng` (linux_packages/, `vm.Install("mongobench_stress_ng")`)
adds stress-ng through the OS package manager (PKB runs it only when install_packages is
true); `Check` verifies it is there on every VM. This module installs nothing. `StartParts`
runs the engine's `mongobench.stress.stress_ng_commands` detached (`--vm-keep --vm-locked
--vm-hang 0`), one process for each part of the hold (mongobench.stress.holdparts: a part
per instance slot, on its NUMA node when asked), each with its own PID, output and YAML
file in a private work directory, waits until the memory is actually held (VmLck and
RssAnon of their workers), and `Stop` ends exactly those processes and their workers (the
session each was given), never processes found by name. PKB's own stress_ng package is not used: it parses stdout (stress-ng
prints its metrics on stderr) and uninstalls a package that has no module.

    holds = stress_ng.StartParts(vm, parts, name="step004", workers=8)  # key -> Hold
    ...
    stress_ng.Stop(vm, stress_ng.Together(vm.name, holds.values()))
    stress_ng.StopAll(vm)   # in Cleanup: every PID file of the work directory
"""

import dataclasses
import logging
import posixpath
import shlex

from perfkitbenchmarker import errors

from mongobench.core import units
from mongobench.core.poll import PollTimeout, poll_until
from mongobench.core.split import split_evenly
from mongobench.remote import processes
from mongobench.stress import placement
from mongobench_pkb import vm as mongobench_vm

WORKDIR_NAME = "mongobench-stress-ng"
MIB = 1024 * 1024


def WorkDir(vm):
    return mongobench_vm.WorkDir(vm, WORKDIR_NAME)


def Check(vm, numactl=False):
    """Creates the work directory; a clear error when stress-ng (or numactl) is missing."""
    for tool in ("stress-ng", "numactl") if numactl else ("stress-ng",):
        _, _, rc = vm.RemoteCommandWithReturnCode(
            f"command -v {tool} >/dev/null", ignore_failure=True
        )
        if rc:
            raise errors.Setup.InvalidSetupError(
                f"{vm.name}: {tool} is not installed. On a static host (install_packages"
                f" false) install it first (Debian/Ubuntu/RHEL: package {tool}), or skip the"
                " memory hold with --nomongodb_stress_hold_memory."
            )
    q = shlex.quote(WorkDir(vm))
    vm.RemoteCommand(f"sudo mkdir -p {q} && sudo chown $(id -u):$(id -g) {q}")


@dataclasses.dataclass(frozen=True)
class Hold:
    """stress-ng processes holding `hold_bytes` of locked memory on one VM."""

    vm_name: str
    name: str
    hold_bytes: int
    workers: int
    node_bytes: dict | None  # NUMA node id -> bytes, when held per node
    pid_files: tuple
    pids: tuple
    outputs: tuple

    def metadata(self):
        return {
            "stress_ng_hold_gib": round(self.hold_bytes / units.GiB, 3),
            "stress_ng_workers": self.workers,
            "stress_ng_per_numa_node": bool(self.node_bytes),
        }


def _Launch(vm, name, amount, *, workers, cpu_nodes, timeout_s):
    """Launches detached the stress-ng processes that hold `amount` (bytes, or NUMA node id
    -> bytes: one process a node) as `name`; their Hold, not waited for."""
    workdir = WorkDir(vm)
    cmds = placement.stress_ng_commands(
        amount,
        workers=workers,
        yaml_path=posixpath.join(workdir, f"{name}.yaml"),
        cpu_nodes=cpu_nodes,
        timeout_s=timeout_s,
    )
    pid_files, outputs, pids = [], [], []
    for k, cmd in enumerate(cmds):
        base = posixpath.join(workdir, f"{name}-{k}")
        pid_files.append(base + ".pid")
        outputs.append(base + ".out")
        # root: --vm-locked needs CAP_IPC_LOCK (or a large RLIMIT_MEMLOCK)
        stdout, _ = vm.RemoteCommand(
            processes.background_command(
                cmd, processes.Launch(pid_file=base + ".pid", stdout=base + ".out", sudo=True)
            )
        )
        pids.append(int(stdout.split()[-1]))
        logging.info("mongobench: started stress-ng %s-%d pid %d on %s", name, k, pids[-1], vm.name)
    node_bytes = dict(amount) if isinstance(amount, dict) else None
    total = sum(node_bytes.values()) if node_bytes else int(amount)
    return Hold(
        vm.name, name, total, workers, node_bytes, tuple(pid_files), tuple(pids), tuple(outputs)
    )


def Together(vm_name, holds, name="hold"):
    """One Hold of several (their processes, bytes and workers together): to wait for,
    read or stop them at once."""
    holds = [h for h in holds if h is not None]
    return Hold(
        vm_name,
        name,
        sum(h.hold_bytes for h in holds),
        sum(h.workers for h in holds),
        None,
        tuple(f for h in holds for f in h.pid_files),
        tuple(p for h in holds for p in h.pids),
        tuple(o for h in holds for o in h.outputs),
    )


def StartParts(vm, parts, *, name, workers, cpu_nodes=None, timeout_s=None, wait_s=600):
    """Starts one stress-ng process for each of `parts` (mongobench.stress.holdparts.Part:
    its bytes, locked, on its NUMA node when it has one: numactl --membind, and
    --cpunodebind where the node is in `cpu_nodes`) at once, `workers` split over them (at
    least one each), and waits until every one holds its memory. `timeout_s` is stress-ng's
    own --timeout, a safety net should nobody stop it. Returns part key -> Hold. Raises when
    a process exits or the memory is not held within `wait_s` (every process it started
    stopped first)."""
    holds = {}
    if not parts:
        return holds
    try:
        for part, w in zip(parts, split_evenly(workers, len(parts)), strict=True):
            amount = {part.node: part.nbytes} if part.node is not None else part.nbytes
            holds[part.key] = _Launch(
                vm,
                f"{name}-{part.key}",
                amount,
                workers=max(1, w),
                cpu_nodes=cpu_nodes,
                timeout_s=timeout_s,
            )
        WaitHeld(vm, Together(vm.name, holds.values(), name), wait_s)
    except Exception:
        Stop(vm, Together(vm.name, holds.values(), name))
        raise
    return holds


def Held(vm, hold):
    """Bytes of memory the hold's processes have locked and resident now: VmLck counts a
    locked mapping before its pages are touched (measured here: 4 GiB locked at once,
    resident only 11 s later), so the smaller of VmLck and RssAnon (their anonymous
    resident pages: the held buffers, not the shared binary)."""
    files, marker = list(hold.pid_files), WorkDir(vm)
    stdout, _ = vm.RemoteCommand(
        processes.locked_memory_command(files, marker=marker)
        + " && echo -- && "
        + processes.locked_memory_command(files, marker=marker, field="RssAnon"),
        should_pre_log=False,
    )
    locked, _, resident = stdout.partition("--")
    return min(processes.sum_kib(locked), processes.sum_kib(resident))


class _Died(Exception):
    """A process of the hold exited while WaitHeld waited for its memory."""


def WaitHeld(vm, hold, timeout_s, poll_s=1.0):
    """Waits until the hold's memory is locked (stress-ng rounds to KiB per process)."""
    want = hold.hold_bytes - MIB
    entries = [(f"p{k}", f, None) for k, f in enumerate(hold.pid_files)]
    held = 0

    def check():
        nonlocal held
        held = Held(vm, hold)
        if held >= want:
            return True, held
        states = mongobench_vm.RemoteStates(vm, entries, WorkDir(vm))
        if not all(s.running for s in states.values()):
            raise _Died()
        return False, held

    try:
        return poll_until(check, timeout=timeout_s, interval=poll_s)
    except (PollTimeout, _Died):
        pass
    tail, _ = vm.RemoteCommand(
        "tail -n 5 " + " ".join(shlex.quote(o) for o in hold.outputs), ignore_failure=True
    )
    raise errors.Benchmarks.RunError(
        f"{vm.name}: stress-ng did not hold {hold.hold_bytes / units.GiB:.2f} GiB of locked "
        f"memory (held {held / units.GiB:.2f} GiB) within {timeout_s}s; its output:\n{tail}"
    )


def Stop(vm, hold, timeout_s=30):
    """Stops exactly the hold's processes and their workers."""
    if hold is None:
        return
    vm.RemoteCommand(
        processes.stop_processes_command(
            list(hold.pid_files), marker=WorkDir(vm), timeout_s=timeout_s, sudo=True, session=True
        )
    )


def StopAll(vm, timeout_s=30):
    """Stops every stress-ng process whose PID file is in the work directory (Cleanup)."""
    workdir = WorkDir(vm)
    return mongobench_vm.StopByPidFiles(
        vm, workdir, marker=workdir, timeout_s=timeout_s, sudo=True, session=True
    )


def DiagnosticPaths(vm):
    """stress-ng's outputs and YAML metrics, for Cleanup to keep."""
    return [WorkDir(vm)]


def Remove(vm):
    mongobench_vm.RemoveWorkDir(vm, WORKDIR_NAME)
