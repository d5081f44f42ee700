"""YCSB client processes on PKB VMs, with the project's own YCSB MongoDB binding.

The client (site.ycsb:core 0.17.0 plus `java/ycsb-binding`: mongodb-driver-sync 5.x,
`mongodb+srv://`, `mongodb.urlfile`) is built on the PKB host by `javabuild.build()` and
shipped as jars to a private work directory on each VM (`<scratch>/mongobench-ycsb`), never
installed system-wide. Only a Java runtime is needed on the VM: the PKB package
`mongobench_ycsb` (linux_packages/, `vm.Install("mongobench_ycsb")`) adds one through the OS
package manager (PKB runs it only when install_packages is true); `Deploy` checks
`java -version` on every VM and fails clearly when it is missing or too old. This module
installs nothing.

Each YCSB process runs detached in the background with its own files in the run directory
(`<name>.properties`, `.out`, `.err`, `.pid`, `.rc`, `<name>-<OP>.hdr`), so several
processes on one VM never share an output or histogram path, and each is stopped by its own
PID, never by name:

    vm.Install("mongobench_ycsb")
    workdir = ycsb.Deploy(vm)
    procs = ycsb.Start(vm, [ycsb.ProcessSpec("run-0", "run", props)])
    states = ycsb.Wait(vm, procs, timeout_s=600)
    outputs = ycsb.Fetch(vm, procs, local_dir)   # name -> Output
    ycsb.StopAll(vm); ycsb.Remove(vm)            # in Cleanup

Property files are built by `mongobench.ycsb.properties.Workload` (or
`mongobench.stress.run_properties`/`load_properties`); put credentials in a 0600 file
(`mongobench_pkb.vm.PushSecret`) named by `mongodb.urlfile`, never in the properties. For TLS
with a private CA, `PushTlsCa` puts its certificate where `mongodb.tlsCAFile` can name it.
"""

import dataclasses
import logging
import os
import posixpath
import re
import shlex
import tarfile
import tempfile
import threading

from absl import flags
from perfkitbenchmarker import background_tasks, errors, vm_util

from mongobench.remote import javabuild, probes, processes
from mongobench.ycsb import parse
from mongobench.ycsb import properties as ycsb
from mongobench_pkb import engine
from mongobench_pkb import vm as mongobench_vm

WORKDIR_NAME = "mongobench-ycsb"
STOP_SUFFIX = ".stop"  # a run process's stop file (StopFile, RequestStop)
STOP_CHECK_S = 2.0  # how often RunOnClients asks its stop_when (and polls its processes then)
# The project's jars are compiled for Java 17 (java/pom.xml: maven.compiler.release 17).
MIN_JAVA = 17

