"""Shipping the engine to a client VM: the archive and the shell commands.

The client VM gets a private work directory with a virtualenv and this
package; nothing is installed system-wide, so static hosts stay as they were.
Pure functions (the PKB package module runs the commands).
"""

from __future__ import annotations

import gzip
import io
import pathlib
import shlex
import tarfile

from mongobench.remote import provenance

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]  # the mongobench package
REQUIREMENTS_FILE = PACKAGE_DIR / "client-requirements.txt"


def requirements() -> list[str]:
    lines = REQUIREMENTS_FILE.read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


# What the engine's virtualenv needs from the OS, per package manager: Python with venv and
# pip, and a C compiler with Python's headers, which build the driver's compiled loop
# (driver.native) on every architecture and hdrhistogram (the latency histograms) where it
# has no wheel (Linux: x86_64 only; aarch64 VMs build it from its sdist).
_SYSTEM_PACKAGES = {
    "apt": ["python3", "python3-venv", "python3-pip"],
    "yum": ["python3", "python3-pip"],
}
_BUILD_PACKAGES = {"apt": ["gcc", "libc6-dev", "python3-dev"], "yum": ["gcc", "python3-devel"]}


def system_packages(package_manager: str, arch: str) -> list[str]:
    """The OS packages a VM of `arch` (uname -m) needs for the engine's virtualenv (the
    same on every architecture now; `arch` stays for the callers' sake)."""
    if package_manager not in _SYSTEM_PACKAGES:
        raise ValueError(f"unknown package manager {package_manager!r} (apt, yum)")
    return _SYSTEM_PACKAGES[package_manager] + _BUILD_PACKAGES[package_manager]


def archive_bytes() -> bytes:
    """A tar.gz of the `mongobench` package (sources and data, no caches), with this
    host's version and commit in mongobench/_build_info.json: the copy has no .git."""
    buf = io.BytesIO()
    info_name = provenance.BUILD_INFO_NAME
    # mtime=0 in the gzip header too, or two archives differ by their timestamp.
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for path in sorted(PACKAGE_DIR.rglob("*")):
            rel = path.relative_to(PACKAGE_DIR.parent)
            if "__pycache__" in rel.parts or path.suffix in (".pyc", ".so") or path.is_dir():
                continue  # .so: built here for this host; the VM builds its own
            if path == PACKAGE_DIR / info_name:
                continue  # written below, from build_info (which reads this file first)
            info = tar.gettarinfo(str(path), arcname=str(rel))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # reproducible: the same sources give the same archive
            with open(path, "rb") as f:
                tar.addfile(info, f)
        data = provenance.build_info_json(PACKAGE_DIR)
        info = tarfile.TarInfo(f"{PACKAGE_DIR.name}/{info_name}")
        info.size, info.mode, info.mtime = len(data), 0o644, 0
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


PYTHONS = ("python3", "python3.13", "python3.12", "python3.11", "python3.10")


def python_probe_command() -> str:
    """Prints the first interpreter of PYTHONS that is >= 3.10 and has venv and ensurepip
    (python3 first:
    the OS's own when it is new enough, else e.g. RHEL's python3.11); prints nothing and
    fails when there is none."""
    check = "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))"
    loop = (
        f"for p in {' '.join(PYTHONS)}; do"
        f" command -v $p >/dev/null 2>&1 && $p -c {shlex.quote(check)} 2>/dev/null"
        " && $p -m venv --help >/dev/null 2>&1 && { echo $p; exit 0; }; done; exit 1"
    )
    return "sh -c " + shlex.quote(loop)


BUILD_FAILED = "mongobench: the driver's compiled loop did not build; the Python loop runs"


def setup_commands(workdir: str, archive: str, python: str = "python3") -> list[str]:
    """Commands that (re)create the client in `workdir` from `archive`.

    The virtualenv is reused when it exists; the package is replaced, so a
    re-run always executes the runner's sources.
    """
    q = shlex.quote
    venv = f"{workdir}/venv"
    reqs = " ".join(q(r) for r in requirements())
    return [
        f"{q(python)} -c 'import sys; assert sys.version_info >= (3, 10), sys.version'",
        f"test -x {q(venv)}/bin/python || {q(python)} -m venv {q(venv)}",
        f"{q(venv)}/bin/python -m pip install --quiet --disable-pip-version-check {reqs}",
        f"rm -rf {q(workdir)}/mongobench && tar -xzf {q(archive)} -C {q(workdir)}",
        # the compiled loop; without it the Python loop runs and the results say so
        # (client_loop: python), so a failed build warns and does not stop the run
        f"cd {q(workdir)} && {{ {q(venv)}/bin/python -m mongobench.driver.native build >/dev/null"
        f" || echo {q(BUILD_FAILED)} >&2; }}",
        f"cd {q(workdir)} && {q(venv)}/bin/python -c 'import mongobench.perftables.runner'",
    ]


def perftables_command(workdir: str, uri_file: str, request_file: str) -> str:
    """The client command for one perftables run: its options in `request_file` (a
    PerftablesRun as JSON), its target in `uri_file` (no secret on the command line)."""
    q = shlex.quote
    args = [
        f"{workdir}/venv/bin/python", "-m", "mongobench", "perftables", "run",
        "--uri-file", uri_file, "--request", request_file,
        "--yes",  # PKB runs are not interactive: the estimate is logged in CheckPrerequisites
    ]  # fmt: skip
    return f"cd {q(workdir)} && " + " ".join(q(a) for a in args)


def perftables_follow_command(
    workdir: str, uri_file: str, run_id: str, index: int, processes: int | None = None
) -> str:
    """The command of client VM `index` (1..K-1) following a leader's perftables run."""
    q = shlex.quote
    args = [
        f"{workdir}/venv/bin/python", "-m", "mongobench", "perftables", "follow",
        "--uri-file", uri_file, "--run-id", run_id, "--client-index", str(index),
    ]  # fmt: skip
    if processes:
        args += ["--processes", str(processes)]
    return f"cd {q(workdir)} && " + " ".join(q(a) for a in args)


def sweep_drop_command(engine_dir: str, uri_file: str, table: str) -> str:
    """Shell command that drops the sweep's collection with the engine deployed on a client VM
    (see `setup_commands`) and prints ``{"dropped": ..., "server_memory_mb": ...,
    "server_version": ..., "storage_engine": ...}``. No secret:
    the URI stays in its file."""
    q = shlex.quote
    args = [f"{engine_dir}/venv/bin/python", "-m", "mongobench", "sweep", "drop"]
    args += ["--uri-file", uri_file, "--table", table]
    return f"cd {q(engine_dir)} && " + " ".join(q(a) for a in args)
