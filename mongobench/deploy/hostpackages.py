"""What a run may undo of a static Debian host's packages: the ones it installed, no other.

PKB snapshots a static VM's `dpkg --get-selections` before anything is installed and at
teardown restores it with `apt-get --purge dselect-upgrade`. That purges what the run
installed, and also upgrades every host package that has a newer version in the apt lists
(the run refreshed them): 135 unrelated packages in a trial. Here the packages taken off are
those selected for install now and not in the snapshot, and only when apt's own simulation
of their purge removes nothing else (a host package upgraded during the run to a version
that needs one of them would go too); they are purged, or removed where the host had
removed them and kept their configuration files. Pure functions; `mongobench_pkb.host`
runs them.
"""

from __future__ import annotations

import re
import shlex

# `apt-get -s` prints one line a package it would remove: "Purg name [version]" or
# "Remv name [version]".
_SIMULATED = re.compile(r"^(?:Purg|Remv) (\S+)", re.M)


def installed(selections: str) -> set[str]:
    """The packages `dpkg --get-selections` output selects for install."""
    out = set()
    for line in selections.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == "install":
            out.add(fields[0])
    return out


def added(snapshot: str, now: str) -> list[str]:
    """The packages selected for install now and not in the snapshot (both
    `dpkg --get-selections` outputs), sorted."""
    return sorted(installed(now) - installed(snapshot))


def simulate_command(packages: list[str]) -> str:
    return "sudo apt-get -s purge " + " ".join(map(shlex.quote, packages))


def undo_commands(snapshot: str, packages: list[str]) -> list[str]:
    """The apt commands that take `packages` (added) off: removed, keeping their
    configuration files, where the snapshot lists them (the host had removed them and kept
    those files), first; purged otherwise. Never an upgrade."""
    known = {line.split()[0] for line in snapshot.splitlines() if line.split()}
    remove = [p for p in packages if p in known]
    purge = [p for p in packages if p not in known]
    return [_apt(verb, names) for verb, names in (("remove", remove), ("purge", purge)) if names]


def _apt(verb: str, packages: list[str]) -> str:
    names = " ".join(map(shlex.quote, packages))
    return f"sudo DEBIAN_FRONTEND=noninteractive apt-get {verb} -y -q {names}"


def _base(name: str) -> str:
    # dpkg selections may name a package with its architecture (libc6:amd64), apt's
    # simulation without it for the native one
    return name.split(":", 1)[0]


def others_removed(packages: list[str], simulation: str) -> list[str]:
    """The packages apt's simulated purge of `packages` would also remove (sorted): none
    may be purged then."""
    ours = {_base(p) for p in packages}
    return sorted({p for p in _SIMULATED.findall(simulation) if _base(p) not in ours})
