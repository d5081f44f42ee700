"""Detached processes on a host, tracked by PID file: start, state, stop, wait for a port."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mongobench.core.units import KiB


def _sudo(sudo: bool) -> str:
    return "sudo " if sudo else ""


# ----------------------------------------------------------------------------- remote processes
#
# Shell commands (no I/O here) that start a process detached with a PID file, report its
# state, wait for its port, and stop exactly the processes whose PID files we wrote. The PKB
# package modules run them over ssh; the unit tests run them locally.

STATE_RUNNING, STATE_EXITED, STATE_GONE = "running", "exited", "gone"


@dataclass(frozen=True)
class Launch:
    """How background_command starts a process: its PID file and output files, whether
    through sudo, as which user, with which limits, environment and PID-file wait."""

    pid_file: str
    stdout: str
    stderr: str | None = None
    rc_file: str | None = None
    sudo: bool = False
    run_as: str | None = None
    nofile: int | None = None
    nproc: int | None = None
    env: Mapping[str, str] | None = None
    wait_s: int = 30


def background_command(argv: Sequence[str], launch: Launch) -> str:
    """Starts `argv` detached and returns once its PID is in `pid_file` (and prints it); the
    names below are `launch`'s fields.

    The process gets its own session (setsid: no terminal, survives the ssh session and sudo's
    pty), stdin from /dev/null, stdout to `stdout`, stderr to `stderr` (default: `stdout`).
    `pid_file` holds the PID of argv's own process (setsid and numactl exec, they do not fork).
    `nofile`/`nproc` raise the limits of this process only (needs root: `sudo`); where even
    root cannot, the hard limit is used and stderr says so. With `rc_file`, a shell in the
    same session waits for it and writes its exit status there (so a finished process can be
    told from a killed or vanished one). `run_as` drops to that user. Stale PID and
    exit-status files are removed first. `env` adds variables to the process's environment
    (through `env`, which execs: the PID stays the process's own).
    """
    pid_file, stdout, stderr, rc_file = (
        launch.pid_file,
        launch.stdout,
        launch.stderr,
        launch.rc_file,
    )
    run_as, nofile, nproc, env = launch.run_as, launch.nofile, launch.nproc, launch.env
    sudo, wait_s = launch.sudo, launch.wait_s
    q = shlex.quote
    cmd = " ".join(q(str(a)) for a in argv)
    if env:
        cmd = "env " + " ".join(q(f"{k}={v}") for k, v in env.items()) + " " + cmd
    if run_as:
        cmd = f"setpriv --reuid={q(run_as)} --regid={q(run_as)} --init-groups {cmd}"
    err = f"2>{q(stderr)}" if stderr else "2>&1"
    launch = f"{cmd} >{q(stdout)} {err} </dev/null"
    if rc_file:
        inner = f"{launch} & echo $! >{q(pid_file)}; wait $!; echo $? >{q(rc_file)}"
        start = f"setsid bash -c {q(inner)} >/dev/null 2>&1 </dev/null &"
    else:
        start = f"setsid {launch} & echo $! >{q(pid_file)};"
    # Plain `;` lists: `a && b &` would put the whole list in a background subshell and $!
    # would be that subshell's PID, not the process's.
    limits = "".join(
        # A host whose hard limit root cannot raise (a container without CAP_SYS_RESOURCE)
        # gets its hard limit and a line on stderr, not a failed start.
        f"ulimit -{opt} {int(value)} 2>/dev/null || {{ ulimit -{opt} $(ulimit -H{opt}) && "
        f'echo "{what} limit stays at $(ulimit -H{opt}), not {int(value)}" >&2; }} || exit 1; '
        for opt, value, what in (("n", nofile, "open files"), ("u", nproc, "processes"))
        if value
    )
    stale = f"rm -f {q(pid_file)}" + (f" {q(rc_file)}" if rc_file else "")
    script = (
        f"{stale}; {limits}{start} "
        f"i=0; while [ ! -s {q(pid_file)} ] && [ $i -lt {int(wait_s) * 10} ]; do "
        f"sleep 0.1; i=$((i+1)); done; "
        f"test -s {q(pid_file)} || {{ echo 'no PID file {pid_file} after {int(wait_s)}s' >&2; exit 1; }}; "
        f"cat {q(pid_file)}"
    )
    # bash, not sh: dash has no `ulimit -u`
    return ("sudo " if sudo else "") + f"bash -c {q(script)}"


def _alive_test(pid_file_word: str, marker: str) -> str:
    """Shell test, true when the PID in the file (a shell word: quoted path or "$f") is a live
    process whose command line holds `marker` (a path of this run), so that a reused PID is
    never taken for ours; leaves the PID in $p."""
    return (
        f'{{ p=$(cat {pid_file_word} 2>/dev/null) && [ -n "$p" ] && '
        f'grep -qaF -- {shlex.quote(marker)} /proc/"$p"/cmdline 2>/dev/null; }}'
    )


def process_states_command(entries: Sequence[tuple[str, str, str | None]], *, marker: str) -> str:
    """One line per (name, pid_file, rc_file): `name running PID`, `name exited RC` or
    `name gone` (no live process, no exit status). Parse with parse_process_states."""
    q = shlex.quote
    parts = []
    for name, pid_file, rc_file in entries:
        if not re.fullmatch(r"[\w.@:-]+", name):
            raise ValueError(f"process name must be a plain word, got {name!r}")
        exited = (
            f'elif test -s {q(rc_file)}; then echo "{name} {STATE_EXITED} $(cat {q(rc_file)})"; '
            if rc_file
            else ""
        )
        parts.append(
            f'if {_alive_test(q(pid_file), marker)}; then echo "{name} {STATE_RUNNING} $p"; '
            f"{exited}else echo {q(name + ' ' + STATE_GONE)}; fi;"
        )
    return "sh -c " + shlex.quote(" ".join(parts) + " true")


@dataclass(frozen=True)
class ProcessState:
    state: str  # running | exited | gone
    value: int | None = None  # the PID when running, the exit status when exited

    @property
    def running(self) -> bool:
        return self.state == STATE_RUNNING


def parse_process_states(text: str) -> dict[str, ProcessState]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[1] not in (STATE_RUNNING, STATE_EXITED, STATE_GONE):
            continue
        value = int(parts[2]) if len(parts) > 2 and re.fullmatch(r"-?\d+", parts[2]) else None
        out[parts[0]] = ProcessState(parts[1], value)
    return out


SESSION_GRACE_S = 2  # after the main process ended, for the rest of its session to end
SESSION_GONE_S = 5  # after SIGKILL, for the session's processes to be gone


def stop_processes_command(
    pid_files: Sequence[str],
    *,
    marker: str,
    timeout_s: int = 30,
    sudo: bool = False,
    session: bool = False,
) -> str:
    """SIGTERM to each live process of `pid_files` (checked against `marker`), SIGKILL to any
    left after `timeout_s`, then the PID files are removed. With `session`, the other members
    of each process's session (stress-ng's workers, the engine's worker processes) get
    SESSION_GRACE_S to end, then SIGKILL, and the command returns once they are gone:
    background_command gave the process a session of its own, and the command never touches
    its own session."""
    if not pid_files:
        return "true"
    q = shlex.quote
    files = " ".join(q(f) for f in pid_files)
    alive = _alive_test('"$f"', marker)
    # the live (not zombie) members of the sessions in $sids, this command's own excepted
    members = (
        'members() { for s in $sids; do [ "$s" = "$me" ] && continue; '
        "ps -o pid=,stat= -s \"$s\" 2>/dev/null | awk '$2 !~ /^Z/ {print $1}'; done; }; "
    )
    kill_session = (
        # a short grace for the rest of the session to end by itself (the engine ends its
        # workers on TERM), then KILL what is left, and wait until it is gone
        f'{members}j=0; while [ $j -lt {SESSION_GRACE_S * 5} ] && [ -n "$(members)" ]; do '
        "sleep 0.2; j=$((j+1)); done; "
        'for m in $(members); do kill -KILL "$m" 2>/dev/null; done; '
        f'j=0; while [ $j -lt {SESSION_GONE_S * 5} ] && [ -n "$(members)" ]; do '
        "sleep 0.2; j=$((j+1)); done; "
        if session
        else ""
    )
    script = (
        "me=$(ps -o sid= -p $$ | tr -d ' '); pids=; sids=; "
        f"for f in {files}; do "
        f"if {alive}; then "
        'pids="$pids $p"; sids="$sids $(ps -o sid= -p "$p" | tr -d \' \')"; '
        'kill -TERM "$p" 2>/dev/null; fi; done; '
        f"i=0; while [ $i -lt {int(timeout_s) * 5} ]; do left=; "
        # a zombie (exited, not yet reaped) has an empty cmdline: it counts as gone
        'for p in $pids; do grep -qa . /proc/"$p"/cmdline 2>/dev/null && left="$left $p"; done; '
        '[ -z "$left" ] && break; sleep 0.2; i=$((i+1)); done; '
        'for p in $pids; do kill -KILL "$p" 2>/dev/null; done; '
        f"{kill_session}"
        f"rm -f {files}; true"
    )
    return ("sudo " if sudo else "") + "bash -c " + q(script)


def pid_files_command(directory: str, pattern: str = "*.pid") -> str:
    """Lists the PID files under `directory` (recursively; nothing when it does not exist)."""
    q = shlex.quote
    return f"test -d {q(directory)} && find {q(directory)} -name {q(pattern)} -type f || true"


def wait_ready_command(
    pid_file: str, host: str, port: int, *, marker: str, timeout_s: int = 120
) -> str:
    """Waits until something accepts TCP on host:port; fails at once when the process of
    `pid_file` is gone (no waiting out the timeout for a server that died at start)."""
    script = (
        f"i=0; while [ $i -lt {int(timeout_s) * 5} ]; do "
        f"(exec 3<>/dev/tcp/{host}/{int(port)}) 2>/dev/null && exit 0; "
        f"{_alive_test(shlex.quote(pid_file), marker)} || {{ echo 'the server process exited' >&2; exit 2; }}; "
        "sleep 0.2; i=$((i+1)); done; "
        f"echo 'nothing listens on {host}:{int(port)} after {int(timeout_s)}s' >&2; exit 1"
    )
    return "bash -c " + shlex.quote(script)


def locked_memory_command(pid_files: Sequence[str], *, marker: str, field: str = "VmLck") -> str:
    """Prints the `field` (kB, from /proc/PID/status) of every member of the sessions of the
    live processes in `pid_files`: the memory stress-ng's workers hold. Sum with sum_kib."""
    if not re.fullmatch(r"(Vm|Rss)[A-Za-z]+", field):
        raise ValueError(f"not a /proc status memory field: {field!r}")
    q = shlex.quote
    files = " ".join(q(f) for f in pid_files)
    alive = _alive_test('"$f"', marker)
    script = (
        f"for f in {files}; do "
        f"if {alive}; then "
        "s=$(ps -o sid= -p \"$p\" | tr -d ' '); "
        'for m in $(ps -o pid= -s "$s" 2>/dev/null); do '
        f"awk '/^{field}:/ {{print $2}}' /proc/$m/status 2>/dev/null; done; fi; done; true"
    )
    return "bash -c " + q(script)


def sum_kib(text: str) -> int:
    """Sum of the integer lines of `text` (kB values), in bytes."""
    return sum(int(t) for t in text.split() if t.isdigit()) * KiB
