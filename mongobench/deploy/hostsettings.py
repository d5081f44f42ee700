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
