"""Local test bed: a MongoDB wire-protocol server and an sshd posing as a static VM.

`up()` starts, on loopback only:
  - a real `mongod` when one is on PATH, else the stand-in built from Maven
    Central (mongo-java-server; see java/standin), on a free port;
  - a private sshd (own host key, key-only root login, random port) and
    writes PKB benchmark configs with a static VM for it.
`down()` stops exactly the processes it started (by PID) and removes its
directory. The pieces are also used as pytest fixtures.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import random
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import yaml

from mongobench.core.files import write_private
from mongobench.core.poll import PollTimeout, poll_until
from mongobench.remote import javabuild
from testbed import ferretdb, fresh
from testbed.pids import stop_pid

STATE_FILE = "state.json"


def default_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"mongobench-testbed-{os.getuid()}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(count: int, low: int = 20000, high: int = 32000) -> int:
    """First of `count` consecutive free loopback ports, below Linux's ephemeral range."""

    for _ in range(200):
        first = random.randrange(low, high - count)
        socks = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports in {low}..{high}")


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    def check():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.args[0]} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True, None
        except OSError:
            return False, None

    try:
        poll_until(check, timeout=timeout, interval=0.1)
    except PollTimeout:
        raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s") from None


@dataclass
class Server:
    kind: str
    uri: str
    pid: int
    port: int
    proc: subprocess.Popen | None = None
    pg_datadir: str | None = None  # FerretDB on PostgreSQL: the private cluster's directory

    def stop(self) -> None:
        stop_pid(self.pid)
        if self.pg_datadir:
            ferretdb.stop_postgres(self.pg_datadir)


def start_server(
    workdir: str,
    kind: str = "auto",
    log_name: str = "server.log",
    *,
    users_file: str | None = None,
    tls_pem: str | None = None,
    replset: str | None = None,
    advertise: str | None = None,
    mongos: bool = False,
    config_db: str | None = None,
    tickets: int | None = None,
    ticket_hold_ms: int | None = None,
    dbpath: str | None = None,
) -> Server:
    """A MongoDB server on a free loopback port: mongod if present, else the stand-in.

    ``kind`` ``ferretdb`` / ``ferretdb-postgresql`` start the pinned FerretDB (built from the Go
    module proxy on first use, see testbed.ferretdb) on SQLite or on a private PostgreSQL cluster.

    The keyword options are the stand-in's (see java/standin): ``users_file`` (JSON list of
    ``{"user", "password", "db"}``) turns on SCRAM-SHA-256 authentication, ``tls_pem`` serves
    TLS only with that certificate+key PEM, ``replset`` makes it a simulated replica-set member
    known to the others as ``advertise`` (default ``127.0.0.1:<port>``), ``mongos`` makes it a
    mongos that registers shards but keeps all data itself, checking the config server replica
    set ``config_db`` (``"cfg/h:p,..."``) when given; ``tickets`` admits at most that many
    reads and writes at once (the rest queue; serverStatus reports both as mongod does), each
    holding its ticket at least ``ticket_hold_ms``; ``dbpath`` keeps the store in a data file
    there (read at start, written at a clean stop, see java/standin DataFiles). With any of them ``kind="auto"`` picks the
    stand-in. The returned ``uri`` carries no credentials; it has ``tls=true`` with TLS (add
    ``tlsCAFile``) and ``directConnection=true`` for a replica-set member (an uninitiated member
    is not selectable otherwise).
    """
    os.makedirs(workdir, exist_ok=True)
    standin_only = {
        "users_file": users_file,
        "tls_pem": tls_pem,
        "replset": replset,
        "advertise": advertise,
        "mongos": mongos or None,
        "config_db": config_db,
        "tickets": tickets,
        "ticket_hold_ms": ticket_hold_ms,
        "dbpath": dbpath,
    }
    given = [k for k, v in standin_only.items() if v is not None]
    if advertise is not None and replset is None:
        raise ValueError("advertise needs replset")
    if mongos and replset is not None:
        raise ValueError("mongos and replset exclude each other")
    if config_db is not None and not mongos:
        raise ValueError("config_db needs mongos")
    if kind == "auto":
        kind = "mongod" if shutil.which("mongod") and not given else "standin"
    if kind == "mongod" and given:
        raise ValueError(f"{', '.join(given)}: options of the stand-in only, not of kind='mongod'")
    if kind.startswith("ferretdb") and given:
        raise ValueError(f"{', '.join(given)}: options of the stand-in only, not of kind={kind!r}")
    log = open(os.path.join(workdir, log_name), "ab")
    if kind in SERVER_KINDS[3:]:
        return _start_ferretdb(workdir, kind, log)
    if kind == "mongod":
        if not shutil.which("mongod"):
            raise RuntimeError("--server mongod: no mongod on PATH")
        port = free_port()
        dbpath = os.path.join(workdir, "mongod-data")
        os.makedirs(dbpath, exist_ok=True)
        cmd = ["mongod", "--bind_ip", "127.0.0.1", "--port", str(port), "--dbpath", dbpath]
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        with _stopped_unless_up(proc):
            wait_port(port, 60, proc)
    else:
        extra: list[str] = []
        if users_file is not None:
            extra += ["--users-file", os.fspath(users_file)]
        if tls_pem is not None:
            extra += ["--tls-cert-key-file", os.fspath(tls_pem)]
        if replset is not None:
            extra += ["--replset", replset]
        if advertise is not None:
            extra += ["--advertise", advertise]
        if mongos:
            extra.append("--mongos")
        if config_db is not None:
            extra += ["--config-db", config_db]
        if tickets is not None:
            extra += ["--tickets", str(tickets)]
        if ticket_hold_ms is not None:
            extra += ["--ticket-hold-ms", str(ticket_hold_ms)]
        if dbpath is not None:
            extra += ["--dbpath", os.fspath(dbpath)]
        javabuild.build()
        proc = subprocess.Popen(
            javabuild.standin_command("127.0.0.1", 0, extra_args=extra),
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
        try:
            with _stopped_unless_up(proc):
                port = _read_listening(proc, timeout=60)
        except RuntimeError as exc:  # the reason (bad users file, PEM, port) is on stderr
            log.flush()
            with open(os.path.join(workdir, log_name), errors="replace") as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"{exc}; {log_name}: {tail.strip()}") from None
    options = [o for o, on in (("tls=true", tls_pem), ("directConnection=true", replset)) if on]
    uri = f"mongodb://127.0.0.1:{port}/" + ("?" + "&".join(options) if options else "")
    return Server(kind, uri, proc.pid, port, proc)


