"""How the stress instances get their data: YCSB inserts into every instance ("load"), or one
instance loaded by YCSB and its data files copied to the others ("copy").

Copying follows MongoDB's file-system backup: the source mongod is shut down cleanly (its
data files are then consistent), its dbPath is copied with `cp -a --reflink=auto` (a clone of
the extents on a file system that has them, XFS with reflink or btrfs; else a plain copy, all
targets in parallel) and restarted. Every copy is verified before its step: its record count
and a SHA-256 over sampled records (`VerifyData` of the project's YCSB binding, which names the
sampled keys as YCSB does) must equal the source's, taken right before it was stopped.

A copy carries the source's storage settings (WiredTiger's table and log configuration live
in the files), so instances whose storage settings differ are loaded instead; the run's
metadata says which (`data_seeding`) and why (`data_seeding_reason`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from mongobench.stress.settings import SEEDINGS
from mongobench.stress.steps import StepError

SOURCE = 0  # the instance YCSB loads; the others get copies of its files
VERIFY_SAMPLES = 64
SAMPLES_PROPERTY = "mongobench.verify.samples"  # VerifyData: records sampled
VERIFY_CLASS = "io.github.mongobench.ycsb.VerifyData"
FTDC_DIR = "diagnostic.data"  # mongod's full-time diagnostic data capture, per instance
# Settings that may differ between instances whose files are copies of one another: where the
# files are, and the cache (a runtime setting, not written into the files).
_PER_INSTANCE_STORAGE = (("dbPath",), ("wiredTiger", "engineConfig", "cacheSizeGB"))


@dataclass(frozen=True)
class Seeding:
    mode: str  # "copy" or "load"
    reason: str

    def metadata(self) -> dict:
        return {"data_seeding": self.mode, "data_seeding_reason": self.reason}


def storage_settings(config_text: str) -> dict:
    """The storage section of a mongod YAML config without what may differ between copies."""
    storage = dict((yaml.safe_load(config_text) or {}).get("storage") or {})
    for path in _PER_INSTANCE_STORAGE:
        storage = _without(storage, path)
    return storage


def _without(tree: dict, path: Sequence[str]) -> dict:
    out = dict(tree)
    if len(path) == 1:
        out.pop(path[0], None)
        return out
    child = out.get(path[0])
    if isinstance(child, dict):
        out[path[0]] = _without(child, path[1:])
    return out


def choose(
    requested: str,
    *,
    server_kind: str,
    configs: Sequence[str] = (),
    has_data_files: bool = True,
) -> Seeding:
    """The seeding a run uses. `requested` "load" is always honoured; "copy" falls back to
    "load" (with the reason) when the server keeps no data files or the instances' storage
    settings (their YAML `configs`, one per instance, stand-in: none) differ."""
    if requested not in SEEDINGS:
        raise ValueError(f"data seeding must be one of {SEEDINGS}, got {requested!r}")
    if requested == "load":
        return Seeding("load", "asked for: every instance is loaded by YCSB")
    if not has_data_files:
        return Seeding("load", f"the {server_kind} server keeps no data files to copy")
    settings = [storage_settings(c) for c in configs]
    differ = [i for i, s in enumerate(settings) if s != settings[SOURCE]]
    if differ:
        return Seeding(
            "load",
            "storage settings (WiredTiger) differ from instance 0's on instance(s) "
            + ",".join(str(i) for i in differ)
            + ": a copy would carry instance 0's",
        )
    return Seeding(
        "copy",
        f"instance {SOURCE} loaded by YCSB, shut down cleanly; the others get copies of its"
        " data files (cp --reflink=auto), each verified (record count, SHA-256 of sampled"
        " records) before its step",
    )


# ----------------------------------------------------------------------------- copying


def copy_command(source_dbpath: str, target_dbpaths: Sequence[str], *, sudo: bool = True) -> str:
    """Copies the (stopped) source's dbPath to every target dbPath, all in parallel: each
    target's parent is made as the caller (as Start makes them), the target replaced by
    `cp -a --reflink=auto` (owners and modes kept, extents cloned where the file system can),
    without the source's diagnostic.data (FTDC: each instance records its own).
    Exits non-zero, naming the target, when any copy fails."""
    if not target_dbpaths:
        raise ValueError("no target to copy to")
    q = shlex.quote
    s = "sudo " if sudo else ""
    src = q(source_dbpath.rstrip("/"))
    parts = ["pids=''"]
    for target in target_dbpaths:
        t = q(target.rstrip("/"))
        parts.append(
            f"{{ mkdir -p {t} && {s}rm -rf {t} && {s}cp -a --reflink=auto {src} {t} &&"
            f" {s}rm -rf {t}/{FTDC_DIR} ||"
            f" {{ echo 'copy to '{t}' failed' >&2; exit 1; }}; }} & pids=\"$pids $!\""
        )
    parts.append("rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc")
    return "; ".join(parts)


def reflink_probe_command(directory: str) -> str:
    """Exits 0 when `cp --reflink=always` clones a file in `directory` (XFS with reflink,
    btrfs): copies are then clones, free in time and space, and made for every instance at
    once."""
    d = shlex.quote(directory)
    return (
        f'f=$(mktemp -p {d}) && cp --reflink=always "$f" "$f.clone" 2>/dev/null; rc=$?; '
        'rm -f "$f" "$f.clone"; exit $rc'
    )


# ----------------------------------------------------------------------------- verification

_VERIFY = re.compile(
    r"^VERIFY (?P<file>\S+) records=(?P<records>\d+) sampled=(?P<sampled>\d+) "
    r"found=(?P<found>\d+) sha256=(?P<digest>[0-9a-f]{64})$"
)


@dataclass(frozen=True)
class Fingerprint:
    """An instance's data as VerifyData saw it."""

    records: int
    sampled: int
    found: int
    digest: str

    def metadata(self) -> dict:
        return {"records": self.records, "sampled": self.sampled, "sha256": self.digest}


