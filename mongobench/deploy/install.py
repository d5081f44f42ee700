"""Self-managed mongod on Linux hosts: install, configure, start/stop, host settings.

Pure functions that return shell commands, config documents and metadata; a
PKB package module (or any runner) executes them. No PKB imports here.

Sources (MongoDB manual, stored copies checked 2026-11):
- Package repositories: https://www.mongodb.com/docs/manual/tutorial/install-mongodb-on-ubuntu/,
  .../install-mongodb-on-debian/, .../install-mongodb-on-red-hat/
- Supported platforms: https://www.mongodb.com/docs/manual/administration/production-notes/
  (platform matrix), https://www.mongodb.com/docs/manual/administration/community-platform-support/
- Config options: https://www.mongodb.com/docs/manual/reference/configuration-options/ and
  .../configuration-file-settings-command-line-options-mapping/ (removed options)
- Host settings: production notes, and
  https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/ (THP by version)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from mongobench.deploy import platforms
from mongobench.remote.processes import _sudo

KNOWN_SERIES = ("6.0", "7.0", "8.0")

# apt keys: the manual's apt pages fetch from www.mongodb.org/static/pgp, its yum
# repo files point at pgp.mongodb.com; both serve the same server-X.Y.asc.
APT_KEY_URL = "https://www.mongodb.org/static/pgp/server-{series}.asc"
YUM_KEY_URL = "https://pgp.mongodb.com/server-{series}.asc"
APT_KEYRING = "/usr/share/keyrings/mongodb-server-{series}.gpg"
APT_LIST = "/etc/apt/sources.list.d/mongodb-org-{series}.list"
YUM_REPO_FILE = "/etc/yum.repos.d/mongodb-org-{series}.repo"
TARBALL_BASE = "https://fastdl.mongodb.org/linux"

# The support matrix (OS x release x arch -> MongoDB series; apt codename, tarball target,
# the engine's Python) is one table of data: mongobench.deploy.platforms.
_DISTROS = platforms.DISTROS
_SUPPORT = platforms.SERVER
UnsupportedPlatform = platforms.UnsupportedPlatform

_FAMILY_ALIASES = {
    "ubuntu": "ubuntu",
    "debian": "debian",
    "rhel": "rhel",
    "redhat": "rhel",
    "rocky": "rhel",
    "almalinux": "rhel",
    "centos": "rhel",
    "ol": "rhel",
    "oracle": "rhel",
    "amzn": "amazon",
    "amazon": "amazon",
}
_ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


@dataclass(frozen=True)
class Platform:
    family: str  # ubuntu | debian | rhel | amazon
    release: str  # 20.04 | 22.04 | 24.04 | 11 | 12 | 8 | 9 | 2023
    arch: str  # x86_64 | aarch64

    @property
    def package_manager(self) -> str:
        return "yum" if self.family in ("rhel", "amazon") else "apt"


def parse_version(version: str) -> tuple[int, ...]:
    """'8.0' -> (8, 0); '8.0.4' -> (8, 0, 4); 'v7.0.12-rc1' -> (7, 0, 12)."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(version).strip())
    if not m:
        raise ValueError(f"not a MongoDB version: {version!r}")
    return tuple(int(g) for g in m.groups() if g is not None)


def series(version: str) -> str:
    major, minor = parse_version(version)[:2]
    return f"{major}.{minor}"


def platform(os_family: str, os_version: str, arch: str) -> Platform:
    """Normalizes names ('rocky', '9.4', 'arm64' -> rhel/9/aarch64)."""
    family = _FAMILY_ALIASES.get(os_family.strip().lower())
    arch_n = _ARCH_ALIASES.get(arch.strip().lower())
    if family is None:
        raise UnsupportedPlatform(f"unsupported OS family {os_family!r}")
    if arch_n is None:
        raise UnsupportedPlatform(f"unsupported architecture {arch!r}")
    parts = str(os_version).strip().split(".")
    release = ".".join(parts[:2]) if family == "ubuntu" else parts[0]
    if (family, release) not in _DISTROS:
        known = ", ".join(f"{f} {r}" for f, r in _DISTROS)
        raise UnsupportedPlatform(f"{os_family} {os_version}: supported are {known}")
    return Platform(family, release, arch_n)


def platform_from_os_release(os_release: str, uname_m: str) -> Platform:
    """From the text of /etc/os-release and `uname -m`."""
    fields = {}
    for line in os_release.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            fields[k.strip()] = v.strip().strip('"')
    family = fields.get("ID", "")
    if family not in _FAMILY_ALIASES:
        # e.g. ID=pop with ID_LIKE="ubuntu debian": not a platform MongoDB lists
        raise UnsupportedPlatform(f"unsupported OS ID {family!r}")
    return platform(family, fields.get("VERSION_ID", ""), uname_m)


