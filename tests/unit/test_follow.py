"""remote.follow: the poll command runs in a real shell on real files, decoded as PKB does."""

import subprocess

import pytest

from mongobench.remote import follow, processes


def _poll(follower, prefix=""):
    out = subprocess.run(
        ["bash", "-c", follower.command(prefix)], capture_output=True, check=True
    ).stdout
    return out.decode("ascii", "ignore")  # what PKB's IssueCommand hands back


def test_new_complete_lines_only_once_and_partial_lines_wait(tmp_path):
    log = tmp_path / "engine.err"
    log.write_text("[1/3] a/x: 10 ops\n[2/3] b/")
    f = follow.Follower([("engine", str(log))])
    _, lines = f.feed(_poll(f))
    assert lines == {"engine": ["[1/3] a/x: 10 ops"]}
    _, lines = f.feed(_poll(f))
    assert lines == {"engine": []}  # nothing new, the half line still waits
    with open(log, "a") as out:
        out.write("y: 20 ops\nheartbeat\n")
    _, lines = f.feed(_poll(f))
    assert lines == {"engine": ["[2/3] b/y: 20 ops", "heartbeat"]}
    with open(log, "a") as out:
        out.write("mongobench: gave up")  # the last words, without a newline
    _, lines = f.feed(_poll(f), final=True)
    assert lines == {"engine": ["mongobench: gave up"]}
    assert f.offsets["engine"] == log.stat().st_size


def test_non_ascii_bytes_keep_the_offsets_right(tmp_path):
    log = tmp_path / "e.err"
    log.write_bytes("caf\u00e9 \u2713 done\n".encode() + b"\xff\x00next\n")
    f = follow.Follower([("e", str(log))])
    _, lines = f.feed(_poll(f))
    assert lines["e"][0].startswith("caf") and lines["e"][0].endswith(" done")
    assert f.offsets["e"] == log.stat().st_size
    with open(log, "ab") as out:
        out.write(b"after\n")
    assert f.feed(_poll(f))[1] == {"e": ["after"]}


def test_several_files_a_missing_one_and_a_state_prefix(tmp_path):
    a, b = tmp_path / "a.err", tmp_path / "b.err"
    a.write_text("one\n")
    pid, rc = tmp_path / "p.pid", tmp_path / "p.rc"
    rc.write_text("0\n")
    states = processes.process_states_command([("p", str(pid), str(rc))], marker=str(tmp_path))
    f = follow.Follower([("a", str(a)), ("b", str(b))])
    head, lines = f.feed(_poll(f, states))
    assert processes.parse_process_states(head) == {"p": processes.ProcessState("exited", 0)}
    assert lines == {"a": ["one"], "b": []}
    b.write_text("two\nthree\n")
    assert f.feed(_poll(f))[1] == {"a": [], "b": ["two", "three"]}


def test_a_line_longer_than_the_limit_is_taken_in_pieces(tmp_path):
    log = tmp_path / "long.err"
    log.write_text("x" * 250 + "\nend\n")
    f = follow.Follower([("l", str(log))], limit=100)
    pieces = []
    for _ in range(5):
        pieces += f.feed(_poll(f))[1]["l"]
    assert "".join(pieces[:-1]) == "x" * 250 and pieces[-1] == "end"


def test_names_must_be_plain_words():
    with pytest.raises(ValueError, match="plain word"):
        follow.follow_command([("a b; rm", "/x", 0)])


def test_a_backlog_over_the_limit_is_pending_even_when_final(tmp_path):
    log = tmp_path / "big.err"
    log.write_text("".join(f"line {i:04d}\n" for i in range(100)))  # 1,000 bytes
    f = follow.Follower([("b", str(log))], limit=300)
    got = []
    while True:
        got += f.feed(_poll(f), final=True)[1]["b"]
        if not f.pending:
            break
    assert got == [f"line {i:04d}" for i in range(100)]
