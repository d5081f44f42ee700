"""Markdown tables in the seed's layout from samples (PKB results or a local run).

PKB writes one JSON sample per line; metadata is either a dict (`metadata`,
with --collapse_labels=False) or a `labels` string `|key:value|,|key:value|`.
Both are read. Each experiment's tables follow its `layout` (reports.layout):
the seed's columns, headers and row order, then the project's extra columns; a
figure without a sample shows as "n/a" (missing, not zero), a figure with a
95 % interval or a standard deviation (repeated variants) as "value ± half-width".
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict

from mongobench.core.markdown import fixed, md_table
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import identity
from mongobench.reports import caption, ratecurve, timeseries
from mongobench.reports import layout as layouts
from mongobench.reports.results import COLUMNS, FAILED_METRIC, NA_METRIC
from mongobench.reports.tableplots import plot_experiment

_BY_METRIC = {c.metric: key for key, c in COLUMNS.items()}


def parse_labels(labels: str) -> dict[str, str]:
    """PKB's `|k:v|,|k:v|` label string (values may contain ':' and ',')."""
    out = {}
    if not labels:
        return out
    for part in labels.strip("|").split("|,|"):
        k, _, v = part.partition(":")
        out[k] = v
    return out


def load_pkb_results(path: str) -> list[dict]:
    """Samples of a PKB results file; ValueError (with the path and line) for a file
    that is not one: binary, not JSON, or JSON that is not a sample."""
    samples = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file (PKB results are JSON lines)") from None
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not a JSON sample: {e}") from None
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("metric"), str)
            or not isinstance(rec.get("value"), (int, float))
            or isinstance(rec.get("value"), bool)
        ):
            raise ValueError(f"{path}:{n}: not a PKB sample (an object with metric and value)")
        md = rec.get("metadata")
        if md is None:
            md = parse_labels(rec.get("labels", ""))
        if not isinstance(md, dict) or not isinstance(rec.get("labels", ""), str):
            raise ValueError(f"{path}:{n}: metadata is not an object")
        samples.append(
            {
                "metric": rec["metric"],
                "value": rec["value"],
                "unit": rec.get("unit", ""),
                "metadata": md,
                "run_uri": rec.get("run_uri", ""),
                "timestamp": rec.get("timestamp"),  # epoch seconds: the provenance's date
            }
        )
    return samples


# A variant without figures shows as a row all the same: its cells say why.
STATUS = {FAILED_METRIC: "FAILED", NA_METRIC: "not run"}


def group(samples: list[dict]) -> dict:
    """experiment -> (run_uri, variant_index, variant) -> {column key: value, "_md": metadata,
    "_err": {column key: (low, high)} of figures with a 95 % interval or a stdev}.
    A failed or n/a variant with no figures is a row too: no figure, and "_status" (FAILED,
    not run) with "_why" (its error or reason)."""
    out: dict = {}
    status = []
    for s in samples:
        if s.get("metric") in STATUS and (s.get("metadata") or {}).get("experiment"):
            status.append(s)
            continue
        md = s.get("metadata") or {}
        experiment = md.get("experiment")
        key = _BY_METRIC.get(s["metric"])
        if not experiment or key is None or ratecurve.is_step(md):
            continue  # rate steps: their own section (ratecurve)
        try:
            idx = int(float(md.get("variant_index", -1)))
        except (TypeError, ValueError):
            idx = -1
        row_key = (s.get("run_uri", ""), idx, str(md.get("variant")))
        row = out.setdefault(experiment, {}).setdefault(row_key, {"_md": md, "_err": {}})
        if s.get("timestamp") is not None:
            row["_ts"] = s["timestamp"]
        row[key] = float(s["value"])
        interval = _interval(row[key], md)
        if interval:
            row["_err"][key] = interval
    for s in status:
        md = s["metadata"]
        rows = out.setdefault(str(md["experiment"]), {})
        run, variant = s.get("run_uri", ""), str(md.get("variant"))
        if any(k[0] == run and k[2] == variant for k in rows):
            continue  # figures of the variant exist (a failed repeat, a fails_run variant)
        idx = _float(md.get("variant_index"))
        rows[(run, -1 if idx is None else int(idx), variant)] = {
            "_md": md,
            "_err": {},
            "_status": STATUS[s["metric"]],
            "_why": str(md.get("error") or md.get("na_reason") or "?"),
            **({"_ts": s["timestamp"]} if s.get("timestamp") is not None else {}),
        }
    return out


