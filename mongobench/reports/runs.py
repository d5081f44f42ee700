"""One comparison report over several PKB results files (machine types, disk types, Atlas tiers).

Each run is identified by (file, run_uri) and labelled by a user label for its file, else by
what its samples' metadata say: Atlas tier, machine type (server group first) and, when runs
differ by it, disk type. The report holds:

- the seed 002 plots of the dataset-size sweep (runtime and throughput vs dataset size on
  linear and log scales, p99 per operation) and side-by-side tables per phase;
- side-by-side tables of the Performance Tables throughput per experiment and variant;
- the mongodb_stress KPIs per run;
- operations per dollar wherever an hourly price is known: ``--price label=USD``, Atlas tiers
  (`mongobench.core.pricing.price_per_hour`) or a small built-in table of common instance types
  (approximate list prices, dated below).

A figure without a sample shows as "n/a" in tables and as a gap in plots: missing, never zero.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mongobench.core import pricing
from mongobench.reports import caption, layout, loader, report
from mongobench.stress import search as stress
from mongobench.sweep import plan as sweep

_MACHINE_KEYS = ("servers_machine_type", "server_machine_type", "machine_type")
_DISK_KEYS = ("servers_data_disk_0_type", "server_data_disk_0_type", "data_disk_0_type")
_MISSING = {"", "none", "null", "n/a"}


# ----------------------------------------------------------------------------- runs


@dataclass(eq=False)
class Run:
    path: str
    run_uri: str
    samples: list[dict]
    label: str = ""
    user_label: str | None = None
    machine_type: str | None = None
    machine_key: str | None = None
    disk_type: str | None = None
    tier: str | None = None
    provider: str | None = None
    region: str | None = None
    price: float | None = None
    price_source: str | None = None
    benchmarks: list[str] = field(default_factory=list)


def _value(md: Mapping, key: str) -> str | None:
    v = md.get(key)
    if v is None or str(v).strip().lower() in _MISSING:
        return None
    return str(v)


def _first(samples: Sequence[dict], keys: Sequence[str], suffix: str | None = None):
    """(key, value) of the first metadata key found, in the order of `keys`; then any key ending
    with `suffix` (e.g. ``clients_machine_type``)."""
    for key in keys:
        for s in samples:
            v = _value(s["metadata"], key)
            if v:
                return key, v
    if suffix:
        for s in samples:
            for key in sorted(s["metadata"]):
                if key.endswith(suffix):
                    v = _value(s["metadata"], key)
                    if v:
                        return key, v
    return None, None


def _kind(s: dict) -> str | None:
    md = s["metadata"]
    if "phase" in md and "size_mb" in md:
        return "sweep"
    if s["metric"] in (stress.MAX_METRIC, stress.SLA_METRIC):
        return "stress"
    if "experiment" in md and "variant" in md:
        return "perftables"
    return None


def is_stress_step(s: dict) -> bool:
    """A per-step sample of a stress search (its throughput, latencies, usage and time
    series), not a KPI."""
    md = s["metadata"]
    return "step" in md and "instances" in md and "size_mb" not in md and _kind(s) != "stress"


def _label_for(path: str, labels: Mapping[str, str]) -> str | None:
    """The user label of a file, given by its path as typed, its absolute path or its name."""
    for key, name in labels.items():
        if key in (path, os.path.basename(path)) or os.path.abspath(key) == os.path.abspath(path):
            return name
    return None


def load_runs(paths: Sequence[str], labels: Mapping[str, str] | None = None) -> list[Run]:
    """Every run (file, run_uri) of the files, in the order given."""
    labels = dict(labels or {})
    unknown = [k for k in labels if not any(_label_for(p, {k: k}) for p in paths)]
    if unknown:
        raise ValueError(f"--label names no --results file: {', '.join(unknown)}")
    runs: list[Run] = []
    for path in paths:
        by_uri: dict[str, list[dict]] = {}
        for s in loader.load(path):
            by_uri.setdefault(s.get("run_uri") or "", []).append(s)
        if not by_uri:
            raise ValueError(f"{path}: no samples")
        for uri, samples in by_uri.items():
            run = Run(path=path, run_uri=uri, samples=samples, user_label=_label_for(path, labels))
            run.machine_key, run.machine_type = _first(samples, _MACHINE_KEYS, "machine_type")
            _, run.disk_type = _first(samples, _DISK_KEYS, "data_disk_0_type")
            _, run.tier = _first(samples, ("atlas_tier",))
            _, run.provider = _first(samples, ("atlas_provider",))
            _, run.region = _first(samples, ("atlas_region",))
            kinds = {_kind(s) for s in samples} - {None}
            run.benchmarks = sorted(kinds)
            runs.append(run)
    _assign_labels(runs)
    return runs


def sweep_runs(loaded: Sequence[tuple[str, list[dict]]]) -> list[Run]:
    """The runs (file, run_uri) of loaded files (path, samples) that hold sweep samples, each
    labelled by its run_uri, else its file's name (`report`'s sweep section)."""
    out: list[Run] = []
    for path, samples in loaded:
        by_uri: dict[str, list[dict]] = {}
        for s in samples:
            if _kind(s) == "sweep":
                by_uri.setdefault(s.get("run_uri") or "", []).append(s)
        for uri, got in by_uri.items():
            label = uri or os.path.basename(path)
            if any(r.label == label for r in out):
                label = f"{label} ({len(out) + 1})"
            out.append(Run(path=path, run_uri=uri, samples=got, label=label, benchmarks=["sweep"]))
    return out


def stress_runs(loaded: Sequence[tuple[str, list[dict]]]) -> list[Run]:
    """The runs (file, run_uri) of loaded files (path, samples) that hold stress KPIs,
    each labelled by its run_uri, else its file's name (`report`'s stress section)."""
    out: list[Run] = []
    for path, samples in loaded:
        by_uri: dict[str, list[dict]] = {}
        for s in samples:
            if _kind(s) == "stress" or is_stress_step(s):
                by_uri.setdefault(s.get("run_uri") or "", []).append(s)
        for uri, got in by_uri.items():
            if not any(_kind(s) == "stress" for s in got):
                continue  # steps of a search that ended without KPIs: nothing to tabulate
            label = uri or os.path.basename(path)
            if any(r.label == label for r in out):
                label = f"{label} ({len(out) + 1})"
            out.append(Run(path=path, run_uri=uri, samples=got, label=label, benchmarks=["stress"]))
    return out


def _assign_labels(runs: list[Run]) -> None:
    per_file: dict[str, int] = {}
    for r in runs:
        per_file[r.path] = per_file.get(r.path, 0) + 1
    auto = [r for r in runs if not r.user_label]
    disks_differ = len({r.disk_type for r in auto if r.disk_type}) > 1
    for r in runs:
        if r.user_label:
            r.label = r.user_label
            if per_file[r.path] > 1:
                r.label += f" ({r.run_uri[:8] or 'no run_uri'})"
            continue
        primary = f"Atlas {r.tier}" if r.tier else r.machine_type
        parts = [p for p in (primary, r.disk_type if disks_differ or not primary else None) if p]
        r.label = " / ".join(parts) or r.run_uri[:8] or os.path.basename(r.path)
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in runs:
        if seen[r.label] > 1 and not r.user_label:
            r.label = f"{r.label} ({r.run_uri[:8] or os.path.basename(r.path)})"
    labels = [r.label for r in runs]
    dups = sorted({x for x in labels if labels.count(x) > 1})
    if dups:
        raise ValueError(f"several runs share the label(s) {', '.join(dups)}: give --label")


def assign_prices(runs: Sequence[Run], prices: Mapping[str, float] | None = None) -> None:
    """Hourly price of each run: --price (by label, machine type or tier), the Atlas price in
    the samples or table, else the built-in instance table."""
    prices = dict(prices or {})
    matched = set()
    for r in runs:
        for key in (r.label, r.user_label, r.machine_type, r.tier):
            if key and key in prices:
                r.price, r.price_source = float(prices[key]), "--price"
                matched.add(key)
                break
        if r.price is not None:
            continue
        if r.tier:
            _, given = _first(r.samples, ("atlas_price_per_hour_usd",))
            price = float(given) if given else None
            price = price or pricing.price_per_hour(r.tier, r.provider or "AWS", r.region)
            if price:
                r.price = price
                r.price_source = f"Atlas list price {pricing.PRICES_AS_OF}"
                continue
        if r.machine_type and r.machine_type in pricing.INSTANCE_PRICES:
            r.price = pricing.INSTANCE_PRICES[r.machine_type]
            where = (r.machine_key or "machine_type").removesuffix("machine_type").rstrip("_")
            r.price_source = f"built-in table {pricing.PRICES_AS_OF}" + (
                f", {where} VM only" if where else ""
            )
    unused = sorted(set(prices) - matched)
    if unused:
        raise ValueError(f"--price names no run, machine type or tier: {', '.join(unused)}")


def ops_per_dollar(ops_per_s: float | None, price_per_hour: float | None) -> float | None:
    """Operations bought by one dollar at this throughput: ops/s x 3600 / ($/h)."""
    if ops_per_s is None or not price_per_hour:
        return None
    return ops_per_s * 3600.0 / price_per_hour


# ----------------------------------------------------------------------------- figures


@dataclass
class SweepPoint:
    runtime_s: float | None = None
    throughput: float | None = None
    p99_ms: dict = field(default_factory=dict)
    p50_ms: dict = field(default_factory=dict)
    exceeds_memory: bool | None = None
    error: str | None = None


def _bool(v) -> bool | None:
    if isinstance(v, bool):
        return v
    if v is None or str(v).lower() in _MISSING:
        return None
    return str(v).lower() == "true"


# Names of results written before the sweep took PKB's ycsb_stats names (runtime in seconds).
_LEGACY_RUNTIME_S = "Runtime"
_LEGACY_THROUGHPUT = "Throughput"
_LEGACY_P99 = " p99 Latency"  # "<OP> p99 Latency"


def sweep_points(run: Run) -> dict[tuple[str, float], SweepPoint]:
    """(phase, size_mb) -> figures of one run's sweep samples (also of results files written
    under the sweep's former names)."""
    out: dict[tuple[str, float], SweepPoint] = {}
    for s in run.samples:
        if _kind(s) != "sweep":
            continue
        md = s["metadata"]
        point = out.setdefault((md["phase"], float(md["size_mb"])), SweepPoint())
        point.exceeds_memory = _bool(md.get("exceeds_memory"))
        metric = s["metric"]
        op = md.get("op", "")
        if metric == sweep.RUNTIME_METRIC:
            point.runtime_s = float(s["value"]) / 1000.0
        elif metric == _LEGACY_RUNTIME_S:
            point.runtime_s = float(s["value"])
        elif metric in (sweep.THROUGHPUT_METRIC, _LEGACY_THROUGHPUT):
            point.throughput = float(s["value"])
        elif metric == sweep.FAILED_METRIC:
            point.error = str(md.get("error") or "failed")
        elif op and metric in (sweep.latency_metric(op, sweep.P99_STAT), op + _LEGACY_P99):
            point.p99_ms[op] = float(s["value"])
        elif op and metric == sweep.latency_metric(op, sweep.P50_STAT):
            point.p50_ms[op] = float(s["value"])
    return out


