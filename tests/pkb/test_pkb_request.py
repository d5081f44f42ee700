"""The perftables benchmark builds the engine's typed request (PerftablesRun) from its flags,
validated once with the flags named, and ships it as JSON beside target.uri: the client VM's
command line holds the request file's path, not the run options (issue 24, item 2)."""

import types

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors, vm_util
from perfkitbenchmarker.linux_benchmarks import mongodb_perftables_benchmark as perftables

from mongobench.perftables.request import PerftablesRun
from mongobench_pkb import engine, topology


def test_the_flags_build_the_request_once(pkb_flags):
    pkb_flags(
        mongodb_perftables_experiments="insert_docsize",
        mongodb_perftables_variants="1;4",
        mongodb_perftables_set="threads=2",
        mongodb_perftables_scale="smoke",
        mongodb_perftables_repeats=2,
        mongodb_perftables_reply_timeout=30,
    )
    request = perftables._Request()
    assert request == PerftablesRun(
        experiments=["insert_docsize"],
        scale="smoke",
        variants=["1", "4"],
        overrides={"threads": 2},
        repeats=2,
        reply_timeout=30.0,
    )
    assert [v.label for _, vs in request.plans for v in vs] == ["1", "4"]
    assert perftables._Request() is request  # planned once per PKB process
    pkb_flags(mongodb_perftables_experiments="all")
    assert perftables._Request().experiments is None


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"mongodb_perftables_max_seconds": -5}, "--mongodb_perftables_max_seconds must be > 0"),
        ({"mongodb_perftables_set": "threads=0"}, "--mongodb_perftables_set: threads=0 is not"),
        ({"mongodb_perftables_database": "a.b"}, "--mongodb_perftables_database 'a.b': a"),
        ({"mongodb_perftables_scale": "huge"}, "--mongodb_perftables_scale: scale must be"),
        ({"mongodb_perftables_experiments": "nope"}, "unknown experiment(s) nope; known:"),
    ],
)
def test_a_bad_flag_is_named_before_anything_is_provisioned(pkb_flags, flags, expected):
    pkb_flags(**flags)
    with pytest.raises(errors.Config.InvalidValue) as e:
        perftables._Request()
    assert str(e.value).startswith(expected), str(e.value)


class _Client(FakeVm):
    def PullFile(self, local, remote):
        raise errors.VirtualMachine.RemoteCommandError("no results")


def test_a_step_ships_the_request_beside_target_uri(pkb_flags, tmp_path, monkeypatch):
    pkb_flags(
        run_uri="r1",
        mongodb_perftables_experiments="insert_docsize",
        mongodb_perftables_scale="smoke",
        mongodb_perftables_set="threads=2",
        mongodb_perftables_client_processes=3,
    )
    monkeypatch.setattr(vm_util, "GetTempDir", lambda: str(tmp_path))
    ran = []
    monkeypatch.setattr(engine, "RunEngine", lambda vm, wd, cmd, name: ran.append(cmd) or (1, "x"))
    monkeypatch.setattr(engine, "StartFollowers", lambda *a: [])
    monkeypatch.setattr(engine, "WaitFollowers", lambda f: [])
    client = _Client("c0")
    state = perftables.State(
        topology.Servers([], {}),
        request=perftables._Request(),
        workdir="/w",
        uri_file="/w/target.uri",
    )
    spec = types.SimpleNamespace(vm_groups={"clients": [client]}, mongobench=state)
    samples, failed = perftables._RunStep(spec, None, {"threads": 2, "instance_type": "n2"}, {})
    assert samples == [] and failed[0]["experiment"] == "target"
    [command] = ran
    assert command.endswith(
        "mongobench perftables run --uri-file /w/target.uri --request /w/perftables-request.json"
        " --yes"
    )
    assert ("PushFile", "/w/perftables-request.json") in client.calls
    sent = PerftablesRun.from_json((tmp_path / "c0-perftables-request.json").read_text())
    assert sent == state.request.replace(
        out="/w/perftables-results.json",
        os_path="/w",
        overrides={"threads": 2, "instance_type": "n2"},
        processes=3,
        run_id="r1-0",
    )
