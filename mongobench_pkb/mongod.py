"""Self-managed mongod instances on PKB server VMs (or the project's stand-in in their place):
deploying, configuring, starting, checking and stopping them, host settings and TLS. What
installs software is the PKB package `mongobench_mongod` (linux_packages/), which PKB runs on
`vm.Install("mongobench_mongod")`; this module installs nothing.

Where mongod comes from (flags --mongobench_*, `InstallMethod()`):
  - "repository" (default): MongoDB's own package repository for the VM's OS (Ubuntu
    22.04/24.04, Debian 12, RHEL 9 and rebuilds), series --mongobench_mongodb_version (8.0; a
    full version such as 8.0.4 pins the packages), installed by the package module; PKB runs
    it only when install_packages is true, so on a static host mongod must already be in
    /usr/bin;
  - "tarball" (--mongobench_mongod_tarball_url): a MongoDB tarball unpacked by `Deploy` into
    the private work directory (works on static hosts; "auto" derives the URL from the OS and
    the full version);
  - "bin_dir" (--mongobench_mongod_bin_dir): binaries already on the host;
  - "standin" (--mongobench_mongod_server=standin): the project's stand-in (mongo-java-server,
    built on the PKB host and shipped like the YCSB client) runs in place of each mongod; a
    test-bed tool that only a source checkout of the plugin (pip install -e) has. It
    speaks the wire protocol but is not MongoDB (no WiredTiger, no cache; replica sets and
    mongos are simulated: membership, initiation and sharding commands, no replication or
    data distribution): its numbers test the plumbing only, and `Server.metadata()` says so
    (`server_kind: standin`).

Instances are identified by index, port and role, each with its own directory under
`<workdir>/instances/mongod-<index>/` (data, log, config, PID file: the layout of
`mongobench.stress.instance_paths`), started detached with a PID file (optionally under a
numactl prefix), checked and stopped by that PID, never by name:

    vm.Install("mongobench_mongod")
    server = mongod.Deploy(vm)
    inst = mongod.NewInstance(server, 0, host=vm.internal_ip, port=27017)
    config = mongod.Config(server, inst, cache_gb=1.0)     # or your own YAML
    mongod.Start(vm, server, inst, config)
    mongod.States(vm, server, [inst])                      # index -> ProcessState
    mongod.Stop(vm, server, [inst])
    mongod.StopAll(vm); mongod.Remove(vm)                  # in Cleanup

Roles: "mongod" (standalone), "shardsvr"/"configsvr" (need `replset`) and "mongos" (needs
`config_db` in Config); replica-set initiation and sharding commands are the caller's
(mongobench.deploy.topology and .placement plan them). Host settings (THP per version,
swappiness, zone_reclaim_mode, readahead) are recorded once, applied, and restored from the
record by `RestoreHostSettings`.
"""

import dataclasses
import logging
import os
import pathlib
import posixpath
import shlex

from absl import flags
from perfkitbenchmarker import background_tasks, errors

from mongobench.deploy import hostsettings, install, mongod, platforms
from mongobench.remote import diagnostics, javabuild, probes, processes, tlscerts
from mongobench_pkb import vm as mongobench_vm
from mongobench_pkb import ycsb as mongobench_ycsb

WORKDIR_NAME = "mongobench-mongod"
ROLES = ("mongod", "shardsvr", "configsvr", "mongos")
STANDIN_DESCRIPTION = "stand-in (mongo-java-server 1.47.0), not MongoDB"
SERVER_KINDS = ("mongod", "standin")
FLAGS = flags.FLAGS

