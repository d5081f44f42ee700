"""FerretDB for the test bed: a pinned release built from the Go module proxy, and started on
SQLite (embedded, one directory) or on a private PostgreSQL cluster.

FerretDB's `go install` binary panics at start on a missing `build/version/version.txt` (the
release process generates it). So the build takes the module's source from the proxy
(`go mod download`), copies it to a writable directory, writes that file with the pinned version,
and runs `go build ./cmd/ferretdb`. The binary is cached under
``$XDG_CACHE_HOME/mongobench/ferretdb-<version>/ferretdb`` (about 3 minutes cold on 2 cores; the
Go build and module caches make later builds faster); a lock keeps concurrent builds apart.
When Go is missing, `GoMissing` says so in one line and callers keep the stand-in.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

VERSION = "v1.24.2"
MODULE = "github.com/FerretDB/FerretDB"
BACKENDS = ("sqlite", "postgresql")
BUILD_TIMEOUT_S = 1200.0
# Go's official install location, for hosts where it is not on PATH (CI images, root shells).
_GO_FALLBACK = ("/usr/local/go/bin/go",)


class GoMissing(RuntimeError):
    """No Go toolchain: FerretDB cannot be built here."""


def cache_dir(version: str = VERSION) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mongobench", f"ferretdb-{version}")


def binary_path(version: str = VERSION) -> str:
    return os.path.join(cache_dir(version), "ferretdb")


def go_command() -> str:
    """The `go` to use: $GO, then PATH, then Go's official install location."""
    for cand in (os.environ.get("GO"), shutil.which("go"), *_GO_FALLBACK):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise GoMissing(
        f"FerretDB {VERSION} is built from the Go module proxy and needs Go (>= 1.24): no `go`"
        " on PATH (set GO=/path/to/go); the test bed keeps the stand-in"
    )


def available() -> bool:
    """A cached binary, or Go to build one."""
    if os.path.exists(binary_path()):
        return True
    try:
        go_command()
    except GoMissing:
        return False
    return True


def build(version: str = VERSION, timeout: float = BUILD_TIMEOUT_S, log=None) -> str:
    """The cached FerretDB binary, built first when missing. Bounded by `timeout` seconds."""
    target = binary_path(version)
    if os.path.exists(target):
        return target
    go = go_command()
    d = cache_dir(version)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod -buildvcs=false")
    with open(os.path.join(d, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(target):  # another process built it meanwhile
            return target
        if log:
            log(f"building FerretDB {version} from the Go module proxy (a few minutes, once)")
        try:
            info = subprocess.run(
                [go, "mod", "download", "-json", f"{MODULE}@{version}"],
                capture_output=True, text=True, env=env, timeout=timeout, cwd=d, check=True,
            )  # fmt: skip
            src_dir = json.loads(info.stdout)["Dir"]
            work = os.path.join(d, "src")
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(src_dir, work)
            for root, dirs, files in os.walk(work):  # the module cache is read-only
                for name in dirs + files:
                    os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
            os.chmod(work, 0o755)
            with open(os.path.join(work, "build", "version", "version.txt"), "w") as f:
                f.write(version + "\n")
            tmp = target + ".tmp"
            subprocess.run(
                [go, "build", "-trimpath", "-o", tmp, "./cmd/ferretdb"],
                capture_output=True, text=True, env=env, timeout=timeout, cwd=work, check=True,
            )  # fmt: skip
            os.replace(tmp, target)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"FerretDB {version} build took over {timeout:.0f}s") from None
        except subprocess.CalledProcessError as e:
            tail = (e.stderr or e.stdout or "").strip().splitlines()[-3:]
            raise RuntimeError(
                f"FerretDB {version} build failed ({' '.join(e.cmd[:3])}): {' | '.join(tail)}"
            ) from None
    return target


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    # Debian/Ubuntu keep the server tools off PATH, under the major version's directory.
    for cand in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return cand
    raise RuntimeError(
        f"--server ferretdb-postgresql needs PostgreSQL's {name}: apt-get install postgresql"
    )


@dataclass
class Postgres:
    """A private PostgreSQL cluster: its own data directory, loopback port and socket dir."""

    datadir: str
    port: int
    user: str
    pids: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/ferretdb"


def _as_user(user: str):
    if os.geteuid() != 0:
        return None
    pw = pwd.getpwnam(user)

    def demote():
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)

    return demote


