"""Provenance on every table and plot (reports.caption): target, scale, date, repeats and
what the error bars mean; the stand-in's figures say they are not performance figures."""

import datetime
import json

from test_results_report import RUN, pkb_lines, raw_result

from mongobench.perftables import experiments as exp_mod
from mongobench.remote.provenance import STANDIN_ENGINE
from mongobench.reports import caption, report, results
from mongobench.reports.tableplots import plot_experiment

DAY = datetime.datetime(2026, 11, 20, 12, tzinfo=datetime.UTC).timestamp()


def test_each_kind_of_target_and_the_standin_note():
    standin = {"server_version": "7.0.0", "topology": "Single", "storage_engine": STANDIN_ENGINE,
               "scale": "smoke"}  # fmt: skip
    line = caption.line([standin], [DAY])
    assert line == (
        "Target: stand-in claiming MongoDB 7.0.0 (Single). scale smoke; 2026-11-20; 1 repeat;"
        " no error bars (one run per variant); stand-in: not a performance figure."
    )
    mongod = dict(
        standin, storage_engine="wiredTiger", topology="ReplicaSet", server_version="8.0.4"
    )
    assert caption.target(mongod) == "mongod 8.0.4, wiredTiger (ReplicaSet)"
    assert caption.target(dict(mongod, atlas_tier="M30")) == "Atlas M30, MongoDB 8.0.4 (ReplicaSet)"
    ferret = dict(mongod, storage_engine="unknown", server_version="7.0.77")
    assert caption.target(ferret).startswith("a compatible server reporting 7.0.77")
    assert "not a performance figure" not in caption.line([mongod], [DAY])


def test_error_bars_say_what_they_are():
    md = {"repeats": 3, "ci95_low": 1.0, "ci95_high": 2.0, "storage_engine": "wiredTiger"}
    line = caption.line([md], [DAY, DAY + 3 * 86400])
    assert "3 repeats" in line and "2026-11-20 to 2026-11-23" in line
    assert "error bars: 95 % confidence interval of the mean of 3 repeats" in line
    assert caption.error_bars([{"stdev": 1.0}]) == "error bars: ± one standard deviation"


def test_the_report_table_and_plot_carry_the_line(tmp_path):
    run = dict(RUN, results=[raw_result("4"), raw_result("1", docs=4000)])
    for r in run["results"]:
        r["start"] = DAY
    samples = results.to_samples(run)
    path = tmp_path / "r.json"
    lines = [dict(json.loads(line), timestamp=DAY) for line in pkb_lines(samples).splitlines()]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    loaded = report.load_pkb_results(str(path))
    text = report.render(loaded, exp_mod.load(), plots_dir=str(tmp_path / "plots"))
    assert "Target: " in text and "scale smoke; 2026-11-20; 1 repeat" in text
    rows = report.group(loaded)["insert_docsize"]
    note = caption.line([r["_md"] for r in rows.values()], [r["_ts"] for r in rows.values()])
    assert note in text
    e = exp_mod.load()["insert_docsize"]
    from mongobench.reports import layout

    fig = plot_experiment(e.title, layout.of(e), {"": layout.prepare(rows, e.label)},
                          str(tmp_path / "p.png"), note)  # fmt: skip
    assert any(note.split(".")[0] in t.get_text().replace("\n", " ") for t in fig.texts)


def test_a_repeat_wider_than_a_quarter_of_its_mean_is_flagged():
    md = {"experiment": "insert_docsize", "variant": "4", "variant_index": 0, "repeats": 3}
    wide = {"metric": "Document Throughput", "value": 9815.0, "unit": "docs/sec", "run_uri": "a",
            "metadata": dict(md, ci95_low=-156.0, ci95_high=19786.0, stdev=4000.0)}  # fmt: skip
    tight = {"metric": "Document Throughput", "value": 1000.0, "unit": "docs/sec", "run_uri": "a",
             "metadata": dict(md, variant="1", variant_index=1, ci95_low=950.0,
                              ci95_high=1050.0, stdev=20.0)}  # fmt: skip
    rows = report.group([wide, tight])["insert_docsize"]
    assert report.noisy_lines(rows) == ["- 4: Speed (docs/s) 9815 ± 9971"]
    text = report.render([wide, tight], exp_mod.load())
    assert "Noisy (95 % half-width above 25 % of the mean" in text