flags.DEFINE_string(
    "mongobench_mongodb_version",
    "8.0",
    "MongoDB series (8.0, 7.0, 6.0) or full version (8.0.4, pins the packages) to install"
    " from MongoDB's repositories; also the version mongod configs are validated for. When"
    " only PKB's own --mongodb_version is set, that one is used; both set must agree.",
)
_SERVER = flags.DEFINE_enum(
    "mongobench_mongod_server",
    "mongod",
    SERVER_KINDS,
    "What runs as each instance: mongod, or the project's stand-in server (mongo-java-server;"
    " for test beds without MongoDB: not MongoDB numbers, and samples say server_kind: standin).",
)
_TARBALL_URL = flags.DEFINE_string(
    "mongobench_mongod_tarball_url",
    None,
    "Install mongod from this MongoDB tarball into the private work directory (also on static"
    ' hosts); "auto" derives the fastdl.mongodb.org URL from the OS and'
    " --mongobench_mongodb_version, which must then be a full version (8.0.4).",
)
_BIN_DIR = flags.DEFINE_string(
    "mongobench_mongod_bin_dir",
    None,
    "Directory on the server holding preinstalled mongod/mongos binaries (static hosts).",
)
_START_TIMEOUT = flags.DEFINE_integer(
    "mongobench_mongod_start_timeout",
    300,
    "Seconds to wait for an instance to accept connections.",
    lower_bound=1,
)
_READAHEAD = flags.DEFINE_integer(
    "mongobench_mongod_readahead_sectors",
    8,
    "Readahead (512-byte sectors) of the data disk when host settings are applied (the"
    " production notes' 8..32 for WiredTiger).",
    lower_bound=0,
)


# ----------------------------------------------------------------------------- checks


def MongodbVersion():
    """The MongoDB version to install: --mongobench_mongodb_version, or PKB's own
    --mongodb_version when only that one was set (on the command line or in the config's
    flags); both set to different versions: InvalidValue. CheckPrerequisites calls it."""
    ours = FLAGS["mongobench_mongodb_version"]
    pkbs = FLAGS["mongodb_version"] if "mongodb_version" in FLAGS else None
    try:
        return install.chosen_version(
            ours.value,
            bool(ours.present),
            None if pkbs is None else pkbs.value,
            pkbs is not None and bool(pkbs.present),
        )
    except ValueError as e:
        raise errors.Config.InvalidValue(str(e)) from None


def InstallMethod():
    """Where mongod comes from: "standin", "tarball", "bin_dir" or "repository"."""
    if _SERVER.value == "standin":
        return "standin"
    if _TARBALL_URL.value:
        return "tarball"
    return "bin_dir" if _BIN_DIR.value else "repository"


def CheckPrerequisites(benchmark_config=None, group_name="servers"):
    """Before any VM exists: the version flags agree (MongodbVersion); for the stand-in, the
    PKB host can build it and has its sources (a source checkout: an installed wheel has no
    stand-in); otherwise the servers' OS, release and architecture (when PKB
    tells it from the machine type) have MongoDB packages of that version
    (mongobench.deploy.platforms). Not checked: preinstalled binaries, a tarball URL given
    in full, static VMs that install nothing."""
    version = MongodbVersion()
    if _SERVER.value == "standin":
        mongobench_ycsb.CheckPrerequisites()
        if not javabuild.has_standin():
            raise errors.Config.InvalidValue(
                f"--mongobench_mongod_server=standin: {javabuild.NO_STANDIN}"
            )
        return
    if benchmark_config is None or _BIN_DIR.value or _TARBALL_URL.value not in (None, "auto"):
        return
    for os_type, arch, installs in mongobench_vm.GroupPlatforms(benchmark_config, group_name):
        if not installs and not _TARBALL_URL.value:
            continue  # a static host with its own mongod in /usr/bin (checked at Deploy)
        flag = "--mongobench_mongodb_version"
        ours = FLAGS["mongobench_mongodb_version"]
        if not ours.present and version != ours.value:
            flag = "--mongodb_version"  # PKB's own flag chose it
        try:
            platforms.check_pkb_server(os_type, version, arch, flag)
        except platforms.UnsupportedPlatform as e:
            raise errors.Config.InvalidValue(f"{group_name}: {e}") from None


def Platform(vm):
    """The VM's OS family, release and architecture (mongobench.deploy.install.Platform)."""
    out, _ = vm.RemoteCommand("cat /etc/os-release; echo ---; uname -m")
    os_release, _, arch = out.partition("---")
    try:
        return install.platform_from_os_release(os_release, arch.strip())
    except install.UnsupportedPlatform as e:
        raise errors.Setup.InvalidSetupError(f"{vm.name}: {e}") from e


# ----------------------------------------------------------------------------- deploy