def start_postgres(port: int, log_path: str) -> Postgres:
    """initdb + pg_ctl start of a private cluster (trust auth on loopback only) and a `ferretdb`
    database. As root it runs as the `postgres` user, whose data directory lives in the temp
    directory (the test bed's own directory is private to root)."""
    user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            raise RuntimeError(
                "--server ferretdb-postgresql as root needs the postgres user"
            ) from None
    datadir = tempfile.mkdtemp(prefix="mongobench-pg-")
    if os.geteuid() == 0:
        os.chown(datadir, pw.pw_uid, pw.pw_gid)
    demote = _as_user(user)
    run = dict(preexec_fn=demote, capture_output=True, text=True, timeout=120, check=True)
    try:
        subprocess.run(
            [_pg_bin("initdb"), "-D", datadir, "-A", "trust", "-U", user, "--no-sync"], **run
        )
        with open(os.path.join(datadir, "postgresql.conf"), "a") as f:
            f.write(
                f"listen_addresses = '127.0.0.1'\nport = {port}\n"
                f"unix_socket_directories = '{datadir}'\nfsync = off\n"
            )
        subprocess.run(
            [_pg_bin("pg_ctl"), "-D", datadir, "-l", os.path.join(datadir, "log"), "-w", "start"],
            **run,
        )
        subprocess.run(
            [_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", user, "ferretdb"],
            **run,
        )
    except subprocess.CalledProcessError as e:
        shutil.copy(os.path.join(datadir, "log"), log_path) if os.path.exists(
            os.path.join(datadir, "log")
        ) else None
        stop_postgres(datadir)
        raise RuntimeError(
            f"private PostgreSQL did not start ({os.path.basename(e.cmd[0])}):"
            f" {(e.stderr or '').strip()[-300:]}"
        ) from None
    return Postgres(datadir, port, user)


def stop_postgres(datadir: str) -> None:
    """pg_ctl stop (fast) of a cluster `start_postgres` made, then its directory removed."""
    if not os.path.isdir(datadir):
        return
    st = os.stat(datadir)
    demote = None
    if os.geteuid() == 0 and st.st_uid != 0:
        user = pwd.getpwuid(st.st_uid).pw_name
        demote = _as_user(user)
    if os.path.exists(os.path.join(datadir, "postmaster.pid")):
        try:
            subprocess.run(
                [_pg_bin("pg_ctl"), "-D", datadir, "-m", "fast", "-w", "stop"],
                preexec_fn=demote, capture_output=True, timeout=60,
            )  # fmt: skip
        except (subprocess.TimeoutExpired, RuntimeError):
            pass
    shutil.rmtree(datadir, ignore_errors=True)


def command(binary: str, port: int, backend: str, state_dir: str, pg_url: str = "") -> list[str]:
    """FerretDB's command line: loopback only, no telemetry, no debug HTTP listener."""
    if backend not in BACKENDS:
        raise ValueError(f"FerretDB backend {backend!r}: one of {', '.join(BACKENDS)}")
    cmd = [
        binary,
        f"--listen-addr=127.0.0.1:{port}",
        f"--handler={backend}",
        f"--state-dir={state_dir}",
        "--telemetry=disable",
        "--debug-addr=-",
        "--log-level=warn",
    ]
    if backend == "sqlite":
        data = os.path.join(state_dir, "sqlite")
        os.makedirs(data, exist_ok=True)
        cmd.append(f"--sqlite-url=file:{data}/")
    else:
        cmd.append(f"--postgresql-url={pg_url}")
    return cmd
