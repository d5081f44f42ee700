"""PNG plots of the Performance Tables in the tables' structure (matplotlib, PKB host only).

Throughput (or the layout's `plot: {y: ...}` figure, e.g. MB/s for document sizes) and p99
latency side by side. A numeric label setting with three values or more (threads, document
size, batch size, ...) is the x axis, logarithmic when its values span a decade or more,
and y is logarithmic when the figures span two decades; every other label setting, and
every run when several are plotted, is a line of its own. Otherwise (no numeric label, or
two values: categories) grouped bars: one group per value of the first label setting, one
bar per value of the others (and per run). Error bars where the samples carry a 95 %
interval or a standard deviation, never below zero; value labels sit on the bars. Legends
hold the values, their title the settings. One variant of one run is a table row, not a
plot.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

from mongobench.reports.layout import P99_KEY, LabelColumn, Layout, ordered, plot_axes, spell
from mongobench.reports.results import COLUMNS

_LOG_SPAN = 10.0  # x is logarithmic when max / min reaches this (a decade)
_LOG_Y_SPAN = 100.0  # y is logarithmic when the plotted figures span two decades


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
    if len(every) < 2:
        return None  # one bar says nothing a table row does not
    if layout.y and any(layout.y in r for r in every):
        throughput = layout.y
    else:
        throughput = layout.throughput_key(every)
    panels = [k for k in (throughput, P99_KEY) if k and any(k in r for r in every)]
    if not panels:
        return None
    x, lines = plot_axes(layout, [r["_md"] for r in every])
    if x is not None:
        size = (6.2 * len(panels), 4.4)
    else:
        size = (6.2 * len(panels), 0.35 * len(every) + 2.4)
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
    """A legend entry: the run and the values only (the legend's title names the settings)."""
    return ", ".join(([run] if run else []) + [c.cell(md) for c in cols])


def _legend_title(series: Mapping, cols: Sequence[LabelColumn]) -> str | None:
    parts = (["run"] if any(series) else []) + [c.header for c in cols]
    return ", ".join(parts) or None


def _log_y(ax, values) -> None:
    """A log y axis when the positive figures span _LOG_Y_SPAN or more."""
    got = [v for v in values if v is not None and not math.isnan(v) and v > 0]
    if got and max(got) / min(got) >= _LOG_Y_SPAN:
        ax.set_yscale("log")


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
    _log_y(ax, [p[1] for pts in curves.values() for p in pts])
    from matplotlib import ticker  # not a client requirement: see plot_experiment

    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xticks(xs_all, [spell(_int(v)) for v in xs_all], fontsize=8)
    ax.set_xlabel(x.header)
    ax.set_ylabel(layout.figure_header(key))
    if ax.get_yscale() == "linear":
        ax.set_ylim(bottom=0)
    if len(curves) > 1 or lines:
        ax.legend(fontsize=7, title=_legend_title(series, lines), title_fontsize=7)


def _below(value, interval) -> float:
    """The error bar's extent below the value, ending at zero at the lowest (a throughput
    or a latency is never negative, though a mean minus a wide half-width may be)."""
    ok = interval is not None and value is not None and not math.isnan(value)
    return max(value - max(interval[0], 0.0), 0.0) if ok else 0.0


def _above(value, interval) -> float:
    ok = interval is not None and value is not None and not math.isnan(value)
    return max(interval[1] - value, 0.0) if ok else 0.0


def _int(v: float):
    return int(v) if float(v).is_integer() else v


def _bars(ax, key, cols, layout: Layout, series: Mapping) -> None:
    """Grouped horizontal bars: one group per value of the first label setting, one bar per
    value of the other settings and per run (with one label setting: one group per variant,
    one bar per run). The value is written on its bar, not at its error bar's end."""
    group_col, bar_cols = (cols[0], tuple(cols[1:])) if len(cols) > 1 else (None, tuple(cols))
    groups: list[str] = []
    members: list[str] = []
    values: dict[tuple[str, str], tuple[float | None, tuple | None]] = {}
    for run, rows in series.items():
        for row in ordered(layout, rows):
            md = row["_md"]
            if group_col is None:
                g, m = ", ".join(c.cell(md) for c in cols), run
            else:
                g, m = group_col.cell(md), _name(run, bar_cols, md)
            groups += [g] if g not in groups else []
            members += [m] if m not in members else []
            values[(g, m)] = (row.get(key), _interval(row, key))
    n = max(1, len(members))
    height = 0.8 / n
    digits = COLUMNS[key].digits
    for i, m in enumerate(members):
        ys = [gi + (i - (n - 1) / 2) * height for gi in range(len(groups))]
        got = [values.get((g, m), (None, None)) for g in groups]
        widths = [v or 0.0 for v, _ in got]
        err = None
        if any(iv for _, iv in got):
            err = [[_below(v, iv) for v, iv in got], [_above(v, iv) for v, iv in got]]
        bars = ax.barh(ys, widths, height, xerr=err, capsize=3, label=m or None)
        texts = ["n/a" if v is None else f"{v:,.{digits}f}" for v, _ in got]
        ax.bar_label(bars, texts, label_type="center", fontsize=7)
    ax.set_yticks(range(len(groups)), groups, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel(layout.figure_header(key))
    if group_col is not None:
        ax.set_ylabel(group_col.header)
    if len(members) > 1:
        title = _legend_title(series, bar_cols if group_col is not None else ())
        ax.legend(fontsize=7, title=title, title_fontsize=7)