@dataclasses.dataclass(frozen=True)
class Server:
    """What Deploy set up on one VM: the kind of server, where its binaries are, its version
    as reported by the binary, and the version configs are validated for."""

    vm_name: str
    kind: str  # mongod | standin
    workdir: str
    bin_dir: str | None
    version: str
    config_version: str
    run_as: str

    @property
    def instances_dir(self):
        return posixpath.join(self.workdir, "instances")

    @property
    def persistent(self):
        """Whether an instance keeps its data across a restart (the stand-in keeps it in
        memory: stopping it loses the data)."""
        return self.kind == "mongod"

    def metadata(self):
        meta = {"server_kind": self.kind, "mongodb_version": self.version}
        if self.kind == "standin":
            meta["server_warning"] = (
                "instances were the project's stand-in server (mongo-java-server), not mongod:"
                " these numbers test the benchmark's plumbing, they are not MongoDB numbers"
            )
        else:
            meta["mongod_install"] = InstallMethod()
        return meta


def WorkDir(vm):
    return mongobench_vm.WorkDir(vm, WORKDIR_NAME)


def _BinDir(vm):
    if _TARBALL_URL.value:
        return posixpath.join(WorkDir(vm), "mongodb", "bin")
    return (_BIN_DIR.value or "/usr/bin").rstrip("/")


def Version(vm, server=None):
    """The server's version: `mongod --version` of the binaries in use, or the stand-in's
    description."""
    if server is not None:
        return server.version
    if _SERVER.value == "standin":
        return STANDIN_DESCRIPTION
    out, _, rc = vm.RemoteCommandWithReturnCode(
        install.bin_dir_check_command(_BinDir(vm)), ignore_failure=True
    )
    if rc:
        raise errors.Setup.InvalidSetupError(
            f"{vm.name}: no mongod in {_BinDir(vm)}. On a static host (install_packages false)"
            " install MongoDB first, or use --mongobench_mongod_tarball_url or"
            " --mongobench_mongod_bin_dir (or --mongobench_mongod_server=standin for a test bed)."
        )
    try:
        return install.version_from_output(out)
    except ValueError as e:
        raise errors.Setup.InvalidSetupError(f"{vm.name}: {e}: {out[:300]!r}") from e


def _DeployTarball(vm):
    url = _TARBALL_URL.value
    if url == "auto":
        plat = Platform(vm)
        try:
            url = install.tarball_url(MongodbVersion(), plat.family, plat.release, plat.arch)
        except (ValueError, install.UnsupportedPlatform) as e:
            raise errors.Setup.InvalidSetupError(f"{vm.name}: {e}") from e
    _, _, rc = vm.RemoteCommandWithReturnCode(
        "command -v curl && command -v tar", ignore_failure=True
    )
    if rc:
        raise errors.Setup.InvalidSetupError(f"{vm.name}: curl and tar are needed for the tarball")
    for cmd in install.tarball_install_commands(url, posixpath.join(WorkDir(vm), "mongodb")):
        vm.RemoteCommand(cmd)


def _DeployStandin(vm, workdir):
    mongobench_ycsb.CheckJava(vm)
    try:
        javabuild.build()
        lib_glob, jar = javabuild.standin_classpath().split(os.pathsep)
    except RuntimeError as e:
        raise errors.Setup.InvalidSetupError(f"cannot build the stand-in server: {e}") from e
    jars = sorted(str(p) for p in pathlib.Path(lib_glob).parent.glob("*.jar"))
    mongobench_ycsb.ShipJars(
        vm, "mongobench-standin", [*jars, jar], posixpath.join(workdir, "standin")
    )


def Deploy(vm):
    """Prepares the server VM: work directory, binaries (tarball) or the stand-in, version
    check. Returns a Server."""
    workdir = WorkDir(vm)
    mongobench_ycsb.MakeWorkDir(vm, workdir)
    StopAll(vm)  # a crashed earlier run on a static host may have left instances
    if _SERVER.value == "standin":
        mongobench_ycsb.MakeWorkDir(vm, posixpath.join(workdir, "standin"))
        _DeployStandin(vm, workdir)
        bin_dir, version = None, STANDIN_DESCRIPTION
    else:
        if _TARBALL_URL.value:
            _DeployTarball(vm)
        bin_dir, version = _BinDir(vm), Version(vm)
    config_version = version if _SERVER.value == "mongod" else MongodbVersion()
    server = Server(vm.name, _SERVER.value, workdir, bin_dir, version, config_version, vm.user_name)
    vm.RemoteCommand(f"mkdir -p {shlex.quote(server.instances_dir)}")
    logging.info("mongobench: %s %s ready on %s in %s", server.kind, version, vm.name, workdir)
    return server


# ----------------------------------------------------------------------------- instances


