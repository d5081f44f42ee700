"""One comparison report over several PKB results files (machine types, disk types, Atlas tiers).

Each run is identified by (file, run_uri) and labelled by a user label for its file, else by
what its samples' metadata say: Atlas tier, machine type (server group first) and, when runs
differ by it, disk type. The report holds:

- the seed 002 plots of the dataset-size sweep (runtime and throughput vs dataset size on
  linear and log scales, p99 per operation) and side-by-side tables per phase;
- side-by-side tables of the Performance Tables throughput per experiment and variant;
- the mongodb_stress KPIs per run;
- operations per dollar wherever an hourly price is known: ``--price label=USD``, Atlas tiers
  (`mongobench.atlas.price_per_hour`) or a small built-in table of common instance types
  (approximate list prices, dated below).

A figure without a sample shows as "n/a" in tables and as a gap in plots: missing, never zero.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mongobench import atlas, report, stress, sweep
from mongobench import experiments as exp_mod
from mongobench.results import COLUMNS

# Approximate on-demand Linux list prices in USD per hour (AWS us-east-1, GCP us-central1,
# Azure East US), as published by the providers around mid-2025. Written from those public
# price lists without re-reading a live page (no web access when written): ballpark figures
# for ops per dollar, always marked approximate. Update the date when you re-read them.
INSTANCE_PRICES_AS_OF = "2025-06 (approximate, not re-verified)"
INSTANCE_PRICES = {
    # AWS EC2, us-east-1
    "t3.medium": 0.0416,
    "t3.large": 0.0832,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "m5.4xlarge": 0.768,
    "m6i.large": 0.096,
    "m6i.xlarge": 0.192,
    "m6i.2xlarge": 0.384,
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "c6i.large": 0.085,
    "c6i.xlarge": 0.17,
    "r5.large": 0.126,
    "r5.xlarge": 0.252,
    "r6i.large": 0.126,
    "r6i.xlarge": 0.252,
    "i3.large": 0.156,
    "i3.xlarge": 0.312,
    # Google Compute Engine, us-central1
    "e2-standard-2": 0.067,
    "e2-standard-4": 0.134,
    "e2-standard-8": 0.268,
    "n1-standard-2": 0.095,
    "n1-standard-4": 0.19,
    "n2-standard-2": 0.0971,
    "n2-standard-4": 0.1942,
    "n2-standard-8": 0.3885,
    "n2-highmem-4": 0.262,
    "c2-standard-4": 0.2088,
    # Azure, East US, pay as you go
    "Standard_D2s_v3": 0.096,
    "Standard_D4s_v3": 0.192,
    "Standard_D8s_v3": 0.384,
    "Standard_D2s_v5": 0.096,
    "Standard_D4s_v5": 0.192,
    "Standard_E2s_v5": 0.126,
    "Standard_E4s_v5": 0.252,
}

_MACHINE_KEYS = ("servers_machine_type", "server_machine_type", "machine_type")
_DISK_KEYS = ("servers_data_disk_0_type", "server_data_disk_0_type", "data_disk_0_type")
_THROUGHPUT_KEYS = ("docs_per_s", "ops_per_s", "insert_ops_per_s", "find_ops_per_s")
_MISSING = {"", "none", "null", "n/a"}
NA = "n/a"


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
        raise ValueError(f"--label names no --pkb-results file: {', '.join(unknown)}")
    runs: list[Run] = []
    for path in paths:
        by_uri: dict[str, list[dict]] = {}
        for s in report.load_pkb_results(path):
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
            price = price or atlas.price_per_hour(r.tier, r.provider or "AWS", r.region)
            if price:
                r.price = price
                r.price_source = f"Atlas list price {atlas.PRICES_AS_OF}"
                continue
        if r.machine_type and r.machine_type in INSTANCE_PRICES:
            r.price = INSTANCE_PRICES[r.machine_type]
            where = (r.machine_key or "machine_type").removesuffix("machine_type").rstrip("_")
            r.price_source = f"built-in table {INSTANCE_PRICES_AS_OF}" + (
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
    exceeds_memory: bool | None = None
    error: str | None = None


def _bool(v) -> bool | None:
    if isinstance(v, bool):
        return v
    if v is None or str(v).lower() in _MISSING:
        return None
    return str(v).lower() == "true"


def sweep_points(run: Run) -> dict[tuple[str, float], SweepPoint]:
    """(phase, size_mb) -> figures of one run's sweep samples."""
    out: dict[tuple[str, float], SweepPoint] = {}
    for s in run.samples:
        if _kind(s) != "sweep":
            continue
        md = s["metadata"]
        point = out.setdefault((md["phase"], float(md["size_mb"])), SweepPoint())
        point.exceeds_memory = _bool(md.get("exceeds_memory"))
        metric = s["metric"]
        if metric == sweep.RUNTIME_METRIC:
            point.runtime_s = float(s["value"])
        elif metric == sweep.THROUGHPUT_METRIC:
            point.throughput = float(s["value"])
        elif metric == sweep.FAILED_METRIC:
            point.error = str(md.get("error") or "failed")
        elif metric == sweep.latency_metric(md.get("op", ""), "p99"):
            point.p99_ms[md["op"]] = float(s["value"])
    return out


