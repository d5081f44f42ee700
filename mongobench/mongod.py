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

import yaml

KNOWN_SERIES = ("6.0", "7.0", "8.0")

# apt keys: the manual's apt pages fetch from www.mongodb.org/static/pgp, its yum
# repo files point at pgp.mongodb.com; both serve the same server-X.Y.asc.
APT_KEY_URL = "https://www.mongodb.org/static/pgp/server-{series}.asc"
YUM_KEY_URL = "https://pgp.mongodb.com/server-{series}.asc"
APT_KEYRING = "/usr/share/keyrings/mongodb-server-{series}.gpg"
APT_LIST = "/etc/apt/sources.list.d/mongodb-org-{series}.list"
YUM_REPO_FILE = "/etc/yum.repos.d/mongodb-org-{series}.repo"
TARBALL_BASE = "https://fastdl.mongodb.org/linux"

# (family, release) -> apt codename / tarball target. RHEL-likes map to "rhel".
_DISTROS = {
    ("ubuntu", "22.04"): {"codename": "jammy", "tarball": "ubuntu2204"},
    ("ubuntu", "24.04"): {"codename": "noble", "tarball": "ubuntu2404"},
    ("debian", "12"): {"codename": "bookworm", "tarball": "debian12"},
    ("rhel", "9"): {"codename": None, "tarball": "rhel90"},
}

# What MongoDB publishes for Community: (family, release, arch) -> {series: first patch}.
# Platform matrix of the production notes / community-platform-support pages:
# Ubuntu 24.04 only from 8.0 (7.0 is not built for noble); Debian 12 x86_64 only
# (no arm64 packages), from 7.0.3; Ubuntu 22.04 and RHEL 9 from 6.0.4 (arm64
# RHEL 9 from 6.0.7).
_SUPPORT: dict[tuple[str, str, str], dict[str, str]] = {
    ("ubuntu", "22.04", "x86_64"): {"6.0": "6.0.4", "7.0": "7.0.0", "8.0": "8.0.0"},
    ("ubuntu", "22.04", "aarch64"): {"6.0": "6.0.4", "7.0": "7.0.0", "8.0": "8.0.0"},
    ("ubuntu", "24.04", "x86_64"): {"8.0": "8.0.0"},
    ("ubuntu", "24.04", "aarch64"): {"8.0": "8.0.0"},
    ("debian", "12", "x86_64"): {"7.0": "7.0.3", "8.0": "8.0.0"},
    ("rhel", "9", "x86_64"): {"6.0": "6.0.4", "7.0": "7.0.0", "8.0": "8.0.0"},
    ("rhel", "9", "aarch64"): {"6.0": "6.0.7", "7.0": "7.0.0", "8.0": "8.0.0"},
}

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
}
_ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}

# Config-file settings removed from mongod, with the version that removed them
# (configuration-file-settings-command-line-options-mapping, "ChangeLog").
REMOVED_OPTIONS = {
    "storage.journal.enabled": (6, 1),
    "net.serviceExecutor": (5, 0),
    "storage.indexBuildRetry": (4, 4),
    "storage.mmapv1": (4, 2),
    "storage.repairPath": (4, 2),
    "replication.secondaryIndexPrefetch": (4, 2),
}

WIREDTIGER_MIN_CACHE_GB = 0.25

# net.tls.* (configuration-options, "net.tls Options"): new in 4.2, replacing net.ssl.*
# (deprecated since 4.2, still accepted). Older servers refuse the tls names.
TLS_SINCE = (4, 2)
TLS_MODES = ("disabled", "allowTLS", "preferTLS", "requireTLS")


class UnsupportedPlatform(ValueError):
    """MongoDB publishes no Community packages for this OS/arch/version."""


@dataclass(frozen=True)
class Platform:
    family: str  # ubuntu | debian | rhel
    release: str  # 22.04 | 24.04 | 12 | 9
    arch: str  # x86_64 | aarch64

    @property
    def package_manager(self) -> str:
        return "yum" if self.family == "rhel" else "apt"


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
        raise UnsupportedPlatform(
            f"{os_family} {os_version}: supported are Ubuntu 22.04/24.04, Debian 12, RHEL/Rocky/Alma 9"
        )
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