@dataclasses.dataclass(frozen=True)
class Instance:
    """One server process on a VM: index (its directory), port, role, the address clients
    use and the address(es) it binds; `tls_pem` the server's certificate-key PEM on the VM
    when it serves TLS only (requireTLS)."""

    index: int
    port: int
    host: str
    bind_ip: str
    role: str
    replset: str | None
    paths: mongod.InstancePaths
    tls_pem: str | None = None

    @property
    def name(self):
        return f"mongod-{self.index}"

    def uri(self, database="ycsb", options=""):
        return f"mongodb://{self.host}:{self.port}/{database}" + (f"?{options}" if options else "")


def NewInstance(
    server, index, *, host, bind_ip=None, port=None, role="mongod", replset=None, tls_pem=None
):
    """Instance `index` on `server`: port `port` (default mongobench.deploy.mongod.
    instance_port(index): FIRST_PORT + index), bound to `bind_ip` (default `host`), serving
    TLS only with the PEM `tls_pem` (on the VM) if given."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    if role in ("shardsvr", "configsvr") and not replset:
        raise ValueError(f"a {role} must be a replica set member (replset)")
    return Instance(
        index=index,
        port=mongod.instance_port(index) if port is None else int(port),
        host=host,
        bind_ip=bind_ip or host,
        role=role,
        replset=replset,
        paths=mongod.instance_paths(index, server.instances_dir),
        tls_pem=tls_pem,
    )


def Config(server, inst, *, cache_gb=None, config_db=None, extra=None):
    """The YAML config of `inst` for the server's version (mongobench.deploy.mongod.
    instance_config): its port, bind address, role, data directory, log, WiredTiger cache,
    and net.tls (requireTLS) when the instance has a TLS PEM."""
    options = mongod.InstanceOptions(
        cache_gb=cache_gb,
        bind_ip=inst.bind_ip,
        role=inst.role,
        replset=inst.replset,
        config_db=config_db,
        tls_certificate_key_file=inst.tls_pem,
        extra=extra,
    )
    return mongod.instance_config(
        inst.index,
        options,
        base_dir=server.instances_dir,
        version=server.config_version,
        port=inst.port,
    )


def _Marker(server):
    return server.workdir


def _StandinArgv(server, inst, data_files=False):
    # the stand-in binds one address: all of them when several are asked for
    bind = inst.bind_ip if "," not in inst.bind_ip else "0.0.0.0"
    argv = [
        mongobench_ycsb.Java(),
        "-cp",
        posixpath.join(server.workdir, "standin", "lib", "*"),
        javabuild.STANDIN_MAIN_CLASS,
        "--host",
        bind,
        "--port",
        str(inst.port),
    ]
    if inst.role == "mongos":  # a router that keeps the data itself (no distribution)
        argv += ["--mongos"]
    elif inst.replset:
        argv += ["--replset", inst.replset]
    if inst.tls_pem:  # the stand-in takes no config file: TLS comes as an option
        argv += ["--tls-cert-key-file", inst.tls_pem]
    if data_files:  # its store in a data file in dbPath, written at a clean stop
        argv += ["--dbpath", inst.paths.dbpath]
    return argv


def Start(vm, server, inst, config_text, *, numactl=(), timeout_s=None, data_files=False):
    """Writes the config, starts the instance detached with its PID file, waits until it
    accepts connections on inst.host:inst.port. Returns its PID. A clear error with the end
    of its log when it exits or does not listen in time. `data_files`: the stand-in keeps its
    store in a data file in its dbPath too (read at start, written at a clean stop), as mongod
    always does, so its dbPath can be copied to another instance."""
    q = shlex.quote
    p = inst.paths
    vm.RemoteCommand(f"mkdir -p {q(p.dbpath)}")
    mongobench_ycsb.WriteRemoteFile(vm, p.config, config_text)
    if server.kind == "standin":
        argv = _StandinArgv(server, inst, data_files)
        cmd = processes.background_command(
            argv, processes.Launch(pid_file=p.pid_file, stdout=p.stdout)
        )
    else:
        binary = "mongos" if inst.role == "mongos" else "mongod"
        cmd = mongod.start_command(
            posixpath.join(server.bin_dir, binary),
            p,
            version=server.config_version,
            numactl=list(numactl),
            run_as=server.run_as,
        )
    stdout, stderr = vm.RemoteCommand(cmd)
    pid = int(stdout.split()[-1])
    if stderr.strip():  # e.g. a limit the host does not let even root raise
        logging.warning("%s: %s %s: %s", vm.name, server.kind, inst.name, stderr.strip())
    logging.info(
        "mongobench: started %s %s (%s) pid %d port %d on %s",
        server.kind,
        inst.name,
        inst.role,
        pid,
        inst.port,
        vm.name,
    )
    timeout = timeout_s or _START_TIMEOUT.value
    _, stderr, rc = vm.RemoteCommandWithReturnCode(
        processes.wait_ready_command(
            p.pid_file, inst.host, inst.port, marker=_Marker(server), timeout_s=timeout
        ),
        ignore_failure=True,
    )
    if rc:
        raise errors.Benchmarks.RunError(
            f"{vm.name}: {server.kind} {inst.name} (port {inst.port}) did not start:"
            f" {stderr.strip()}\n{_Tail(vm, inst)}"
        )
    return pid


def Limits(vm, inst):
    """The running instance's soft limits: {'nofile': ..., 'nproc': ...} (/proc/PID/limits)."""
    out, _, rc = vm.RemoteCommandWithReturnCode(
        probes.process_limits_command(inst.paths.pid_file), ignore_failure=True
    )
    return probes.parse_process_limits(out) if not rc else {}