# The client latency percentiles `compare` shows beside throughput: (row key, sample stat).
LATENCY_PERCENTILES = (("_p50_ms", "p50 latency"), ("_p99_ms", "p99 latency"))


def perftables_rows(run: Run) -> dict[str, dict[tuple[int, str], dict]]:
    """experiment -> (variant_index, variant) -> {column key: value}; with `_p50_ms` and
    `_p99_ms`, the client latency percentiles of the variant's main operation (the one with
    the most operations), when the samples have them."""
    samples = [s for s in run.samples if _kind(s) == "perftables"]
    out: dict = {}
    for experiment, rows in report.group(samples).items():
        for (_, idx, variant), row in rows.items():
            out.setdefault(experiment, {})[(idx, variant)] = row
    # "<op> p50 latency" samples (results.LATENCY_STATS): per variant, the busiest op's.
    best: dict = {}
    for s in samples:
        md = s["metadata"]
        op = md.get("op")
        for key, stat in LATENCY_PERCENTILES:
            if not op or s["metric"] != f"{op} {stat}":
                continue
            try:
                count = float(md.get("op_count") or 0)
            except (TypeError, ValueError):
                count = 0.0
            rows = out.get(md.get("experiment"), {})
            for (_, variant), row in rows.items():
                if variant != str(md.get("variant")):
                    continue
                if count >= best.get((id(row), key), -1.0):
                    best[(id(row), key)] = count
                    row[key] = float(s["value"])
    return out