def chosen_version(ours: str, ours_set: bool, pkbs: str | None, pkbs_set: bool) -> str:
    """The MongoDB version to install from --mongobench_mongodb_version (`ours`) and PKB's own
    --mongodb_version (`pkbs`), each with whether the user set it: PKB's when only it was set
    (a config that pins 7.0 for PKB's MongoDB benchmarks keeps 7.0), ours otherwise. Both
    set to different versions is refused (ValueError, one line)."""
    if ours_set and pkbs_set and pkbs != ours:
        raise ValueError(
            f"--mongodb_version={pkbs} and --mongobench_mongodb_version={ours} disagree:"
            " set one of them (or both to the same version)"
        )
    return pkbs if pkbs_set and not ours_set and pkbs else ours


def check_supported(plat: Platform, mongodb_version: str) -> str:
    """The series for `mongodb_version` on `plat`, or UnsupportedPlatform saying why."""
    ser = series(mongodb_version)
    avail = _SUPPORT.get((plat.family, plat.release, plat.arch))
    where = f"{plat.family} {plat.release} {plat.arch}"
    if not avail:
        raise UnsupportedPlatform(
            f"MongoDB publishes no Community packages for {where}"
            " (e.g. Debian is x86_64 only): see docs/platforms.md"
        )
    if ser not in avail:
        raise UnsupportedPlatform(
            f"MongoDB {ser} has no Community packages for {where}"
            f" (available: {', '.join(sorted(avail))})"
        )
    full = parse_version(mongodb_version)
    if len(full) == 3 and full < parse_version(avail[ser]):
        raise UnsupportedPlatform(
            f"{where} is supported from MongoDB {avail[ser]}, not {mongodb_version}"
        )
    return ser


def repo_setup_commands(
    os_family: str, os_version: str, arch: str, mongodb_version: str, sudo: bool = True
) -> list[str]:
    """Commands that add MongoDB's own package repository (signed-by keyring on apt). Before
    them the caller installs repo_prerequisites() and after them, on apt, refreshes the
    package lists, both with PKB's package mechanism (it retries, e.g. while
    unattended-upgrades holds the dpkg lock at boot): no apt-get or dnf is run by hand."""
    plat = platform(os_family, os_version, arch)
    ser = check_supported(plat, mongodb_version)
    s = _sudo(sudo)
    if plat.package_manager == "apt":
        keyring = APT_KEYRING.format(series=ser)
        codename = _DISTROS[(plat.family, plat.release)].codename
        if plat.family == "ubuntu":
            # As in the manual's Ubuntu list file: arch list and the multiverse component.
            entry = (
                f"deb [ arch=amd64,arm64 signed-by={keyring} ] https://repo.mongodb.org/apt/ubuntu"
                f" {codename}/mongodb-org/{ser} multiverse"
            )
        else:
            entry = (
                f"deb [ signed-by={keyring} ] https://repo.mongodb.org/apt/debian"
                f" {codename}/mongodb-org/{ser} main"
            )
        return [
            f"curl -fsSL {APT_KEY_URL.format(series=ser)}"
            f" | {s}gpg --batch --yes -o {keyring} --dearmor",
            f"echo {shlex.quote(entry)} | {s}tee {APT_LIST.format(series=ser)} >/dev/null",
        ]
    distro = "amazon" if plat.family == "amazon" else "redhat"
    repo = (
        f"[mongodb-org-{ser}]\n"
        "name=MongoDB Repository\n"
        f"baseurl=https://repo.mongodb.org/yum/{distro}/{plat.release}/mongodb-org/{ser}/{plat.arch}/\n"
        "gpgcheck=1\n"
        "enabled=1\n"
        f"gpgkey={YUM_KEY_URL.format(series=ser)}\n"
    )
    return [f"printf %s {shlex.quote(repo)} | {s}tee {YUM_REPO_FILE.format(series=ser)} >/dev/null"]


def repo_files(os_family: str, os_version: str, arch: str, mongodb_version: str) -> list[str]:
    """The files repo_setup_commands writes: apt's keyring and list file, or the yum repo
    file."""
    plat = platform(os_family, os_version, arch)
    ser = check_supported(plat, mongodb_version)
    if plat.package_manager == "apt":
        return [APT_KEYRING.format(series=ser), APT_LIST.format(series=ser)]
    return [YUM_REPO_FILE.format(series=ser)]


