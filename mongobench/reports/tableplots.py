"""PNG plots of the Performance Tables in the tables' structure (matplotlib, PKB host only).

Throughput and p99 latency side by side. A numeric label setting (threads, document size,
batch size, ...) is the x axis, logarithmic when its values span a decade or more; every
other label setting (with/without index, cached/not cached), and every run when several
are plotted, is a line of its own. Without a numeric label, bars per variant. Error bars
where the samples carry a 95 % interval or a standard deviation (repeated variants).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

from mongobench.reports.layout import P99_KEY, LabelColumn, Layout, ordered, plot_axes, spell
from mongobench.reports.results import COLUMNS

_LOG_SPAN = 10.0  # x is logarithmic when max / min reaches this (a decade)


def plot_experiment(
    title: str, layout: Layout, series: Mapping[str, Mapping], path: str, note: str | None = None
) -> object | None:
    """Writes the PNG and returns its matplotlib Figure, or None when there is nothing to plot.
    `series`: name (a run's label; "" for one run) -> rows (row key -> row, as report.group).
    `note`: the provenance line (reports.caption), printed under the panels."""
    # Imported here: matplotlib is not a client requirement (client VMs never plot).
    from matplotlib.figure import Figure

    # A failed or n/a variant's row has no figure to plot (its table row says why).
    series = {
        n: {k: r for k, r in rows.items() if not r.get("_status")} for n, rows in series.items()
    }
    series = {n: rows for n, rows in series.items() if rows}
    every = [r for rows in series.values() for r in rows.values()]
    throughput = layout.throughput_key(every)
    panels = [k for k in (throughput, P99_KEY) if k and any(k in r for r in every)]
    if not panels:
        return None
    x, lines = plot_axes(layout, [r["_md"] for r in every])
    if x is not None:
        size = (6.2 * len(panels), 4.4)
    else:
        size = (6.2 * len(panels), 0.4 * len(every) + 2.2)
    fig = Figure(figsize=size)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, key in zip(axes, panels, strict=True):
        if x is not None:
            _lines(ax, key, x, lines, layout, series)
        else:
            _bars(ax, key, lines, layout, series)
        ax.set_title(layout.figure_header(key), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    if note:
        width = max(60, int(95 * len(panels)))
        fig.text(0.01, 0.005, textwrap.fill(note, width), fontsize=7, va="bottom", ha="left")
        fig.tight_layout(rect=(0, 0.04 * (1 + len(note) // width), 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    return fig


def _name(run: str, cols: Sequence[LabelColumn], md: Mapping) -> str:
    parts = [run] if run else []
    parts += [f"{c.header}: {c.cell(md)}" for c in cols]
    return ", ".join(parts)


def _interval(row: Mapping, key: str) -> tuple[float, float] | None:
    return (row.get("_err") or {}).get(key)


def _lines(ax, key, x: LabelColumn, lines, layout: Layout, series: Mapping) -> None:
    """One line per run and value of the other label settings, x = the numeric setting."""
    curves: dict[str, list[tuple[float, float, tuple | None]]] = {}
    for run, rows in series.items():
        for row in ordered(layout, rows):
            xv, y = x.raw(row["_md"]), row.get(key)
            if xv is None:
                continue
            name = _name(run, lines, row["_md"]) or layout.figure_header(key)
            curves.setdefault(name, []).append(
                (float(xv), math.nan if y is None else y, _interval(row, key))
            )
    xs_all = sorted({p[0] for pts in curves.values() for p in pts})
    for name, pts in curves.items():
        pts.sort(key=lambda p: p[0])
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        if any(p[2] for p in pts):
            err = [[_below(y, iv) for _, y, iv in pts], [_above(y, iv) for _, y, iv in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=name)
        else:
            ax.plot(xs, ys, marker="o", label=name)
    if xs_all and xs_all[0] > 0 and xs_all[-1] / xs_all[0] >= _LOG_SPAN:
        ax.set_xscale("log")
    from matplotlib import ticker  # not a client requirement: see plot_experiment

    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xticks(xs_all, [spell(_int(v)) for v in xs_all], fontsize=8)
    ax.set_xlabel(x.header)
    ax.set_ylabel(layout.figure_header(key))
    ax.set_ylim(bottom=0)
    if len(curves) > 1 or lines:
        ax.legend(fontsize=7)


def _below(value, interval) -> float:
    ok = interval is not None and value is not None and not math.isnan(value)
    return max(value - interval[0], 0.0) if ok else 0.0


def _above(value, interval) -> float:
    ok = interval is not None and value is not None and not math.isnan(value)
    return max(interval[1] - value, 0.0) if ok else 0.0


def _int(v: float):
    return int(v) if float(v).is_integer() else v


def _bars(ax, key, cols, layout: Layout, series: Mapping) -> None:
    """Horizontal bars: one group per variant (its label cells), one bar per run."""
    groups: list[str] = []
    values: dict[tuple[str, str], tuple[float | None, tuple | None]] = {}
    for run, rows in series.items():
        for row in ordered(layout, rows):
            g = ", ".join(c.cell(row["_md"]) for c in cols)
            if g not in groups:
                groups.append(g)
            values[(run, g)] = (row.get(key), _interval(row, key))
    n = max(1, len(series))
    height = 0.8 / n
    for i, run in enumerate(series):
        ys = [gi + (i - (n - 1) / 2) * height for gi in range(len(groups))]
        got = [values.get((run, g), (None, None)) for g in groups]
        widths = [v or 0.0 for v, _ in got]
        err = None
        if any(iv for _, iv in got):
            err = [[_below(v, iv) for v, iv in got], [_above(v, iv) for v, iv in got]]
        ax.barh(ys, widths, height, xerr=err, capsize=3, label=run or None)
        for y, (v, iv) in zip(ys, got, strict=True):
            at = max(v or 0.0, iv[1] if iv else 0.0)  # beside the bar and its error bar
            ax.text(at, y, " n/a" if v is None else f" {v:,.{COLUMNS[key].digits}f}",
                    va="center", fontsize=7)  # fmt: skip
    ax.set_yticks(range(len(groups)), groups, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(layout.figure_header(key))
    if len(series) > 1:
        ax.legend(fontsize=7)
