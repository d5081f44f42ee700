"""The audit of acknowledged writes: expected from the acknowledged count, lost when the server
has less (or, for deletions, more); not audited workloads give None; samples and the report
carry lost_writes."""

from mongobench.driver import base
from mongobench.driver.base import ThreadStats, Workload
from mongobench.driver.catalog import WORKLOADS
from mongobench.reports import report, results


class Counter(Workload):
    audit_check = "counter"

    def __init__(self, values):
        self.values = iter(values)

    def audit_state(self):
        return next(self.values)


def _stats(docs):
    s = ThreadStats()
    s.docs = docs
    return s


def test_audit_counts_what_is_missing():
    w = Counter([10, 55])
    baseline = base.audit_baseline(w)
    assert base.audit(w, baseline, _stats(100)) == {
        "check": "counter", "expected": 110, "found": 55, "lost_writes": 55
    }  # fmt: skip
    w = Counter([10, 120])  # more than acknowledged (an unanswered write applied): none lost
    assert base.audit(w, base.audit_baseline(w), _stats(100))["lost_writes"] == 0


def test_which_workloads_are_audited():
    audited = {name for name, cls in WORKLOADS.items() if cls.audit_check}
    assert {"insert", "hot_update", "update_api", "delete"} <= audited
    assert base.audit_baseline(WORKLOADS["query"].__new__(WORKLOADS["query"])) is None


def test_deletions_acknowledged_but_still_there_are_lost():
    cls = WORKLOADS["delete"]
    w = cls.__new__(cls)
    assert w.audit_expected(100, _stats(100)) == 0
    assert w.audit_lost(0, 3) == 3 and w.audit_lost(0, 0) == 0


def test_lost_writes_in_samples_and_report():
    res = {
        "status": "ok", "experiment": "concurrency", "label": "10, False", "variant_index": 0,
        "settings": {}, "ops": {"update": 400}, "docs": 400, "bytes": 0, "errors": {},
        "counters": {}, "duration_s": 1.0, "latency": {}, "server_before": {},
        "server_after": {}, "threads": 10,
        "audit": {"check": "c", "expected": 400, "found": 51, "lost_writes": 349},
    }  # fmt: skip
    samples = results.to_samples({"scale": "smoke", "results": [res]})
    assert samples and all(s["metadata"]["lost_writes"] == 349 for s in samples)
    text = report.render(samples)
    assert "- 10, False: lost_writes 349 (expected 400, found 51)" in text