def measured(rows: dict) -> dict:
    """The rows with figures (not a failed or n/a variant's row)."""
    return {k: r for k, r in rows.items() if not r.get("_status")}


def _interval(value: float, md: dict) -> tuple[float, float] | None:
    """(low, high) from the sample's ci95_low/ci95_high, else value ± stdev; None without."""
    low, high = _float(md.get("ci95_low")), _float(md.get("ci95_high"))
    if low is not None and high is not None:
        return low, high
    sd = _float(md.get("stdev"))
    return None if sd is None else (value - sd, value + sd)


def _float(v) -> float | None:
    v = layouts.canon(v)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def table(layout: layouts.Layout, tab: layouts.Table, rows: dict) -> str:
    """One of the experiment's tables: a Run column first when rows come from several runs,
    the label columns as the seed writes them, the figures (± where repeats give one)."""
    multi = len({k[0] for k in rows}) > 1
    headers = (["Run"] if multi else []) + [layout.header(tab, c) for c in tab.all_columns]
    first_label = next((c for c in tab.all_columns if layout.label(c)), None)
    cells = []
    for row in layouts.ordered(layout, rows):
        md = row["_md"]
        line = [row["_run"]] if multi else []
        for c in tab.all_columns:
            lab = layout.label(c)
            if lab is None:
                line.append(row.get("_status") or _cell(row, c))
            elif c == first_label and _had_errors(md):
                line.append(f"{lab.cell(md)} (errors)")
            else:
                line.append(lab.cell(md))
        cells.append(line)
    return md_table(headers, cells)


def _cell(row: dict, key: str) -> str:
    digits = COLUMNS[key].digits
    text = fixed(row.get(key), digits)
    interval = row["_err"].get(key)
    if interval and row.get(key) is not None:
        text += f" ± {fixed((interval[1] - interval[0]) / 2, digits)}"
    return text


def _had_errors(md: dict) -> bool:
    # A dict from JSON metadata, or text from PKB's label string.
    return str(md.get("had_errors", "")).lower() == "true"


def error_lines(rows: dict) -> list[str]:
    out = []
    multi = len({k[0] for k in rows}) > 1
    for (run, _, variant), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if _had_errors(row["_md"]):
            kinds = row["_md"].get("error_types") or "?"
            out.append(f"- {run + ': ' if multi else ''}{variant}: {kinds}")
    return out


NOISY_SHARE = 0.25  # a 95 % half-width above this share of the mean: the figure is noise


def is_replicated(row: dict) -> bool:
    """The row's figures are means of 2 or more repeats (they carry a 95 % interval)."""
    n = _float((row.get("_md") or {}).get("repeats"))
    return n is not None and n >= 2


def is_noisy(row: dict, key: str) -> bool:
    """A repeated figure whose 95 % half-width is above NOISY_SHARE of its mean (a single
    run has no interval: a stdev alone is not one)."""
    interval, mean = (row.get("_err") or {}).get(key), row.get(key)
    if not interval or not mean or not is_replicated(row):
        return False
    return (interval[1] - interval[0]) / 2 > NOISY_SHARE * abs(mean)


