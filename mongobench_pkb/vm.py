"""Helpers the wing's VM modules share on a PKB VM (no flags, nothing to install).

Each of `engine`, `mongod`, `ycsb` and `stress_ng` has its own work directory name and keeps
its public functions (`WorkDir(vm)`, `Remove(vm)`, `StopAll(vm)`, `States(...)`) as one-line
calls of these, because benchmarks and Cleanup call them by those names.
"""

import dataclasses
import logging
import os
import posixpath
import shlex
import tarfile
import tempfile
import time

from perfkitbenchmarker import errors, vm_util

from mongobench.core import redact
from mongobench.remote import diagnostics, follow, processes

DIAGNOSTICS_ARCHIVE = "mongobench-diagnostics.tgz"


def WorkDir(vm, name):
    """A private directory `name` on the VM: on its scratch disk when it has one."""
    base = vm.GetScratchDir() if vm.scratch_disks else vm_util.VM_TMP_DIR
    return posixpath.join(base, name)


def MakeWorkDir(vm, path):
    """Creates `path` owned by the ssh user (so processes need no root to write there)."""
    q = shlex.quote(path)
    vm.RemoteCommand(f"sudo mkdir -p {q} && sudo chown $(id -u):$(id -g) {q}")


def WriteRemoteFile(vm, path, text):
    """Writes `text` to `path` on `vm` (not for secrets: the content is in pkb.log)."""
    vm.RemoteCommand(f"printf %s {shlex.quote(text)} > {shlex.quote(path)}")


