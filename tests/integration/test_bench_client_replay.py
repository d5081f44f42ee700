"""scripts/bench_client.py --replay --json on three small variants (single operations,
a bulk insert): the earlier schema is kept and every replayed variant has the new
figures. Figures are not judged (a shared machine); only their presence and sense."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler"),
]
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench_client.py")
EARLIER = {
    "ycsb_us_per_op", "experiments", "scaling", "wake_us_after_idle",
    "native_wake_us_after_idle", "native_floor_above_target", "bare_loop_us_per_op",
}  # fmt: skip
NEW = ("replay_us_per_op", "floor_us_per_op", "ops_per_core_s", "added_latency_us")


def test_replay_json_keeps_the_earlier_schema_and_adds_the_replay_figures(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, SCRIPT, "--replay", "--json", str(out), "--rounds", "1",
        "--records", "1000", "--warmup", "10", "--seconds", "4", "--clients", "4",
        "--min-ops", "300", "--min-mb", "1",
        "--experiment", "query_fetch", "--variant", "1 document, cached",
        "--experiment", "insert_batchsize", "--variant", "100",
        # not the experiment's first: at one client it must stay itself (threads set to 1)
        "--experiment", "concurrency", "--variant", "20, False",
    ]  # fmt: skip
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))  # the bench's work directory goes here
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    # 0: every target met, 1: one missed (this machine decides); a traceback: failed
    said = run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, said
    assert "replay targets:" in run.stdout and out.exists(), said
    doc = json.loads(out.read_text())
    assert EARLIER <= set(doc)
    assert set(doc["experiments"]) == {
        "query_fetch/1 document, cached", "insert_batchsize/100", "concurrency/20, False",
    }  # fmt: skip
    for key, e in doc["experiments"].items():
        assert all(isinstance(e[f], float) for f in NEW), key
        assert e["replay_us_per_op"] > 0 and e["floor_us_per_op"] > 0, key
        assert e["ops_per_core_s"] == pytest.approx(1e6 / e["replay_us_per_op"])
        assert e["floor_round_trip_us"] > 0
        # every request the client sent was answered from the recording
        assert e["replay_server"]["missed"] == 0 and e["replay_server"]["requests"] > 0
        assert e["client_loop"] in ("native", "python"), key
        assert e["client_sources"] in ("compiled", "python"), key
        assert f"; {e['client_loop']} loop, {e['client_sources']} sources" in run.stdout, key
    single = doc["experiments"]["query_fetch/1 document, cached"]
    assert not single["bulk"] and "client_us_per_op" in single
    bulk = doc["experiments"]["insert_batchsize/100"]
    assert bulk["bulk"] and "client_us_per_doc" in bulk
    assert bulk["replay_us_per_kb"] > 0 and bulk["floor_us_per_kb"] > 0
    # 755 documents over 48 clients went in batches of 15 or 16, not 100: so does one client
    # (its round trip is compared with the floor's on those requests)
    assert 15 <= bulk["floor_docs_per_request"] <= 16
    assert 15 <= bulk["one_client_docs_per_op"] <= 16
    for name in ("read", "update"):
        assert doc["ycsb_replay_us_per_op"][name]["us_per_op"] > 0
        assert doc["ycsb_replay_us_per_op"][name]["replay_server"]["missed"] == 0
    targets = doc["replay_targets"]
    assert targets["variants"] == 3 and not targets["failed"] and isinstance(targets["met"], bool)
    assert (run.returncode == 0) == targets["met"]
    # the bare Python loop and C on the same find against the replay server, every reply
    # answered from YCSB's recorded reads
    floor = doc["replay_python_floor"]
    assert set(floor) == {"4", "32"}
    for e in floor.values():
        assert e["python_us"] > 0 and e["c_us"] > 0
        assert e["ratio"] == pytest.approx(e["python_us"] / e["c_us"])
    [line] = [ln for ln in run.stdout.splitlines() if "a bare Python loop" in ln]
    assert "'missed': 0" in line, line
    # its work directory (server data, recordings: up to a GB at full scale) is gone
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("bench-client-")]
