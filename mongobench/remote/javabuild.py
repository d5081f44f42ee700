"""Build and locate the project's Java components: the YCSB binding and the MongoDB stand-in.

Stdlib only and free of PerfKitBenchmarker imports, so tests and tools can use it directly.

Where the Maven sources are: a source checkout (and `pip install -e`) has them in
`java/` next to the package; a wheel ships the YCSB binding's inside the package
(`mongobench/java`, copied there by setup.py). The stand-in is a development tool: only a
checkout has it (`has_standin()`). Maven builds in place in a writable checkout; otherwise in a
per-user cache copy named by the sources' digest, so installed package files are never
modified and installs of different versions do not share outputs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]  # the mongobench package
SHIPPED_SOURCES = PACKAGE_DIR / "java"
CHECKOUT_SOURCES = PACKAGE_DIR.parent / "java"
# Replaces the per-user cache (~/.cache/mongobench) as the parent of build copies.
BUILD_DIR_ENV = "MONGOBENCH_JAVA_BUILD_DIR"

STANDIN_MAIN_CLASS = "io.github.mongobench.standin.StandinServer"
YCSB_CLIENT_CLASS = "site.ycsb.Client"
YCSB_BINDING_CLASS = "io.github.mongobench.ycsb.MongoDbClient"

YCSB_MODULE = "ycsb-binding"  # every install has it: the sweep and the perftables runs need it
STANDIN_MODULE = "standin"  # a source checkout only (a test bed's server; setup.py leaves it out)
NO_STANDIN = (
    "the stand-in comes only with a source checkout of mongobench-pkb (pip install -e <checkout>,"
    " docs/standin.md); this installed package ships the YCSB binding alone"
)
_MVN_ARGS = ("-B", "-q", "-Dstyle.color=never", "package", "-DskipTests")
_OUTPUT_TAIL_LINES = 60


def _has_sources(root: pathlib.Path) -> bool:
    return all((root / m / "pom.xml").is_file() for m in ("", YCSB_MODULE))


def _modules(root: pathlib.Path) -> tuple[str, ...]:
    """The modules whose sources `root` holds: the YCSB binding, and the stand-in in a checkout."""
    has_standin = (root / STANDIN_MODULE / "pom.xml").is_file()
    return (STANDIN_MODULE, YCSB_MODULE) if has_standin else (YCSB_MODULE,)


def source_dir() -> pathlib.Path:
    """The directory holding the Maven sources (parent pom.xml, ycsb-binding/, maybe standin/)."""
    for root in (SHIPPED_SOURCES, CHECKOUT_SOURCES):
        if _has_sources(root):
            return root
    raise RuntimeError(
        f"the Java sources of mongobench are neither in {SHIPPED_SOURCES} (installed package)"
        f" nor in {CHECKOUT_SOURCES} (source checkout); reinstall the package with"
        " `pip install <repository or its wheel/sdist>` (a wheel built by its setup.py ships them)"
    )


def has_standin() -> bool:
    """True when the stand-in's sources are here: a source checkout, never an installed wheel."""
    return STANDIN_MODULE in _modules(source_dir())


def _source_files(root: pathlib.Path) -> Iterator[pathlib.Path]:
    """The build's inputs under `root`: every pom.xml and every file under a module's src/."""
    yield root / "pom.xml"
    for module in _modules(root):
        yield root / module / "pom.xml"
        src = root / module / "src"
        if src.is_dir():
            yield from sorted(p for p in src.rglob("*") if p.is_file())


def _sources_digest(root: pathlib.Path) -> str:
    h = hashlib.sha256()
    for path in _source_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _writable(root: pathlib.Path) -> bool:
    return all(os.access(d, os.W_OK) for d in (root, *(root / m for m in _modules(root))))


def cache_root() -> pathlib.Path:
    override = os.environ.get(BUILD_DIR_ENV)
    if override:
        return pathlib.Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache") / "mongobench"


def java_dir() -> pathlib.Path:
    """Where Maven builds (and the jars are): the checkout's java/ when writable, else a cache copy."""
    src = source_dir()
    if src == CHECKOUT_SOURCES and _writable(src):
        return src
    return cache_root() / f"java-{_sources_digest(src)}"