def CheckAllocator(vm, server, inst, metadata):
    """Verifies what the running instance's allocator got (MongoDB 8.0+: GLIBC_TUNABLES with
    glibc.pthread.rseq=0 on glibc >= 2.35, read from its /proc environment) and records it
    in `metadata`; a missing tunable makes host_settings_as_recommended False."""
    if server.kind != "mongod":
        return metadata
    out, _, rc = vm.RemoteCommandWithReturnCode(
        hostsettings.tcmalloc_readings_command(inst.paths.pid_file), ignore_failure=True
    )
    readings = hostsettings.parse_settings(out) if not rc else {}
    tcmalloc = hostsettings.tcmalloc_metadata(readings, server.config_version)
    if tcmalloc.get("tcmalloc_deviation"):
        logging.warning(
            "%s: %s %s: %s", vm.name, server.kind, inst.name, tcmalloc["tcmalloc_deviation"]
        )
    return hostsettings.merge_tcmalloc(metadata, tcmalloc)


def _Tail(vm, inst, lines=20):
    q = shlex.quote
    out, _ = vm.RemoteCommand(
        f"tail -n {int(lines)} {q(inst.paths.stdout)} {q(inst.paths.log)} 2>/dev/null; true",
        ignore_failure=True,
    )
    return out.strip()


def States(vm, server, instances):
    """index -> mongobench.stress.ProcessState of each instance (running PID or gone)."""
    entries = [(inst.name, inst.paths.pid_file, None) for inst in instances]
    states = mongobench_vm.RemoteStates(vm, entries, _Marker(server))
    return {i.index: states[i.name] for i in instances}


def DeadInstances(vm, server, instances):
    """index -> reason (with the end of its log) for every instance that is not running."""
    states = States(vm, server, instances)
    by_index = {i.index: i for i in instances}
    return {
        index: "not running; log ends: " + _Tail(vm, by_index[index], 5)[-500:]
        for index, state in states.items()
        if not state.running
    }


def Stop(vm, server, instances, timeout_s=120):
    """Clean shutdown (SIGTERM, SIGKILL after `timeout_s`) of exactly these instances."""
    if instances:
        vm.RemoteCommand(
            processes.stop_processes_command(
                [i.paths.pid_file for i in instances],
                marker=_Marker(server),
                timeout_s=timeout_s,
                sudo=True,
            )
        )


def StopAll(vm, timeout_s=120):
    """Stops every instance whose PID file is in the work directory (Cleanup)."""
    workdir = WorkDir(vm)
    instances = posixpath.join(workdir, "instances")
    return mongobench_vm.StopByPidFiles(
        vm, instances, marker=workdir, timeout_s=timeout_s, sudo=True
    )


def RemoveData(vm, server=None, instances=None):
    """Deletes the directories (data, logs, configs) of `instances`, or of all instances."""
    q = shlex.quote
    if instances is None:
        targets = [posixpath.join(WorkDir(vm), "instances")]
    else:
        targets = [i.paths.root for i in instances]
    vm.RemoteCommand("sudo rm -rf " + " ".join(q(t) for t in targets))