def noisy_lines(rows: dict) -> list[str]:
    """Variants whose repeated figures have a 95 % half-width above NOISY_SHARE of their
    mean (only figures with a confidence interval, i.e. --repeats 2 or more)."""
    out = []
    multi = len({k[0] for k in rows}) > 1
    for (run, _, variant), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        wide = []
        for key, (low, high) in sorted(row["_err"].items()):
            if is_noisy(row, key):
                mean = row[key]
                wide.append(f"{COLUMNS[key].header} {mean:.4g} ± {(high - low) / 2:.4g}")
        if wide:
            out.append(f"- {run + ': ' if multi else ''}{variant}: {'; '.join(wide)}")
    return out


def failed_variants(samples: list[dict]) -> dict[str, list[str]]:
    """experiment -> "variant: error" of every "Variant Failed" sample."""
    out: dict[str, list[str]] = {}
    for s in samples:
        md = s.get("metadata") or {}
        if s.get("metric") == FAILED_METRIC and md.get("experiment"):
            out.setdefault(str(md["experiment"]), []).append(
                f"{md.get('variant', '?')}: {str(md.get('error', '?'))[:300]}"
            )
    return out


def lost_write_lines(rows: dict) -> list[str]:
    """Variants whose acknowledged writes were not all on the server afterwards (the audit)."""
    out = []
    multi = len({k[0] for k in rows}) > 1
    for (run, _, variant), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        md = row["_md"]
        if md.get("lost_writes"):
            out.append(
                f"- {run + ': ' if multi else ''}{variant}: lost_writes {md['lost_writes']}"
                f" (expected {md.get('audit_expected')}, found {md.get('audit_found')})"
            )
    return out


def _server(md: dict) -> str:
    """`7.0.42`, or with a known product `FerretDB v1.24.2 (SQLite), claims MongoDB 7.0.42`."""
    if md.get("server_product") in (None, "unknown"):
        return str(md.get("server_version", "?"))
    return identity.describe(md)


def na_variants(samples: list[dict]) -> dict[str, list[str]]:
    """experiment -> "variant: n/a (reason)" of every "Variant Not Applicable" sample."""
    out: dict[str, list[str]] = {}
    for s in samples:
        md = s.get("metadata") or {}
        if s.get("metric") == NA_METRIC and md.get("experiment"):
            line = f"{md.get('variant', '?')}: n/a ({md.get('na_reason', '?')})"
            if line not in out.setdefault(str(md["experiment"]), []):
                out[str(md["experiment"])].append(line)
    return out


def bottleneck_lines(rows: dict) -> list[str]:
    out = []
    for (run, _, variant), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        neck = row["_md"].get("bottleneck")
        if neck:
            out.append(f"- {run + ': ' if len({k[0] for k in rows}) > 1 else ''}{variant}: {neck}")
    return out


def rate_curves(samples: list[dict]) -> dict:
    """experiment -> its latency-versus-throughput curves (reports.ratecurve) with at least
    one open-loop step: what `render` shows even without the experiment's own rows."""
    return {
        name: curves
        for name, curves in ratecurve.collect(samples).items()
        if any(p["step"] for points in curves.values() for p in points)
    }


def _curves_only(name, experiment, samples, curves, plots_dir, plots_ref) -> list[str]:
    """The section of an experiment that ran only as rate steps (no closed-loop row of its
    own): its heading, the provenance of the steps and each curve's table and plot."""
    mine = [s for s in samples if (s.get("metadata") or {}).get("experiment") == name]
    note = caption.line([s["metadata"] for s in mine], [s.get("timestamp") for s in mine])
    parts = [f"## {experiment.title}", ""]
    if experiment.description:
        parts += [experiment.description, ""]
    parts += [note, "", "Run only as rate steps: no closed-loop figures of its own.", ""]
    return parts + ratecurve.section(name, curves, plots_dir, plots_ref)