@contextlib.contextmanager
def _stopped_unless_up(proc: subprocess.Popen, pg_datadir: str | None = None):
    """A server being started, stopped (with its PostgreSQL) when its wait fails or is
    interrupted: it runs in its own session, so the caller's Ctrl-C never reaches it."""
    try:
        yield
    except BaseException:
        stop_pid(proc.pid)
        if pg_datadir:
            ferretdb.stop_postgres(pg_datadir)
        raise


SERVER_KINDS = ("auto", "mongod", "standin", "ferretdb", "ferretdb-postgresql")


def _start_ferretdb(workdir: str, kind: str, log) -> Server:
    binary = ferretdb.build(log=lambda m: print(m, file=sys.stderr, flush=True))
    backend = "postgresql" if kind == "ferretdb-postgresql" else "sqlite"
    port = free_port()
    pg = None
    if backend == "postgresql":
        pg = ferretdb.start_postgres(free_port(), os.path.join(workdir, "postgresql.log"))
    state_dir = os.path.join(workdir, "ferretdb")
    os.makedirs(state_dir, exist_ok=True)
    cmd = ferretdb.command(binary, port, backend, state_dir, pg.url if pg else "")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    with _stopped_unless_up(proc, pg.datadir if pg else None):
        wait_port(port, 60, proc)
    return Server(kind, f"mongodb://127.0.0.1:{port}/", proc.pid, port, proc, pg and pg.datadir)


