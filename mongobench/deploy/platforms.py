"""The support matrix: which OS, release and architecture get which MongoDB versions and
which Python for the engine. One table of data; install.py builds its commands from it and
the PKB modules check a run's VM specs against it before anything is provisioned.

MongoDB Community (server packages), from MongoDB's platform support pages (production
notes, "Platform Support Matrix", and each install tutorial), checked 2026-11:
- Ubuntu 20.04 (focal) and 22.04 (jammy): x86_64 and arm64, 6.0 (jammy from 6.0.4), 7.0, 8.0
- Ubuntu 24.04 (noble): x86_64 and arm64, 8.0 only (no 7.0 or 6.0 packages for noble)
- Debian 11 (bullseye): x86_64 only, 6.0, 7.0, 8.0; Debian 12 (bookworm): x86_64 only, from
  7.0.3, and 8.0
- RHEL 8 and 9 and their rebuilds (Rocky, Alma, Oracle Linux, CentOS Stream 9): x86_64 and
  aarch64, 6.0 (RHEL 9 from 6.0.4, aarch64 from 6.0.7), 7.0, 8.0
- Amazon Linux 2023: x86_64 and aarch64, 7.0 and 8.0
Left out: Amazon Linux 2, SLES, Debian 13, Ubuntu 26.04, RHEL 10 (not all three series
published, or no Python >= 3.10 package for the engine).

The engine (client VMs) needs Python >= 3.10 with venv: the OS's python3 where it is new
enough, else the python3.11 package (RHEL 8/9 AppStream, Amazon Linux 2023). Ubuntu 20.04
(3.8) and Debian 11 (3.9) have no such package: servers only.
"""

from __future__ import annotations

from dataclasses import dataclass

SERIES = ("6.0", "7.0", "8.0")
X86, ARM = "x86_64", "aarch64"

# (family, release, arch) -> {series: first patch with packages}
SERVER: dict[tuple[str, str, str], dict[str, str]] = {}
for _arch in (X86, ARM):
    SERVER[("ubuntu", "20.04", _arch)] = {"6.0": "6.0.0", "7.0": "7.0.0", "8.0": "8.0.0"}
    SERVER[("ubuntu", "22.04", _arch)] = {"6.0": "6.0.4", "7.0": "7.0.0", "8.0": "8.0.0"}
    SERVER[("ubuntu", "24.04", _arch)] = {"8.0": "8.0.0"}
    SERVER[("rhel", "8", _arch)] = {"6.0": "6.0.0", "7.0": "7.0.0", "8.0": "8.0.0"}
    SERVER[("amazon", "2023", _arch)] = {"7.0": "7.0.0", "8.0": "8.0.0"}
SERVER[("debian", "11", X86)] = {"6.0": "6.0.0", "7.0": "7.0.0", "8.0": "8.0.0"}
SERVER[("debian", "12", X86)] = {"7.0": "7.0.3", "8.0": "8.0.0"}
SERVER[("rhel", "9", X86)] = {"6.0": "6.0.4", "7.0": "7.0.0", "8.0": "8.0.0"}
SERVER[("rhel", "9", ARM)] = {"6.0": "6.0.7", "7.0": "7.0.0", "8.0": "8.0.0"}


@dataclass(frozen=True)
class Distro:
    codename: str | None  # apt suite; None on yum/dnf systems
    tarball: str | None  # fastdl.mongodb.org target name; None: not checked, give the URL
    client_python: str | None  # the engine's interpreter package; None: no Python >= 3.10


# (family, release) -> what the package repository, the tarballs and the engine need
DISTROS = {
    ("ubuntu", "20.04"): Distro("focal", None, None),
    ("ubuntu", "22.04"): Distro("jammy", "ubuntu2204", "python3"),
    ("ubuntu", "24.04"): Distro("noble", "ubuntu2404", "python3"),
    ("debian", "11"): Distro("bullseye", None, None),
    ("debian", "12"): Distro("bookworm", "debian12", "python3"),
    ("rhel", "8"): Distro(None, None, "python3.11"),
    ("rhel", "9"): Distro(None, "rhel90", "python3.11"),
    ("amazon", "2023"): Distro(None, None, "python3.11"),
}