def perftables_rows(run: Run) -> dict[str, dict[tuple[int, str], dict]]:
    """experiment -> (variant_index, variant) -> {column key: value}."""
    out: dict = {}
    for experiment, rows in report.group(
        [s for s in run.samples if _kind(s) == "perftables"]
    ).items():
        for (_, idx, variant), row in rows.items():
            out.setdefault(experiment, {})[(idx, variant)] = row
    return out


def throughput_key(experiment: str, rows: Sequence[dict], catalog: Mapping) -> str | None:
    """The experiment's throughput column: the first of its Performance table, else the first
    the samples have."""
    e = catalog.get(experiment)
    columns = list((e.tables.get("performance") if e else None) or []) + list(_THROUGHPUT_KEYS)
    for key in columns:
        if key in _THROUGHPUT_KEYS and any(key in r for r in rows):
            return key
    return None


def stress_kpis(run: Run) -> dict[str, dict]:
    """KPI metric -> {value, metadata}."""
    return {
        s["metric"]: {"value": float(s["value"]), "metadata": s["metadata"]}
        for s in run.samples
        if _kind(s) == "stress"
    }


# ----------------------------------------------------------------------------- formatting


def fmt(value: float | None, digits: int | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NA
    if digits is not None:
        return f"{value:.{digits}f}"
    a = abs(value)
    if a >= 100:
        return f"{value:.0f}"
    if a >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "--:") -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join([align] * len(headers)) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def linear_sizes(sizes: Sequence[float]) -> list[float]:
    """The leading sizes that grow linearly (the seed's 1, 2, 3 MB): the longest prefix of the
    sorted sizes in arithmetic progression, at least two."""
    sizes = sorted(sizes)
    if len(sizes) <= 2:
        return sizes
    step = sizes[1] - sizes[0]
    n = 2
    while n < len(sizes) and math.isclose(sizes[n] - sizes[n - 1], step, rel_tol=1e-6):
        n += 1
    return sizes[:n]


