"""The `mongobench` engine on a PKB VM: shipping it, running it detached and following it
into pkb.log, the follower clients, the OS sampler on server VMs, its samples as PKB samples.

The system prerequisites (python3 and venv; a C compiler and Python's headers where
hdrhistogram has no wheel, e.g. aarch64) are the PKB package `mongobench_client`
(linux_packages/); PKB skips it on VMs with install_packages: false. `Deploy` installs it
first on every VM it serves (client and server VMs), then puts the engine and a virtualenv
in a private work directory (never system-wide) and checks the prerequisites, failing with
a clear message when a static host lacks them. This module installs nothing itself.
"""

import logging
import os
import posixpath

from absl import flags
from perfkitbenchmarker import errors, sample, vm_util

from mongobench.core import samples as core_samples
from mongobench.deploy import platforms
from mongobench.remote import diagnostics, shipping
from mongobench_pkb import vm as mongobench_vm

WORKDIR_NAME = "mongobench"

_PROGRESS_SECONDS = flags.DEFINE_float(
    "mongobench_progress_seconds",
    10.0,
    "How often PKB polls a running engine or YCSB step on its VM and copies its new"
    " progress lines ([i/N] lines, heartbeats, YCSB status lines) into pkb.log.",
    lower_bound=0.5,
)


def ProgressSeconds():
    return _PROGRESS_SECONDS.value


def CheckPrerequisites(benchmark_config, group_name="clients"):
    """The engine has a Python >= 3.10 on every client VM's OS (mongobench.deploy.
    platforms), checked before any VM exists; static hosts that install nothing are checked
    at Deploy."""
    for os_type, _, installs in mongobench_vm.GroupPlatforms(benchmark_config, group_name):
        if not installs:
            continue
        try:
            platforms.check_pkb_client(os_type)
        except platforms.UnsupportedPlatform as e:
            raise errors.Config.InvalidValue(f"{group_name}: {e}") from None


# The first python (python3, else python3.13..3.10) >= 3.10 whose venv works: venv alone
# imports on Debian/Ubuntu without python3-venv (which holds ensurepip, without which
# `python3 -m venv` fails), so the probe imports both.
VENV_CHECK = shipping.python_probe_command()


def WorkDir(vm):
    """Our private directory on the VM: on its scratch disk when it has one."""
    return mongobench_vm.WorkDir(vm, WORKDIR_NAME)


def Deploy(vm):
    """Installs the engine's prerequisites (PKB's package mechanism: a no-op when done or
    with install_packages false) and ships the engine to `vm`, client or server; returns the
    work directory."""
    vm.Install("mongobench_client")
    workdir = WorkDir(vm)
    vm.RemoteCommand(f"sudo mkdir -p {workdir} && sudo chown $(id -u):$(id -g) {workdir}")
    out, _, rc = vm.RemoteCommandWithReturnCode(VENV_CHECK, ignore_failure=True)
    python = (out.strip().splitlines() or ["python3"])[-1] if not rc else None
    if not python:
        raise errors.Setup.InvalidSetupError(
            f"{vm.name}: Python >= 3.10 with the venv module is required on the client"
            " VM. On a static host without install_packages, install it first"
            " (Debian/Ubuntu: apt-get install python3-venv; RHEL 8/9, Amazon Linux 2023:"
            " dnf install python3.11)."
        )
    local = os.path.join(vm_util.GetTempDir(), "mongobench-engine.tar.gz")
    with open(local, "wb") as f:
        f.write(shipping.archive_bytes())
    remote_archive = posixpath.join(workdir, "mongobench-engine.tar.gz")
    vm.PushFile(local, remote_archive)
    for cmd in shipping.setup_commands(workdir, remote_archive, python=python):
        _, err = vm.RemoteCommand(cmd)
        if shipping.BUILD_FAILED in (err or ""):  # the run goes on, on the Python loop
            logging.warning("%s: %s (client_loop: python)", vm.name, shipping.BUILD_FAILED)
    logging.info("mongobench client deployed on %s in %s", vm.name, workdir)
    return workdir


def PushSecret(vm, remote_path, content):
    """Writes `content` to a 0600 file on the VM without it touching argv or logs."""
    mongobench_vm.PushSecret(vm, remote_path, content)


def PushRequest(vm, workdir, name, text):
    """Writes an engine run request (JSON, no secret) to `workdir/name` on the VM, keeping a
    copy in the PKB run's directory; returns the remote path."""
    local = os.path.join(vm_util.GetTempDir(), f"{vm.name}-{name}")
    with open(local, "w") as f:
        f.write(text)
    remote = posixpath.join(workdir, name)
    vm.PushFile(local, remote)
    return remote


