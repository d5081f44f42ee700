"""What a failed run keeps for diagnosis, and the shell command that gathers it on a host.

Cleanup deletes the work directories; before it does, the PKB benchmarks pull mongod's logs
and `diagnostic.data` (FTDC), the YCSB outputs and the engine's raw results into PKB's run
directory (mongobench_pkb.vm.PullDiagnostics runs the command built here). Files
that hold secrets are never taken, whatever the patterns match: the target URI files
(`target.uri`, 0600), TLS material and users files.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# Names (any path component, tar's unanchored --exclude) never put in a diagnostics archive.
SECRET_EXCLUDES = (
    "target.uri",  # the connection string, credentials included (PushSecret, 0600)
    "*.uri",
    "tls",  # directories of the run's certificates and keys
    "*.pem",
    "*.key",
    "*.crt",
    "*keyfile*",
    "*keyFile*",
    "*users*",  # the stand-in's users files (user names and passwords)
    "secret-*",
)

_GLOB = re.compile(r"([*?\[\]])")


def glob_quote(pattern: str) -> str:
    """`pattern` quoted for the shell with its glob characters (* ? [ ]) left active."""
    return "".join(
        part if _GLOB.fullmatch(part) else shlex.quote(part)
        for part in _GLOB.split(pattern)
        if part
    )


def mongod_patterns(instances_dir: str) -> list[str]:
    """Logs, stdout, config and FTDC of every instance under `instances_dir` (the layout of
    mongobench.deploy.mongod.instance_paths); not the data files, which may be gigabytes."""
    root = f"{instances_dir.rstrip('/')}/mongod-*"
    return [
        f"{root}/mongod.log*",
        f"{root}/mongod.stdout",
        f"{root}/mongod.conf",
        f"{root}/data/diagnostic.data",
    ]


def engine_patterns(workdir: str) -> list[str]:
    """The engine's raw results, OS readings and topology plan in its work directory."""
    workdir = workdir.rstrip("/")
    return [
        f"{workdir}/perftables-results*.json",
        f"{workdir}/os-readings*.jsonl",
        f"{workdir}/topology-plan.json",
    ]


def archive_command(
    base: str,
    patterns: Sequence[str],
    archive: str,
    *,
    sudo: bool = True,
    excludes: Sequence[str] = SECRET_EXCLUDES,
) -> str:
    """A command that tars what exists of `patterns` (paths or shell globs under `base`,
    stored relative to it) into `archive`, without `excludes`, and prints how many paths it
    took. Missing paths are skipped; with none left no archive is written and it prints 0.

    With `sudo` the files are read as root (mongod's may be root's and 0600) and the archive
    is then handed to the calling user, who pulls it. Files that change while they are read
    (a running mongod's log) are taken as they are."""
    base = base.rstrip("/") or "/"
    relative = []
    for p in patterns:
        if p != base and not p.startswith(base.rstrip("/") + "/"):
            raise ValueError(f"{p!r} is not under {base!r}")
        relative.append(p[len(base) :].lstrip("/") or ".")
    q = shlex.quote
    exclude = " ".join(f"--exclude={q(e)}" for e in excludes)
    found = " ".join(glob_quote(p) for p in relative)
    inner = (
        f"cd {q(base)} || exit 1; set --; for p in {found}; do"
        ' [ -e "$p" ] && set -- "$@" "$p"; done; rm -f ' + q(archive) + "; "
        "if [ $# -gt 0 ]; then tar -czf " + q(archive) + f" {exclude}"
        ' --warning=no-file-changed --warning=no-file-removed -- "$@"'
        " || [ $? -eq 1 ] || exit 2; fi; echo $#"
    )
    if not sudo:
        return f"sh -c {q(inner)}"
    owner = f"sudo chown $(id -u):$(id -g) {q(archive)} 2>/dev/null"
    return f"sudo sh -c {q(inner)} && {{ {owner}; true; }}"


def parse_archive_count(stdout: str) -> int:
    """How many paths archive_command took (its last output line)."""
    lines = stdout.strip().splitlines()
    try:
        return int(lines[-1])
    except (IndexError, ValueError):
        raise ValueError(f"unexpected output of the diagnostics command: {stdout!r}") from None
