"""The driver's compiled event loop (`_loop.c`): its build and whether a run uses it.
It also holds the reply checks' element count (`helper`).

`multiplex.Loop` runs its inner loop in C where the module is built for this Python and
matches its source (a compiled hash), the sockets are plain (not TLS) and the loop is
closed; elsewhere it runs the Python loop, which stays the reference (the tests run both).
The project's setup builds it (scripts/setup; a client VM's setup, remote.shipping): one
compiler call with this Python's flags and headers. `MONGOBENCH_DRIVER_LOOP=python` keeps
the Python loop (e.g. to measure one against the other, scripts/bench_client.py).

    python -m mongobench.driver.native build    # builds it next to its source
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pathlib
import shlex
import subprocess
import sys
import sysconfig
import time
import warnings

SOURCE = pathlib.Path(__file__).with_name("_loop.c")
# every file the module is built from (the .c files compiled, the headers they include)
SOURCES = tuple(
    SOURCE.with_name(n)
    for n in ("_loop.c", "_loop_bson.c", "_loop_common.c", "_loop_sources.c", "_loop_docs.c")
)
HEADERS = tuple(SOURCE.with_name(n) for n in ("_loop_bson.h", "_loop_common.h"))
ENV = "MONGOBENCH_DRIVER_LOOP"
NATIVE, PYTHON = "native", "python"


def source_hash() -> str:
    h = hashlib.sha256()
    for path in (*SOURCES, *HEADERS):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def target() -> pathlib.Path:
    """Where the built module goes: beside its source, named for this Python."""
    return SOURCE.with_name("_loop" + sysconfig.get_config_var("EXT_SUFFIX"))


def compile_command(out: pathlib.Path) -> list[str]:
    """The compiler call: $CC or this Python's compiler, its headers, the source's hash."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    return [
        *cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", f"-I{include}",
        f'-DLOOP_SOURCE_HASH="{source_hash()}"', *map(str, SOURCES), "-o", str(out),
    ]  # fmt: skip


def build() -> pathlib.Path:
    """Builds the module (atomically: a run importing it meanwhile sees the old one or the
    new one). Raises RuntimeError with the compiler's output when it fails."""
    out = target()
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        p = subprocess.run(compile_command(tmp), capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"building {SOURCE.name} failed: {(p.stderr or p.stdout)[-2000:]}")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _load():
    try:
        module = importlib.import_module("mongobench.driver._loop")
    except ImportError:
        return None
    if getattr(module, "SOURCE_HASH", None) != source_hash():
        # built from another _loop.c: running it would measure code that is not the source's
        warnings.warn(
            f"{target().name} is stale (rebuild: python -m mongobench.driver.native build)",
            stacklevel=2,
        )
        return None
    return module


# The loop's clock is CLOCK_MONOTONIC: perf_counter's on Linux, which the sources read.
_CLOCK_OK = time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
_MODULE = _load() if _CLOCK_OK else None


def module(tls: bool = False, paced: bool = False):
    """The compiled loop for a run (None: the Python loop runs)."""
    if _MODULE is None or tls or paced or os.environ.get(ENV, NATIVE) == PYTHON:
        return None
    return _MODULE


def helper(name: str):
    """A compiled helper of the reply checks (e.g. count_elements), None where the module is
    not built; used by either loop (each has its Python reference, which the tests compare)."""
    return getattr(_MODULE, name, None)


def kind(tls: bool = False, paced: bool = False) -> str:
    """Which loop such a run uses: "native" or "python" (the results' client_loop)."""
    return NATIVE if module(tls, paced) is not None else PYTHON


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m mongobench.driver.native build", file=sys.stderr)
        return 2
    try:
        print(build())
    except (RuntimeError, OSError) as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