def DiagnosticPaths(vm):
    """The engine's raw results, OS readings and topology plan, for Cleanup to keep."""
    return diagnostics.engine_patterns(WorkDir(vm))


def Remove(vm):
    """Deletes the work directory (engine, virtualenv, result files)."""
    mongobench_vm.RemoveWorkDir(vm, WORKDIR_NAME)


def RunEngine(vm, workdir, command, name):
    """Runs an engine command detached on `vm` (it survives a dropped ssh session), its
    progress lines reaching pkb.log as they come; returns (exit status or None, stderr)."""
    return mongobench_vm.RunDetached(
        vm,
        command,
        name=name,
        directory=workdir,
        label=f"mongobench {vm.name}:",
        poll_s=ProgressSeconds(),
    )


def StartFollowers(vms, workdirs, run_id, processes=None):
    """Client VMs 1..K-1 (`vms`) wait for the leader's timed phases (`perftables follow`),
    detached; `workdirs`: VM name -> its work directory (target.uri in it). Returns (vm,
    handle) pairs for WaitFollowers."""
    out = []
    for index, vm in enumerate(vms, 1):
        workdir = workdirs[vm.name]
        command = shipping.perftables_follow_command(
            workdir,
            posixpath.join(workdir, "target.uri"),
            run_id,
            index,
            processes or vm.NumCpusForBenchmark(),
        )
        handle = mongobench_vm.StartDetached(
            vm, command, name=f"follow-{run_id}", directory=workdir
        )
        out.append((vm, handle))
    return out


def WaitFollowers(followers, timeout_s=120):
    """Followers end once their leader is done (stopped after `timeout_s`); returns one
    message per follower that failed or had to be stopped."""
    problems = []
    for vm, handle in followers:
        rc, stderr = mongobench_vm.WaitDetached(
            vm,
            handle,
            label=f"mongobench {vm.name}:",
            poll_s=min(ProgressSeconds(), 5.0),
            timeout_s=timeout_s,
        )
        if rc != 0:
            last = [line for line in stderr.splitlines() if line.strip()][-1:] or ["no output"]
            problems.append(f"{vm.name} follower (exit status {rc}): {last[0][:500]}")
    return problems


def StopEngine(vm):
    """Stops whatever engine process still runs from the work directory (Cleanup: PKB itself
    may have been stopped while the detached engine ran): SIGTERM to the engine, which ends
    its worker processes and writes its partial results, then its whole session (process
    group) is stopped and waited for, before the work directory can be removed."""
    workdir = WorkDir(vm)
    return mongobench_vm.StopByPidFiles(vm, workdir, marker=workdir, timeout_s=30, session=True)


def StartSampler(vm, workdir, data_path):
    """Starts the engine's OS sampler on `vm` (deployed there) in the background."""
    out = posixpath.join(workdir, "os-readings.jsonl")
    pid = posixpath.join(workdir, "ossampler.pid")
    vm.RemoteCommand(
        f"cd {workdir} && rm -f {out} && (nohup venv/bin/python -m mongobench.measure.ossampler"
        f" --path {data_path} --interval 1 --out {out} > ossampler.log 2>&1 &"
        f" echo $! > {pid})"
    )
    return out, pid


def StopSampler(vm, sampler, local_dir):
    """Stops the sampler by its PID and pulls its readings; returns the local path."""
    out, pid = sampler
    vm.RemoteCommand(
        f"test -f {pid} && kill -TERM $(cat {pid}) 2>/dev/null; sleep 1; rm -f {pid}",
        ignore_failure=True,
    )
    local = os.path.join(local_dir, f"os-readings-{vm.name}.jsonl")
    vm.PullFile(local, out)
    return local


def ToSample(s):
    """The PKB sample of an engine sample dict (metric, value, unit, metadata, timestamp);
    per-interval figures through PKB's own CreateTimeSeriesSample (its time-series form:
    the values, timestamps and interval in the metadata)."""
    if core_samples.is_time_series(s):
        md = {k: v for k, v in s["metadata"].items() if k not in core_samples.TIME_SERIES_KEYS}
        made = sample.CreateTimeSeriesSample(
            values=s["metadata"]["values"],
            timestamps=s["metadata"]["timestamps"],
            metric=s["metric"],
            units=s["unit"],
            interval=s["metadata"]["interval"],
            additional_metadata=md,
        )
        return made._replace(timestamp=s["timestamp"]) if s.get("timestamp") else made
    return sample.Sample(s["metric"], s["value"], s["unit"], s["metadata"], s.get("timestamp"))
