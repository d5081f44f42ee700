"""PNG plots of compared runs (matplotlib, PKB host only)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from mongobench.core.markdown import NA, fmt
from mongobench.reports.runs import Run, SweepPoint
from mongobench.sweep import plan as sweep


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
    # Imported here: matplotlib is not a client requirement (client VMs never plot).
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
        measured = False
        for run in runs:
            pts = points[run.label]
            ys = [getattr(pts.get((phase.name, x), SweepPoint()), attr) for x in sizes]
            ys = [math.nan if y is None else y for y in ys]
            measured |= any(y > 0 for y in ys)  # NaN compares false
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
        if not measured:  # every run's phase failed: no figure, and no log scale of nothing
            _nothing_measured(ax)
        _axes(ax, sizes, log and measured)
        if measured:
            ax.legend(fontsize=8)
    note = " (red ring: dataset larger than memory)" if _any_exceeds(points) else ""
    fig.suptitle(title + note, fontsize=11)
    return _save(fig, plt, path)


def _axes(ax, sizes: Sequence[float], log: bool) -> None:
    """x: one tick per dataset size, labelled "1 MB", "10 GB"; log axes with plain numbers."""
    from matplotlib import ticker  # not a client requirement: see _plt

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


def _nothing_measured(ax) -> None:
    ax.text(
        0.5, 0.5, "no measurement: failed in every run (see the tables)",
        transform=ax.transAxes, ha="center", va="center", fontsize=9, color="gray",
    )  # fmt: skip
    ax.set_yticks([])


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
        measured = False
        for i, run in enumerate(runs):
            pts = points[run.label]
            for j, phase in enumerate(sweep.PHASES):
                ys = [
                    (pts.get((phase.name, x)) or SweepPoint()).p99_ms.get(op, math.nan)
                    for x in sizes
                ]
                if not any(y > 0 for y in ys):  # failed (NaN), or nothing a log axis shows
                    continue
                measured = True
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
        if not measured:
            _nothing_measured(ax)
        _axes(ax, sizes, log=measured)
        if measured:
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