def __getattr__(name: str) -> pathlib.Path:
    # JAVA_DIR is computed on use: it reads the sources, which a client VM's copy lacks.
    if name == "JAVA_DIR":
        return java_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _sync_sources(src: pathlib.Path, dest: pathlib.Path) -> None:
    """Copies the build inputs of `src` that `dest` lacks or has different (fresh mtimes)."""
    if src == dest:
        return
    for path in _source_files(src):
        target = dest / path.relative_to(src)
        if target.is_file() and target.read_bytes() == path.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        shutil.copyfile(path, tmp)
        os.replace(tmp, target)


def _lib_dir(module: str) -> pathlib.Path:
    return java_dir() / module / "target" / "lib"


def ycsb_lib_dir() -> pathlib.Path:
    """Directory holding every runtime jar of a YCSB client, the binding's own jar included."""
    return _lib_dir("ycsb-binding")


def _outputs_mtime(jdir: pathlib.Path) -> float | None:
    """Oldest build stamp over the modules, or None when a module has no jars yet."""
    stamps = []
    for module in _modules(jdir):
        lib = jdir / module / "target" / "lib"
        jars = list(lib.glob("*.jar")) if lib.is_dir() else []
        if not jars:
            return None
        stamps.append(max([lib.stat().st_mtime, *(j.stat().st_mtime for j in jars)]))
    return min(stamps)


def _up_to_date(jdir: pathlib.Path) -> bool:
    built = _outputs_mtime(jdir)
    if built is None or not _has_sources(jdir):
        return False
    return all(p.stat().st_mtime <= built for p in _source_files(jdir))


def is_up_to_date() -> bool:
    """True when the lib dirs exist and are newer than every pom.xml and source file."""
    return _up_to_date(java_dir())


