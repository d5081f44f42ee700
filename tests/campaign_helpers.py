"""What every case of a fault campaign checks after it ran (issue 22's campaign:
tests/integration/test_issue22_campaign.py, tests/e2e/test_pkb_issue22_campaign.py).

A case's command runs in a session of its own with a marker in its environment
(`MARKER_ENV`), which every process it starts inherits (worker processes, YCSB's Java,
followers): `marked(case)` finds what is still alive of it, however it left its session.
`after_case` is the shared post-check: the expected exit status, no traceback, nothing of
the case left running, /dev/full still a character device, no /dev/plots, and every symlink
given as --out still a link to its target, whose inode is unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

MARKER_ENV = "MONGOBENCH_CAMPAIGN_CASE"


def new_marker(case_id: str) -> str:
    return f"{case_id}-{uuid.uuid4().hex[:12]}"


def marked_env(marker: str, env: dict | None = None) -> dict:
    return {**(env if env is not None else os.environ), MARKER_ENV: marker}


def marked(marker: str) -> list[str]:
    """`pid command` of every live (not zombie) process whose environment holds `marker`."""
    needle = f"{MARKER_ENV}={marker}".encode()
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out.append(f"{pid} {cmd}")
    return out


def session_members(sid: int) -> list[str]:
    """`pid command` of every live (not zombie) process of session `sid`."""
    out = subprocess.run(
        ["ps", "-o", "pid=,stat=,args=", "-s", str(sid)], capture_output=True, text=True
    ).stdout
    return [line for line in out.splitlines() if line.split()[1][0] != "Z"]


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout} s")


def kill_marked(marker: str) -> list[str]:
    """SIGKILLs what is left of a case (after the test saw it); returns what it found."""
    left = marked(marker)
    for line in left:
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def start(marker: str, *argv, env=None, **popen) -> subprocess.Popen:
    """`python -m mongobench *argv` in a session of its own (as PKB starts the engine),
    marked with `marker`; stdout and stderr are pipes unless `popen` says otherwise."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(
        [sys.executable, "-m", "mongobench", *argv], text=True, start_new_session=True,
        env=marked_env(marker, env), **popen,
    )  # fmt: skip


def cli(marker: str, *argv, env=None, timeout=180, **popen) -> subprocess.CompletedProcess:
    """Runs `python -m mongobench *argv` to its end (see `start`)."""
    proc = start(marker, *argv, env=env, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def refused(p, *expected) -> str:
    """Exit 1 with one last stderr line holding every `expected` piece, no traceback."""
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    for piece in expected:
        assert piece in last, (piece, last)
    return last


@dataclasses.dataclass
class Symlink:
    """A symlink given as --out and its target: neither may be replaced."""

    link: str
    target: str
    inode: int

    @classmethod
    def make(cls, directory, name="link.json") -> Symlink:
        target = os.path.join(str(directory), f"kept-{name}")
        with open(target, "w") as f:
            f.write("old\n")
        link = os.path.join(str(directory), name)
        os.symlink(target, link)
        return cls(link, target, os.stat(target).st_ino)

    def check(self):
        assert os.path.islink(self.link) and os.readlink(self.link) == self.target
        assert os.stat(self.target).st_ino == self.inode  # written in place, never renamed over


def after_case(marker: str, p=None, *, status=None, symlinks=(), gone_within_s=2.0):
    """The shared post-checks of a campaign case (see the module's docstring). `p`: the
    case's CompletedProcess (or Popen after communicate), `status`: its expected exit
    status. Processes of the case still alive after `gone_within_s` fail the case (and are
    killed)."""
    if p is not None:
        if status is not None:
            assert p.returncode == status, (p.returncode, (p.stderr or "")[-2000:])
        assert "Traceback" not in (p.stderr or ""), p.stderr[-3000:]
    deadline = time.monotonic() + gone_within_s
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = kill_marked(marker)
    assert left == [], left
    devices_intact(symlinks)


def devices_intact(symlinks=()):
    """/dev/full still a character device, no /dev/plots, every symlink and its target kept."""
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert not os.path.exists("/dev/plots")
    for s in symlinks:
        s.check()
