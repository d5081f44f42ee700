"""The rates past runs measured, kept per target for the next run's estimate.

One JSON file (MONGOBENCH_RATES_FILE, else ~/.cache/mongobench/rates.json) maps a key (the
target's redacted URI, prefixed for other kinds of run) to what was measured against it.
perftables.estimate and sweep.estimate read and write their records here.
"""

from __future__ import annotations

import json
import os
import pathlib

from mongobench.core import files, redact

RATES_ENV = "MONGOBENCH_RATES_FILE"


def rates_file() -> pathlib.Path:
    if os.environ.get(RATES_ENV):
        return pathlib.Path(os.environ[RATES_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "mongobench" / "rates.json"


def target_key(uri: str) -> str:
    """The target as the rates file names it: its redacted form (never a password)."""
    return redact.uri(uri)


def _read_all() -> dict:
    try:
        data = json.loads(rates_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_record(key: str) -> dict | None:
    """What past runs recorded under `key` (a target as target_key names it)."""
    past = _read_all().get(key)
    return past if isinstance(past, dict) else None


def write_record(key: str, entry: dict) -> None:
    """Records `entry` under `key` for the next estimate. An estimate is advice: a file that
    cannot be written is skipped, never a failed run."""
    data = _read_all()
    data[key] = entry
    path = rates_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(str(path), json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass
