"""Data seeding by copy for real: the stand-in keeps its store in its dbpath, YCSB loads one
instance, its files are copied (stress.seeding.copy_command) to two others, and VerifyData (the
YCSB binding's) proves each copy holds the source's records; a damaged copy is caught."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pymongo
import pytest

from mongobench.remote import javabuild
from mongobench.stress import seeding, steps
from mongobench.ycsb import properties
from testbed import bed as testbed

pytestmark = pytest.mark.integration

RECORDS = 400
TIMEOUT_S = 180


def _props(uri: str, proc: steps.YcsbProcess, **extra) -> str:
    return properties.Workload(
        recordcount=proc.recordcount,
        insertstart=proc.insertstart,
        insertcount=proc.insertcount,
        operationcount=proc.insertcount,
        threadcount=2,
        url=uri.rstrip("/") + "/ycsb",
        extra={seeding.SAMPLES_PROPERTY: 32, **extra},
    ).text()


def _verify(files: list[pathlib.Path]) -> dict[str, seeding.Fingerprint]:
    cmd = seeding.verify_command("java", javabuild.ycsb_classpath(), [str(f) for f in files])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    return seeding.parse_verify(proc.stdout), proc


def test_copied_data_files_verified(tmp_path):
    javabuild.build()
    plan = steps.plan_step(
        3, loaded=(), clients=1, records=RECORDS, hosts=("h",), copying=steps.Copying()
    )
    assert plan.copy == (1, 2)
    dbpaths = [tmp_path / f"mongod-{i}" / "data" for i in range(3)]
    src = testbed.start_server(str(tmp_path / "s0"), kind="standin", dbpath=str(dbpaths[0]))
    try:
        props = tmp_path / "load.properties"
        props.write_text(_props(src.uri, plan.load[0]))
        load = subprocess.run(
            properties.ycsb_command(javabuild.ycsb_classpath(), "load", str(props)),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        assert load.returncode == 0, load.stderr[-2000:]
        steps.load_result(plan.load[0], load.returncode, load.stdout + load.stderr)
        vsrc = tmp_path / "v0.properties"
        vsrc.write_text(_props(src.uri, plan.run[0]))
        got, proc = _verify([vsrc])
        source = seeding.check_source(got.get(str(vsrc)), RECORDS)
        assert source.found == source.sampled == 32, proc.stderr
    finally:
        src.stop()  # SIGTERM: a clean shutdown writes the data file
    assert (dbpaths[0] / "standin-data.bson").stat().st_size > RECORDS * 1000

    cmd = seeding.copy_command(str(dbpaths[0]), [str(dbpaths[1]), str(dbpaths[2])], sudo=False)
    subprocess.run(["bash", "-c", cmd], check=True, timeout=60)

    servers = [
        testbed.start_server(str(tmp_path / f"s{i}"), kind="standin", dbpath=str(dbpaths[i]))
        for i in range(3)
    ]
    try:
        files = []
        for i, server in enumerate(servers):
            f = tmp_path / f"v{i}.properties"
            f.write_text(_props(server.uri, plan.run[i]))
            files.append(f)
        got, proc = _verify(files)
        for i in (1, 2):
            seeding.check_copy(i, got.get(str(files[i])), source)
        assert got[str(files[0])] == source  # the restarted source reads its own file back

        # A copy that lost a record is caught by count, one whose record changed by digest.
        with pymongo.MongoClient(servers[2].uri, serverSelectionTimeoutMS=10_000) as c:
            doc = c.ycsb.usertable.find_one()
            c.ycsb.usertable.delete_one({"_id": doc["_id"]})
        with pymongo.MongoClient(servers[1].uri, serverSelectionTimeoutMS=10_000) as c:
            c.ycsb.usertable.update_many({}, {"$set": {"field0": "changed"}})
        got, _ = _verify(files[1:])
        with pytest.raises(steps.StepError, match="copy on instance 1: sampled records differ"):
            seeding.check_copy(1, got.get(str(files[1])), source)
        with pytest.raises(steps.StepError, match=f"copy on instance 2: {RECORDS - 1} records"):
            seeding.check_copy(2, got.get(str(files[2])), source)
    finally:
        for server in servers:
            server.stop()
    assert os.path.exists(dbpaths[1] / "standin-data.bson")