def record_new_files_command(paths: list[str], record: str) -> str:
    """Before files are written: appends to `record` those of `paths` that do not exist yet
    (what the run creates, and may remove again; a file the host had stays)."""
    names = " ".join(map(shlex.quote, paths))
    return f'for f in {names}; do [ -e "$f" ] || echo "$f"; done >> {shlex.quote(record)}'


def remove_recorded_files_command(record: str, sudo: bool = True) -> str:
    """Removes the files `record` lists (record_new_files_command), then the record; does
    nothing without a record."""
    r = shlex.quote(record)
    return (
        f'if [ -f {r} ]; then while IFS= read -r f; do {_sudo(sudo)}rm -f -- "$f"; done < {r};'
        f" rm -f {r}; fi"
    )


def repo_prerequisites(plat: Platform) -> list[str]:
    """OS packages repo_setup_commands needs on `plat` (curl and gpg for apt's keyring)."""
    return ["gnupg", "curl", "ca-certificates"] if plat.package_manager == "apt" else []


def server_packages(
    os_family: str,
    os_version: str,
    arch: str,
    mongodb_version: str,
    with_mongos: bool = True,
    with_shell: bool = False,
) -> list[str]:
    """MongoDB's packages for the VM's package manager (installed with PKB's InstallPackages);
    a full version ('8.0.4') pins the server packages."""
    plat = platform(os_family, os_version, arch)
    check_supported(plat, mongodb_version)
    full = parse_version(mongodb_version)
    pin = ".".join(map(str, full)) if len(full) == 3 else None
    names = ["mongodb-org-server"] + (["mongodb-org-mongos"] if with_mongos else [])
    sep = "=" if plat.package_manager == "apt" else "-"
    pkgs = [f"{n}{sep}{pin}" if pin else n for n in names]
    if with_shell:
        pkgs.append("mongodb-mongosh")  # versioned independently of the server
    return pkgs


def after_install_commands(sudo: bool = True) -> list[str]:
    """After server_packages: the packaged `mongod` service is stopped and disabled (instances
    are started by `start_command` with our own configs and ports), the binary checked."""
    s = _sudo(sudo)
    return [
        f"{s}systemctl disable --now mongod >/dev/null 2>&1 || true",
        "/usr/bin/mongod --version",
    ]


def tarball_url(version: str, os_family: str, os_version: str, arch: str) -> str:
    """fastdl.mongodb.org URL of the Linux tarball for a full version ('8.0.4').

    RHEL 9 builds are named rhel90 up to 7.0 and rhel93 from 8.0 (8.0 needs RHEL 9.3+).
    """
    full = parse_version(version)
    if len(full) != 3:
        raise ValueError(f"tarballs need a full version such as 8.0.4, not {version!r}")
    plat = platform(os_family, os_version, arch)
    check_supported(plat, version)
    target = _DISTROS[(plat.family, plat.release)].tarball
    if target is None:
        known = ", ".join(f"{f} {r}" for (f, r), d in _DISTROS.items() if d.tarball)
        raise UnsupportedPlatform(
            f"no tarball name known for {plat.family} {plat.release}: give the URL itself"
            f" (--mongobench_mongod_tarball_url=https://fastdl.mongodb.org/...); auto knows {known}"
        )
    if plat.family == "rhel" and full >= (8, 0, 0):
        target = "rhel93"
    return f"{TARBALL_BASE}/mongodb-linux-{plat.arch}-{target}-{'.'.join(map(str, full))}.tgz"


def tarball_install_commands(url: str, dest: str) -> list[str]:
    """Unpacks a tarball into `dest` (its binaries end up in `dest`/bin). No root needed."""
    q = shlex.quote
    archive = f"{dest}/mongodb.tgz"
    return [
        f"mkdir -p {q(dest)}",
        f"curl -fsSL --retry 3 -o {q(archive)} {q(url)}",
        f"tar -xzf {q(archive)} -C {q(dest)} --strip-components=1",
        f"rm -f {q(archive)}",
        f"{q(dest)}/bin/mongod --version",
    ]


def bin_dir_check_command(bin_dir: str) -> str:
    """Preinstalled binaries (static hosts): fails unless mongod is there; prints its version."""
    q = shlex.quote(bin_dir.rstrip("/"))
    return f"test -x {q}/mongod && {q}/mongod --version"


def version_from_output(output: str) -> str:
    """'db version v8.0.4' (mongod --version) -> '8.0.4'."""
    m = re.search(r"db version v(\d+\.\d+\.\d+)", output)
    if not m:
        raise ValueError("no 'db version vX.Y.Z' in mongod --version output")
    return m.group(1)
