"""Data seeding of mongodb_stress by copy (mongobench.stress.seeding) and its plans and costs."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import subprocess

import pytest

from mongobench.deploy import mongod
from mongobench.stress import seeding, steps
from testbed import simulator

R = 10_000_000
COPY = steps.Copying(seeding.SOURCE)  # instance 0 loaded, the others copies


def config(index, cache_gb=1.0, extra=None):
    return mongod.instance_config(
        index, mongod.InstanceOptions(cache_gb=cache_gb, extra=extra), base_dir="/d", version="8.0"
    )


# ----------------------------------------------------------------------------- choice


def test_copy_when_storage_settings_agree_even_with_other_caches_and_paths():
    s = seeding.choose("copy", server_kind="mongod", configs=[config(0), config(1, 2.5)])
    assert s.mode == "copy" and "cp --reflink=auto" in s.reason
    assert s.metadata()["data_seeding"] == "copy"


def test_load_when_wiredtiger_settings_differ():
    other = {"storage": {"wiredTiger": {"collectionConfig": {"blockCompressor": "zstd"}}}}
    s = seeding.choose("copy", server_kind="mongod", configs=[config(0), config(1, extra=other)])
    assert s.mode == "load"
    assert "instance(s) 1" in s.reason and "WiredTiger" in s.reason


def test_load_when_asked_or_without_data_files():
    assert seeding.choose("load", server_kind="mongod").mode == "load"
    s = seeding.choose("copy", server_kind="standin", has_data_files=False)
    assert s.mode == "load" and "no data files" in s.reason
    with pytest.raises(ValueError, match="data seeding"):
        seeding.choose("clone", server_kind="mongod")


def test_storage_settings_drop_only_what_differs_per_copy():
    got = seeding.storage_settings(config(3, 7.0))
    assert "dbPath" not in got
    assert "cacheSizeGB" not in got.get("wiredTiger", {}).get("engineConfig", {})
    assert seeding.storage_settings(config(0)) == got


# ----------------------------------------------------------------------------- copying


def test_copy_command_copies_into_every_target_in_parallel(tmp_path):
    src = tmp_path / "src"
    (src / "journal").mkdir(parents=True)
    (src / "collection-0.wt").write_bytes(b"x" * 4096)
    (src / "journal" / "WiredTigerLog.1").write_text("log")
    (src / "diagnostic.data").mkdir()
    (src / "diagnostic.data" / "metrics.interim").write_text("ftdc of the source")
    stale = tmp_path / "t1"
    stale.mkdir()
    (stale / "old.wt").write_text("stale")
    targets = [str(tmp_path / "t1"), str(tmp_path / "t 2")]
    cmd = seeding.copy_command(str(src), targets, sudo=False)
    subprocess.run(["bash", "-c", cmd], check=True)
    for t in targets:
        files = sorted(p.relative_to(t).as_posix() for p in pathlib.Path(t).rglob("*"))
        assert files == ["collection-0.wt", "journal", "journal/WiredTigerLog.1"]


def test_copy_command_fails_naming_the_target(tmp_path):
    cmd = seeding.copy_command(str(tmp_path / "missing"), [str(tmp_path / "t")], sudo=False)
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    assert proc.returncode != 0 and "copy to" in proc.stderr and "/t failed" in proc.stderr
    with pytest.raises(ValueError):
        seeding.copy_command("/a", [])


# ----------------------------------------------------------------------------- verification

LINE = "VERIFY /w/v-i000.properties records=500 sampled=64 found=64 sha256=" + "ab" * 32


def test_parse_and_check():
    out = "WARNING: SLF4J\n" + LINE + "\n" + LINE.replace("i000", "i001").replace("ab", "cd")
    fps = seeding.parse_verify(out)
    src = seeding.check_source(fps["/w/v-i000.properties"], 500)
    seeding.check_copy(2, seeding.Fingerprint(500, 64, 64, "ab" * 32), src)
    with pytest.raises(steps.StepError, match="copy on instance 1: sampled records differ"):
        seeding.check_copy(1, fps["/w/v-i001.properties"], src)
    with pytest.raises(steps.StepError, match="copy on instance 3: 499 records"):
        seeding.check_copy(3, seeding.Fingerprint(499, 64, 64, "ab" * 32), src)
    with pytest.raises(steps.StepError, match="copy on instance 4: no verification"):
        seeding.check_copy(4, None, src)
    with pytest.raises(steps.StepError, match="source instance 0: 500 records .expected 600"):
        seeding.check_source(src, 600)
    with pytest.raises(steps.StepError, match="63 of 64 sampled keys"):
        seeding.check_source(seeding.Fingerprint(500, 64, 63, "ab" * 32), 500)
    meta = seeding.verification_metadata(src, {2: src, 1: src})
    assert meta["data_seeding_verified"] is True and meta["data_seeding_copies"] == "1,2"


# ----------------------------------------------------------------------------- plans


def test_plan_with_copies_loads_the_source_only_on_its_key_range():
    plan = steps.plan_step(4, loaded=(), clients=2, records=100, hosts=("h",), copying=COPY)
    assert [p.instance for p in plan.load] == [0] and plan.copy == (1, 2, 3)
    assert plan.source == 0
    assert {(p.insertstart, p.insertcount, p.recordcount) for p in plan.run} == {(0, 100, 100)}
    later = steps.plan_step(
        6, loaded={0, 1, 2, 3}, clients=2, records=100, hosts=("h",), copying=COPY
    )
    assert later.load == () and later.copy == (4, 5)
    ahead = steps.plan_step(
        2, loaded=(), clients=1, records=100, hosts=("h",), copying=steps.Copying(upto=5)
    )
    assert ahead.copy == (1, 2, 3, 4) and [p.instance for p in ahead.run] == [0, 1]
    # without copies every instance keeps its own key range, as before
    own = steps.plan_step(2, loaded=(), clients=1, records=100, hosts=("h",))
    assert [p.insertstart for p in own.load] == [0, 100] and own.copy == ()


def test_the_source_loaded_by_parallel_processes_in_slices():
    plan = steps.plan_step(
        3, loaded=(), clients=2, records=100, hosts=("h",), copying=steps.Copying(loaders=3)
    )
    assert [p.instance for p in plan.load] == [0, 0, 0] and plan.copy == (1, 2)
    assert [(p.insertstart, p.insertcount) for p in plan.load] == [(0, 34), (34, 33), (67, 33)]
    assert {p.recordcount for p in plan.load} == {100}
    assert [p.client for p in plan.load] == [0, 1, 0]
    assert [p.stem for p in plan.load] == ["load-i000-p0", "load-i000-p1", "load-i000-p2"]
    # the run processes still read and update the whole range
    assert {(p.insertstart, p.insertcount) for p in plan.run} == {(0, 100)}
    # without copies every instance keeps one loader of its own
    own = steps.plan_step(2, loaded=(), clients=1, records=100, hosts=("h",))
    assert [(p.instance, p.insertcount) for p in own.load] == [(0, 100), (1, 100)]
    with pytest.raises(ValueError, match="source_loaders"):
        none = steps.Copying(loaders=0)
        steps.plan_step(1, loaded=(), clients=1, records=1, hosts=("h",), copying=none)
    with pytest.raises(ValueError, match="the copy source 2 is not one of the step's"):
        steps.plan_step(2, loaded=(), clients=1, records=1, hosts=("h",), copying=steps.Copying(2))


def test_parallel_source_loaders_shorten_the_load_where_the_server_absorbs_them():
    server = simulator.SimulatedServer(simulator.peaked_capacity(6, 16))
    for capacity, faster in ((30_000.0, False), (120_000.0, True)):
        one = simulator.CostModel(seeding="copy", load_capacity=capacity)
        four = dataclasses.replace(one, source_loaders=4)
        a = simulator.simulate(server, search="bounded", cost=one)
        b = simulator.simulate(server, search="bounded", cost=four)
        assert a.records_loaded == b.records_loaded == one.records_per_instance
        assert (b.load_seconds < a.load_seconds) == faster
        assert b.kpis == a.kpis


# ----------------------------------------------------------------------------- costs


def test_copy_seeding_loads_once_and_keeps_the_kpis():
    server = simulator.SimulatedServer(simulator.peaked_capacity(6, 16))
    cost = simulator.CostModel(seeding="copy")
    anchor = simulator.simulate(server, search="anchor", cost=cost)
    copied = simulator.simulate(server, search="bounded", cost=cost)
    loaded = simulator.simulate(server, search="bounded", cost=simulator.CostModel())
    assert [k.value for k in copied.kpis] == [k.value for k in loaded.kpis]
    assert [k.value for k in copied.kpis] == [k.value for k in anchor.kpis]
    assert copied.records_loaded == R and anchor.records_loaded == 36 * R
    # one load of instance 0 plus one clone round for all 16 instances, then the steps
    expected = (
        cost.load_seconds(1) + cost.copy_seconds(15) + len(copied.steps) * cost.step_total_seconds
    )
    assert copied.wall_seconds == pytest.approx(expected)
    assert copied.wall_seconds / anchor.wall_seconds <= 0.15


def test_plain_copies_are_made_per_step():
    server = simulator.SimulatedServer(simulator.peaked_capacity(6, 16))
    cost = simulator.CostModel(seeding="copy", copy_rate=200_000.0)
    run = simulator.simulate(server, search="bounded", cost=cost)
    assert not math.isinf(cost.copy_rate)
    # from 4 instances (a quarter of 16), then 8: two rounds copying 3 + 4 instances
    assert run.steps[:2] == (4, 8)
    rounds = 2 * cost.copy_overhead_seconds + 7 * R / cost.copy_rate
    steps_s = len(run.steps) * cost.step_total_seconds
    assert run.load_seconds == pytest.approx(cost.load_seconds(1) + rounds)
    assert run.wall_seconds == pytest.approx(cost.load_seconds(1) + rounds + steps_s)