def experiment_layout(experiment: str, catalog: Mapping) -> tuple[layout.Layout, tuple]:
    """(the experiment's table layout, its label settings); an experiment the catalog does not
    know has no tables and no label settings (its rows show their variant label)."""
    e = catalog.get(experiment)
    if e is None:
        return layout.parse({"labels": [{"setting": "variant", "header": "Variant"}]}), ()
    return layout.of(e), tuple(e.label)


def throughput_key(experiment: str, rows: Sequence[dict], catalog: Mapping) -> str | None:
    """The experiment's throughput column: the first its tables show, else the first the
    samples have."""
    return experiment_layout(experiment, catalog)[0].throughput_key(rows)


def stress_kpis(run: Run) -> dict[str, dict]:
    """KPI metric -> {value, metadata}."""
    return {
        s["metric"]: {"value": float(s["value"]), "metadata": s["metadata"]}
        for s in run.samples
        if _kind(s) == "stress"
    }


# The kind of server a run measured (caption.target_kind), computed from its perftables samples.
TARGET_KIND = "target_kind"
# What makes two runs comparable: (what the warning calls it, metadata keys in order).
COMPARABLE = (
    ("scale", ("scale",)),
    ("server product", ("server_product", "server_product_version", "server_backend")),
    ("server version", ("mongodb_version", "server_version", "atlas_mongodb_version")),
    ("topology", ("topology", "deployment")),
    ("driver", ("client_path", "pymongo_version", "java_driver_version")),
    ("client count", ("client_vms", "client_processes")),
    ("setting overrides", ("overrides",)),  # --set, and the URI's write concern
    ("target", (TARGET_KIND,)),
)