def _read_listening(proc: subprocess.Popen, timeout: float) -> int:
    """Port from the stand-in's `LISTENING host:port` line."""

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.time() + timeout
    buf = b""
    while time.time() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.time())):
            break
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
        for line in buf.decode(errors="replace").splitlines():
            if line.startswith("LISTENING "):
                return int(line.rsplit(":", 1)[1])
    stop_pid(proc.pid)
    raise RuntimeError(f"stand-in server did not start (exit {proc.poll()}): {buf[-500:]!r}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


SSHD_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {dir}/ssh_host_ed25519_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
"""


@dataclass
class Sshd:
    pid: int
    port: int
    key: str
    user: str


# What the test bed's static VM needs on this host, and the Debian package of each:
# our sshd and its keys, and what PKB runs on a static VM at boot (`sudo fdisk -l`).
HOST_COMMANDS = {
    "sshd": "openssh-server",
    "ssh-keygen": "openssh-client",
    "sudo": "sudo",
    "fdisk": "fdisk",
}
# sudo's secure_path: PKB's `sudo fdisk` finds sbin tools that a user's PATH may lack.
_SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


class PreflightError(RuntimeError):
    """The host lacks commands the test bed's static VM needs."""


def missing_host_commands(path: str | None = None) -> list[str]:
    """The HOST_COMMANDS not found on `path` (default: PATH plus the sbin directories)."""
    if path is None:
        path = os.pathsep.join([os.environ.get("PATH", os.defpath), *_SBIN_DIRS])
    return [cmd for cmd in HOST_COMMANDS if shutil.which(cmd, path=path) is None]


def preflight(path: str | None = None) -> None:
    """Raises PreflightError, one line naming the missing commands and their packages."""
    missing = missing_host_commands(path)
    if missing:
        packages = " ".join(dict.fromkeys(HOST_COMMANDS[c] for c in missing))
        raise PreflightError(
            f"test bed host lacks {', '.join(missing)} (its sshd static VM, PKB's"
            f" `sudo fdisk -l` at boot); install: apt-get install {packages}"
        )


def start_sshd(workdir: str) -> Sshd:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        raise RuntimeError(
            "sshd not found: install openssh-server (apt-get install openssh-server)"
        )
    d = os.path.join(workdir, "ssh")
    os.makedirs(d, mode=0o700, exist_ok=True)
    for key in ("ssh_host_ed25519_key", "id_ed25519"):
        if not os.path.exists(os.path.join(d, key)):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(d, key)],
                check=True,
            )
    shutil.copy(os.path.join(d, "id_ed25519.pub"), os.path.join(d, "authorized_keys"))
    port = free_port()
    config = os.path.join(d, "sshd_config")
    with open(config, "w") as f:
        f.write(SSHD_CONFIG.format(port=port, dir=d))
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
    log = open(os.path.join(workdir, "sshd.log"), "ab")
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", config], stdout=log, stderr=log, start_new_session=True
    )
    wait_port(port, 20, proc)
    return Sshd(proc.pid, port, os.path.join(d, "id_ed25519"), getpass.getuser())


def static_vm(sshd: Sshd, scratch: str) -> dict:
    """A PKB static VM entry for the test bed's sshd.

    install_packages: false keeps PKB from snapshotting and, at teardown,
    purging/upgrading the host's packages.
    """
    return {
        "ip_address": "127.0.0.1",
        "internal_ip": "127.0.0.1",
        "user_name": sshd.user,
        "ssh_port": sshd.port,
        "ssh_private_key": sshd.key,
        "os_type": "debian12",
        "install_packages": False,
        "disk_specs": [{"mount_point": scratch}],
    }


# Variants the stand-in cannot run (no collMod, no pipeline updates); they fail
# loudly against it, so test-bed configs leave them out.
STANDIN_UNSUPPORTED = "update_fields/50, 500000, validation;update_fields/50, 500000, pipeline"


# mongodb_stress at its smallest: stand-in servers in place of mongod, 3 s steps at a low
# rate, no stress-ng memory hold and no host settings (they would change this machine, or
# on the fresh bed the shared kernel, for every process on it).
STRESS_SMOKE_FLAGS = {
    "mongobench_mongod_server": "standin",
    "mongodb_stress_max_instances": 3,
    "mongodb_stress_records_per_instance": 1000,
    "mongodb_stress_cache_gb": 0.25,
    "mongodb_stress_step_seconds": 3,
    "mongodb_stress_target_ops_per_client": 200,
    "mongodb_stress_run_threads": 2,
    "mongodb_stress_load_threads": 2,
    "mongodb_stress_hold_memory": False,
    "mongodb_stress_host_settings": False,
    "mongodb_stress_drop_caches": False,
}


