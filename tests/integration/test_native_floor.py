"""bench_client's native floor against the stand-in: the recording holds every request
the variant's clients sent, and the C replay sends them again, from the variant's
prepared state, and reads every reply."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from pymongo import MongoClient

from mongobench.driver import protocol
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import native_floor

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler"),
]
DB = "nativefloor"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return native_floor.build(str(tmp_path_factory.mktemp("native")))


def recorded_run(uri, tmp_path, experiment, label, overrides):
    rec = tmp_path / "rec"
    rec.mkdir()
    with native_floor.recording(str(rec)):
        run = perftables.run(
            PerftablesRun(
                experiments=[experiment],
                scale="smoke",
                out=str(tmp_path / "out.json"),
                database=DB,
                variants=[label],
                overrides=overrides,
                os_path="none",
                processes=2,
            ),
            uri,
            log=lambda m: None,
        )
    [res] = run["results"]
    assert res["status"] == "ok" and not res["errors"] and res["client_path"] == "multiplexed"
    return str(rec), res


def command_of(message: bytes) -> dict:
    """The command (section kind 0) of a whole OP_MSG."""
    assert int.from_bytes(message[:4], "little") == len(message)
    assert int.from_bytes(message[12:16], "little") == protocol.OP_MSG
    return protocol._reply_doc(message)


def test_recording_holds_every_request_and_the_replay_reads_every_reply(
    server_uri, tmp_path, binary
):
    rec, res = recorded_run(server_uri, tmp_path, "query_fetch", "1 document, cached", None)
    sent = native_floor.requests(rec)
    ops = sum(res["ops"].values())
    assert ops > 0 and len(sent) == ops  # one find per operation, none lost or doubled
    assert {command_of(m).get("find") for m in sent} == {"query"}
    floor = native_floor.floor(binary, server_uri, rec, res, DB)
    assert floor["round_trips_per_op"] == 1.0
    assert 0 < floor["us_per_op"] < 100_000


def test_the_replay_repeats_the_variant_from_its_prepared_state(server_uri, tmp_path, binary):
    # 2,000 documents over 10 clients: two deleteManys of 100 each
    more = {"preload_docs": 2000}  # what the user sets runs unscaled
    rec, res = recorded_run(server_uri, tmp_path, "delete", "100", more)
    sent = native_floor.requests(rec)
    assert {next(iter(command_of(m))) for m in sent} == {"delete"}
    assert res["docs"] == int(res["settings"]["preload_docs"]) == 2000 and len(sent) == 20
    # Replay all but the last two deleteManys: 200 documents are left only if the
    # variant's data was prepared again and every other delete reached the server.
    for name in os.listdir(rec):
        os.unlink(os.path.join(rec, name))
    with open(os.path.join(rec, "requests.1"), "wb") as f:
        f.write(b"".join(sent[:-2]))
    floor = native_floor.floor(binary, server_uri, rec, res, DB)
    with MongoClient(server_uri) as c:
        assert c[DB]["deletes"].count_documents({}) == 200
    assert floor["us_per_op"] > 0 and floor["us_per_doc"] == pytest.approx(floor["us_per_op"] / 100)


def test_the_replay_spreads_the_connections_over_processes(server_uri, binary):
    with MongoClient(server_uri) as c:
        c[DB]["spread"].drop()
        c[DB]["spread"].insert_one({"_id": 1})
    msg = protocol.encode_msg({"find": "spread", "filter": {"_id": 1}, "$db": DB}, 1)
    # 3 processes, 5 connections, 7 requests: every request gets its reply
    us = native_floor.replay_us(binary, server_uri, [msg] * 7, 5, 3)
    assert us > 0
