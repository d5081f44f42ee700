"""Faults and bad input, round two (issue 22): the campaign through the engine's command line.

Every case is one try a hostile new user made, replayed: it must be refused before anything
runs (one line naming the option and the value, no traceback, exit status 1), or survived as
stated. No device node or symlink target is replaced, and no process is left behind.
The cases through ./pkb.py are in tests/e2e/test_pkb_fault_campaign.py.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
from standin_helpers import built_workdir, write_users_file

from mongobench.testbed import bed as testbed

pytestmark = pytest.mark.integration

DEAD = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500"  # never contacted: refused first


def mongobench(*argv, env=None, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "mongobench", *argv],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def refused(p, *expected):
    """Exit 1 with one last stderr line holding every `expected` piece, no traceback."""
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    for piece in expected:
        assert piece in last, (piece, last)
    return last


def write_uri(tmp_path, uri, name="uri"):
    path = tmp_path / name
    path.write_text(uri + "\n")
    path.chmod(0o600)
    return str(path)


def run_args(tmp_path, uri=DEAD, *argv, out=None):
    return (
        "perftables", "run", "--uri-file", write_uri(tmp_path, uri), "--scale", "smoke",
        "--os-path", "none", "--out", out or str(tmp_path / "r.json"), *argv,
    )  # fmt: skip


@pytest.fixture
def fresh_symlink(tmp_path):
    target = tmp_path / "kept.json"
    target.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    return link, target, os.stat(target).st_ino


# ----------------------------------------------------------------- refused before any work


@pytest.mark.parametrize(
    ("case", "argv", "expected"),
    [
        # bad 3: the results file is rewritten after every variant: a device must not be
        # turned into a regular file (it was, and the run exited 0)
        ("perftables --out /dev/full", ("--out", "/dev/full"), ["--out /dev/full", "regular"]),
        # bad 4: a path under a file, a missing experiments file, malformed YAML
        ("--out under a file", ("--out", "/etc/hostname/x"), ["/etc/hostname", "not a directory"]),
        ("--out in a missing dir", ("--out", "/nonexistent-dir/r.json"), ["does not exist"]),
        ("--out a directory", ("--out", "/tmp"), ["--out /tmp", "is a directory"]),
        (
            "missing --experiments-file",
            ("--experiments-file", "/nonexistent.yaml"),
            ["/nonexistent.yaml", "No such file"],
        ),
        # bad 5: an empty list is not "all"
        ("--experiments ''", ("--experiments", ""), ["--experiments", "empty list"]),
        ("--variants ';'", ("--variants", ";"), ["--variants", "empty list"]),
        ("--skip ''", ("--skip", ""), ["skip", "empty list"]),
        # weak: checked up front, not by every variant
        ("--database a.b", ("--database", "a.b"), ["--database 'a.b'", "'.'"]),
        ("--database ''", ("--database", ""), ["--database", "empty"]),
        ("--database admin", ("--database", "admin"), ["'admin'", "system database"]),
        ("--os-path missing", ("--os-path", "/nonexistent/path"), ["--os-path", "no such"]),
        # weak: --variants over two experiments names the labels of both
        (
            "--variants across experiments",
            ("--experiments", "insert_docsize,insert_idtype", "--variants", "1;nope"),
            ["unknown variant(s) nope", "insert_docsize: 1, 4", "insert_idtype: business_id"],
        ),
        # weak: a run that would run nothing
        (
            "everything skipped",
            (
                "--experiments",
                "insert_idtype",
                "--variants",
                "uuid",
                "--skip",
                "insert_idtype/uuid",
            ),
            ["nothing to run"],
        ),
    ],
)
def test_refused_before_the_target_is_touched(tmp_path, case, argv, expected):
    out = None
    if argv[0] == "--out":
        out, argv = argv[1], argv[2:]
    p = mongobench(*run_args(tmp_path, DEAD, *argv, out=out))
    refused(p, *expected)
    assert "server unreachable" not in p.stderr  # nothing was contacted
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_perftables_list_with_a_missing_experiments_file_is_one_line():
    # a traceback before: list loaded the file outside its error handling
    refused(
        mongobench("perftables", "list", "--experiments-file", "no_such.yaml"),
        "experiments file no_such.yaml",
        "No such file",
    )


def test_malformed_experiments_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("experiments: {a: [1, 2\n")
    refused(
        mongobench(*run_args(tmp_path, DEAD, "--experiments-file", str(bad))),
        str(bad),
        "not valid YAML (line",
    )


@pytest.mark.parametrize(
    ("case", "content", "expected"),
    [
        # weak: a URI file of two lines said "Bad database name"
        ("two lines", f"{DEAD}\nmongodb://other/\n", ["holds 2 lines", "one connection string"]),
        # weak: an unescaped '/' (or '?') in a password was read as a host, and the message
        # showed the password's tail
        ("slash in password", "mongodb://u:pa/ssTAIL@h/", ["percent-escaped"]),
        ("query mark in password", "mongodb://u:pa?ssTAIL@h/", ["percent-escaped"]),
    ],
)
def test_bad_uri_files(tmp_path, case, content, expected):
    path = tmp_path / "uri"
    path.write_text(content)
    p = mongobench("perftables", "run", "--uri-file", str(path), "--out", str(tmp_path / "r"))
    last = refused(p, *expected)
    assert "TAIL" not in p.stderr and "ssTAIL" not in last


@pytest.mark.parametrize(
    ("case", "argv", "expected"),
    [
        ("sweep --table ''", ("--table", ""), ["--table", "empty collection name"]),
        ("sweep --table bad$name", ("--table", "bad$name"), ["--table 'bad$name'", "'$'"]),
        ("sweep --out /dev/full", ("--out", "/dev/full"), ["--out /dev/full", "regular"]),
        # weak: a one-record sweep failed its 50/50 phase with "no READ operations"
        ("one-record sweep", ("--sizes", "0.001"), ["too few", "50/50", "at least 30"]),
        ("empty phases", ("--phases", ""), ["--phases: no phase given"]),
        ("empty sizes", ("--sizes", ""), ["--sizes: no dataset sizes given"]),
    ],
)
def test_sweep_refused_before_the_target_is_touched(tmp_path, case, argv, expected):
    p = mongobench("sweep", "run", "--uri-file", write_uri(tmp_path, DEAD), *argv)
    refused(p, *expected)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


# ----------------------------------------------------------------- survived as stated


def _perftables_samples(tmp_path):
    samples = tmp_path / "samples.json"
    samples.write_text(
        json.dumps({"metric": "Document Throughput", "value": 1.0, "unit": "docs/sec",
                    "metadata": {"experiment": "insert_docsize", "variant": "1"}}) + "\n"
    )  # fmt: skip
    return str(samples)


def test_report_to_a_full_device_is_one_line_and_makes_no_plots_dir(tmp_path):
    # bad 3 and 4: `report --out /dev/full` gave a traceback and created /dev/plots/
    p = mongobench("report", "--pkb-results", _perftables_samples(tmp_path), "--out", "/dev/full")
    refused(p, "/dev/full", "No space left on device")
    assert not os.path.exists("/dev/plots")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_report_to_dev_stdout_sent_to_a_file_makes_no_plots_dir(tmp_path):
    # bad 3: /dev/stdout redirected by the shell to a regular file counted as a report file,
    # and its plots went to a new /dev/plots/
    out = tmp_path / "report.md"
    with open(out, "w") as f:
        p = subprocess.run(
            [sys.executable, "-m", "mongobench", "report", "--pkb-results",
             _perftables_samples(tmp_path), "--out", "/dev/stdout"],
            stdout=f, stderr=subprocess.PIPE, text=True, timeout=180,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert not os.path.exists("/dev/plots")
    assert out.read_text().startswith("# MongoDB Performance Tables")


def test_report_under_a_file_is_one_line(tmp_path):
    # bad 4: `report --out /etc/hostname/x` gave a traceback
    p = mongobench(
        "report", "--pkb-results", _perftables_samples(tmp_path), "--out", "/etc/hostname/x"
    )
    refused(p, "--out /etc/hostname/x", "/etc/hostname is not a directory")


def test_report_symlink_out_is_written_through(tmp_path, fresh_symlink):
    # bad 3: a symlink given as --out was replaced by the atomic rename
    link, target, inode = fresh_symlink
    p = mongobench("report", "--pkb-results", _perftables_samples(tmp_path), "--out", str(link))
    assert p.returncode == 0, p.stderr[-2000:]
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert os.stat(target).st_ino == inode
    assert target.read_text().startswith("# MongoDB Performance Tables")


def test_a_port_above_65535_in_the_uri_is_refused(tmp_path):
    # weak: perftables port 70000 was found after provisioning and a server start (PKB's
    # flag: tests/e2e/test_pkb_fault_campaign.py); the URI's port is checked up front
    refused(mongobench(*run_args(tmp_path, "mongodb://127.0.0.1:70000/")), "70000", "Port must be")


def test_symlink_out_is_written_through_not_replaced(tmp_path, uri_file, fresh_symlink):
    link, target, inode = fresh_symlink
    p = mongobench(
        "perftables", "run", "--uri-file", uri_file, "--scale", "smoke", "--os-path", "none",
        "--experiments", "insert_idtype", "--variants", "uuid", "--set", "total_docs=50",
        "--processes", "1", "--out", str(link),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert os.stat(target).st_ino == inode  # written in place, never renamed over
    assert json.loads(target.read_text())["results"][0]["label"] == "uuid"


def test_what_the_user_sets_is_what_runs(tmp_path, server_uri):
    # weak: the URI's w= was replaced by the experiments' majority without a word, and
    # duration_s was scaled after --set (the user's 1 s ran as 0.5 s)
    out = tmp_path / "r.json"
    p = mongobench(*run_args(
        tmp_path, server_uri.rstrip("/") + "/?w=1", "--experiments", "update_fields",
        "--variants", "1, 500000, plain", "--set", "duration_s=1.5", "--processes", "1",
        out=str(out),
    ))  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "the URI's w=1 replaces the experiments' own" in p.stderr
    (res,) = json.loads(out.read_text())["results"]
    assert res["settings"]["write_concern"] == 1
    assert res["settings"]["duration_s"] == 1.5
    assert 1.3 < res["duration_s"] < 3.0


def test_an_overridden_label_key_says_which_variant_ran(tmp_path, server_uri):
    # weak: --set doc_size_kb=8 labelled every insert_docsize row "8" while they loaded
    # different volumes
    out = tmp_path / "r.json"
    p = mongobench(*run_args(
        tmp_path, server_uri, "--experiments", "insert_docsize", "--variants", "1;4",
        "--set", "doc_size_kb=8", "--processes", "1", out=str(out),
    ))  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert [r["label"] for r in results] == ["8 (variant 1)", "8 (variant 4)"]
    assert {r["settings"]["doc_size_kb"] for r in results} == {8}
    assert len({r["settings"]["total_docs"] for r in results}) == 2


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    workdir = built_workdir(tmp_path_factory, "campaign-auth")
    users = write_users_file(workdir, [{"user": "alice", "password": "s3cret"}])
    srv = testbed.start_server(str(workdir / "auth"), users_file=users)
    yield srv
    srv.stop()


def test_no_credentials_fail_once_up_front(tmp_path, auth_server):
    # weak: every variant failed on its own against a server that requires credentials
    p = mongobench(*run_args(tmp_path, auth_server.uri, "--experiments", "insert_idtype,delete"))
    refused(p, "not authorized on database 'mongobench'", "the URI names no user")
    assert "[1/" not in p.stderr  # no variant ran


@pytest.fixture
def ssh_like_port():
    """A port that answers like sshd: a banner, then nothing MongoDB can read."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    srv.close()


def test_a_uri_naming_another_protocol_fails_fast_in_words(tmp_path, ssh_like_port):
    # weak: a URI pointing at the sshd port said "Got response id ..." after 30 s
    p = mongobench(*run_args(tmp_path, f"mongodb://127.0.0.1:{ssh_like_port}/"), timeout=60)
    refused(p, f"127.0.0.1:{ssh_like_port} did not answer in MongoDB's wire protocol")


def test_a_server_killed_in_the_last_variant_fails_the_run(tmp_path, tmp_path_factory):
    # bad 1: the server died during the last variant after some operations were
    # acknowledged; the run exited 0 and published the fragment as that variant's figures
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "campaign-last") / "s"))
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mongobench", *run_args(
            tmp_path, srv.uri, "--experiments", "update_fields", "--variants",
            "1, 500000, plain;10, 500000, plain", "--set", "duration_s=30", "--processes", "1",
            out=str(out),
        )],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        for line in proc.stderr:
            if "[2/2] update_fields/10, 500000, plain: running" in line:
                break
        # once the last variant acknowledged something (or, on a slow machine, still in its
        # preparation: it fails either way)
        time.sleep(4.0)
        srv.stop()
        err = proc.stderr.read()
        assert proc.wait(120) == 1, err[-2000:]
    finally:
        proc.kill()
        srv.stop()
    assert "Traceback" not in err
    first, last = json.loads(out.read_text())["results"]
    assert first["status"] == "ok" and not first.get("fails_run")
    assert last["status"] == "failed" or last["fails_run"].startswith("the server was lost")
    assert "FAILED update_fields [10, 500000, plain]" in err