@contextlib.contextmanager
def _build_lock(jdir: pathlib.Path) -> Iterator[None]:
    # Parallel test workers may all call build(); let one run Maven, the others then see it fresh.
    # target/ is ignored by git, and the build itself only ever empties target/lib.
    lock_dir = jdir / YCSB_MODULE / "target"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(
            f"cannot create the Java build directory {jdir} ({exc.strerror}); set"
            f" {BUILD_DIR_ENV} to a writable directory"
        ) from exc
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, Maven copes with most overlaps anyway
        yield
        return
    with open(lock_dir / ".javabuild.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


MIN_JDK = 17  # java/pom.xml: maven.compiler.release 17


def _jdk_major(javac: str) -> int | None:
    """The major version `javac -version` prints ("javac 17.0.9", "javac 1.8.0_392")."""
    try:
        out = subprocess.run(
            [javac, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = (out.stdout + out.stderr).split()
    if len(words) < 2 or words[0] != "javac":
        return None
    parts = words[1].split(".")
    try:
        return int(parts[1] if parts[0] == "1" and len(parts) > 1 else parts[0])
    except ValueError:
        return None


def missing_build_tools() -> list[str]:
    """What this host lacks to build the Java components: Maven and a JDK 17+ (javac)."""
    missing = []
    if shutil.which("mvn") is None:
        missing.append("Maven ('mvn' is not on PATH; Debian: apt-get install maven)")
    javac = shutil.which("javac")
    major = _jdk_major(javac) if javac else None
    if javac is None or major is None or major < MIN_JDK:
        found = "'javac' is not on PATH" if javac is None else f"{javac}: JDK {major or '?'}"
        missing.append(
            f"a JDK {MIN_JDK} or newer ({found}; Debian: apt-get install openjdk-17-jdk-headless)"
        )
    return missing


def check_build_tools() -> None:
    """Raises RuntimeError (one line naming each missing tool) when the Java components are
    not built and up to date and this host cannot build them. The benchmarks call it before
    any VM exists (CheckPrerequisites), build() again before it builds."""
    jdir = java_dir()
    if _up_to_date(jdir):
        return
    missing = missing_build_tools()
    if missing:
        raise RuntimeError(f"building the Java components in {jdir} needs {' and '.join(missing)}")


def _require_tools(jdir: pathlib.Path) -> str:
    missing = missing_build_tools()
    if missing:
        raise RuntimeError(f"building the Java components in {jdir} needs {' and '.join(missing)}")
    return shutil.which("mvn")


def build(force: bool = False, *, timeout: float | None = 1800) -> None:
    """Run ``mvn package`` in java_dir() unless its outputs are newer than its inputs.

    Raises RuntimeError with the tail of Maven's output when the build fails.
    """
    src = source_dir()
    jdir = java_dir()
    if not force and _up_to_date(jdir):
        return
    mvn = _require_tools(jdir)
    with _build_lock(jdir):
        _sync_sources(src, jdir)
        if not force and _up_to_date(jdir):
            return
        # Without the stand-in the parent pom names a module that is not there: build the
        # binding's pom alone (Maven finds the parent by its relativePath).
        only = () if STANDIN_MODULE in _modules(jdir) else ("-f", f"{YCSB_MODULE}/pom.xml")
        try:
            proc = subprocess.run(
                [mvn, *_MVN_ARGS, *only],
                cwd=jdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"mvn package in {jdir} timed out after {timeout} s") from exc
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.splitlines()[-_OUTPUT_TAIL_LINES:])
            raise RuntimeError(
                f"mvn package failed in {jdir} (exit {proc.returncode}); output tail:\n{tail}"
            )
        # Maven may leave unchanged jars with old mtimes; stamp the outputs as fresh.
        for module in _modules(jdir):
            os.utime(jdir / module / "target" / "lib")


def ensure_built(log=print) -> None:
    """Builds on first use (or after the sources changed), with a line saying so first: an
    installed package's CLI builds the Java parts itself, as the PKB path does."""
    if is_up_to_date():
        return
    log(
        f"mongobench: building the Java components ({', '.join(_modules(source_dir()))}) with"
        f" Maven in {java_dir()}: first use or changed sources, a minute or two"
    )
    build()


_NOT_BUILT = (
    "{path} is missing: the Java components are not built; build them with"
    f" `{sys.executable} -c 'from mongobench.remote import javabuild; javabuild.build()'`"
    " (needs a JDK 17+ and Maven)"
)


def _standin_jar() -> pathlib.Path:
    if not has_standin():
        raise RuntimeError(NO_STANDIN)
    target = java_dir() / STANDIN_MODULE / "target"
    jars = sorted(target.glob("standin-*.jar"), key=lambda p: p.stat().st_mtime)
    if not jars:
        raise RuntimeError(_NOT_BUILT.format(path=target / "standin-*.jar"))
    return jars[-1]


def standin_classpath() -> str:
    """Classpath for the stand-in: its dependencies' lib/* wildcard plus the module jar.
    RuntimeError (NO_STANDIN) in an installed package, which has no stand-in."""
    if not has_standin():
        raise RuntimeError(NO_STANDIN)
    lib = _lib_dir(STANDIN_MODULE)
    if not lib.is_dir():
        raise RuntimeError(_NOT_BUILT.format(path=lib))
    return os.pathsep.join([str(lib / "*"), str(_standin_jar())])


def ycsb_classpath() -> str:
    """Classpath (a lib/* wildcard) for site.ycsb.Client with the MongoDB binding."""
    lib = ycsb_lib_dir()
    if not lib.is_dir():
        raise RuntimeError(_NOT_BUILT.format(path=lib))
    return str(lib / "*")


def standin_command(
    host: str = "127.0.0.1",
    port: int = 0,
    java: str = "java",
    extra_args: Sequence[str] = (),
) -> list[str]:
    """argv that starts the stand-in; it prints ``LISTENING <host>:<port>`` once bound.

    ``extra_args``: the stand-in's other options, e.g. ``("--users-file", path)``,
    ``("--tls-cert-key-file", pem)``, ``("--replset", "rs0", "--advertise", "h:p")``,
    ``("--mongos", "--config-db", "cfg/h:p")``.
    """
    return [
        java,
        "-cp",
        standin_classpath(),
        STANDIN_MAIN_CLASS,
        "--host",
        host,
        "--port",
        str(port),
        *extra_args,
    ]
