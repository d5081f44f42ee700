"""Where a sample came from: the engine's version, the client's Python, pymongo and YCSB.

`mongobench_version` is the package version plus the git commit when the package runs
from a checkout. The engine shipped to client VMs is a copy without .git: the archive
carries the PKB host's figures in `mongobench/_build_info.json` (BUILD_INFO_NAME), so
both ends report the same version.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import pathlib
import platform
import re
import subprocess
import xml.etree.ElementTree as ET

from mongobench.remote import javabuild

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]  # the mongobench package
DISTRIBUTION = "mongobench-pkb"
BUILD_INFO_NAME = "_build_info.json"
ENGINE_KEYS = ("mongobench_version", "python_version", "pymongo_version")
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
# Jar names in the binding's built lib/ directory: <artifact>-<version>.jar.
_JARS = {
    "ycsb_binding_version": "ycsb-binding",
    "ycsb_version": "core",
    "java_driver_version": "mongodb-driver-sync",
}


def package_version(package_dir: pathlib.Path = PACKAGE_DIR) -> str:
    """The installed distribution's version, else the one setup.py declares, else unknown."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pass
    setup_py = package_dir.parent / "setup.py"
    if setup_py.is_file():
        m = re.search(r"""\bversion\s*=\s*["']([^"']+)["']""", setup_py.read_text())
        if m:
            return m.group(1)
    return "unknown"


def git_commit(directory: pathlib.Path) -> str | None:
    """Short commit of the git checkout `directory` is the top of; None when it is none."""
    if not (directory / ".git").exists():
        return None  # an installed package inside some other repository is not ours
    try:
        out = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def build_info(package_dir: pathlib.Path = PACKAGE_DIR) -> dict:
    """{"version", "commit"}: from the shipped build-info file when there is one, else here."""
    shipped = package_dir / BUILD_INFO_NAME
    if shipped.is_file():
        try:
            info = json.loads(shipped.read_text())
            return {"version": str(info["version"]), "commit": info.get("commit")}
        except (ValueError, KeyError, TypeError):
            pass  # a damaged file: what this copy can tell is better than nothing
    return {"version": package_version(package_dir), "commit": git_commit(package_dir.parent)}


def build_info_json(package_dir: pathlib.Path = PACKAGE_DIR) -> bytes:
    """The build-info file for an archive of the package (sorted keys: reproducible)."""
    return (json.dumps(build_info(package_dir), sort_keys=True) + "\n").encode()


def version_string(info: dict) -> str:
    """'0.1.0+g1a2b3c4' (PEP 440 local version, as setuptools-scm spells it) or '0.1.0'."""
    return f"{info['version']}+g{info['commit']}" if info.get("commit") else info["version"]


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def engine() -> dict:
    """Sample metadata of this process: the engine's, Python's and pymongo's versions."""
    return {
        "mongobench_version": version_string(build_info()),
        "python_version": platform.python_version(),
        "pymongo_version": _dist_version("pymongo"),
    }


def _text(node, path: str) -> str | None:
    found = node.find(path, _POM_NS) if node is not None else None
    return found.text.strip() if found is not None and found.text else None


def _resolve(value: str | None, props: dict[str, str]) -> str | None:
    if value is None:
        return None
    value = re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m.group(1), m.group(0)), value)
    return None if "${" in value else value


def ycsb_from_poms(java_dir: pathlib.Path) -> dict[str, str | None]:
    """Versions of the YCSB binding, YCSB core and the Java driver from the Maven sources
    (`java_dir`: the parent pom.xml with ycsb-binding/ under it)."""
    parent = ET.parse(java_dir / "pom.xml").getroot()
    binding = ET.parse(java_dir / "ycsb-binding" / "pom.xml").getroot()
    props = {}
    for root in (parent, binding):
        for prop in root.findall("m:properties/*", _POM_NS):
            props[prop.tag.split("}", 1)[-1]] = (prop.text or "").strip()
    props["project.version"] = _text(binding, "m:version") or _text(parent, "m:version") or ""

    def dependency(artifact: str) -> str | None:
        for root, path in (
            (binding, "m:dependencies/m:dependency"),
            (parent, "m:dependencyManagement/m:dependencies/m:dependency"),
        ):
            for dep in root.findall(path, _POM_NS):
                if _text(dep, "m:artifactId") == artifact and _text(dep, "m:version"):
                    return _resolve(_text(dep, "m:version"), props)
        return None

    return {
        "ycsb_binding_version": props["project.version"] or None,
        "ycsb_version": dependency("core"),
        "java_driver_version": dependency("mongodb-driver-sync"),
    }


def ycsb_from_jars(lib_dir: pathlib.Path) -> dict[str, str | None]:
    """The same versions from the jar names of a built lib/ directory."""
    names = [p.name for p in lib_dir.glob("*.jar")] if lib_dir.is_dir() else []
    out = {}
    for key, artifact in _JARS.items():
        pattern = re.compile(rf"{re.escape(artifact)}-(\d[^/]*)\.jar")
        found = [m.group(1) for n in names if (m := pattern.fullmatch(n))]
        out[key] = found[0] if len(found) == 1 else None  # two versions: cannot tell which
    return out


@functools.lru_cache(maxsize=1)
def ycsb() -> dict[str, str | None]:
    """YCSB samples' client versions: the Maven sources, else the built jars' names."""
    try:
        got = ycsb_from_poms(javabuild.source_dir())
    except (RuntimeError, OSError, ET.ParseError):
        got = dict.fromkeys(_JARS)
    if None in got.values():
        try:
            jars = ycsb_from_jars(javabuild.ycsb_lib_dir())
        except (RuntimeError, OSError):
            jars = {}
        got = {k: v or jars.get(k) for k, v in got.items()}
    return got


# The stand-in (mongo-java-server) keeps data in memory and reports no storageEngine.
STANDIN_ENGINE = "none (stand-in, in memory)"


def storage_engine_of(server_kind: str | None) -> str:
    """The storage engine of a server this project deployed: mongod's default (the only
    one mongod offers since 4.2 outside Enterprise's inMemory), or the stand-in's none."""
    if server_kind == "standin":
        return STANDIN_ENGINE
    return "wiredTiger" if server_kind == "mongod" else "unknown"