def check_supported(plat: Platform, mongodb_version: str) -> str:
    """The series for `mongodb_version` on `plat`, or UnsupportedPlatform saying why."""
    ser = series(mongodb_version)
    avail = _SUPPORT.get((plat.family, plat.release, plat.arch))
    where = f"{plat.family} {plat.release} {plat.arch}"
    if not avail:
        raise UnsupportedPlatform(
            f"MongoDB publishes no Community packages for {where}"
            " (e.g. Debian 12 is x86_64 only); use a tarball URL or --..._mongod_bin_dir"
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


def _sudo(sudo: bool) -> str:
    return "sudo " if sudo else ""


def repo_setup_commands(
    os_family: str, os_version: str, arch: str, mongodb_version: str, sudo: bool = True
) -> list[str]:
    """Commands that add MongoDB's own package repository (signed-by keyring on apt)."""
    plat = platform(os_family, os_version, arch)
    ser = check_supported(plat, mongodb_version)
    s = _sudo(sudo)
    if plat.package_manager == "apt":
        keyring = APT_KEYRING.format(series=ser)
        codename = _DISTROS[(plat.family, plat.release)]["codename"]
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
            f"{s}apt-get update -q",
            f"{s}env DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnupg curl ca-certificates",
            f"curl -fsSL {APT_KEY_URL.format(series=ser)}"
            f" | {s}gpg --batch --yes -o {keyring} --dearmor",
            f"echo {shlex.quote(entry)} | {s}tee {APT_LIST.format(series=ser)} >/dev/null",
            f"{s}apt-get update -q",
        ]
    repo = (
        f"[mongodb-org-{ser}]\n"
        "name=MongoDB Repository\n"
        f"baseurl=https://repo.mongodb.org/yum/redhat/{plat.release}/mongodb-org/{ser}/{plat.arch}/\n"
        "gpgcheck=1\n"
        "enabled=1\n"
        f"gpgkey={YUM_KEY_URL.format(series=ser)}\n"
    )
    return [f"printf %s {shlex.quote(repo)} | {s}tee {YUM_REPO_FILE.format(series=ser)} >/dev/null"]


