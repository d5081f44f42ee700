"""The report's tables and plots in the seed's layout (issue 14 item 3), from results files."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import BarContainer

from mongobench.perftables import experiments as exp_mod
from mongobench.reports import layout, report
from mongobench.reports.results import COLUMNS
from mongobench.reports.tableplots import plot_experiment

# The seeds sit beside the repository (a CI clone has shared/ next to it as well).
SEEDS = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "seeds"
_BLOCK = re.compile(r"<!--\s*MONGO_TABLE:\s*(\{.*?\})\s*-->", re.S)


def _words(text: str) -> str:
    # Markdown collapses whitespace: the seed's "Time Taken (s) " and "Disk  IOPS" read as
    # "Time Taken (s)" and "Disk IOPS".
    return " ".join(text.split())


def seed_tables() -> list[tuple[str, str, list[str]]]:
    """(testname, heading before the block, headers) of every MONGO_TABLE of the seeds."""
    if not SEEDS.is_dir():
        pytest.skip("the seed documents are not beside the repository (../shared/seeds)")
    out = []
    for path in sorted(SEEDS.glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in _BLOCK.finditer(text):
            spec = json.loads(m.group(1))
            match = next(s["$match"] for s in spec["pipeline"] if "$match" in s)
            heading = re.findall(r"^### (.+?)\s*$", text[: m.start()], re.M)[-1]
            out.append((match["_id.testname"], heading, [_words(h) for h in spec["headers"]]))
    if not out:
        pytest.skip(f"no MONGO_TABLE block in {SEEDS}")
    return out


@pytest.fixture(scope="module")
def catalog():
    return exp_mod.load()


def _md(e, v, **extra) -> dict:
    md = {"experiment": e.name, "variant": v.label, "variant_index": v.index}
    for k, value in v.settings.items():
        md[k] = value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
    return {**md, **extra}


def samples_of(catalog, names=None, per_variant=None) -> list[dict]:
    """A sample of every figure for every variant (full scale) of the experiments;
    `per_variant(e, v, key)` -> extra metadata (e.g. an interval) or None to leave it out."""
    out = []
    for e in catalog.values():
        if names and e.name not in names:
            continue
        for v in e.resolve("full"):
            for n, (key, col) in enumerate(COLUMNS.items()):
                extra = per_variant(e, v, key) if per_variant else {}
                if extra is None:
                    continue
                value = 100.0 * (v.index + 1) + n
                out.append(
                    {
                        "metric": col.metric,
                        "value": value,
                        "unit": col.unit,
                        "metadata": _md(e, v, **extra),
                    }
                )
    return out


def write_pkb(path: pathlib.Path, samples, run_uri="r1", collapse=True) -> str:
    """A PKB results file; PKB's default collapses metadata into a `labels` string."""
    with open(path, "w") as f:
        for s in samples:
            rec = {"metric": s["metric"], "value": s["value"], "unit": s["unit"]}
            rec["run_uri"] = run_uri
            if collapse:
                rec["labels"] = ",".join(f"|{k}:{v}|" for k, v in s["metadata"].items())
            else:
                rec["metadata"] = s["metadata"]
            f.write(json.dumps(rec) + "\n")
    return str(path)


def tables_of(text: str, title: str) -> dict[str, list[list[str]]]:
    """heading -> rows (header row first) of the experiment's tables in the report."""
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].split("\n# ", 1)[0]
    out = {}
    for part in body.split("\n### ")[1:]:
        heading, _, rest = part.partition("\n")
        lines = [ln for ln in rest.splitlines() if ln.startswith("|")]
        rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
        out[heading] = [r for r in rows if not all(re.fullmatch(r":?-+:?", c) for c in r)]
    return out


@pytest.fixture(scope="module")
def full_report(catalog, tmp_path_factory):
    path = write_pkb(tmp_path_factory.mktemp("r") / "results.json", samples_of(catalog))
    return report.render(report.load_pkb_results(path), catalog)


# ----------------------------------------------------------------------------- tables


def test_every_seed_table_has_the_seeds_headers_then_the_projects(catalog, full_report):
    seen = set()
    for testname, heading, headers in seed_tables():
        assert testname in catalog, f"seed table of {testname} has no experiment"
        e = catalog[testname]
        got = tables_of(full_report, e.title).get(heading)
        assert got, f"{testname}: no '{heading}' table in the report"
        row = got[0]
        assert row[: len(headers)] == headers, (testname, heading)
        # After the seed's columns only the project's extra ones, none the seed has.
        tab = next(t for t in layout.of(e).tables if t.heading == heading)
        lay = layout.of(e)
        assert row[len(headers) :] == [lay.header(tab, c) for c in tab.extra]
        assert not set(row[len(headers) :]) & set(headers)
        seen.add((testname, heading))
    assert len(seen) >= 20  # every table of seed 000, both kinds