def pkb_configs(
    workdir: str, sshd: Sshd, uri_file: str, server_kind: str = "standin", client_vms: int = 1
) -> dict[str, str]:
    """Ready PKB benchmark configs using the static VM; returns name -> path. With
    `client_vms` > 1 the perftables config's clients group has that many static VMs: the
    same host, each with its own scratch (work) directory."""
    scratch = os.path.join(workdir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    vm = static_vm(sshd, scratch)
    clients = [vm]
    for i in range(1, client_vms):
        other = os.path.join(workdir, f"scratch-client{i}")
        os.makedirs(other, exist_ok=True)
        clients.append(static_vm(sshd, other))
    perftables = {
        "mongodb_perftables": {
            # PKB takes the first vm_count (default 1) of a group's static VMs.
            "vm_groups": {"clients": {"vm_count": client_vms, "static_vms": clients}},
            "flags": {
                "mongodb_perftables_uri_file": uri_file,
                "mongodb_perftables_scale": "smoke",
                "mongodb_perftables_experiments": "all",
            },
        }
    }
    if server_kind == "standin":  # an empty skip list is refused: none for other servers
        perftables["mongodb_perftables"]["flags"]["mongodb_perftables_skip"] = STANDIN_UNSUPPORTED
    # mongodb_stress at its smallest: both groups on the test bed's static VM (PKB accepts
    # the same static VM in two groups), stand-in servers in place of mongod on a free port
    # block, 3 s steps at a low rate, no stress-ng memory hold and no host settings (they
    # would change this machine for every process on it).
    stress = {
        "mongodb_stress": {
            "vm_groups": {
                # copies, or the YAML would hold an anchor and an alias
                "servers": {"static_vms": [json.loads(json.dumps(vm))]},
                "clients": {"static_vms": [json.loads(json.dumps(vm))]},
            },
            "flags": dict(STRESS_SMOKE_FLAGS, mongodb_stress_first_port=free_port_block(3)),
        }
    }
    paths = {}
    for name, cfg in (("mongodb_perftables", perftables), ("mongodb_stress", stress)):
        path = os.path.join(workdir, f"{name}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f, sort_keys=False)
        paths[name] = path
    return paths


def fresh_vm(machine: dict, key: str) -> dict:
    """A PKB static VM entry for a fresh machine (fresh.up_machines): root over ssh on its
    own address, packages installed by PKB (install_packages true: the image lacks them, and
    PKB's dpkg snapshot and restore at teardown touch only the machine's own root)."""
    return {
        "ip_address": machine["address"],
        "internal_ip": machine["address"],
        "user_name": "root",
        "ssh_port": 22,
        "ssh_private_key": key,
        "os_type": "debian12",
        "install_packages": True,
        "disk_specs": [{"mount_point": fresh.SCRATCH}],
    }


# The plugin installs OS packages on the fresh machines (its own install steps are what the
# fresh bed tests). FRESH_RUN_STAGES skips PKB's teardown, which restores the machine's
# packages (purging what the run installed), so that the next run finds them installed; the
# bed's `down` discards the machines. A run with teardown leaves them as they were.
FRESH_FLAGS = {"mongobench_static_package_changes": True}
FRESH_RUN_STAGES = "--run_stage=provision,prepare,run,cleanup"


def fresh_machine_names(client_vms: int = 1) -> list[str]:
    return ["server", "client"] + [f"client{i}" for i in range(1, client_vms)]


def fresh_configs(workdir: str, state: dict, client_vms: int = 1) -> dict[str, str]:
    """PKB configs on the fresh machines: the server VM runs the stand-in in place of mongod
    (--mongobench_mongod_server=standin), the client VMs the engine."""
    key = state["ssh_key"]
    machines = state["machines"]
    server = [fresh_vm(machines["server"], key)]
    clients = [fresh_vm(machines[n], key) for n in fresh_machine_names(client_vms)[1:]]
    perftables = {
        "mongodb_perftables": {
            "vm_groups": {
                "clients": {"vm_count": client_vms, "static_vms": clients},
                "servers": {"static_vms": server},
            },
            "flags": {
                "mongodb_perftables_deployment": "standalone",
                "mongobench_mongod_server": "standin",
                "mongodb_perftables_scale": "smoke",
                "mongodb_perftables_experiments": "all",
                "mongodb_perftables_skip": STANDIN_UNSUPPORTED,
                **FRESH_FLAGS,
            },
        }
    }
    stress = {
        "mongodb_stress": {
            "vm_groups": {
                "servers": {"static_vms": server},
                "clients": {"static_vms": clients[:1]},
            },
            "flags": dict(
                STRESS_SMOKE_FLAGS,
                **FRESH_FLAGS,
                mongodb_stress_first_port=27017,
                # 3 s steps saw single-digit operations on a loaded 2-core host: YCSB and the
                # stand-in start cold on each machine
                mongodb_stress_step_seconds=10,
            ),
        }
    }
    paths = {}
    for name, cfg in (("mongodb_perftables", perftables), ("mongodb_stress", stress)):
        path = os.path.join(workdir, f"{name}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(json.loads(json.dumps(cfg)), f, sort_keys=False)
        paths[name] = path
    return paths


def _up_fresh(directory: str, client_vms: int, cache_dir: str | None) -> dict:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    state = {"dir": directory, "pids": {}, "fresh": {}}
    try:
        key = _client_key(directory)
        state.update(ssh_key=key, ssh_user="root", server_kind="standin")
        with open(key + ".pub") as f:
            pub = f.read()
        fresh.up_machines(
            directory, fresh_machine_names(client_vms), pub, cache_dir, state["fresh"]
        )
        state["machines"] = state["fresh"]["machines"]
        state["configs"] = fresh_configs(directory, state, client_vms)
    except BaseException:
        _save(directory, state)
        down(directory)
        raise
    _save(directory, state)
    return state


def _client_key(directory: str) -> str:
    d = os.path.join(directory, "ssh")
    os.makedirs(d, mode=0o700, exist_ok=True)
    key = os.path.join(d, "id_ed25519")
    if not os.path.exists(key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    return key


def up(
    directory: str | None = None,
    with_ssh: bool = True,
    server: str = "auto",
    client_vms: int = 1,
    fresh_machines: bool = False,
    cache_dir: str | None = None,
) -> dict:
    """The test bed. fresh_machines: a network namespace, Debian root and sshd per PKB VM
    (see testbed.fresh), no server on this host; else the stand-in (or mongod)
    and one sshd on this host's loopback."""
    directory = os.path.abspath(directory or default_dir())
    existing = _load(directory)
    if existing and (
        any(alive(p) for p in existing.get("pids", {}).values()) or existing.get("fresh")
    ):
        raise RuntimeError(f"test bed already up in {directory}; run 'scripts/testbed down'")
    if fresh_machines:
        fresh.preflight()
        return _up_fresh(directory, client_vms, cache_dir)
    if with_ssh:
        preflight()  # before anything starts: a PKB run would die deep in its log instead
    os.makedirs(directory, mode=0o700, exist_ok=True)
    state = {"dir": directory, "pids": {}}
    try:
        srv = start_server(directory, server)
        state["pids"]["server"] = srv.pid
        state.update(server_kind=srv.kind, uri=srv.uri, server_port=srv.port)
        if srv.pg_datadir:
            state["pg_datadir"] = srv.pg_datadir
        state["skip"] = STANDIN_UNSUPPORTED if srv.kind == "standin" else ""
        uri_file = os.path.join(directory, "uri")
        write_private(uri_file, srv.uri + "\n")
        state["uri_file"] = uri_file
        if with_ssh:
            sshd = start_sshd(directory)
            state["pids"]["sshd"] = sshd.pid
            state.update(ssh_port=sshd.port, ssh_key=sshd.key, ssh_user=sshd.user)
            state["configs"] = pkb_configs(directory, sshd, uri_file, srv.kind, client_vms)
    except BaseException:
        _save(directory, state)
        down(directory)
        raise
    _save(directory, state)
    return state


def down(directory: str | None = None) -> None:
    directory = os.path.abspath(directory or default_dir())
    state = _load(directory)
    if state is None:
        return
    for pid in state.get("pids", {}).values():
        stop_pid(pid)
    if state.get("fresh"):
        fresh.down_machines(directory, state["fresh"])  # raises, keeping the dir, on a mount
    if state.get("pg_datadir"):
        ferretdb.stop_postgres(state["pg_datadir"])
    shutil.rmtree(directory, ignore_errors=True)


def status(directory: str | None = None) -> dict:
    directory = os.path.abspath(directory or default_dir())
    state = _load(directory) or {"dir": directory, "pids": {}}
    state["alive"] = {k: alive(p) for k, p in state.get("pids", {}).items()}
    return state


def public_state(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "pids"} | {"pids": state.get("pids", {})}


def _save(directory: str, state: dict) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, STATE_FILE), "w") as f:
        json.dump(state, f, indent=1)


def _load(directory: str) -> dict | None:
    try:
        with open(os.path.join(directory, STATE_FILE)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