def DiagnosticPaths(vm):
    """Every instance's log, stdout, config and diagnostic.data (FTDC), for Cleanup to keep."""
    return diagnostics.mongod_patterns(posixpath.join(WorkDir(vm), "instances"))


def Remove(vm):
    """Deletes the whole work directory (binaries from a tarball, the stand-in, records)."""
    mongobench_vm.RemoveWorkDir(vm, WORKDIR_NAME)


# ----------------------------------------------------------------------------- host settings


def _SettingsFile(vm):
    return posixpath.join(WorkDir(vm), "host-settings.orig")


def ApplyHostSettings(vm, server, data_dir):
    """Records the host's values once (a re-run never records our own values as the
    originals), applies the production-notes settings for the server's version, and returns
    sample metadata: the values now in force and any deviation (a knob the kernel refused)."""
    state = _SettingsFile(vm)
    vm.RemoteCommand(hostsettings.record_settings_command(state, data_dir))
    recorded, _ = vm.RemoteCommand(f"cat {shlex.quote(state)}")
    readings = hostsettings.parse_settings(recorded)
    for cmd in hostsettings.apply_settings_commands(
        server.config_version,
        readahead_sectors=_READAHEAD.value,
        data_device=readings.get("readahead_device"),
    ):
        _, stderr, rc = vm.RemoteCommandWithReturnCode(cmd, ignore_failure=True)
        if rc:
            logging.warning("%s: host setting not applied: %s: %s", vm.name, cmd, stderr.strip())
    now, _ = vm.RemoteCommand(hostsettings.read_settings_command(data_dir))
    meta = hostsettings.host_settings_metadata(
        hostsettings.parse_settings(now), server.config_version
    )
    meta["host_settings_applied"] = True
    return meta


def DataFilesystem(vm, server, data_dir):
    """The filesystem under `data_dir` as sample metadata (data_fs_type, and a warning that
    is also logged when it is not XFS)."""
    if server.kind != "mongod":
        return {}
    out, _, rc = vm.RemoteCommandWithReturnCode(
        hostsettings.data_filesystem_command(data_dir), ignore_failure=True
    )
    meta = hostsettings.data_filesystem_metadata(out if not rc else "")
    if "data_fs_warning" in meta:
        logging.warning("%s: %s", vm.name, meta["data_fs_warning"])
    return meta


def RestoreHostSettings(vm):
    """Puts back the values recorded by ApplyHostSettings; True when there was a record."""
    state = _SettingsFile(vm)
    out, _, rc = vm.RemoteCommandWithReturnCode(f"cat {shlex.quote(state)}", ignore_failure=True)
    if rc:
        return False
    for cmd in hostsettings.restore_settings_commands(hostsettings.parse_settings(out)):
        vm.RemoteCommand(cmd, ignore_failure=True)
    vm.RemoteCommand(f"sudo rm -f {shlex.quote(state)}", ignore_failure=True)
    logging.info("%s: host settings restored", vm.name)
    return True


def SetUpTls(server_vm, client_vms, server, hosts, local_dir):
    """Makes the run's CA and server certificate (for every address in `hosts`) in
    `local_dir` on the PKB host, puts the server's PEM on the server VM (0600, through a
    file: key material is never on a command line) and the CA certificate on every client
    VM. Returns the PEM's path on the server and sample metadata."""
    try:
        material = tlscerts.generate(local_dir, hosts)
    except (RuntimeError, ValueError) as e:
        raise errors.Setup.InvalidSetupError(f"TLS certificates: {e}") from e
    remote_pem = posixpath.join(server.workdir, "tls", tlscerts.SERVER_PEM)
    q = shlex.quote(posixpath.dirname(remote_pem))
    server_vm.RemoteCommand(f"mkdir -p {q} && chmod 700 {q}")
    with open(material.server_pem) as f:
        mongobench_vm.PushSecret(server_vm, remote_pem, f.read())
    os.remove(material.server_pem)  # the VM has it; the CA's key is gone already
    background_tasks.RunThreaded(
        lambda vm: mongobench_ycsb.PushTlsCa(vm, material.ca_cert), client_vms
    )
    logging.info("mongod TLS certificate for %s", ",".join(hosts))
    return remote_pem, {"tls_mode": "requireTLS", **material.metadata()}
