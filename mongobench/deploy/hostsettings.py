"""MongoDB's production-notes host settings: read, record, apply and restore (THP, readahead, ...)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from mongobench.deploy.install import parse_version
from mongobench.remote.processes import _sudo

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


# ---- the data disk's filesystem ------------------------------------------------------
# The production notes strongly recommend XFS for WiredTiger data (ext4 stalls under its
# checkpoints); the shipped PKB configs format data disks with disk_fs_type: xfs.
RECOMMENDED_FS = "xfs"


def data_filesystem_command(data_dir: str) -> str:
    """Prints the filesystem type and device of the mount holding `data_dir`."""
    return f"findmnt -n -o FSTYPE,SOURCE --target {shlex.quote(data_dir)}"


def data_filesystem_metadata(output: str) -> dict:
    """Sample metadata from data_filesystem_command's output: `data_fs_type`, and
    `data_fs_warning` when it is not XFS (or unknown)."""
    fields = output.split()
    fs = fields[0] if fields else "unknown"
    meta = {"data_fs_type": fs}
    if len(fields) > 1:
        meta["data_fs_device"] = fields[1]
    if fs != RECOMMENDED_FS:
        meta["data_fs_warning"] = (
            f"data directory on {fs}, not {RECOMMENDED_FS}: the production notes strongly"
            " recommend XFS for WiredTiger (PKB: --disk_fs_type=xfs or disk_fs_type: xfs in"
            " the config's flags)"
        )
    return meta


# ---- TCMalloc per-CPU caches (MongoDB 8.0+) ---------------------------------------
# MongoDB 8.0 ships an upgraded TCMalloc whose per-CPU caches need the kernel's restartable
# sequences (rseq). glibc 2.35 and later register rseq for every thread themselves, and then
# TCMalloc falls back to its per-thread caches: slower, with more memory held per thread.
# The production notes ("TCMalloc performance") ask for GLIBC_TUNABLES=glibc.pthread.rseq=0
# in mongod's environment; MongoDB's own packaged service unit sets it, a mongod started by
# hand does not. serverStatus().tcmalloc.usingPerCPUCaches (8.0+) says which one runs.
RSEQ_TUNABLE = "glibc.pthread.rseq=0"
RSEQ_GLIBC = (2, 35)
PER_CPU_SINCE = (8, 0)


def mongod_environment(mongodb_version: str) -> dict[str, str]:
    """Variables a mongod of `mongodb_version` is started with (GLIBC_TUNABLES on 8.0+)."""
    if parse_version(mongodb_version)[:2] >= PER_CPU_SINCE:
        return {"GLIBC_TUNABLES": RSEQ_TUNABLE}
    return {}


def tcmalloc_readings_command(pid_file: str, sudo: bool = True) -> str:
    """Prints glibc_version=X.Y and mongod_glibc_tunables=<value or empty> of the process
    whose PID is in `pid_file` (its /proc/PID/environ: what it really runs with)."""
    q = shlex.quote(pid_file)
    script = (
        "printf 'glibc_version=%s\\n' \"$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')\"; "
        f'p=$(cat {q} 2>/dev/null) && [ -n "$p" ] && '
        f"{_sudo(sudo)}cat /proc/$p/environ >/dev/null 2>&1 && printf 'mongod_glibc_tunables=%s\\n'"
        f" \"$({_sudo(sudo)}cat /proc/$p/environ | tr '\\0' '\\n' | sed -n 's/^GLIBC_TUNABLES=//p')\";"
        " true"
    )
    return "sh -c " + shlex.quote(script)


def tcmalloc_metadata(readings: dict, mongodb_version: str) -> dict:
    """Sample metadata of a running 8.0+ mongod's allocator: the glibc version, the
    GLIBC_TUNABLES it runs with, and `tcmalloc_rseq_ok` False (with a deviation) when
    glibc >= 2.35 registers rseq itself, so per-CPU caches are off."""
    if parse_version(mongodb_version)[:2] < PER_CPU_SINCE:
        return {}
    glibc = str(readings.get("glibc_version") or "")
    known = "mongod_glibc_tunables" in readings  # the process' environment was readable
    tunables = str(readings.get("mongod_glibc_tunables") or "") if known else "unknown"
    meta = {"host_glibc_version": glibc or "unknown", "mongod_glibc_tunables": tunables}
    m = re.match(r"(\d+)\.(\d+)", glibc)
    rseq_off = RSEQ_TUNABLE in tunables.split(":")
    if known and m and (int(m.group(1)), int(m.group(2))) >= RSEQ_GLIBC:
        meta["tcmalloc_rseq_ok"] = rseq_off
        if not rseq_off:
            meta["tcmalloc_deviation"] = (
                f"glibc {glibc} registers rseq and GLIBC_TUNABLES lacks {RSEQ_TUNABLE}:"
                " TCMalloc runs without per-CPU caches"
            )
    return meta


def merge_tcmalloc(meta: dict, tcmalloc: dict) -> dict:
    """Adds tcmalloc_metadata to host-settings metadata: a missing rseq tunable is a
    deviation, so host_settings_as_recommended turns False."""
    meta.update(tcmalloc)
    if tcmalloc.get("tcmalloc_rseq_ok") is False:
        meta["host_settings_as_recommended"] = False
        off = [d for d in str(meta.get("host_settings_deviations") or "").split(",") if d]
        meta["host_settings_deviations"] = ",".join(
            [*off, f"GLIBC_TUNABLES={tcmalloc.get('mongod_glibc_tunables')}(want {RSEQ_TUNABLE})"]
        )
    return meta


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
