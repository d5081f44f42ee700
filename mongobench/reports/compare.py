"""`mongobench compare`: several PKB results files side by side in one markdown report."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from mongobench.reports.runs import assign_prices, load_runs
from mongobench.reports.sections import render


def compare(
    paths: Sequence[str],
    out: str,
    plots_dir: str | None = None,
    labels: Mapping[str, str] | None = None,
    prices: Mapping[str, float] | None = None,
    title: str = "MongoDB benchmark comparison",
    baseline: str | None = None,
) -> tuple[str, list[str]]:
    """Loads the files, writes the report to `out` and its plots; returns (text, plots).
    `baseline` (a run label): the other runs' figures also as % change against it."""
    out_dir = os.path.dirname(os.path.abspath(out))
    if plots_dir is None:
        stem = os.path.splitext(os.path.basename(out))[0]
        plots_dir = os.path.join(out_dir, f"{stem}-plots")
    runs = load_runs(paths, labels)
    assign_prices(runs, prices)
    ref = os.path.relpath(os.path.abspath(plots_dir), out_dir)
    text, plots = render(runs, plots_dir, ref, title, baseline=baseline)
    os.makedirs(out_dir, exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    return text, plots