def install_packages_commands(
    os_family: str,
    os_version: str,
    arch: str,
    mongodb_version: str,
    with_mongos: bool = True,
    with_shell: bool = False,
    sudo: bool = True,
) -> list[str]:
    """Installs mongod (and mongos/mongosh); a full version ('8.0.4') pins the server packages.

    The packaged `mongod` service is stopped and disabled: instances are started
    by `start_command` with our own configs and ports.
    """
    plat = platform(os_family, os_version, arch)
    check_supported(plat, mongodb_version)
    full = parse_version(mongodb_version)
    pin = ".".join(map(str, full)) if len(full) == 3 else None
    names = ["mongodb-org-server"] + (["mongodb-org-mongos"] if with_mongos else [])
    sep = "=" if plat.package_manager == "apt" else "-"
    pkgs = [f"{n}{sep}{pin}" if pin else n for n in names]
    if with_shell:
        pkgs.append("mongodb-mongosh")  # versioned independently of the server
    s = _sudo(sudo)
    if plat.package_manager == "apt":
        install = f"{s}env DEBIAN_FRONTEND=noninteractive apt-get install -y -q {' '.join(pkgs)}"
    else:
        install = f"{s}dnf install -y {' '.join(pkgs)}"
    return [
        install,
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
    target = _DISTROS[(plat.family, plat.release)]["tarball"]
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


def _flatten(doc: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        out[key] = v
    return out


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def validate_config(config: dict, version: str) -> None:
    """Raises ValueError for settings the given mongod version no longer accepts."""
    ver = parse_version(version)[:2]
    flat = _flatten(config)
    for key, removed_in in REMOVED_OPTIONS.items():
        if key in flat and ver >= removed_in:
            raise ValueError(
                f"{key} was removed in MongoDB {removed_in[0]}.{removed_in[1]};"
                f" mongod {series(version)} refuses to start with it"
            )
    if (config.get("processManagement") or {}).get("fork"):
        raise ValueError("processManagement.fork: instances are tracked by PID, do not fork")
    _validate_tls(config.get("net") or {}, ver)


def _validate_tls(net: dict, ver: tuple[int, ...]) -> None:
    tls = net.get("tls")
    if tls is None:
        return
    if ver < TLS_SINCE:
        raise ValueError(
            f"net.tls.* is new in MongoDB {TLS_SINCE[0]}.{TLS_SINCE[1]}; older mongod uses net.ssl.*"
        )
    if "ssl" in net:
        raise ValueError("net.tls and net.ssl (its deprecated alias) must not be mixed")
    mode = tls.get("mode", "disabled")
    if mode not in TLS_MODES:
        raise ValueError(f"net.tls.mode must be one of {TLS_MODES}, got {mode!r}")
    if mode != "disabled" and not tls.get("certificateKeyFile"):
        raise ValueError(f"net.tls.mode {mode} needs net.tls.certificateKeyFile")


def tls_settings(
    certificate_key_file: str,
    *,
    mode: str = "requireTLS",
    ca_file: str | None = None,
    allow_connections_without_certificates: bool = True,
) -> dict:
    """The `net` part of a config that serves TLS with `certificate_key_file` (one PEM file:
    the certificate, then its unencrypted PKCS#8 key, as mongod and FIPS mode want it).

    Without `ca_file` mongod asks clients for no certificate. With it, mongod validates client
    certificates against that CA and refuses clients without one unless
    net.tls.allowConnectionsWithoutCertificates, true by default here: the
    benchmark's clients authenticate, if at all, by password, not by certificate."""
    tls: dict = {"mode": mode, "certificateKeyFile": certificate_key_file}
    if ca_file:
        tls["CAFile"] = ca_file
        tls["allowConnectionsWithoutCertificates"] = bool(allow_connections_without_certificates)
    _validate_tls({"tls": tls}, TLS_SINCE)
    return {"tls": tls}


def mongod_config(
    instance: int,
    port: int,
    dbpath: str,
    logpath: str,
    cache_gb: float,
    bind_ip: str,
    replset: str | None = None,
    cluster_role: str | None = None,
    *,
    version: str,
    extra: dict | None = None,
    tls: dict | None = None,
) -> dict:
    """The config document of mongod instance number `instance` on its host, valid for `version`.

    No processManagement.fork (the runner records the PID of the process it
    starts) and no storage.journal.* (journaling is always on; the `enabled`
    option is gone since 6.1). `tls` is a `tls_settings` result (net.tls.*).
    `extra` is merged last and validated too.
    """
    if cache_gb < WIREDTIGER_MIN_CACHE_GB:
        raise ValueError(
            f"instance {instance}: cache_gb must be >= {WIREDTIGER_MIN_CACHE_GB} (WiredTiger minimum)"
        )
    if cluster_role not in (None, "configsvr", "shardsvr"):
        raise ValueError(f"cluster_role must be configsvr or shardsvr, not {cluster_role!r}")
    if cluster_role and not replset:
        raise ValueError("config servers and shards must be replica sets (replset required)")
    config: dict = {
        "storage": {
            "dbPath": dbpath,
            "wiredTiger": {"engineConfig": {"cacheSizeGB": round(float(cache_gb), 2)}},
        },
        "systemLog": {"destination": "file", "path": logpath, "logAppend": True},
        "net": {"port": int(port), "bindIp": bind_ip},
    }
    if replset:
        config["replication"] = {"replSetName": replset}
    if cluster_role:
        config["sharding"] = {"clusterRole": cluster_role}
    if tls:
        config = _merge(config, {"net": tls})
    if extra:
        config = _merge(config, extra)
    validate_config(config, version)
    return config


def mongos_config(port: int, config_db: str, logpath: str, bind_ip: str, *, version: str) -> dict:
    """mongos: sharding.configDB 'cfgRS/h1:p,h2:p,...'; no storage section (mongos has none)."""
    config = {
        "sharding": {"configDB": config_db},
        "systemLog": {"destination": "file", "path": logpath, "logAppend": True},
        "net": {"port": int(port), "bindIp": bind_ip},
    }
    validate_config(config, version)
    return config


def render_config(config: dict, instance: int | None = None) -> str:
    head = f"# mongobench instance {instance}\n" if instance is not None else ""
    return head + yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def start_command(
    bin_dir: str,
    config_path: str,
    pid_file: str,
    stdout_path: str,
    binary: str = "mongod",
    nofile: int = 64000,
    nproc: int = 64000,
    run_as: str | None = None,
    sudo: bool = True,
) -> str:
    """Starts one mongod/mongos in the background and writes its PID to `pid_file`.

    ulimits from the production notes are raised for this process only, so the
    host needs no restore. setsid+nohup keep it alive after the ssh session;
    the exec chain keeps $! equal to the server's own PID.
    """
    q = shlex.quote
    drop = f"setpriv --reuid={q(run_as)} --regid={q(run_as)} --init-groups " if run_as else ""
    inner = (
        f"ulimit -n {int(nofile)} && ulimit -u {int(nproc)} && "
        f"{{ setsid nohup {drop}{q(bin_dir.rstrip('/') + '/' + binary)} --config {q(config_path)}"
        f" >{q(stdout_path)} 2>&1 </dev/null & echo $! >{q(pid_file)}; }}"
    )
    # bash, not sh: dash (Debian/Ubuntu /bin/sh) has no `ulimit -u`
    return f"{_sudo(sudo)}bash -c {q(inner)}"


def stop_command(
    pid_file: str, timeout_s: int = 120, binary: str = "mongod", sudo: bool = True
) -> str:
    """SIGTERM (clean shutdown), wait, SIGKILL after `timeout_s`; only our PID, only if it is mongod."""
    q = shlex.quote
    inner = (
        f"test -f {q(pid_file)} || exit 0; pid=$(cat {q(pid_file)}); "
        f'if grep -qa {q(binary)} /proc/"$pid"/cmdline 2>/dev/null; then '
        f'kill -TERM "$pid"; i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt {int(timeout_s)} ]; '
        'do sleep 1; i=$((i+1)); done; kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"; fi; '
        f"rm -f {q(pid_file)}"
    )
    return f"{_sudo(sudo)}sh -c {q(inner)}"


def wait_for_port_command(host: str, port: int, timeout_s: int = 120) -> str:
    """Polls until something accepts TCP on host:port (bash /dev/tcp, no client needed)."""
    inner = (
        f"for i in $(seq 1 {int(timeout_s)}); do "
        f"(exec 3<>/dev/tcp/{host}/{int(port)}) 2>/dev/null && exit 0; sleep 1; done; "
        f"echo 'nothing listens on {host}:{int(port)} after {int(timeout_s)}s' >&2; exit 1"
    )
    return f"bash -c {shlex.quote(inner)}"


def process_limits_command(pid_file: str) -> str:
    return f"cat /proc/$(cat {shlex.quote(pid_file)})/limits"


def parse_process_limits(text: str) -> dict:
    """Soft limits of the running server from /proc/PID/limits."""
    out = {}
    for line in text.splitlines():
        for label, key in (("Max open files", "nofile"), ("Max processes", "nproc")):
            if line.startswith(label):
                soft = line[len(label) :].split()[0]
                out[key] = soft if soft == "unlimited" else int(soft)
    return out


# ---- host settings (production notes) ----------------------------------------

THP = "/sys/kernel/mm/transparent_hugepage"


@dataclass(frozen=True)
class HostSetting:
    name: str
    path: str  # a sysfs/procfs file
    value: str  # desired value
    bracketed: bool = False  # sysfs shows "always madvise [never]"


def host_settings(mongodb_version: str, swappiness: int = 1) -> list[HostSetting]:
    """The kernel settings the production notes ask for, per version.

    THP is version dependent: 7.0 and earlier want it disabled (never/never);
    8.0+ uses per-CPU TCMalloc and wants it enabled (always, defrag
    defer+madvise, khugepaged max_ptes_none 0, vm.overcommit_memory 1), as in
    the manual's enable-transparent-huge-pages.service.
    """
    if parse_version(mongodb_version)[:2] >= (8, 0):
        thp = [
            HostSetting("thp_enabled", f"{THP}/enabled", "always", True),
            HostSetting("thp_defrag", f"{THP}/defrag", "defer+madvise", True),
            HostSetting("thp_max_ptes_none", f"{THP}/khugepaged/max_ptes_none", "0"),
            HostSetting("overcommit_memory", "/proc/sys/vm/overcommit_memory", "1"),
        ]
    else:
        thp = [
            HostSetting("thp_enabled", f"{THP}/enabled", "never", True),
            HostSetting("thp_defrag", f"{THP}/defrag", "never", True),
        ]
    return thp + [
        HostSetting("swappiness", "/proc/sys/vm/swappiness", str(int(swappiness))),
        HostSetting("zone_reclaim_mode", "/proc/sys/vm/zone_reclaim_mode", "0"),
    ]


# Every setting any version may touch, so that a restore covers all of them.
_ALL_SETTINGS = {s.name: s for v in ("7.0", "8.0") for s in host_settings(v)}


def _read_snippet(setting: HostSetting, root: str) -> str:
    path = shlex.quote(root + setting.path)
    # sysfs marks the active choice: "always [madvise] never" -> madvise
    value = f"sed 's/.*\\[\\(.*\\)\\].*/\\1/' {path}" if setting.bracketed else f"cat {path}"
    return f"test -r {path} && printf '{setting.name}=%s\\n' \"$({value})\";"


def read_settings_command(data_dir: str | None = None, root: str = "", sudo: bool = True) -> str:
    """Prints the current values as name=value lines (THP, sysctls, data-disk readahead)."""
    parts = [_read_snippet(s, root) for s in _ALL_SETTINGS.values()]
    if data_dir:
        q = shlex.quote(data_dir)
        # readahead belongs to the block device under the data directory
        parts.append(
            f'dev=$(findmnt -n -o SOURCE --target {q} 2>/dev/null); if [ -b "$dev" ] && '
            f'ra=$({_sudo(sudo)}blockdev --getra "$dev" 2>/dev/null); then '
            'printf \'readahead_device=%s\\nreadahead_sectors=%s\\n\' "$dev" "$ra"; fi;'
        )
    parts.append("true")
    return "sh -c " + shlex.quote(" ".join(parts))


def parse_settings(output: str) -> dict:
    """name=value lines -> dict (ints where numeric)."""
    out: dict = {}
    for line in output.splitlines():
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        v = v.strip()
        out[k.strip()] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


def record_settings_command(
    state_file: str, data_dir: str | None = None, root: str = "", sudo: bool = True
) -> str:
    """Saves the host's values before any change. Never overwrites: a second run
    (or a crashed one) must not record our own values as the originals."""
    q = shlex.quote(state_file)
    return (
        f"test -e {q} || {{ {read_settings_command(data_dir, root, sudo)} | "
        f"{_sudo(sudo)}tee {q}.tmp >/dev/null && {_sudo(sudo)}mv {q}.tmp {q}; }}"
    )


def _write(path: str, value: str, sudo: bool) -> str:
    q = shlex.quote(path)
    # A knob the kernel lacks (e.g. no NUMA, no khugepaged) is skipped, a refused write fails.
    return f"test ! -e {q} || echo {shlex.quote(value)} | {_sudo(sudo)}tee {q} >/dev/null"


def apply_settings_commands(
    mongodb_version: str,
    readahead_sectors: int | None = 8,
    data_device: str | None = None,
    swappiness: int = 1,
    root: str = "",
    sudo: bool = True,
) -> list[str]:
    """Applies the production-notes settings. Record first (record_settings_command).

    Readahead 8..32 sectors is the production notes' range for WiredTiger;
    `data_device` is the readahead_device of the readings (None: unchanged).
    """
    cmds = [
        _write(root + s.path, s.value, sudo) for s in host_settings(mongodb_version, swappiness)
    ]
    if data_device and readahead_sectors is not None:
        cmds.append(
            f"{_sudo(sudo)}blockdev --setra {int(readahead_sectors)} {shlex.quote(data_device)}"
        )
    return cmds


def restore_settings_commands(recorded: dict, root: str = "", sudo: bool = True) -> list[str]:
    """Puts back every recorded value (from the state file's readings)."""
    cmds = []
    for name, setting in _ALL_SETTINGS.items():
        if name in recorded:
            cmds.append(_write(root + setting.path, str(recorded[name]), sudo))
    if "readahead_device" in recorded and "readahead_sectors" in recorded:
        cmds.append(
            f"{_sudo(sudo)}blockdev --setra {int(recorded['readahead_sectors'])}"
            f" {shlex.quote(str(recorded['readahead_device']))}"
        )
    return cmds


def host_settings_commands(
    mongodb_version: str,
    state_file: str,
    data_dir: str | None = None,
    data_device: str | None = None,
    readahead_sectors: int | None = 8,
    swappiness: int = 1,
    sudo: bool = True,
) -> list[str]:
    """Record the previous values (once), then apply. Restore with
    restore_settings_commands(parse_settings(<contents of state_file>))."""
    return [record_settings_command(state_file, data_dir, sudo=sudo)] + apply_settings_commands(
        mongodb_version, readahead_sectors, data_device, swappiness, sudo=sudo
    )


def host_settings_metadata(
    readings: dict, mongodb_version: str | None = None, limits: dict | None = None
) -> dict:
    """Sample metadata: the values in force, and whether they match the notes."""
    meta = {f"host_{k}": v for k, v in sorted(readings.items())}
    if limits:
        meta.update({f"mongod_ulimit_{k}": v for k, v in sorted(limits.items())})
    if mongodb_version:
        wanted = {s.name: s.value for s in host_settings(mongodb_version)}
        # a knob the kernel does not have (absent from the readings) is no deviation
        off = [
            f"{k}={readings[k]}(want {v})"
            for k, v in wanted.items()
            if k in readings and str(readings[k]) != v
        ]
        ra = readings.get("readahead_sectors")
        if isinstance(ra, int) and not 8 <= ra <= 32:
            off.append(f"readahead_sectors={ra}(want 8..32)")
        meta["host_settings_as_recommended"] = not off
        if off:
            meta["host_settings_deviations"] = ",".join(off)
    return meta
