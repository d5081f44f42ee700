"""mongobench_pkb.vm's detached processes and Follow, on a VM whose commands really run
(here, in a temporary directory): what a process writes on stderr reaches the caller and
pkb.log's lines as it comes, its exit status is read from its status file, and a process
that outlives its timeout is stopped (issue 24, item 3: Follow takes one Followed)."""

import pytest
from fakevm import NEEDS_PKB, LocalVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from mongobench_pkb import vm as mongobench_vm


def test_a_detached_command_is_followed_to_its_exit_status(tmp_path, caplog):
    caplog.set_level("INFO")
    command = "echo first >&2; sleep 1; echo 'mongodb://u:secret@h/ db' >&2; exit 3"
    rc, stderr = mongobench_vm.RunDetached(
        LocalVm(), command, name="job", directory=str(tmp_path), label="eng:", poll_s=0.5
    )
    assert rc == 3
    assert stderr.splitlines()[0] == "first" and "secret" not in stderr
    assert "eng: first" in caplog.text and "secret" not in caplog.text


def test_follow_takes_what_to_follow_as_one_followed(tmp_path):
    vm = LocalVm()
    handles = [
        mongobench_vm.StartDetached(vm, f"echo {n} line >&2; echo skip >&2", name=n, directory=str(tmp_path))
        for n in ("a", "b")
    ]  # fmt: skip
    followed = mongobench_vm.Followed(
        [(h["name"], h["pid"], h["rc"]) for h in handles],
        str(tmp_path),
        [(h["name"], h["err"]) for h in handles],
        lambda name: f"[{name}]",
        keep=lambda line: "line" in line,
    )
    collected = {}
    states = mongobench_vm.Follow(vm, followed, poll_s=0.5, timeout_s=30, collected=collected)
    assert {n: (s.state, s.value) for n, s in states.items()} == {
        "a": ("exited", 0),
        "b": ("exited", 0),
    }
    assert collected == {"a": ["a line"], "b": ["b line"]}


def test_a_process_past_its_timeout_is_stopped(tmp_path):
    vm = LocalVm()
    # the directory is in its command line: the marker a live process is known by
    command = f"cd {tmp_path} && sleep 60; true"  # not exec-ed: its bash stays
    handle = mongobench_vm.StartDetached(vm, command, name="slow", directory=str(tmp_path))
    rc, stderr = mongobench_vm.WaitDetached(vm, handle, label="x", poll_s=0.5, timeout_s=1.5)
    assert rc is None and stderr.endswith("stopped after 2 s")
    states = mongobench_vm.RemoteStates(vm, [("slow", handle["pid"], handle["rc"])], str(tmp_path))
    assert not states["slow"].running
