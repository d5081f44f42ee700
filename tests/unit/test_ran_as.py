"""Honest labels at small scales (issue 23): a setting the scale changed says what it ran as,
in the variant's settings, on the samples, in the tables and in `perftables list`."""

import subprocess
import sys

from test_results_report import RUN, raw_result

from mongobench.perftables import experiments as exp_mod
from mongobench.reports import report, results


def _variants(name, scale):
    return {v.label: v for v in exp_mod.load()[name].resolve(scale)}


def test_batches_larger_than_a_clients_share_say_what_they_ran_as():
    smoke = _variants("insert_batchsize", "smoke")
    # 755 documents from 48 clients: at most 16 each, so 100, 1000, 2000 are all 16
    assert {k: v.settings.get("ran_as_batch_size") for k, v in smoke.items()} == {
        "1": None, "10": None, "100": 16, "1000": 16, "2000": 16,
    }  # fmt: skip
    assert exp_mod.ran_as_text(smoke["1000"].settings, "batch_size", 1000) == "1000 (ran as 16)"
    small = _variants("insert_batchsize", "small")
    assert (
        small["1000"].settings["ran_as_batch_size"] == small["2000"].settings["ran_as_batch_size"]
    )
    assert not any(
        "ran_as_batch_size" in v.settings for v in _variants("insert_batchsize", "full").values()
    )
    # a setting outside the label too: the 256 KB "4 MB batches" are 2 documents at smoke
    assert _variants("insert_docsize", "smoke")["256"].settings["ran_as_batch_size"] == 2


def test_the_table_cell_says_it():
    res = raw_result()
    res.update(experiment="insert_batchsize", label="1000", params={"batch_size": 1000})
    res["settings"] = {
        "batch_size": 1000,
        "threads": 48,
        "total_docs": 755,
        "ran_as_batch_size": 16,
    }
    samples = results.to_samples({**RUN, "results": [res]})
    assert all(s["metadata"]["ran_as_batch_size"] == 16 for s in samples)
    assert "| 1000 (ran as 16) |" in report.render(samples)


def test_perftables_list_shows_it():
    out = subprocess.run(
        [sys.executable, "-m", "mongobench", "perftables", "list", "--scale", "smoke"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "batch_size=1000 (ran as 16)" in out
    assert "batch_size=1 " in out  # the 1 and 10 keep their label alone
    assert "doc_size_kb=256, batch_size ran as 2" in out
    full = subprocess.run(
        [sys.executable, "-m", "mongobench", "perftables", "list", "--scale", "full"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "ran as" not in full


def test_a_scaled_label_key_names_its_full_scale_value_and_what_ran():
    smoke = _variants("update_fields", "smoke")["1, 500000, plain"].settings
    # the key range shrinks with the preload: 500000 of 15M runs as 60 of the smoke preload
    assert smoke["nominal_doc_range"] == 500000
    assert smoke["ran_as_doc_range"] == smoke["doc_range"] < 500000
    full = _variants("update_fields", "full")["1, 500000, plain"].settings
    assert not any(k.startswith(("ran_as_", "nominal_")) for k in full)
    # what a user sets is not scaled: it is what the label says
    mine = exp_mod.load()["update_fields"].resolve("smoke", {"doc_range": 100})
    assert all("ran_as_doc_range" not in v.settings for v in mine)


def test_the_key_range_cell_says_it():
    settings = _variants("update_fields", "smoke")["1, 500000, plain"].settings
    res = raw_result()
    res.update(experiment="update_fields", label="1, 500000, plain", params={"n_fields": 1})
    res["settings"] = settings
    text = report.render(results.to_samples({**RUN, "results": [res]}))
    assert f"| 500000 (ran as {settings['doc_range']}) |" in text


def test_perftables_list_names_the_full_scale_key_range():
    out = subprocess.run(
        [sys.executable, "-m", "mongobench", "perftables", "list", "--scale", "smoke"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "n_fields=1, doc_range=500000 (ran as " in out
    assert "doc_range=15000000 (ran as " in out