def test_label_settings_get_a_column_each_spelt_and_sorted_as_the_seed(catalog, full_report):
    conc = tables_of(full_report, catalog["concurrency"].title)["Performance"]
    assert conc[0][:3] == ["Num Threads", "Updating Index", "writeConflicts"]
    threads = ["10", "20", "50", "100", "200", "400"]
    assert [r[:2] for r in conc[1:]] == [[t, "false"] for t in threads] + [
        [t, "true"] for t in threads
    ]
    api = tables_of(full_report, catalog["updateapi"].title)["Performance"]
    assert [r[:3] for r in api[1:]] == [
        [pct, fn, up]
        for pct in ("0", "50")
        for fn in ("updateOne", "findOneAndUpdate")  # the seed sorts function descending
        for up in ("false", "true")
    ]
    ids = tables_of(full_report, catalog["insert_idtype"].title)
    for rows in ids.values():
        assert [r[0] for r in rows[1:]] == ["OBJECT_ID", "UUID", "BUSINESS_ID"]
    size = tables_of(full_report, catalog["insert_docsize"].title)["Performance"]
    assert [r[0] for r in size[1:]] == ["1", "4", "32", "256", "2048"]
    # Figures: the project's column order behind the labels, values unchanged.
    assert size[0][1:5] == ["Time Taken (s)", "Data Loaded (MB)", "Speed (docs/s)", "Speed (MB/s)"]
    # Variant order where the seed sorts by run (its start_time).
    full = tables_of(full_report, catalog["query_full"].title)["Performance"]
    assert [r[0] for r in full[1:]] == [v.label for v in catalog["query_full"].resolve("full")]