# ----------------------------------------------------------------------------- plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(plt, n: int):
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.9 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _save(fig, plt, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_sweep_metric(
    runs: Sequence[Run],
    points: Mapping[str, Mapping],
    attr: str,
    ylabel: str,
    sizes: Sequence[float],
    log: bool,
    title: str,
    path: str,
) -> str:
    """One panel per phase, one line per run; x = dataset size."""
    plt = _plt()
    phases = [
        p for p in sweep.PHASES if any(p.name == k[0] for pts in points.values() for k in pts)
    ]
    fig, axes = _grid(plt, len(phases))
    for ax, phase in zip(axes, phases, strict=True):
        for run in runs:
            pts = points[run.label]
            ys = [getattr(pts.get((phase.name, x), SweepPoint()), attr) for x in sizes]
            ys = [math.nan if y is None else y for y in ys]
            (line,) = ax.plot(sizes, ys, marker="o", label=run.label)
            over = [
                (x, y)
                for x, y in zip(sizes, ys, strict=True)
                if (pts.get((phase.name, x)) or SweepPoint()).exceeds_memory and not math.isnan(y)
            ]
            if over:
                ax.scatter(
                    *zip(*over, strict=True), s=140, facecolors="none", edgecolors="red", zorder=3
                )
        ax.set_title(phase.title)
        ax.set_ylabel(ylabel)
        _axes(ax, sizes, log)
        ax.legend(fontsize=8)
    note = " (red ring: dataset larger than memory)" if _any_exceeds(points) else ""
    fig.suptitle(title + note, fontsize=11)
    return _save(fig, plt, path)


def _axes(ax, sizes: Sequence[float], log: bool) -> None:
    """x: one tick per dataset size, labelled "1 MB", "10 GB"; log axes with plain numbers."""
    from matplotlib import ticker

    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        ax.yaxis.set_major_formatter(plain)
        # Within about a decade no power of ten is in view: label the minor ticks instead.
        if high / max(low, 1e-12) < 20:
            ax.yaxis.set_minor_formatter(plain)
        else:
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xticks(list(sizes), [sweep.size_label(x) for x in sizes], fontsize=8, rotation=30)
    ax.set_xlabel("dataset size")
    ax.tick_params(axis="y", which="both", labelsize=8)
    ax.grid(True, which="both", alpha=0.3)


def _any_exceeds(points: Mapping[str, Mapping]) -> bool:
    return any(p.exceeds_memory for pts in points.values() for p in pts.values())


def plot_sweep_p99(
    runs: Sequence[Run], points: Mapping[str, Mapping], sizes: Sequence[float], path: str
) -> str | None:
    """One panel per operation, a line per run and phase; log axes."""
    plt = _plt()
    ops = [
        op
        for op in ("INSERT", "READ", "UPDATE", "SCAN", "DELETE")
        if any(op in p.p99_ms for pts in points.values() for p in pts.values())
    ]
    if not ops:
        return None
    fig, axes = _grid(plt, len(ops))
    styles = ["-", "--", ":", "-."]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, op in zip(axes, ops, strict=True):
        for i, run in enumerate(runs):
            pts = points[run.label]
            for j, phase in enumerate(sweep.PHASES):
                ys = [
                    (pts.get((phase.name, x)) or SweepPoint()).p99_ms.get(op, math.nan)
                    for x in sizes
                ]
                if all(math.isnan(y) for y in ys):
                    continue
                ax.plot(
                    sizes,
                    ys,
                    marker="o",
                    linestyle=styles[j % len(styles)],
                    color=colors[i % len(colors)],
                    label=f"{run.label}: {phase.title}",
                )
        ax.set_title(f"{op} p99 latency")
        ax.set_ylabel("p99 latency (ms)")
        _axes(ax, sizes, log=True)
        ax.legend(fontsize=7)
    fig.suptitle("p99 latency per operation vs dataset size", fontsize=11)
    return _save(fig, plt, path)


def plot_bars(
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    ylabel: str,
    path: str,
    texts: Mapping[str, Sequence[str | None]] | None = None,
) -> str:
    """Grouped bars: one group per `groups` item, one bar per series (run); n/a is labelled.
    `texts` replaces a bar's value label (e.g. "none within SLA")."""
    plt = _plt()
    n = max(1, len(series))
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * n + 2), 4.2))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [v or 0 for v in values], width, label=name)
        labels = list((texts or {}).get(name) or [None] * len(values))
        for x, v, t in zip(xs, values, labels, strict=True):
            ax.annotate(
                t or (NA if v is None else fmt(v)),
                (x, v or 0),
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90 if n * len(groups) > 12 else 0,
            )
    ax.set_xticks(range(len(groups)), groups, fontsize=8, rotation=20 if len(groups) > 4 else 0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, plt, path)


# ----------------------------------------------------------------------------- report