# PKB's os_type -> (family, release)
PKB_OS_TYPES = {
    "ubuntu2004": ("ubuntu", "20.04"),
    "ubuntu2204": ("ubuntu", "22.04"),
    "ubuntu2404": ("ubuntu", "24.04"),
    "debian11": ("debian", "11"),
    "debian12": ("debian", "12"),
    "rhel8": ("rhel", "8"),
    "rhel9": ("rhel", "9"),
    "rocky_linux8": ("rhel", "8"),
    "rocky_linux8_optimized": ("rhel", "8"),
    "rocky_linux9": ("rhel", "9"),
    "rocky_linux9_optimized": ("rhel", "9"),
    "alma_linux8": ("rhel", "8"),
    "alma_linux9": ("rhel", "9"),
    "centos_stream9": ("rhel", "9"),
    "ol8": ("rhel", "8"),
    "ol9": ("rhel", "9"),
    "amazonlinux2023": ("amazon", "2023"),
}


class UnsupportedPlatform(ValueError):
    """MongoDB publishes no Community packages for this OS/arch/version, or the engine has
    no Python there."""


def series_of(version: str) -> str:
    parts = str(version).strip().lstrip("v").split(".")
    return ".".join(parts[:2])


def server_os_types(series: str, arch: str | None = None) -> list[str]:
    """PKB os_types with packages of `series` (on `arch`, or on any architecture)."""
    return [
        os_type
        for os_type, (family, release) in PKB_OS_TYPES.items()
        if any(
            series in SERVER.get((family, release, a), {})
            for a in ((arch,) if arch else (X86, ARM))
        )
    ]


def client_os_types() -> list[str]:
    return [t for t, key in PKB_OS_TYPES.items() if DISTROS[key].client_python]


def check_pkb_server(os_type: str, version: str, arch: str | None, flag: str) -> None:
    """UnsupportedPlatform unless MongoDB `version` has packages for PKB's `os_type` on
    `arch` (None: not known before the VM exists, so any architecture will do). The message
    names the flags and the supported choices."""
    ser = series_of(version)
    if ser not in SERIES:
        raise UnsupportedPlatform(
            f"{flag}={version}: supported MongoDB series are {', '.join(SERIES)}"
        )
    where = f"os_type {os_type}" + (f" on {arch}" if arch else "")
    key = PKB_OS_TYPES.get(os_type)
    versions = sorted(
        {s for (f, r, a), v in SERVER.items() if (f, r) == key and arch in (None, a) for s in v}
    )
    if ser in versions:
        return
    choices = ", ".join(server_os_types(ser, arch)) or "none"
    other = f"; MongoDB series on {where}: {', '.join(versions)}" if versions else ""
    raise UnsupportedPlatform(
        f"{flag}={version}: MongoDB publishes no Community packages for {where}{other};"
        f" os_types with {ser}{' on ' + arch if arch else ''}: {choices}"
        " (or preinstalled binaries: --mongobench_mongod_bin_dir)"
    )


def check_pkb_client(os_type: str) -> str:
    """The Python package the engine uses on PKB's `os_type`, or UnsupportedPlatform
    naming the os_types where it runs."""
    key = PKB_OS_TYPES.get(os_type)
    python = DISTROS[key].client_python if key else None
    if python is None:
        raise UnsupportedPlatform(
            f"client os_type {os_type}: the engine needs Python >= 3.10 and this OS has no"
            f" such package; client os_types: {', '.join(client_os_types())}"
        )
    return python


def client_python_package(family: str, release: str) -> str | None:
    distro = DISTROS.get((family, release))
    return distro.client_python if distro else None


def _cell(family: str, release: str, arch: str) -> str:
    got = SERVER.get((family, release, arch), {})
    parts = [s if p == f"{s}.0" else f"{s} (from {p})" for s, p in got.items()]
    return ", ".join(parts) or "-"


def markdown_table() -> str:
    """The matrix as the Markdown table of docs/platforms.md."""
    lines = [
        "| PKB os_type | OS | MongoDB x86_64 | MongoDB arm64 | engine (client) Python |",
        "|---|---|---|---|---|",
    ]
    for os_type, (family, release) in PKB_OS_TYPES.items():
        py = DISTROS[(family, release)].client_python or "none (servers only)"
        lines.append(
            f"| {os_type} | {family} {release} | {_cell(family, release, X86)}"
            f" | {_cell(family, release, ARM)} | {py} |"
        )
    return "\n".join(lines) + "\n"