_JAVA = flags.DEFINE_string(
    "mongobench_java",
    "java",
    "Java launcher on the VMs (a path, for static hosts whose Java is not on PATH).",
)
_JVM_ARGS = flags.DEFINE_list(
    "mongobench_ycsb_jvm_args",
    [],
    "Extra JVM options for every YCSB process (e.g. -Xmx2g).",
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_archive_lock = threading.Lock()
_archives: dict[str, str] = {}


# ----------------------------------------------------------------------------- java


def Java():
    """The Java launcher used on the VMs (--mongobench_java)."""
    return _JAVA.value


def CheckJava(vm, minimum=MIN_JAVA):
    """Major version of `java` on `vm`; a clear error when it is missing or older than
    `minimum`."""
    java = Java()
    _, stderr, rc = vm.RemoteCommandWithReturnCode(
        f"{shlex.quote(java)} -version", ignore_failure=True
    )
    try:
        major = probes.java_major_version(stderr) if rc == 0 else None
    except ValueError:
        major = None
    if major is None or major < minimum:
        found = f"Java {major}" if major else f"no working {java!r}"
        raise errors.Setup.InvalidSetupError(
            f"{vm.name}: Java {minimum} or newer is needed to run the project's jars, found "
            f"{found}. On a static host (install_packages false) install a JRE first, e.g. "
            "apt-get install openjdk-17-jre-headless, or name it with --mongobench_java."
        )
    return major


# ----------------------------------------------------------------------------- shipping


def WorkDir(vm):
    """Our private directory on `vm`: on its scratch disk when it has one."""
    return mongobench_vm.WorkDir(vm, WORKDIR_NAME)


def RunDir(vm):
    """Where the YCSB processes of this run keep their files (emptied by Deploy)."""
    return posixpath.join(WorkDir(vm), "run")


def Classpath(workdir):
    return posixpath.join(workdir, "lib", "*")


def TlsCaPath(vm):
    """Where PushTlsCa puts the CA certificate YCSB trusts (mongodb.tlsCAFile) on `vm`."""
    return posixpath.join(WorkDir(vm), "tls", "ca.pem")


def PushTlsCa(vm, local_path):
    """Copies a CA certificate (public: no secret) to TlsCaPath(vm); returns that path."""
    remote = TlsCaPath(vm)
    vm.RemoteCommand(f"mkdir -p {shlex.quote(posixpath.dirname(remote))}")
    vm.PushFile(local_path, remote)
    return remote


def MakeWorkDir(vm, path):
    """Creates `path` owned by the ssh user (so processes need no root to write there)."""
    mongobench_vm.MakeWorkDir(vm, path)


def WriteRemoteFile(vm, path, text):
    """Writes `text` to `path` on `vm` (not for secrets: the content is in pkb.log)."""
    mongobench_vm.WriteRemoteFile(vm, path, text)


def _LocalArchive(key, files):
    """A tar.gz (cached for the run) holding `files` flat under lib/."""
    with _archive_lock:
        if key in _archives and os.path.exists(_archives[key]):
            return _archives[key]
        fd, path = tempfile.mkstemp(dir=vm_util.GetTempDir(), prefix=f"{key}-", suffix=".tgz")
        os.close(fd)
        with tarfile.open(path, "w:gz") as tar:
            for f in sorted(files):
                tar.add(f, arcname=posixpath.join("lib", os.path.basename(f)))
        _archives[key] = path
        return path


def ShipJars(vm, key, files, remote_dir):
    """Puts the local jar `files` into `remote_dir`/lib on `vm` (replacing what was there)."""
    archive = _LocalArchive(key, files)
    remote = posixpath.join(remote_dir, f"{key}.tgz")
    vm.PushFile(archive, remote)
    q = shlex.quote
    vm.RemoteCommand(
        f"rm -rf {q(remote_dir)}/lib && tar -xzf {q(remote)} -C {q(remote_dir)} && rm -f {q(remote)}"
    )


def CheckPrerequisites():
    """Before any VM exists: the PKB host can build the Java components (Maven, a JDK 17+)
    unless they are built and up to date; the error names each missing tool."""
    try:
        javabuild.check_build_tools()
    except RuntimeError as e:
        raise errors.Setup.InvalidSetupError(f"PKB host: {e}") from None


def _YcsbJars():
    try:
        javabuild.build()
    except RuntimeError as e:
        raise errors.Setup.InvalidSetupError(
            f"cannot build the YCSB client on the PKB host: {e}"
        ) from e
    jars = sorted(str(p) for p in javabuild.ycsb_lib_dir().glob("*.jar"))
    if not jars:
        raise errors.Setup.InvalidSetupError(f"no jars in {javabuild.ycsb_lib_dir()}")
    return jars


def Deploy(vm):
    """Checks Java, ships the YCSB client, empties the run directory; returns the work dir."""
    workdir = WorkDir(vm)
    MakeWorkDir(vm, workdir)
    CheckJava(vm)
    ShipJars(vm, "mongobench-ycsb", _YcsbJars(), workdir)
    run = RunDir(vm)
    StopAll(vm)  # a crashed earlier run on a static host may have left processes
    vm.RemoteCommand(f"rm -rf {shlex.quote(run)} && mkdir -p {shlex.quote(run)}")
    logging.info("YCSB client deployed on %s in %s", vm.name, workdir)
    return workdir


def DiagnosticPaths(vm):
    """The run directory (property files, outputs, exit statuses, histogram logs), for
    Cleanup to keep; not the work directory, which holds the jars and the target's URI."""
    return [RunDir(vm)]


def Remove(vm):
    """Deletes the work directory (jars, property files, outputs)."""
    mongobench_vm.RemoveWorkDir(vm, WORKDIR_NAME)


# ----------------------------------------------------------------------------- processes


@dataclasses.dataclass(frozen=True)
class ProcessSpec:
    """A YCSB process to start: `name` is its file stem (unique in the run), `phase` "load"
    or "run", `properties` the text of its property file."""

    name: str
    phase: str
    properties: str


@dataclasses.dataclass(frozen=True)
class Process:
    """A started YCSB process: where its files are and its PID."""

    vm_name: str
    name: str
    phase: str
    directory: str
    pid: int

    def path(self, suffix):
        return posixpath.join(self.directory, self.name + suffix)

    @property
    def pid_file(self):
        return self.path(".pid")

    @property
    def rc_file(self):
        return self.path(".rc")


@dataclasses.dataclass(frozen=True)
class Output:
    """What a YCSB process left: exit status (None when it vanished without one), stdout
    (the summary), stderr (status lines, errors) and its HdrHistogram logs by operation."""

    name: str
    returncode: int | None
    stdout: str
    stderr: str
    histograms: dict

    @property
    def text(self):
        """stdout then stderr, as mongobench.ycsb.parse_output wants it."""
        return self.stdout + "\n" + self.stderr


def Start(vm, specs, *, directory=None, jvm_args=None):
    """Starts one detached YCSB process per spec on `vm` (all in one ssh command, so they
    start together); returns their Process handles."""
    directory = directory or RunDir(vm)
    jvm = list(_JVM_ARGS.value if jvm_args is None else jvm_args)
    classpath = Classpath(WorkDir(vm))
    names = [s.name for s in specs]
    if len(set(names)) != len(names) or not all(_NAME.fullmatch(n) for n in names):
        raise ValueError(f"process names must be unique plain words: {names}")
    # One ssh command writes every property file and starts every process.
    commands = []
    for spec in specs:
        base = posixpath.join(directory, spec.name)
        commands.append(
            f"printf %s {shlex.quote(spec.properties)} > {shlex.quote(base + '.properties')}"
            f" && rm -f {shlex.quote(base + STOP_SUFFIX)}"  # no stale stop file (RequestStop)
        )
    for spec in specs:
        base = posixpath.join(directory, spec.name)
        argv = ycsb.ycsb_command(classpath, spec.phase, base + ".properties", Java(), jvm)
        commands.append(
            processes.background_command(
                argv,
                processes.Launch(
                    pid_file=base + ".pid",
                    stdout=base + ".out",
                    stderr=base + ".err",
                    rc_file=base + ".rc",
                ),
            )
        )
    stdout, _ = vm.RemoteCommand(" && ".join(commands))
    pids = [int(t) for t in stdout.split()]
    if len(pids) != len(specs):
        raise errors.VirtualMachine.RemoteCommandError(
            f"{vm.name}: expected {len(specs)} YCSB PIDs, got {stdout!r}"
        )
    procs = [
        Process(vm.name, s.name, s.phase, directory, pid)
        for s, pid in zip(specs, pids, strict=True)
    ]
    for p in procs:
        logging.info("mongobench: started YCSB %s pid %d on %s", p.name, p.pid, vm.name)
    return procs


def StopFile(directory, name):
    """The file whose existence ends a run process early (steps.run_properties stop_file)."""
    return posixpath.join(directory, name + STOP_SUFFIX)


def RequestStop(vm, procs):
    """Ends these run processes early, as at their maxexecutiontime: creates their stop
    files (the project's StoppableCoreWorkload then stops its threads; YCSB still prints its
    summary and histograms)."""
    if procs:
        vm.RemoteCommand("touch " + " ".join(shlex.quote(p.path(STOP_SUFFIX)) for p in procs))


def Wait(vm, procs, timeout_s, *, poll_s=None, gone_grace_s=5.0, collected=None):
    """Waits until no process of `procs` runs any more, or `timeout_s` passed, copying their
    status lines (YCSB's -s output on stderr) into pkb.log as they come.

    Polls every `poll_s` (default --mongobench_progress_seconds); the status lines also go to
    `collected[name]` when given. A process that vanished
    without an exit status gets `gone_grace_s` for its status to appear. Returns the final
    states: callers treat `running` (timed out) and `gone` as failures."""
    followed = mongobench_vm.Followed(
        [(p.name, p.pid_file, p.rc_file) for p in procs],
        WorkDir(vm),
        [(p.name, p.path(".err")) for p in procs],
        lambda name: f"YCSB {vm.name}/{name}:",
        keep=parse.is_status_line,  # the rest of stderr is in the fetched .err files
    )
    return mongobench_vm.Follow(
        vm,
        followed,
        poll_s=poll_s or engine.ProgressSeconds(),
        timeout_s=timeout_s,
        gone_grace_s=gone_grace_s,
        collected=collected,
    )


def Stop(vm, procs, timeout_s=30):
    """Stops exactly these processes (SIGTERM, SIGKILL after `timeout_s`), by PID."""
    if procs:
        vm.RemoteCommand(
            processes.stop_processes_command(
                [p.pid_file for p in procs], marker=WorkDir(vm), timeout_s=timeout_s
            )
        )


def StopAll(vm, timeout_s=30):
    """Stops every YCSB process whose PID file is in the work directory (Cleanup)."""
    workdir = WorkDir(vm)
    return mongobench_vm.StopByPidFiles(vm, workdir, marker=workdir, timeout_s=timeout_s)


def Fetch(vm, procs, local_dir):
    """Copies the processes' outputs and histogram logs to `local_dir` (kept for inspection)
    and returns name -> Output. One archive per call, so one scp per VM and step."""
    if not procs:
        return {}
    os.makedirs(local_dir, exist_ok=True)
    directory = procs[0].directory
    if any(p.directory != directory for p in procs):
        raise ValueError("Fetch takes processes of one run directory")
    q = shlex.quote
    archive = posixpath.join(directory, f"fetch-{procs[0].name}.tgz")
    patterns = " ".join(f"{p.name}.out {p.name}.err {p.name}.rc {p.name}-*.hdr" for p in procs)
    vm.RemoteCommand(
        f"cd {q(directory)} && {{ ls -d -- {patterns} 2>/dev/null || true; }}"
        f" | tar -czf {q(archive)} -T -"
    )
    local_archive = os.path.join(local_dir, os.path.basename(archive))
    vm.PullFile(local_archive, archive)
    vm.RemoteCommand(f"rm -f {q(archive)}")
    files = {}
    with tarfile.open(local_archive) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            name = os.path.basename(member.name)
            data = tar.extractfile(member).read().decode(errors="replace")
            files[name] = data
            with open(os.path.join(local_dir, name), "w") as f:
                f.write(data)
    os.remove(local_archive)
    out = {}
    for p in procs:
        rc_text = files.get(p.name + ".rc", "").strip()
        hists = {
            name[len(p.name) + 1 : -len(".hdr")]: text
            for name, text in files.items()
            if name.startswith(p.name + "-") and name.endswith(".hdr")
        }
        out[p.name] = Output(
            p.name,
            int(rc_text) if re.fullmatch(r"-?\d+", rc_text) else None,
            files.get(p.name + ".out", ""),
            files.get(p.name + ".err", ""),
            hists,
        )
    return out


def RunOnClients(
    clients, procs, props, timeout_s, local_dir_of, *, stop_when=None, on_start=None, on_end=None
):
    """Starts the YCSB processes `procs` (each names its client by index in `clients`) with
    the properties `props(process, vm)`, waits for them on every client at once (their status
    lines reaching pkb.log), stops what
    still runs and fetches the outputs into `local_dir_of(vm)`. Returns name ->
    (ProcessState, Output).

    `stop_when(lines)` (name -> the status lines so far, of every process) is asked every
    STOP_CHECK_S while they run; once it returns true, every process is asked to end
    (RequestStop: their properties must name their StopFile). With `stop_when` the clients
    are polled every STOP_CHECK_S too (not --mongobench_progress_seconds, 10 s): the status
    lines reach it, and the processes' end is seen, within seconds.

    `on_start()` is called once, within STOP_CHECK_S of every process having printed a status
    line (its workload has begun: the JVM's start and the binding's set-up are over), unless
    the processes end first; `on_end()` once, as soon as every client's processes have ended
    (or failed), before what still runs is stopped and the outputs are fetched. Readings
    that bracket the run then hold its workload, not seconds of start-up before it or of
    copying after it. The two never overlap, and on_start never comes after on_end; an
    error in on_start is logged, and the run goes on without it."""
    by_client = {}
    for p in procs:
        by_client.setdefault(p.client, []).append(p)
    collected = {}
    started_on = {}
    done = threading.Event()
    running = [len(by_client)]  # clients whose processes may still run
    lock = threading.Lock()
    marks = threading.Lock()  # on_start and on_end: one at a time, on_start first or never
    ended = [False]
    watching = stop_when is not None or on_start is not None
    poll_s = min(engine.ProgressSeconds(), STOP_CHECK_S) if watching else None

    def one(client_index):
        vm = clients[client_index]
        specs = [ProcessSpec(p.stem, p.phase, props(p, vm)) for p in by_client[client_index]]
        started = Start(vm, specs)
        started_on[client_index] = (vm, started)
        try:
            try:
                states = Wait(vm, started, timeout_s, poll_s=poll_s, collected=collected)
            finally:
                with lock:
                    running[0] -= 1
                    last = running[0] == 0
                if last:
                    with marks:
                        ended[0] = True
                        if on_end is not None:
                            on_end()
        finally:
            Stop(vm, started)  # nothing is left running, whatever happened
        outputs = Fetch(vm, started, local_dir_of(vm))
        return {name: (states[name], outputs[name]) for name in states}

    def start_mark():
        with marks:
            if ended[0]:
                return
            try:
                on_start()
            except Exception as e:  # noqa: BLE001 - a reading lost must not end the run
                logging.warning("YCSB run: the call at the workload's start failed: %s", e)

    def watch():
        starting = on_start is not None
        while not done.wait(STOP_CHECK_S):
            lines = {name: list(got) for name, got in list(collected.items())}
            if starting and len(lines) == len(procs) and all(lines.values()):
                starting = False
                start_mark()
            if stop_when is None:
                if not starting:
                    return
                continue
            try:
                stop = stop_when(lines)
            except (ValueError, LookupError, ArithmeticError) as e:  # they run their full time
                logging.warning("YCSB stop check failed, the processes run on: %s", e)
                return
            if stop:
                for vm, started in list(started_on.values()):
                    try:
                        RequestStop(vm, started)
                    except errors.VirtualMachine.RemoteCommandError as e:
                        logging.warning("%s: could not ask YCSB to stop early: %s", vm.name, e)
                return

    watcher = None
    if watching:
        watcher = threading.Thread(target=watch, name="ycsb-stop-when", daemon=True)
        watcher.start()
    merged = {}
    try:
        for part in background_tasks.RunThreaded(one, sorted(by_client)):
            merged.update(part)
    finally:
        done.set()
        if watcher is not None:
            watcher.join()
    return merged