def test_hardware_labels_are_written_as_the_seed_writes_them(catalog, tmp_path):
    atlas = {
        "atlas_ebs_volume_type": "PROVISIONED",
        "atlas_disk_size_gb": 60.0,
        "atlas_disk_iops": 3000,
        "atlas_tier": "M30",
    }
    samples = samples_of(
        catalog, {"insert_iops", "insert_instancesize"}, lambda e, v, key: atlas
    ) + samples_of(catalog, {"insert_iops"}, lambda e, v, key: {"disk_type": "pd-ssd"})
    for s in samples[len(samples) // 2 :]:
        s["metadata"]["variant"] = "pd-ssd, unspecified"
    write_pkb(tmp_path / "a.json", samples[: len(samples) // 2], "run-a")
    write_pkb(tmp_path / "b.json", samples[len(samples) // 2 :], "run-b")
    loaded = report.load_pkb_results(str(tmp_path / "a.json"))
    loaded += report.load_pkb_results(str(tmp_path / "b.json"))
    text = report.render(loaded, catalog)
    iops = tables_of(text, catalog["insert_iops"].title)["Performance"]
    assert iops[0][:2] == ["Run", "Disk Specification"]
    assert [r[:2] for r in iops[1:]] == [
        ["run-a", "PROVISIONED (60GB@3000IOPS)"],
        ["run-b", "pd-ssd (unspecified IOPS)"],
    ]
    inst = tables_of(text, catalog["insert_instancesize"].title)
    assert inst["Performance"][1][:2] == ["run-a", "M30"]
    assert inst["Resource Usage"][0][1] == "Disk Specification"  # the seed's header, as written


def test_repeats_show_as_plus_minus_half_the_interval(catalog, tmp_path):
    def ci(e, v, key):
        return {"repeats": 3, "stdev": 4.0, "ci95_low": 90.0, "ci95_high": 110.0}

    samples = samples_of(catalog, {"insert_docsize"}, ci)
    for s in samples:
        s["value"] = 100.0
    text = report.render(report.load_pkb_results(write_pkb(tmp_path / "r.json", samples)))
    rows = tables_of(text, catalog["insert_docsize"].title)["Performance"]
    assert rows[1][1:4] == ["100.0 ± 10.0", "100 ± 10", "100 ± 10"]


def test_errors_mark_the_first_label_cell(catalog, tmp_path):
    samples = samples_of(catalog, {"concurrency"}, lambda e, v, key: {"had_errors": v.index == 0})
    text = report.render(report.load_pkb_results(write_pkb(tmp_path / "r.json", samples)))
    rows = tables_of(text, catalog["concurrency"].title)["Performance"]
    assert rows[1][:2] == ["10 (errors)", "false"] and rows[2][:2] == ["20", "false"]


def test_layout_mistakes_are_clear_errors():
    with pytest.raises(layout.LayoutError, match="unknown column.*bogus"):
        layout.parse({"labels": ["a"], "tables": {"P": {"columns": ["label", "bogus"]}}})
    with pytest.raises(layout.LayoutError, match="sort names 'b'"):
        layout.parse({"labels": ["a"], "sort": ["-b"]})
    with pytest.raises(layout.LayoutError, match="unknown layout key"):
        layout.parse({"colums": []})
    with pytest.raises(layout.LayoutError, match="has no group"):
        layout.parse({"plot": {"x": {"setting": "q", "pattern": "cached"}}})


def test_values_from_json_and_pkb_label_text_read_alike():
    for a, b in (("True", True), ("4", 4), ("4.0", 4), ("0.0625", 0.0625), ("None", None)):
        assert layout.canon(a) == layout.canon(b)
    assert layout.spell(layout.canon("25165824.0")) == "25165824"
    assert layout.spell(True) == "true"


# ----------------------------------------------------------------------------- plots


def _plot(catalog, tmp_path, name, per_variant=None, series_runs=("",)):
    e = catalog[name]
    rows = report.group(samples_of(catalog, {name}, per_variant))[name]
    rows = layout.prepare(rows, e.label)
    series = {run: rows for run in series_runs}
    png = tmp_path / f"{name}.png"
    fig = plot_experiment(e.title, layout.of(e), series, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return fig


def _legend(ax) -> set[str]:
    return {t.get_text() for t in ax.get_legend().get_texts()}


def test_a_numeric_label_is_the_x_axis_and_the_others_are_lines(catalog, tmp_path):
    fig = _plot(catalog, tmp_path, "concurrency")
    tput, p99 = fig.axes
    # Figures as the seed's table words them.
    assert tput.get_title() == "Update Speed (docs/s)" and p99.get_title() == "p99 Latency (ms)"
    for ax in (tput, p99):
        assert ax.get_xscale() == "log"  # 10 to 400 threads
        assert ax.get_xlabel() == "Num Threads"
        assert _legend(ax) == {"false", "true"}  # short: the title names the setting
        assert ax.get_legend().get_title().get_text() == "Updating Index"
        lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert [list(ln.get_xdata()) for ln in lines] == [[10, 20, 50, 100, 200, 400]] * 2
        assert not ax.containers  # no repeats, no error bars


def test_small_spans_stay_linear_and_derived_settings_make_lines(catalog, tmp_path):
    fig = _plot(catalog, tmp_path, "insert_nindexes")
    assert len(fig.axes) == 2 and fig.axes[0].get_xscale() == "linear"  # 0..16 indexes
    assert fig.axes[0].get_title() == "Speed (docs/s)"
    fetch = _plot(catalog, tmp_path, "query_fetch")
    ax = fetch.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "Documents fetched"
    assert _legend(ax) == {"cached", "not cached"}
    assert ax.get_legend().get_title().get_text() == "Cache"


def test_without_a_numeric_label_bars_per_variant(catalog, tmp_path):
    fig = _plot(catalog, tmp_path, "insert_idtype")
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["OBJECT_ID", "UUID", "BUSINESS_ID"]
    assert len(ax.patches) == 3


def test_error_bars_when_repeats_give_an_interval(catalog, tmp_path):
    def interval(e, v, key):
        return {"repeats": 3, "ci95_low": 50.0, "ci95_high": 5000.0}

    fig = _plot(catalog, tmp_path, "concurrency", interval)
    for ax in fig.axes:
        bars = [c for c in ax.containers if c.has_yerr]
        assert len(bars) == 2  # one per line
    # stdev only: error bars too; bar charts get them as well.
    fig = _plot(catalog, tmp_path, "insert_idtype", lambda e, v, key: {"stdev": 5.0})
    [bars] = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert bars.errorbar is not None and bars.errorbar.has_xerr
    fig = _plot(catalog, tmp_path, "insert_idtype")
    [bars] = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert bars.errorbar is None


def test_several_runs_are_lines_of_their_own(catalog, tmp_path):
    fig = _plot(catalog, tmp_path, "insert_docsize", series_runs=("m5.large", "Atlas M30"))
    assert _legend(fig.axes[0]) == {"m5.large", "Atlas M30"}
    assert fig.axes[0].get_xscale() == "log"  # 1 to 2048 KB


def test_without_p99_one_panel(catalog, tmp_path):
    fig = _plot(
        catalog,
        tmp_path,
        "insert_docsize",
        lambda e, v, key: None if key == "p99_latency_ms" else {},
    )
    assert len(fig.axes) == 1


def test_report_links_a_plot_per_experiment(catalog, tmp_path):
    path = write_pkb(tmp_path / "r.json", samples_of(catalog, {"concurrency", "insert_idtype"}))
    plots = tmp_path / "plots"
    text = report.render(report.load_pkb_results(path), catalog, plots_dir=str(plots))
    assert sorted(p.name for p in plots.iterdir()) == ["concurrency.png", "insert_idtype.png"]
    assert "](plots/concurrency.png)" in text


# ----------------------------------------------------------------------------- readable plots
# issue 21 item 8: the figure objects, not pixels.


def test_document_size_is_plotted_in_mb_per_s_on_a_log_size_axis(catalog, tmp_path):
    fig = _plot(catalog, tmp_path, "insert_docsize")
    ax = fig.axes[0]
    assert ax.get_title() == "Speed (MB/s)" and ax.get_ylabel() == "Speed (MB/s)"
    assert ax.get_xscale() == "log"


def test_figures_spanning_two_decades_get_a_log_y_axis(catalog, tmp_path):
    e = catalog["insert_docsize"]
    # docs/s falls 1000-fold from 1 KB to 2 MB documents: a linear axis puts them on zero
    lay = layout.parse({"labels": [{"setting": "doc_size_kb", "header": "KB"}]}, e.label)
    rows = report.group(samples_of(catalog, {"insert_docsize"}))["insert_docsize"]
    for row in rows.values():
        row["docs_per_s"] = 100_000.0 / float(row["_md"]["doc_size_kb"])
    fig = plot_experiment(e.title, lay, {"": layout.prepare(rows, e.label)},
                          str(tmp_path / "d.png"))  # fmt: skip
    assert fig.axes[0].get_title() == "Speed (docs/s)" and fig.axes[0].get_yscale() == "log"
    # p99 in this made-up data spans less: linear, from zero
    assert fig.axes[1].get_yscale() == "linear" and fig.axes[1].get_ylim()[0] == 0


def test_a_numeric_setting_of_two_values_is_grouped_bars_not_lines(catalog, tmp_path):
    fig = _plot(catalog, tmp_path, "updateapi")
    ax = fig.axes[0]
    assert not [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]  # no lines
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 4  # updateOne/findOneAndUpdate x upsert true/false
    assert all(len(b.patches) == 2 for b in bars)  # one bar in each of the two groups
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "50"]
    assert ax.get_ylabel() == "Percent Inserts"
    assert ax.get_legend().get_title().get_text() == "Function, Using Upsert"
    assert _legend(ax) == {"updateOne, false", "updateOne, true", "findOneAndUpdate, false",
                           "findOneAndUpdate, true"}  # fmt: skip


def test_value_labels_sit_on_the_bars_and_whiskers_stop_at_zero(catalog, tmp_path):
    def wide(e, v, key):  # a 95 % interval wider than the mean: its low end below zero
        return {"repeats": 3, "ci95_low": -1000.0, "ci95_high": 5000.0}

    fig = _plot(catalog, tmp_path, "insert_idtype", wide)
    ax = fig.axes[0]
    [bars] = [c for c in ax.containers if isinstance(c, BarContainer)]
    labels = [t for t in ax.texts if t.get_text().replace(",", "").replace(".", "").isdigit()]
    assert len(labels) == len(bars.patches) == 3
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for patch, text in zip(bars.patches, labels, strict=True):
        where, bar = text.get_window_extent(renderer), patch.get_window_extent(renderer)
        # on the bar (its middle), not at the whisker's end (5000, far right of the bar)
        assert bar.x0 < (where.x0 + where.x1) / 2 < bar.x1
        assert bar.y0 < (where.y0 + where.y1) / 2 < bar.y1
    (segments,) = [c for c in bars.errorbar.lines[2]]
    lows = [min(seg[0][0], seg[1][0]) for seg in segments.get_segments()]
    assert min(lows) == 0.0  # clipped at zero, not -1000
    assert ax.get_xlim()[0] == 0


def test_one_variant_of_one_run_is_a_table_row_not_a_plot(catalog, tmp_path):
    e = catalog["insert_iops"]
    rows = layout.prepare(report.group(samples_of(catalog, {"insert_iops"}))["insert_iops"],
                          e.label)  # fmt: skip
    assert len(rows) == 1
    png = tmp_path / "iops.png"
    assert plot_experiment(e.title, layout.of(e), {"": rows}, str(png)) is None
    assert not png.exists()
    text = report.render(samples_of(catalog, {"insert_iops"}), catalog, plots_dir=str(tmp_path))
    assert "insert_iops.png" not in text and "### Performance" in text
    # two runs of it: bars side by side
    fig = plot_experiment(e.title, layout.of(e), {"a": rows, "b": rows}, str(png))
    assert fig is not None and len(fig.axes[0].patches) == 2
