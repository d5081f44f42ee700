"""Markdown tables in the seed's layout from samples (PKB results or a local run).

PKB writes one JSON sample per line; metadata is either a dict (`metadata`,
with --collapse_labels=False) or a `labels` string `|key:value|,|key:value|`.
Both are read. Rows are variants, in the experiment's order; a figure without
a sample shows as "n/a" (missing, not zero).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict

from mongobench.core.markdown import fixed, md_table
from mongobench.perftables import experiments as exp_mod
from mongobench.reports.results import COLUMNS

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
            }
        )
    return samples


def group(samples: list[dict]) -> dict:
    """experiment -> (run_uri, variant_index, variant) -> {column key: value}."""
    out: dict = {}
    for s in samples:
        md = s.get("metadata") or {}
        experiment = md.get("experiment")
        key = _BY_METRIC.get(s["metric"])
        if not experiment or key is None:
            continue
        try:
            idx = int(float(md.get("variant_index", -1)))
        except (TypeError, ValueError):
            idx = -1
        row_key = (s.get("run_uri", ""), idx, str(md.get("variant")))
        row = out.setdefault(experiment, {}).setdefault(row_key, {"_md": md})
        row[key] = float(s["value"])
    return out


def table(rows: dict, columns: list[str], label_header: str) -> str:
    runs = {k[0] for k in rows}
    multi = len(runs) > 1
    headers = (["Run"] if multi else []) + [
        label_header if c == "label" else COLUMNS[c].header for c in columns
    ]
    cells = []
    for (run, _, variant), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        label = f"{variant} (errors)" if _had_errors(row["_md"]) else variant
        cells.append(
            ([run] if multi else [])
            + [label if c == "label" else fixed(row.get(c), COLUMNS[c].digits) for c in columns]
        )
    return md_table(headers, cells)


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


def failed_variants(samples: list[dict]) -> dict[str, list[str]]:
    """experiment -> "variant: error" of every "Variant Failed" sample."""
    out: dict[str, list[str]] = {}
    for s in samples:
        md = s.get("metadata") or {}
        if s.get("metric") == "Variant Failed" and md.get("experiment"):
            out.setdefault(str(md["experiment"]), []).append(
                f"{md.get('variant', '?')}: {str(md.get('error', '?'))[:300]}"
            )
    return out


_PLOT_FIGURES = ("docs_per_s", "ops_per_s", "find_ops_per_s", "insert_ops_per_s")


def plot(name: str, title: str, rows: dict, columns: list[str], path: str) -> bool:
    """Bar charts of the experiment's throughput and p99 latency per variant (PNG)."""
    # Imported here: matplotlib is not a client requirement (client VMs never plot).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = next((c for c in _PLOT_FIGURES if c in columns), None)
    items = sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    multi = len({k[0] for k in rows}) > 1
    labels = [f"{k[0]}: {k[2]}" if multi else k[2] for k, _ in items]
    panels = [(figure, COLUMNS[figure])] if figure else []
    if any(r.get("p99_latency_ms") is not None for _, r in items):
        panels.append(("p99_latency_ms", COLUMNS["p99_latency_ms"]))
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 0.45 * len(labels) + 2))
    axes = axes if len(panels) > 1 else [axes]
    for ax, (key, col) in zip(axes, panels, strict=True):
        values = [r.get(key) for _, r in items]
        ax.barh(range(len(labels)), [v or 0 for v in values], color="#4878a8")
        for i, v in enumerate(values):
            ax.text(
                v or 0, i, " n/a" if v is None else f" {v:,.{col.digits}f}", va="center", fontsize=8
            )
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(col.header)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def bottleneck_lines(rows: dict) -> list[str]:
    out = []
    for (run, _, variant), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        neck = row["_md"].get("bottleneck")
        if neck:
            out.append(f"- {run + ': ' if len({k[0] for k in rows}) > 1 else ''}{variant}: {neck}")
    return out


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
    failures = failed_variants(samples)
    sections: OrderedDict[str, list[str]] = OrderedDict()
    for name, experiment in catalog.items():
        if name not in grouped and name not in failures:
            continue
        if name not in grouped:
            parts = [f"## {experiment.title}", "", "Every variant failed:", ""]
            parts += [f"- {line}" for line in failures[name]] + [""]
            sections.setdefault(experiment.section, []).append("\n".join(parts))
            continue
        rows = grouped[name]
        label_header = experiment.headers.get("label", ", ".join(experiment.label))
        parts = [f"## {experiment.title}", ""]
        if experiment.description:
            parts += [experiment.description, ""]
        any_md = next(iter(rows.values()))["_md"]
        parts += [
            f"Scale: {any_md.get('scale', '?')}; server {any_md.get('server_version', '?')}"
            f" ({any_md.get('topology', '?')}).",
            "",
        ]
        for table_name, heading in (
            ("performance", "Performance"),
            ("resources", "Resource Usage"),
        ):
            cols = experiment.tables.get(table_name)
            if cols:
                parts += [f"### {heading}", "", table(rows, cols, label_header), ""]
        flagged = error_lines(rows)
        if flagged:
            parts += ["Variants with failed operations (not in the throughput):", "", *flagged, ""]
        if failures.get(name):
            parts += ["Failed variants (no figures):", ""]
            parts += [f"- {line}" for line in failures[name]] + [""]
        necks = bottleneck_lines(rows)
        if necks:
            parts += ["Bottleneck (the resource closest to its limit):", "", *necks, ""]
        if plots_dir:
            os.makedirs(plots_dir, exist_ok=True)
            png = os.path.join(plots_dir, f"{name}.png")
            if plot(name, experiment.title, rows, experiment.tables.get("performance", []), png):
                ref = (
                    plots_ref if plots_ref is not None else os.path.basename(plots_dir.rstrip("/"))
                )
                parts += [f"![{experiment.title}]({ref}/{name}.png)", ""]
        sections.setdefault(experiment.section, []).append("\n".join(parts))
    unknown = sorted((set(grouped) | set(failures)) - set(catalog))
    out = [f"# {title or 'MongoDB Performance Tables'}", ""]
    for section, bodies in sections.items():
        out += [f"# {section}", ""] + bodies
    if unknown:
        out += [f"Samples of unknown experiments were skipped: {', '.join(unknown)}", ""]
    if not sections:
        out += ["No Performance Tables samples found.", ""]
    return "\n".join(out)
