"""One loader for every results file `report` and `compare` read, as samples.

- PKB results (`perfkitbenchmarker_results.json`): one JSON sample a line, metadata as a
  dict or PKB's `|key:value|` label string. `mongobench sweep run --out` writes this form.
- `mongobench perftables run --out`: the engine's raw results (one JSON object holding the
  run and its variant results); turned into the same samples PKB gets, failed and n/a
  variants included (`results.run_samples`).
- `mongobench perftables run --samples`: a JSON array of samples.

Every sample comes out as {metric, value, unit, metadata, run_uri, timestamp}.
"""

from __future__ import annotations

import json

from mongobench.reports import report, results

# The `tool` a perftables raw results file names.
PERFTABLES_TOOL = "mongobench perftables"


def load(path: str) -> list[dict]:
    """The samples of any results file the engine or PKB writes; ValueError naming the file
    (and line) for anything else."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise ValueError(
            f"{path}: not a text file (a PKB results file, or a perftables or sweep --out file)"
        ) from None
    whole = _whole_json(text)
    if isinstance(whole, dict) and "metric" not in whole:
        if whole.get("tool") != PERFTABLES_TOOL or not isinstance(whole.get("results"), list):
            raise ValueError(
                f"{path}: a JSON object that is neither a sample nor a"
                " `mongobench perftables run --out` file"
            )
        return perftables_samples(whole)
    if isinstance(whole, list):
        return [_checked(rec, f"{path}: item {n}") for n, rec in enumerate(whole, 1)]
    return report.load_pkb_results(path)


def _whole_json(text: str):
    """The file as one JSON document, or None (JSON lines, or not JSON at all)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _checked(rec, where: str) -> dict:
    """A sample of a JSON array (a --samples file) in the loader's form."""
    ok = (
        isinstance(rec, dict)
        and isinstance(rec.get("metric"), str)
        and isinstance(rec.get("value"), (int, float))
        and not isinstance(rec.get("value"), bool)
        and isinstance(rec.get("metadata", {}), dict)
    )
    if not ok:
        raise ValueError(f"{where}: not a sample (an object with metric, value and metadata)")
    return {
        "metric": rec["metric"],
        "value": rec["value"],
        "unit": rec.get("unit", ""),
        "metadata": rec.get("metadata") or {},
        "run_uri": rec.get("run_uri", ""),
        "timestamp": rec.get("timestamp"),
    }


def perftables_samples(run: dict) -> list[dict]:
    """The samples of a perftables raw results document (the run's id, when it has one,
    as their run_uri)."""
    uri = str(run.get("run_id") or "")
    return [dict(_checked(s, "perftables results"), run_uri=uri) for s in results.run_samples(run)]
