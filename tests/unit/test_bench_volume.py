"""scripts/bench_client.py's least volume per variant (bench_volume), over the real catalog's
smoke plan: a variant counted in requests runs at least --min-ops of them and
OPS_PER_CLIENT per virtual client (a fresh connection's first requests cost more than the
floor's, which replays over used connections), bulk inserts --min-mb MB."""

from __future__ import annotations

import os
import sys

import pytest

from mongobench.perftables import experiments as exp_mod

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import bench_client


def _plan():
    plans = exp_mod.plan(exp_mod.load(), None, "smoke", None)
    return [(e, v) for e, variants in plans for v in variants]


def _requests_per_client(workload, s):
    """Requests each virtual client sends, for the variants counted in requests."""
    clients = int(s.get("threads") or 1)
    if s.get("total_ops"):
        return s["total_ops"] / clients
    if workload == "insert" and int(s["batch_size"]) == 1:
        return s["total_docs"] / clients
    return None


def test_every_variant_counted_in_requests_runs_enough_of_them_per_client():
    seen = set()
    for experiment, v in _plan():
        s = dict(v.settings)
        s.update(bench_client.bench_volume(experiment.workload, s, 2000, 50) or {})
        per_client = _requests_per_client(experiment.workload, s)
        if per_client is None:
            continue
        key = f"{experiment.name}/{v.label}"
        assert per_client >= bench_client.OPS_PER_CLIENT, key
        assert (s.get("total_ops") or s["total_docs"]) >= 2000, key
        seen.add(key)
    # the batch of one: an insert counted in documents, which the rule once missed
    assert "insert_batchsize/1" in seen and "concurrency/400, False" in seen


def test_a_batch_of_one_is_lengthened_as_operations_are():
    s = {"threads": 48, "batch_size": 1, "total_docs": 755, "doc_size_kb": 4}
    assert bench_client.bench_volume("insert", s, 2000, 50) == {"total_docs": 2400}
    assert bench_client.bench_volume("insert", s, 0, 50) is None  # 0: smoke as it is
    assert bench_client.bench_volume("insert", dict(s, total_docs=5000), 2000, 50) is None


@pytest.mark.parametrize("kb, docs", [(1, 51_200), (4, 12_800), (2048, 25)])
def test_bulk_inserts_load_min_mb(kb, docs):
    s = {"threads": 10, "batch_size": 1000, "total_docs": 10, "doc_size_kb": kb}
    assert bench_client.bench_volume("insert", s, 2000, 50) == {"total_docs": docs}
    assert bench_client.bench_volume("insert", s, 2000, 0) is None


def test_deletes_start_with_enough_documents_and_timed_variants_are_left_alone():
    s = {"threads": 4, "preload_docs": 200, "docs_per_delete": 100}
    assert bench_client.bench_volume("delete", s, 2000, 50) == {"preload_docs": 200_000}
    s = {"threads": 48, "duration_s": 0.4}
    assert bench_client.bench_volume("query", s, 2000, 50) is None


def _replayed(us: float, busy: float) -> dict:
    return {"bulk": False, "replay_us_per_op": us, "floor_us_per_op": 10.0,
            "ops_per_core_s": 1e6 / us, "added_latency_us": 5.0, "floor_round_trip_us": 30.0,
            "replay_server": {"missed": 0}, "client_loop": "native",
            "client_sources": "compiled", "replay_client_busy": busy}  # fmt: skip


def test_a_replay_whose_client_waited_is_flagged_not_judged(capsys):
    """A client less than SATURATED_BUSY busy paid wake-ups: said beside its figure."""
    out = bench_client.replay_targets({"a/1": _replayed(12, 1.01), "b/2": _replayed(26, 0.62)})
    printed = capsys.readouterr().out.splitlines()
    lines = {k: next(x for x in printed if x[2:].startswith(k)) for k in ("a/1", "b/2")}
    assert out["unsaturated"] == ["b/2"] and out["single_over"] == ["b/2"]
    assert "client 62% busy: not saturated" in lines["b/2"]
    assert "not saturated" not in lines["a/1"]