def comparability_warnings(runs: Sequence[Run]) -> list[str]:
    """One line per property the runs differ in (scale, server version, topology, driver,
    client count): their figures then measure more than the thing compared."""
    out = []
    for what, keys in COMPARABLE:
        values = {}
        for r in runs:
            found = {}
            for key in keys:
                if key == TARGET_KIND:
                    seen = sorted({caption.target_kind(s["metadata"]) for s in _measured(r)})
                else:
                    seen = sorted({v for s in r.samples if (v := _value(s["metadata"], key))})
                if seen:
                    found[key] = "/".join(seen)
            values[r.label] = ", ".join(f"{k} {v}" for k, v in found.items()) or None
        if len({v for v in values.values() if v is not None}) > 1:
            shown = "; ".join(f"{label}: {v or 'n/a'}" for label, v in values.items())
            out.append(f"the runs differ in {what} ({shown})")
    return out


def _measured(run: Run) -> list[dict]:
    """The run's perftables samples of measured variants (they name the server they ran on)."""
    return [s for s in run.samples if _kind(s) == "perftables" and s["metric"] not in report.STATUS]


def replicated(md: Mapping) -> bool:
    """The sample is the mean of two or more repeats (--repeats): it has an interval."""
    try:
        return float(md.get("repeats") or 1) >= 2
    except (TypeError, ValueError):
        return False


def unreplicated_runs(runs: Sequence[Run]) -> list[str]:
    """Labels of the runs whose perftables or sweep figures are single runs (no --repeats):
    a difference against them cannot be told from run-to-run noise."""
    out = []
    for r in runs:
        figures = [s for s in r.samples if _kind(s) in ("perftables", "sweep")]
        figures = [s for s in figures if s["metric"] not in report.STATUS]
        if figures and not any(replicated(s["metadata"]) for s in figures):
            out.append(r.label)
    return out


def percent_change(value: float | None, baseline: float | None) -> float | None:
    """(value / baseline - 1) x 100, or None when either is missing or the baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return (value / baseline - 1.0) * 100.0


def baseline_run(runs: Sequence[Run], label: str | None) -> Run | None:
    """The run labelled `label` (None: no baseline); a label no run has is an error."""
    if label is None:
        return None
    for r in runs:
        if r.label == label:
            return r
    raise ValueError(f"--baseline {label!r} names no run; runs: {', '.join(r.label for r in runs)}")