def PushSecret(vm, remote_path, content):
    """Writes `content` to a 0600 file on the VM without it touching argv or logs.

    The remote file is created empty with mode 0600 before scp overwrites its
    content, so it is never readable by others, even briefly.
    """
    vm.RemoteCommand(
        f"umask 077 && rm -f {remote_path} && touch {remote_path} && chmod 600 {remote_path}"
    )
    fd, local = tempfile.mkstemp(dir=vm_util.GetTempDir(), prefix="secret-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(content)
        vm.PushFile(local, remote_path)
    finally:
        os.remove(local)


def PullDiagnostics(vm, remote_paths, local_dir=None):
    """Copies what exists of `remote_paths` (paths or globs under the VM's work directories)
    into `local_dir`, by default `<PKB run directory>/diagnostics/<vm name>/`: one archive,
    read with sudo (mongod's files may be root's), never the secret files
    (diagnostics.SECRET_EXCLUDES: target.uri, TLS material, users files), unpacked there.
    Returns the local directory, or None when none of the paths exists."""
    base = WorkDir(vm, "")
    archive = posixpath.join(base, DIAGNOSTICS_ARCHIVE)
    out, _ = vm.RemoteCommand(diagnostics.archive_command(base, remote_paths, archive))
    if not diagnostics.parse_archive_count(out):
        logging.info("mongobench: no diagnostics on %s to keep", vm.name)
        return None
    local_dir = local_dir or os.path.join(vm_util.GetTempDir(), "diagnostics", vm.name)
    os.makedirs(local_dir, exist_ok=True)
    local_archive = os.path.join(local_dir, DIAGNOSTICS_ARCHIVE)
    try:
        vm.PullFile(local_archive, archive)
    finally:
        vm.RemoteCommand(f"sudo rm -f {shlex.quote(archive)}", ignore_failure=True)
    with tarfile.open(local_archive) as tar:
        tar.extractall(local_dir, filter="data")
    os.remove(local_archive)
    logging.info("mongobench: diagnostics of %s kept in %s", vm.name, local_dir)
    return local_dir


def RemoveWorkDir(vm, name):
    """Deletes the work directory `name` and everything in it."""
    vm.RemoteCommand(f"sudo rm -rf {shlex.quote(WorkDir(vm, name))}")


def StopByPidFiles(vm, directory, *, marker, timeout_s, sudo=False, session=False):
    """Stops every process whose PID file is under `directory` (Cleanup); returns how many.

    `marker` must appear in a process's command line for it to be signalled (a recycled
    PID is never killed)."""
    out, _ = vm.RemoteCommand(processes.pid_files_command(directory), ignore_failure=True)
    files = out.split()
    if files:
        vm.RemoteCommand(
            processes.stop_processes_command(
                files, marker=marker, timeout_s=timeout_s, sudo=sudo, session=session
            ),
            ignore_failure=True,
        )
    return len(files)


def RemoteStates(vm, entries, marker):
    """name -> processes.ProcessState for each (name, pid_file, rc_file) of `entries`.

    A name the VM does not report is `gone` (no live process, no exit status)."""
    if not entries:
        return {}
    out, _ = vm.RemoteCommand(
        processes.process_states_command(entries, marker=marker), should_pre_log=False
    )
    states = processes.parse_process_states(out)
    gone = processes.ProcessState(processes.STATE_GONE)
    return {name: states.get(name, gone) for name, _, _ in entries}


# ----------------------------------------------------------------------------- following


def _PollOnce(vm, command):
    """One poll's output, or None when the VM could not be reached this time."""
    try:
        # PKB logs each command's output; the new lines are logged once, by Follow, instead.
        out, _, rc = vm.RemoteCommandWithReturnCode(
            command, ignore_failure=True, should_pre_log=False, suppress_logging=True
        )
    except (errors.VirtualMachine.RemoteCommandError, errors.VmUtil.IssueCommandError) as e:
        logging.warning("mongobench: cannot poll %s (%s)", vm.name, str(e)[:200])
        return None
    if rc:
        logging.warning("mongobench: polling %s failed (exit status %s)", vm.name, rc)
        return None
    return out


@dataclasses.dataclass(frozen=True)
class Followed:
    """Detached processes to follow: `entries` ((name, pid_file, rc_file)), the `marker` that
    must be in their command lines, the `files` ((name, path): their output) whose new lines
    reach pkb.log as `<label(name)> <line>`, and `keep(line)` picking those lines (None: all)."""

    entries: list
    marker: str
    files: list
    label: object  # name -> the prefix of its lines in pkb.log
    keep: object = None


def Follow(
    vm, followed, *, poll_s, timeout_s=None, gone_grace_s=5.0, unreachable_s=600.0, collected=None
):
    """Polls the processes of `followed` (a Followed) until none runs, copying each new line
    of their files into pkb.log as it comes. Polls come every 0.5 s at first, then less
    often, every `poll_s` at most.

    Each poll is one short ssh command, so a dropped connection costs a poll, not the run:
    failed polls are retried for `unreachable_s`. A process that vanished without an exit
    status gets `gone_grace_s` for it to appear. A connection string in a copied line loses
    its credentials. The lines also go to `collected[name]` (a dict of lists) when given.
    Returns the final states (callers treat `running`, when `timeout_s` ran out, and `gone`
    as failures)."""
    entries, label, keep = followed.entries, followed.label, followed.keep
    follower = follow.Follower(followed.files)
    states_cmd = processes.process_states_command(entries, marker=followed.marker)
    gone = processes.ProcessState(processes.STATE_GONE)
    start = time.monotonic()
    gone_since = unreachable_since = None
    states = {name: gone for name, _, _ in entries}
    interval = 0.25
    while True:
        text = _PollOnce(vm, follower.command(states_cmd))
        now = time.monotonic()
        if text is None:
            unreachable_since = unreachable_since or now
            if now - unreachable_since > unreachable_s:
                raise errors.VirtualMachine.RemoteCommandError(
                    f"{vm.name}: unreachable for {unreachable_s:.0f}s while its processes ran"
                )
        else:
            unreachable_since = None
            parsed = processes.parse_process_states(follow.parse_follow(text)[0])
            states = {name: parsed.get(name, gone) for name, _, _ in entries}
            running = any(s.running for s in states.values())
            for name, lines in follower.feed(text, final=not running)[1].items():
                lines = [redact.uri(line) for line in lines if keep is None or keep(line)]
                for line in lines:
                    logging.info("%s %s", label(name), line)
                if collected is not None:
                    collected.setdefault(name, []).extend(lines)
            if not running and not follower.pending:
                if all(s.state != processes.STATE_GONE for s in states.values()):
                    return states
                gone_since = gone_since or now
                if now - gone_since >= gone_grace_s:
                    return states
        if timeout_s is not None and now - start >= timeout_s:
            return states
        # 0.5 s, 1 s, 2 s ... up to poll_s: a short step is seen to end soon, a long run
        # costs one ssh command per poll_s.
        interval = min(poll_s, interval * 2)
        wait = interval if timeout_s is None else min(interval, timeout_s - (now - start))
        time.sleep(max(0.0, wait) if not follower.pending else 0.0)


def StartDetached(vm, command, *, name, directory, marker=None):
    """Starts the shell `command` detached on `vm` (its own session: it survives a dropped
    ssh connection and PKB's polling); returns its handle for WaitDetached.

    Its files are `<directory>/<name>.{pid,rc,out,err}`; the PID file lets Cleanup stop it
    (StopByPidFiles) if PKB itself is stopped. `marker` (default `directory`) must be in the
    command line, so a recycled PID is never taken for it."""
    base = posixpath.join(directory, name)
    pid, rc, out, err = (base + ext for ext in (".pid", ".rc", ".out", ".err"))
    vm.RemoteCommand(
        processes.background_command(
            ["bash", "-c", command],
            processes.Launch(pid_file=pid, stdout=out, stderr=err, rc_file=rc),
        )
    )
    return {"name": name, "pid": pid, "rc": rc, "err": err, "marker": marker or directory}


def WaitDetached(vm, handle, *, label, poll_s, timeout_s=None):
    """Follows a StartDetached process until it ends (or `timeout_s`: then it is stopped),
    copying its stderr lines into pkb.log as they come. Returns (exit status, or None when
    it vanished or was stopped; its stderr)."""
    name = handle["name"]
    lines = {}
    followed = Followed(
        [(name, handle["pid"], handle["rc"])],
        handle["marker"],
        [(name, handle["err"])],
        lambda _: label,
    )
    states = Follow(
        vm,
        followed,
        poll_s=poll_s,
        timeout_s=timeout_s,
        collected=lines,
    )
    state = states[name]
    if state.running:
        vm.RemoteCommand(
            processes.stop_processes_command(
                [handle["pid"]], marker=handle["marker"], timeout_s=30
            ),
            ignore_failure=True,
        )
        return None, "\n".join(lines.get(name, []) + [f"stopped after {timeout_s:.0f} s"])
    returncode = state.value if state.state == processes.STATE_EXITED else None
    return returncode, "\n".join(lines.get(name, []))


def RunDetached(vm, command, *, name, directory, label, poll_s, marker=None):
    """StartDetached then WaitDetached: runs `command` on `vm`, its stderr lines reaching
    pkb.log as they come; returns (exit status or None, its stderr)."""
    handle = StartDetached(vm, command, name=name, directory=directory, marker=marker)
    return WaitDetached(vm, handle, label=label, poll_s=poll_s)


def _Arch(group):
    """x86_64 or aarch64 from a cloud group's machine type, as PKB's providers tell it;
    None when they cannot (static VMs, custom machine types, other clouds)."""
    machine_type = getattr(getattr(group, "vm_spec", None), "machine_type", None)
    if not isinstance(machine_type, str):
        return None
    try:
        if group.cloud == "AWS":
            from perfkitbenchmarker.providers.aws import aws_virtual_machine as aws

            arm = aws.GetArmArchitecture(machine_type)
        elif group.cloud == "GCP":
            from perfkitbenchmarker.providers.gcp import gce_virtual_machine as gce

            arm = gce.GetArmArchitecture(machine_type)
        elif group.cloud == "Azure":
            from perfkitbenchmarker.providers.azure import azure_virtual_machine as azure

            arm = azure._MachineTypeIsArm(machine_type)
        else:
            return None
    except ImportError:
        return None
    return "aarch64" if arm else "x86_64"


def GroupPlatforms(benchmark_config, group_name):
    """(os_type, arch or None, installs packages) of each VM a group of the benchmark
    config will have, before any exists: its static VMs' own os_type, else the group's."""
    group = (getattr(benchmark_config, "vm_groups", None) or {}).get(group_name)
    if group is None:
        return []
    statics = getattr(group, "static_vms", None) or []
    if statics:
        return [
            (vm.os_type, None, getattr(vm, "install_packages", True))
            for vm in statics[: getattr(group, "vm_count", None) or len(statics)]
            if getattr(vm, "os_type", None)
        ]
    os_type = getattr(group, "os_type", None)
    return [(os_type, _Arch(group), True)] if os_type else []
