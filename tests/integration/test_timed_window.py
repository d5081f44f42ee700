"""The timed window holds only the operations: every client builds its connections,
templates and document pool before the common start, so a variant's duration_s is the
slowest worker's own timed wall time (within 2 % or 50 ms), on both client paths, for
a 2 MB-document insert (its 16 MB document pool takes seconds to build per process)
and for a duration-bound variant whose clients build a document pool too."""

import pytest
from pymongo import MongoClient

from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration

DB = "mb_window"


def _close(duration: float, worker: float) -> bool:
    return abs(duration - worker) <= max(0.02 * worker, 0.05)


def _worker_wall(r: dict) -> float:
    if r["client_path"] == "multiplexed":  # each worker process's own timed wall time
        return max(p["wall_s"] for p in r["client_per_process"])
    return r["client_worker_wall_s"]


def _run(uri, tmp_path, name, variant, path, overrides=None) -> dict:
    run = perftables.run(
        PerftablesRun(
            experiments=[name],
            scale="smoke",
            out=str(tmp_path / f"{name}-{path}.json"),
            database=DB,
            variants=[variant],
            overrides=overrides,
            os_path="none",
            client_path=path,
            processes=2,
        ),
        uri,
        log=lambda m: None,
    )
    [r] = run["results"]
    assert r["status"] == "ok" and not r["errors"], r.get("error") or r["errors"]
    assert r["client_path"] == path
    return r


@pytest.fixture(autouse=True)
def _clean(server_uri):
    yield
    with MongoClient(server_uri) as c:
        c.drop_database(DB)


@pytest.mark.parametrize("path", ["multiplexed", "pymongo"])
def test_2mb_inserts_time_only_the_inserts(server_uri, tmp_path, path):
    r = _run(server_uri, tmp_path, "insert_docsize", "2048", path)
    assert r["docs"] == 10
    worker = _worker_wall(r)
    assert _close(r["duration_s"], worker), (r["duration_s"], worker)
    # The reported speed is the workers' own count over their timed wall time.
    speed, own = r["docs"] / r["duration_s"], r["docs"] / worker
    assert abs(speed - own) <= 0.2 * own, (speed, own)


@pytest.mark.parametrize("path", ["multiplexed", "pymongo"])
def test_a_duration_bound_variant_lasts_its_duration(server_uri, tmp_path, path):
    # update_api clients each build a document factory before the start: its pool of
    # 16 MB of bodies takes seconds, whatever the document size.
    over = {"duration_s": 1.0, "total_ops": 10**9, "preload_docs": 4, "doc_size_kb": 64,
            "threads": 4, "write_concern": 1}  # fmt: skip
    r = _run(server_uri, tmp_path, "updateapi", "0, update_one, False", path, over)
    worker = _worker_wall(r)
    assert _close(r["duration_s"], worker), (r["duration_s"], worker)
    # It ends at the deadline, after the operations then in flight (at most the slowest).
    slowest = max(f["max_ms"] for f in results.latency_figures(r).values()) / 1000.0
    assert 1.0 <= r["duration_s"] <= 1.0 + slowest + 0.1, (r["duration_s"], slowest)
    assert sum(r["ops"].values()) > 0