def _sweep_section(runs, plots_dir, ref, plots) -> list[str]:
    points = {r.label: sweep_points(r) for r in runs}
    with_sweep = [r for r in runs if points[r.label]]
    if not with_sweep:
        return []
    sizes = sorted({k[1] for pts in points.values() for k in pts})
    lin = linear_sizes(sizes)
    out = [
        "## Dataset-size sweep (YCSB, seed 002)",
        "",
        f"Sizes: {', '.join(sweep.size_label(s) for s in sizes)} of 1 KB records; each size is "
        "rebuilt (drop, load), then read-only, update-only and 50/50 read/update workloads run "
        "with zipfian keys. † marks a dataset larger than the memory of the machine holding it.",
        "",
    ]
    specs = [
        ("runtime_s", "runtime (s)", "Runtime", "sweep_runtime"),
        ("throughput", "throughput (ops/s)", "Throughput", "sweep_throughput"),
    ]
    for attr, ylabel, name, stem in specs:
        for log, xs, kind in ((False, lin, "linear"), (True, sizes, "log")):
            png = os.path.join(plots_dir, f"{stem}_{kind}.png")
            scope = (
                f"sizes {', '.join(f'{x:g}' for x in xs)} MB, linear axes"
                if not log
                else "all sizes, log axes"
            )
            title = f"{name} vs dataset size ({scope})"
            plots.append(plot_sweep_metric(with_sweep, points, attr, ylabel, xs, log, title, png))
            out += [f"![{title}]({ref}/{os.path.basename(png)})", ""]
    png = plot_sweep_p99(with_sweep, points, sizes, os.path.join(plots_dir, "sweep_p99.png"))
    if png:
        plots.append(png)
        out += [f"![p99 latency per operation]({ref}/{os.path.basename(png)})", ""]
    priced = [r for r in with_sweep if r.price]
    for phase in sweep.PHASES:
        keys = [(phase.name, s) for s in sizes]
        if not any(k in points[r.label] for r in with_sweep for k in keys):
            continue
        ops = sorted({op for r in with_sweep for k in keys for op in _p99_ops(points[r.label], k)})
        # Figure by figure, the runs side by side.
        figures = [("Runtime (s)", lambda p: p.runtime_s), ("Throughput (ops/s)", _tput)]
        figures += [(f"{op} p99 (ms)", _p99(op)) for op in ops]
        headers = ["Size"] + [f"{r.label} {name}" for name, _ in figures for r in with_sweep]
        headers += [f"{r.label} ops/$" for r in priced]
        rows = []
        for size in sizes:
            got = {r.label: points[r.label].get((phase.name, size)) for r in with_sweep}
            over = any(p is not None and p.exceeds_memory for p in got.values())
            row = [sweep.size_label(size) + (" †" if over else "")]
            for _name, get in figures:
                for r in with_sweep:
                    p = got[r.label]
                    if p is not None and p.error:
                        row.append("failed")
                        continue
                    value = fmt(get(p or SweepPoint()))
                    # The throughput cell says which run's dataset did not fit in memory.
                    mark = " †" if get is _tput and p and p.exceeds_memory and value != NA else ""
                    row.append(value + mark)
            for r in priced:
                p = got[r.label] or SweepPoint()
                row.append(fmt(ops_per_dollar(p.throughput, r.price), 0))
            rows.append(row)
        out += [f"### {phase.title}", "", md_table(headers, rows), ""]
    errors = [
        f"- {r.label}: {sweep.size_label(k[1])} {k[0]}: {p.error[:200]}"
        for r in with_sweep
        for k, p in sorted(points[r.label].items(), key=lambda kv: (kv[0][1], kv[0][0]))
        if p.error
    ]
    if errors:
        out += ["Failed phases:", "", *errors, ""]
    return out


def _tput(p: SweepPoint) -> float | None:
    return p.throughput


def _p99(op: str):
    return lambda p: p.p99_ms.get(op)


def _p99_ops(pts: Mapping, key) -> list[str]:
    p = pts.get(key)
    return list(p.p99_ms) if p else []


