"""The markdown sections of `mongobench compare`: sweep, perftables and stress."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from mongobench.core import pricing
from mongobench.core.markdown import NA, fmt, md_table
from mongobench.perftables import experiments as exp_mod
from mongobench.reports import caption, layout, report, timeseries
from mongobench.reports.plots import linear_sizes, plot_bars, plot_sweep_metric, plot_sweep_p99
from mongobench.reports.results import COLUMNS
from mongobench.reports.runs import (
    _MISSING,
    LATENCY_PERCENTILES,
    Run,
    SweepPoint,
    _kind,
    baseline_run,
    comparability_warnings,
    experiment_layout,
    is_stress_step,
    ops_per_dollar,
    percent_change,
    perftables_rows,
    stress_kpis,
    sweep_points,
    throughput_key,
    unreplicated_runs,
)
from mongobench.reports.tableplots import plot_experiment
from mongobench.stress import search as stress
from mongobench.sweep import plan as sweep

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
    for attr, ylabel, name, stem in specs if plots_dir is not None else ():
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
    png = plots_dir and plot_sweep_p99(
        with_sweep, points, sizes, os.path.join(plots_dir, "sweep_p99.png")
    )
    if png:
        plots.append(png)
        out += [f"![p99 latency per operation]({ref}/{os.path.basename(png)})", ""]
    priced = [r for r in with_sweep if r.price]
    # the provenance line, as under the perftables tables (reports.caption)
    mine = [s for r in with_sweep for s in r.samples if _kind(s) == "sweep"]
    mds = [s["metadata"] for s in mine]
    note = caption.line(mds, [s.get("timestamp") for s in mine], caption.sweep_scale(mds))
    # throughput over time inside each long phase, a line per size (YCSB's status lines)
    over_time = {}
    if plots_dir is not None:
        over_time = timeseries.long_phases(
            mine, timeseries.YCSB_THROUGHPUT_SERIES, "phase", timeseries.size_label
        )
    for phase in sweep.PHASES:
        keys = [(phase.name, s) for s in sizes]
        if not any(k in points[r.label] for r in with_sweep for k in keys):
            continue
        ops = sorted({op for r in with_sweep for k in keys for op in _p99_ops(points[r.label], k)})
        # Figure by figure, the runs side by side.
        figures = [("Runtime (s)", lambda p: p.runtime_s), ("Throughput (ops/s)", _tput)]
        # each operation's p50 (where the runs' samples have it) and p99 beside throughput
        p50_ops = {op for r in with_sweep for k in keys for op in _p50_ops(points[r.label], k)}
        for op in ops:
            if op in p50_ops:
                figures.append((f"{op} p50 (ms)", _p50(op)))
            figures.append((f"{op} p99 (ms)", _p99(op)))
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
        png = os.path.join(plots_dir or "", f"sweep_{phase.name}_over_time.png")
        title = f"{phase.title}: throughput over time"
        if timeseries.plot(phase.title, over_time.get(phase.name, ()), png, note, "dataset size"):
            plots.append(png)
            out += [f"![{title}]({ref}/{os.path.basename(png)})", ""]
    errors = [
        f"- {r.label}: {sweep.size_label(k[1])} {k[0]}: {p.error[:200]}"
        for r in with_sweep
        for k, p in sorted(points[r.label].items(), key=lambda kv: (kv[0][1], kv[0][0]))
        if p.error
    ]
    if errors:
        out += ["Failed phases:", "", *errors, ""]
    out += [note, ""]
    return out


def sweep_section(runs, plots_dir: str | None, ref: str | None) -> tuple[list[str], list[str]]:
    """(markdown lines, PNGs written) of the dataset-size sweep section for `runs` (nothing
    when none has sweep samples); `plots_dir` None: tables only."""
    plots: list[str] = []
    if plots_dir is not None:
        os.makedirs(plots_dir, exist_ok=True)
    return _sweep_section(runs, plots_dir, ref, plots), plots


def _tput(p: SweepPoint) -> float | None:
    return p.throughput


def _p99(op: str):
    return lambda p: p.p99_ms.get(op)


def _p50(op: str):
    return lambda p: p.p50_ms.get(op)


def _p99_ops(pts: Mapping, key) -> list[str]:
    p = pts.get(key)
    return list(p.p99_ms) if p else []


def _p50_ops(pts: Mapping, key) -> list[str]:
    p = pts.get(key)
    return list(p.p50_ms) if p else []


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:+.1f}%"


def _within_noise(row: dict, base_row: dict, key: str) -> bool:
    """Both runs repeated the variant and their 95 % intervals (or ± stdev) overlap: the
    difference is not told from run-to-run noise."""
    a, b = (r.get("_err", {}).get(key) for r in (row, base_row))
    return bool(a and b) and a[0] <= b[1] and b[0] <= a[1]


def _figure_cell(row: dict, key: str, digits: int) -> str:
    """The figure, its 95 % half-width when repeats gave one, and "(noisy)" when that is
    above a quarter of the mean."""
    text = fmt(row.get(key), digits)
    interval = row.get("_err", {}).get(key)
    if interval and row.get(key) is not None and report.is_replicated(row):
        text += f" ± {fmt((interval[1] - interval[0]) / 2, digits)}"
    return text + (" (noisy)" if report.is_noisy(row, key) else "")


def _change_cell(row: dict, base_row: dict, key: str) -> str:
    """% change against the baseline, marked: (unreplicated) when either is a single run,
    (within noise) when both intervals overlap, (noisy) when either interval is wide."""
    cell = _pct(percent_change(row.get(key), base_row.get(key)))
    if cell == NA:
        return cell
    if not (row.get("_md") and base_row.get("_md")):
        return cell
    if not (report.is_replicated(row) and report.is_replicated(base_row)):
        return cell + " (unreplicated)"
    if _within_noise(row, base_row, key):
        return cell + " (within noise)"
    if report.is_noisy(row, key) or report.is_noisy(base_row, key):
        return cell + " (noisy)"
    return cell


def _perftables_section(runs, plots_dir, ref, plots, catalog, baseline=None) -> list[str]:
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
        "Per experiment and variant: the experiment's throughput figure, one column per run; "
        "label columns and row order as in the experiment's tables.",
        "",
    ]
    for name in experiments:
        in_runs = [r for r in runs if name in rows_by_run[r.label]]
        lay, label_settings = experiment_layout(name, catalog)
        # One series of rows per run, keyed (run, variant_index, variant) as report.group's.
        series = {
            r.label: layout.prepare(
                {(r.label, *k): row for k, row in rows_by_run[r.label][name].items()},
                label_settings,
            )
            for r in in_runs
        }
        all_rows = [row for rows in series.values() for row in rows.values()]
        key = throughput_key(name, all_rows, catalog)
        if key is None:
            continue
        col = COLUMNS[key]
        shown: dict = {}  # (variant_index, variant) -> the first run's row: its label cells
        for rows in series.values():
            for k, row in rows.items():
                shown.setdefault(k[1:], row)
        variants = sorted(shown, key=lambda v: (lay.sort_key(shown[v]["_md"]), v[0]))
        title = catalog[name].title if name in catalog else name
        first = lay.tables[0] if lay.tables else None
        headers = [lay.header(first, c.name) if first else c.header for c in lay.labels]
        # Per run: its throughput, then its client p50/p99 latency where its samples have them.
        lat = {
            r.label: [
                (k, stat) for k, stat in LATENCY_PERCENTILES
                if any(k in row for row in rows_by_run[r.label][name].values())
            ]
            for r in in_runs
        }  # fmt: skip
        for r in in_runs:
            headers.append(f"{r.label} ({col.header})")
            headers += [f"{r.label} {stat.split()[0]} (ms)" for _, stat in lat[r.label]]
        headers += [f"{r.label} ops/$" for r in priced if r in in_runs]
        others = [r for r in in_runs if baseline in in_runs and r is not baseline]
        headers += [f"{r.label} vs {baseline.label}" for r in others]
        rows = []
        for v in variants:
            row = [c.cell(shown[v]["_md"]) for c in lay.labels]
            for r in in_runs:
                got = rows_by_run[r.label][name].get(v, {})
                row.append(got.get("_status") or _figure_cell(got, key, col.digits))
                row += [fmt(got.get(k), 2) for k, _ in lat[r.label]]
            for r in priced:
                if r in in_runs:
                    value = rows_by_run[r.label][name].get(v, {}).get(key)
                    row.append(fmt(ops_per_dollar(value, r.price), 0))
            if others:
                base_row = rows_by_run[baseline.label][name].get(v, {})
                for r in others:
                    other = rows_by_run[r.label][name].get(v, {})
                    row.append(_change_cell(other, base_row, key))
            rows.append(row)
        noted = [r for r in all_rows if not r.get("_status")] or all_rows
        note = caption.line([r["_md"] for r in noted], [r.get("_ts") for r in noted])
        out += [f"### {title}", "", md_table(headers, rows), "", note, ""]
        png = os.path.join(plots_dir, f"perftables_{name}.png")
        if plot_experiment(title, lay, series, png, note) is not None:
            plots.append(png)
            out += [f"![{title}]({ref}/{os.path.basename(png)})", ""]
    return out


def _stress_section(runs, plots_dir, ref, plots, baseline=None) -> list[str]:
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
        ["Read p50 at maximum (ms)"]
        + [fmt(meta(x, stress.MAX_METRIC, "p50_read_latency_ms")) for x in labels],
        ["Read p99 at maximum (ms)"]
        + [fmt(meta(x, stress.MAX_METRIC, "p99_read_latency_ms")) for x in labels],
        ["Instances at maximum"]
        + [fmt(meta(x, stress.MAX_METRIC, "instances"), 0) for x in labels],
        ["Price ($/h)"] + [fmt(r.price, 4) for r in runs],
        ["Maximum Throughput per dollar (ops/$)"]
        + [fmt(ops_per_dollar(value(r.label, stress.MAX_METRIC), r.price), 0) for r in runs],
    ]
    if baseline is not None:
        base = value(baseline.label, stress.MAX_METRIC)
        rows.append(
            [f"Maximum Throughput vs {baseline.label}"]
            + [_pct(percent_change(value(x, stress.MAX_METRIC), base)) for x in labels]
        )
    mine = [s for r in runs for s in r.samples if _kind(s) == "stress"]
    mds = [s["metadata"] for s in mine]
    note = caption.line(mds, [s.get("timestamp") for s in mine], caption.stress_scale(mds))
    out = ["## Stress KPIs (mongodb_stress)", "", md_table(["KPI", *labels], rows), "", note, ""]
    if plots_dir is None:  # `report` on stdout: the tables alone
        return out
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
    # throughput over time inside each long step, a line per step (YCSB's status lines)
    steps = [s for r in runs for s in r.samples if is_stress_step(s)]
    lines = timeseries.long_phases(
        steps, timeseries.YCSB_THROUGHPUT_SERIES, None, timeseries.step_label
    ).get("", ())
    png = os.path.join(plots_dir, "stress_steps_over_time.png")
    if timeseries.plot("mongodb_stress steps", lines, png, note, "step"):
        plots.append(png)
        out += [f"![mongodb_stress steps: throughput over time]({ref}/{os.path.basename(png)})", ""]
    return out


def stress_section(runs, plots_dir: str | None, ref: str | None) -> tuple[list[str], list[str]]:
    """(markdown lines, PNGs written) of the stress section for `runs` (`report`): the KPIs
    side by side and, with `plots_dir`, their plot and each long step's throughput over
    time; nothing when no run has stress KPIs."""
    plots: list[str] = []
    if plots_dir is not None:
        os.makedirs(plots_dir, exist_ok=True)
    return _stress_section(runs, plots_dir, ref, plots), plots


def render(
    runs: Sequence[Run],
    plots_dir: str,
    plots_ref: str | None = None,
    title: str = "MongoDB benchmark comparison",
    catalog: Mapping | None = None,
    baseline: str | None = None,
) -> tuple[str, list[str]]:
    """(markdown, PNG paths written). Images are linked as `plots_ref/<name>.png`.
    `baseline`: the label of the run the others are compared with (% change)."""
    base = baseline_run(runs, baseline)
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
    warnings = [f"{w}: compare with care." for w in comparability_warnings(runs)]
    single = unreplicated_runs(runs)
    if single and len(runs) > 1:
        warnings.append(
            f"single runs (no --repeats): {', '.join(single)}: their differences are"
            " unreplicated and cannot be told from run-to-run noise; marked (unreplicated)."
        )
    if warnings:
        head += ["## Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    body = (
        _sweep_section(runs, plots_dir, ref, plots)
        + _perftables_section(runs, plots_dir, ref, plots, catalog, base)
        + _stress_section(runs, plots_dir, ref, plots, base)
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
        f"- Built-in instance prices: on-demand Linux list prices, {pricing.PRICES_AS_OF}; "
        f"Atlas tiers: {pricing.PRICES_AS_OF}, {pricing.PRICES_SOURCE}. Prefer --price with "
        "your own rates.",
        "",
    ]
    return "\n".join(head + body + notes), plots
