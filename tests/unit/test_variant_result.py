"""A variant's raw result is a typed VariantResult (issue 24, item 2); its to_dict() is the
results file's object with the keys it always had, and a key only some results carry is
left out, not written as null."""

import pytest

from mongobench.perftables import runner
from mongobench.perftables.experiments import Experiment, Variant
from mongobench.perftables.result import ABSENT, VariantResult

EXP = Experiment("insert_docsize", "t", "s", "insert", ["doc_size_kb"], {}, [{}])
VAR = Variant("insert_docsize", 2, "4", {"doc_size_kb": 4}, {"doc_size_kb": 4, "threads": 1})
BASE = {
    "schema": 1,
    "experiment": "insert_docsize",
    "label": "4",
    "variant_index": 2,
    "params": {"doc_size_kb": 4},
    "settings": {"doc_size_kb": 4, "threads": 1},
}


def test_failed_and_not_applicable_results_keep_their_keys():
    assert runner._failed(EXP, VAR, "boom").to_dict() == {
        **BASE,
        "status": "failed",
        "error": "boom",
    }
    assert runner._not_applicable(EXP, VAR, "server lacks $lookup").to_dict() == {
        **BASE,
        "status": "n/a",
        "reason": "server lacks $lookup",
    }


def test_a_measured_result_round_trips_and_absent_keys_stay_out():
    doc = {
        **BASE,
        "status": "ok",
        "ops": {"insert": 10},
        "errors": {},
        "docs": 10,
        "duration_s": 0.5,
        "audit": None,  # None is a value: written as null
        "repeat": 0,
        "repeats": 2,
    }
    res = VariantResult.from_dict(doc)
    assert res.acknowledged == 10 and res.server_lost is ABSENT and not res.server_lost
    assert res.to_dict() == doc
    assert "open_loop" not in res.to_dict() and res.to_dict()["audit"] is None
    res.fails_run = "too many errors"
    assert res.to_dict()["fails_run"] == "too many errors"


def test_an_unknown_key_is_refused():
    with pytest.raises(ValueError, match="variant result: unknown key"):
        VariantResult.from_dict({**BASE, "status": "ok", "bogus": 1})


def test_one_line_and_error_share_read_the_type():
    res = VariantResult.from_dict(
        {**BASE, "status": "ok", "ops": {"insert": 90}, "errors": {"x": 10}, "docs": 90,
         "duration_s": 1.0}
    )  # fmt: skip
    assert runner._one_line(res) == "90 ops, 90 docs in 1.00s (90 docs/s), 10 errors"
    assert runner._error_share(res).startswith("10 of 100 operations failed (10.0%")