def _perftables_section(runs, plots_dir, ref, plots, catalog) -> list[str]:
    rows_by_run = {r.label: perftables_rows(r) for r in runs}
    experiments = [e for e in catalog if any(e in rows_by_run[r.label] for r in runs)]
    experiments += sorted(
        {e for rr in rows_by_run.values() for e in rr} - set(experiments)
    )  # experiments the catalog does not know still get their figures
    if not experiments:
        return []
    priced = [r for r in runs if r.price]
    out = [
        "## Performance Tables KPIs",
        "",
        "Per experiment and variant: the experiment's throughput figure, one column per run.",
        "",
    ]
    for name in experiments:
        in_runs = [r for r in runs if name in rows_by_run[r.label]]
        all_rows = [row for r in in_runs for row in rows_by_run[r.label][name].values()]
        key = throughput_key(name, all_rows, catalog)
        if key is None:
            continue
        col = COLUMNS[key]
        variants = sorted({v for r in in_runs for v in rows_by_run[r.label][name]})
        title = catalog[name].title if name in catalog else name
        headers = ["Variant"] + [f"{r.label} ({col.header})" for r in in_runs]
        headers += [f"{r.label} ops/$" for r in priced if r in in_runs]
        rows = []
        series: dict[str, list[float | None]] = {r.label: [] for r in in_runs}
        for v in variants:
            row = [v[1]]
            for r in in_runs:
                value = rows_by_run[r.label][name].get(v, {}).get(key)
                series[r.label].append(value)
                row.append(fmt(value, col.digits))
            for r in priced:
                if r in in_runs:
                    value = rows_by_run[r.label][name].get(v, {}).get(key)
                    row.append(fmt(ops_per_dollar(value, r.price), 0))
            rows.append(row)
        out += [f"### {title}", "", md_table(headers, rows), ""]
        png = os.path.join(plots_dir, f"perftables_{name}.png")
        plots.append(
            plot_bars(f"{title}: {col.header}", [v[1] for v in variants], series, col.header, png)
        )
        out += [f"![{title}]({ref}/{os.path.basename(png)})", ""]
    return out


def _stress_section(runs, plots_dir, ref, plots) -> list[str]:
    kpis = {r.label: stress_kpis(r) for r in runs}
    if not any(kpis.values()):
        return []

    def value(label, metric):
        k = kpis[label].get(metric)
        return None if k is None else k["value"]

    def meta(label, metric, key):
        k = kpis[label].get(metric)
        v = None if k is None else k["metadata"].get(key)
        try:
            return None if v is None or str(v).lower() in _MISSING else float(v)
        except ValueError:
            return None

    def sla_cell(label):
        k = kpis[label].get(stress.SLA_METRIC)
        if k is None:
            return NA
        if k["metadata"].get("reason") and k["value"] == 0:
            return "none within SLA"
        return fmt(k["value"], 0)

    labels = [r.label for r in runs]
    rows = [
        ["Maximum Throughput (ops/s)"] + [fmt(value(x, stress.MAX_METRIC), 0) for x in labels],
        ["Maximum Throughput for Latency SLA (ops/s)"] + [sla_cell(x) for x in labels],
        ["Read p99 at maximum (ms)"]
        + [fmt(meta(x, stress.MAX_METRIC, "p99_read_latency_ms")) for x in labels],
        ["Instances at maximum"]
        + [fmt(meta(x, stress.MAX_METRIC, "instances"), 0) for x in labels],
        ["Price ($/h)"] + [fmt(r.price, 4) for r in runs],
        ["Maximum Throughput per dollar (ops/$)"]
        + [fmt(ops_per_dollar(value(r.label, stress.MAX_METRIC), r.price), 0) for r in runs],
    ]
    out = ["## Stress KPIs (mongodb_stress)", "", md_table(["KPI", *labels], rows), ""]
    png = os.path.join(plots_dir, "stress_kpis.png")
    sla = [sla_cell(x) for x in labels]
    series = {
        stress.MAX_METRIC: [value(x, stress.MAX_METRIC) for x in labels],
        stress.SLA_METRIC: [
            None if c == "none within SLA" else value(x, stress.SLA_METRIC)
            for x, c in zip(labels, sla, strict=True)
        ],
    }
    texts = {stress.SLA_METRIC: [c if c == "none within SLA" else None for c in sla]}
    plots.append(plot_bars("mongodb_stress KPIs", labels, series, "ops/s", png, texts))
    out += [f"![mongodb_stress KPIs]({ref}/{os.path.basename(png)})", ""]
    return out