def verify_command(java: str, classpath: str, property_files: Sequence[str]) -> list[str]:
    """argv of one VerifyData run over the instances of `property_files`."""
    return [java, "-cp", classpath, VERIFY_CLASS, *property_files]


def parse_verify(output: str) -> dict[str, Fingerprint]:
    """property file -> Fingerprint, from VerifyData's stdout."""
    out = {}
    for line in output.splitlines():
        m = _VERIFY.match(line.strip())
        if m:
            out[m["file"]] = Fingerprint(
                int(m["records"]), int(m["sampled"]), int(m["found"]), m["digest"]
            )
    return out


def check_source(fp: Fingerprint | None, expected_records: int) -> Fingerprint:
    """The source holds exactly the records YCSB loaded and every sampled key; StepError
    otherwise (the copies would carry the fault)."""
    where = f"data seeding: source instance {SOURCE}"
    if fp is None:
        raise StepError(f"{where}: no verification result")
    if fp.records != expected_records or fp.found != fp.sampled:
        raise StepError(
            f"{where}: {fp.records} records (expected {expected_records}), {fp.found} of"
            f" {fp.sampled} sampled keys found"
        )
    return fp


def check_copy(instance: int, fp: Fingerprint | None, source: Fingerprint) -> None:
    """A copy equals its source: same record count, same sampled records; StepError naming the
    instance otherwise."""
    where = f"data seeding: copy on instance {instance}"
    if fp is None:
        raise StepError(f"{where}: no verification result")
    if fp.records != source.records:
        raise StepError(f"{where}: {fp.records} records, the source has {source.records}")
    if fp.found != source.found or fp.digest != source.digest:
        raise StepError(
            f"{where}: sampled records differ from the source's ({fp.found} of {fp.sampled}"
            f" found, sha256 {fp.digest[:12]}... vs {source.digest[:12]}...)"
        )


def verification_metadata(source: Fingerprint, copies: Mapping[int, Fingerprint]) -> dict:
    """Sample metadata of the seeding verified so far."""
    return {
        "data_seeding_verified": True,
        "data_seeding_copies": ",".join(str(i) for i in sorted(copies)) or "none",
        "data_seeding_records": source.records,
        "data_seeding_sampled_keys": source.sampled,
        "data_seeding_sha256": source.digest,
    }
