"""Build and locate the project's Java components: the MongoDB stand-in and the YCSB binding.

Stdlib only and free of PerfKitBenchmarker imports, so tests and tools can use it directly.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
from collections.abc import Iterator, Sequence

JAVA_DIR = pathlib.Path(__file__).resolve().parent.parent / "java"

STANDIN_MAIN_CLASS = "io.github.mongobench.standin.StandinServer"
YCSB_CLIENT_CLASS = "site.ycsb.Client"
YCSB_BINDING_CLASS = "io.github.mongobench.ycsb.MongoDbClient"

_MODULES = ("standin", "ycsb-binding")
_MVN_ARGS = ("-B", "-q", "-Dstyle.color=never", "package", "-DskipTests")
_OUTPUT_TAIL_LINES = 60


def _lib_dir(module: str) -> pathlib.Path:
    return JAVA_DIR / module / "target" / "lib"


def ycsb_lib_dir() -> pathlib.Path:
    """Directory holding every runtime jar of a YCSB client, the binding's own jar included."""
    return _lib_dir("ycsb-binding")


def _inputs() -> Iterator[pathlib.Path]:
    yield JAVA_DIR / "pom.xml"
    for module in _MODULES:
        yield JAVA_DIR / module / "pom.xml"
        src = JAVA_DIR / module / "src"
        if src.is_dir():
            yield from (p for p in src.rglob("*") if p.is_file())


def _outputs_mtime() -> float | None:
    """Oldest build stamp over the modules, or None when a module has no jars yet."""
    stamps = []
    for module in _MODULES:
        lib = _lib_dir(module)
        jars = list(lib.glob("*.jar")) if lib.is_dir() else []
        if not jars:
            return None
        stamps.append(max([lib.stat().st_mtime, *(j.stat().st_mtime for j in jars)]))
    return min(stamps)


def is_up_to_date() -> bool:
    """True when the lib dirs exist and are newer than every pom.xml and source file."""
    built = _outputs_mtime()
    if built is None:
        return False
    return all(p.stat().st_mtime <= built for p in _inputs() if p.exists())


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    # Parallel test workers may all call build(); let one run Maven, the others then see it fresh.
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, Maven copes with most overlaps anyway
        yield
        return
    # target/ is ignored by git, and the build itself only ever empties target/lib.
    lock_dir = JAVA_DIR / "standin" / "target"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".javabuild.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _require_tools() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(
            "Maven ('mvn') is not on PATH; it is needed to build the Java components in "
            f"{JAVA_DIR} (Debian: apt-get install maven)"
        )
    if shutil.which("java") is None:
        raise RuntimeError(
            "'java' is not on PATH; a JDK 17 or newer is needed to build and run them"
        )
    return mvn


def build(force: bool = False, *, timeout: float | None = 1800) -> None:
    """Run ``mvn package`` in java/ unless its outputs are newer than its inputs.

    Raises RuntimeError with the tail of Maven's output when the build fails.
    """
    if not force and is_up_to_date():
        return
    mvn = _require_tools()
    with _build_lock():
        if not force and is_up_to_date():
            return
        try:
            proc = subprocess.run(
                [mvn, *_MVN_ARGS],
                cwd=JAVA_DIR,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"mvn package in {JAVA_DIR} timed out after {timeout} s") from exc
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.splitlines()[-_OUTPUT_TAIL_LINES:])
            raise RuntimeError(
                f"mvn package failed in {JAVA_DIR} (exit {proc.returncode}); output tail:\n{tail}"
            )
        # Maven may leave unchanged jars with old mtimes; stamp the outputs as fresh.
        for module in _MODULES:
            os.utime(_lib_dir(module))


def _standin_jar() -> pathlib.Path:
    target = JAVA_DIR / "standin" / "target"
    jars = sorted(target.glob("standin-*.jar"), key=lambda p: p.stat().st_mtime)
    if not jars:
        raise RuntimeError(f"no standin jar in {target}; call javabuild.build() first")
    return jars[-1]


def standin_classpath() -> str:
    """Classpath for the stand-in: its dependencies' lib/* wildcard plus the module jar."""
    lib = _lib_dir("standin")
    if not lib.is_dir():
        raise RuntimeError(f"{lib} is missing; call javabuild.build() first")
    return os.pathsep.join([str(lib / "*"), str(_standin_jar())])


def ycsb_classpath() -> str:
    """Classpath (a lib/* wildcard) for site.ycsb.Client with the MongoDB binding."""
    lib = ycsb_lib_dir()
    if not lib.is_dir():
        raise RuntimeError(f"{lib} is missing; call javabuild.build() first")
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