def render(
    runs: Sequence[Run],
    plots_dir: str,
    plots_ref: str | None = None,
    title: str = "MongoDB benchmark comparison",
    catalog: Mapping | None = None,
) -> tuple[str, list[str]]:
    """(markdown, PNG paths written). Images are linked as `plots_ref/<name>.png`."""
    catalog = catalog if catalog is not None else exp_mod.load()
    os.makedirs(plots_dir, exist_ok=True)
    ref = plots_ref if plots_ref is not None else os.path.basename(plots_dir.rstrip("/"))
    plots: list[str] = []
    head = [
        f"# {title}",
        "",
        md_table(
            [
                "Run",
                "File",
                "run_uri",
                "Samples of",
                "Machine type",
                "Disk type",
                "Atlas tier",
                "$/h",
                "Price source",
            ],
            [
                [
                    r.label,
                    os.path.basename(r.path),
                    r.run_uri or NA,
                    ", ".join(r.benchmarks) or NA,
                    r.machine_type or NA,
                    r.disk_type or NA,
                    r.tier or NA,
                    fmt(r.price, 4),
                    r.price_source or NA,
                ]
                for r in runs
            ],
            align=":--",
        ),
        "",
    ]
    body = (
        _sweep_section(runs, plots_dir, ref, plots)
        + _perftables_section(runs, plots_dir, ref, plots, catalog)
        + _stress_section(runs, plots_dir, ref, plots)
    )
    if not body:
        body = ["No sweep, Performance Tables or stress samples found.", ""]
    notes = [
        "## Notes",
        "",
        "- n/a: the run has no sample for that figure (missing, not zero).",
        "- ops/$ = throughput (ops/s) x 3600 / price ($/h): operations one dollar of the "
        "priced machine buys at that rate. It covers only what the price names (the labelled "
        "machine or Atlas tier), not client VMs, disks or traffic.",
        f"- Built-in instance prices: on-demand Linux list prices, {INSTANCE_PRICES_AS_OF}; "
        f"Atlas tiers: {atlas.PRICES_AS_OF}, {atlas.PRICES_SOURCE}. Prefer --price with "
        "your own rates.",
        "",
    ]
    return "\n".join(head + body + notes), plots


def parse_pairs(pairs: Sequence[str] | None, what: str, number: bool = False) -> dict:
    """``NAME=VALUE`` pairs; a price's name may hold '=' (split at the last), a label's file
    name may not (split at the first)."""
    out: dict = {}
    for pair in pairs or []:
        key, sep, value = pair.rpartition("=") if number else pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{what} takes NAME=VALUE, not {pair!r}")
        if number:
            try:
                value = float(value.strip().lstrip("$"))
            except ValueError:
                raise ValueError(f"{what}: {pair!r}: the price must be a number") from None
            if not value > 0:
                raise ValueError(f"{what}: {pair!r}: the price must be > 0")
        out[key.strip()] = value
    return out


def compare(
    paths: Sequence[str],
    out: str,
    plots_dir: str | None = None,
    labels: Mapping[str, str] | None = None,
    prices: Mapping[str, float] | None = None,
    title: str = "MongoDB benchmark comparison",
) -> tuple[str, list[str]]:
    """Loads the files, writes the report to `out` and its plots; returns (text, plots)."""
    out_dir = os.path.dirname(os.path.abspath(out))
    if plots_dir is None:
        stem = os.path.splitext(os.path.basename(out))[0]
        plots_dir = os.path.join(out_dir, f"{stem}-plots")
    runs = load_runs(paths, labels)
    assign_prices(runs, prices)
    ref = os.path.relpath(os.path.abspath(plots_dir), out_dir)
    text, plots = render(runs, plots_dir, ref, title)
    os.makedirs(out_dir, exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    return text, plots


def cmd_compare(args) -> int:
    try:
        labels = parse_pairs(args.label, "--label")
        prices = parse_pairs(args.price, "--price", number=True)
        _, plots = compare(args.pkb_results, args.out, args.plots_dir, labels, prices, args.title)
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench compare: {e}") from None
    print(f"wrote {args.out} and {len(plots)} plot(s)", file=sys.stderr)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """`mongobench compare --pkb-results F1 F2 ... --out report.md`."""
    p = subparsers.add_parser(
        "compare", help="one markdown report with plots comparing several PKB results files"
    )
    p.add_argument("--pkb-results", nargs="+", required=True, metavar="FILE")
    p.add_argument(
        "--label",
        action="append",
        metavar="FILE=NAME",
        help="name the run(s) of FILE (default: machine type / disk type / Atlas tier)",
    )
    p.add_argument(
        "--price",
        action="append",
        metavar="NAME=USD",
        help="hourly price of a run label, machine type or tier (ops per dollar)",
    )
    p.add_argument("--out", required=True, help="markdown report")
    p.add_argument("--plots-dir", help="PNG plots (default: <out stem>-plots beside --out)")
    p.add_argument("--title", default="MongoDB benchmark comparison")
    p.set_defaults(func=cmd_compare)
    return p