def render(
    samples: list[dict],
    catalog: dict | None = None,
    title: str | None = None,
    plots_dir: str | None = None,
    plots_ref: str | None = None,
) -> str:
    """The seed's sections for every experiment that has samples.

    With `plots_dir`, a PNG per experiment is written there and linked as
    `plots_ref/<experiment>.png` (default: the directory's name).
    """
    catalog = catalog or exp_mod.load()
    grouped = group(samples)
    curves = ratecurve.collect(samples)  # --rate-steps: latency versus throughput
    over_time = timeseries.long_phases(samples) if plots_dir else {}
    failures = failed_variants(samples)
    na = na_variants(samples)
    sections: OrderedDict[str, list[str]] = OrderedDict()
    for name, experiment in catalog.items():
        if name not in grouped:
            if curves.get(name):  # run only as rate steps: the curves and their tables
                sections.setdefault(experiment.section, []).append(
                    "\n".join(
                        _curves_only(name, experiment, samples, curves[name], plots_dir, plots_ref)
                    )  # fmt: skip
                )
            continue
        rows = layouts.prepare(grouped[name], experiment.label)
        layout = layouts.of(experiment)
        parts = [f"## {experiment.title}", ""]
        if experiment.description:
            parts += [experiment.description, ""]
        shown = measured(rows) or rows
        note = caption.line(
            [r["_md"] for r in shown.values()], [r.get("_ts") for r in shown.values()]
        )
        parts += [note, ""]
        for tab in layout.tables:
            parts += [f"### {tab.heading}", "", table(layout, tab, rows), ""]
        noisy = noisy_lines(rows)
        if noisy:
            parts += ["Noisy (95 % half-width above 25 % of the mean: more repeats needed):", "",
                      *noisy, ""]  # fmt: skip
        flagged = error_lines(rows)
        if flagged:
            parts += ["Variants with failed operations (not in the throughput):", "", *flagged, ""]
        lost = lost_write_lines(rows)
        if lost:
            parts += ["Acknowledged writes missing on the server afterwards (the audit):", ""]
            parts += [*lost, ""]
        if failures.get(name):
            parts += ["Failed variants:", ""]
            parts += [f"- {line}" for line in failures[name]] + [""]
        if na.get(name):
            parts += ["Not run: the server lacks what they need:", ""]
            parts += [f"- {line}" for line in na[name]] + [""]
        necks = bottleneck_lines(rows)
        if necks:
            parts += ["Bottleneck (the resource closest to its limit):", "", *necks, ""]
        if curves.get(name):
            parts += ratecurve.section(name, curves[name], plots_dir, plots_ref)
        if plots_dir and measured(rows):
            rows = measured(rows)
            os.makedirs(plots_dir, exist_ok=True)
            png = os.path.join(plots_dir, f"{name}.png")
            runs = sorted({k[0] for k in rows})
            series = (
                {run: {k: r for k, r in rows.items() if k[0] == run} for run in runs}
                if len(runs) > 1
                else {"": rows}
            )
            ref = plots_ref if plots_ref is not None else os.path.basename(plots_dir.rstrip("/"))
            if plot_experiment(experiment.title, layout, series, png, note) is not None:
                parts += [f"![{experiment.title}]({ref}/{name}.png)", ""]
            # throughput over time inside each long phase (reports.timeseries)
            over = os.path.join(plots_dir, f"{name}-over-time.png")
            if timeseries.plot(experiment.title, over_time.get(name, ()), over, note):
                parts += [f"![{experiment.title}: throughput over time]({ref}/{name}-over-time.png)",
                          ""]  # fmt: skip
        sections.setdefault(experiment.section, []).append("\n".join(parts))
    unknown = sorted((set(grouped) | set(failures) | set(na) | set(curves)) - set(catalog))
    out = [f"# {title or 'MongoDB Performance Tables'}", ""]
    for section, bodies in sections.items():
        out += [f"# {section}", ""] + bodies
    if unknown:
        out += [f"Samples of unknown experiments were skipped: {', '.join(unknown)}", ""]
    if not sections:
        out += ["No Performance Tables samples found.", ""]
    return "\n".join(out)
