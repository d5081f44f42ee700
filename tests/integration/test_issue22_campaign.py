"""Faults and bad input, round two (issue 22): the campaign that replays its 36 cases.

Every case is one try a hostile new user made. It must be refused before anything runs (one
line naming the option and the value, no traceback, exit status 1), or survived as stated.
After every case the shared post-checks of tests/campaign_helpers.py (`after_case`) hold:
the expected exit status, no traceback on stderr, no process of the case left (found by the
marker in the environment every process it started inherits), /dev/full still a character
device, no /dev/plots, a symlink given as --out still a link whose target kept its inode.

The cases (`CASES`, numbered from the issue's text; a case may take several tries):

Bad (14)
  B1  a server killed during the last variant: exit 0 on the CLI ...... test_B1 (CLI)
  B2  ... and SUCCEEDED through ./pkb.py ............................. e2e (./pkb.py)
  B3  SIGTERM to the engine left its workers running ................. test_B3_B6 (SIGTERM)
  B4  SIGTERM to `sweep run` left YCSB's Java process ................ test_B4
  B5  Ctrl-C (or SIGTERM) on ./pkb.py mid-variant left engine workers  e2e (./pkb.py; with
      a second SIGTERM during Cleanup, a terminal's Ctrl-C during Cleanup, and a SIGTERM
      in PKB's Provision stage)
  B6  SIGINT to the engine waited for the phase's end, then a traceback  test_B3_B6 (SIGINT)
  B7  --out /dev/full (perftables, sweep) made the device a JSON file  refused rows
  B8  report --out /dev/full: a traceback and a new /dev/plots/ ...... refused row, test_B8
  B9  a symlink given as --out was replaced by the rename ............ test_B9 (run, report)
  B10 report or perftables run --out /etc/hostname/x: a traceback .... refused rows
  B11 --experiments-file missing, or malformed YAML: a traceback ..... refused rows
  B12 --experiments '' ran all 94 variants (and the other empty lists)  refused rows
  B13 mongodb_perftables_experiments: "" passed PKB's checks ......... e2e (./pkb.py)
  B14 compare on a sweep with a failed phase: matplotlib's log error . tests/unit (cli.main)
Weak (22)
  W1  sweep --table '' ... refused      W2  sweep --table bad$name ... refused
  W3  port 70000: the URI's (refused row) and --mongodb_perftables_port (e2e)
  W4  --database a.b      W5  --database ''      W6  --os-path missing
  W7  no credentials against a server that requires them: once, up front
  W8  admin as the benchmark database   W9  a two-line URI file
  W10 a URI naming an sshd: words within seconds, not "Got response id" after 30 s
  W11 --variants across two experiments lists both experiments' labels
  W12 an unescaped / (or ?) in a password: one line, without the password's tail
  W13 a one-record sweep: refused, not "no READ operations"
  W14 --set doc_size_kb=8 labels every row "8" .................... test_W14
  W15 duration_s scaled after --set; W16 the URI's w= overridden ... test_W15_W16
  W17 a run that skips every variant: refused (CLI row; ./pkb.py in e2e)
  W18 report on a file it has nothing to say about exited 0 ........ refused row
  W19 a leader without followers waited 180 s per variant .......... integration (in-process)
  W20 ... while its heartbeat said "timed phase 2m00s" .............. tests/unit (progress)
  W21 perftables follow with a wrong run id waited forever ......... refused row
  W22 the variant in which a server dies waited 30 s of server selection  integration

W19, W20, W22 and B14 run in-process where they are tested (`REPLAYED_ELSEWHERE`): the
leader's ready timeout (180 s) has no command-line option, the heartbeat is a unit, and
W22 needs the server killed inside the timed phase, which only the runner's own function
can time. The cases through ./pkb.py are in tests/e2e/test_pkb_issue22_campaign.py.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import signal
import socket
import subprocess
import threading
import time

import pytest
from campaign_helpers import (
    Symlink,
    after_case,
    cli,
    kill_marked,
    marked,
    new_marker,
    refused,
    start,
    wait_for,
)
from standin_helpers import built_workdir, write_users_file

from mongobench.remote import javabuild
from testbed import bed as testbed

pytestmark = pytest.mark.integration

DEAD = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500"  # never contacted: refused first
TESTS = pathlib.Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    issue: str  # the issue's wording (shortened)
    argv: tuple = ()  # a refused try: the command line, with {placeholders}
    expect: tuple = ()  # pieces of the one refusal line
    forbid: tuple = ()  # text that must not appear on stderr
    replay: str = ""  # a survived case: the test that replays it


def run(*argv, uri="{dead}", out="{out}"):
    return ("perftables", "run", "--uri-file", uri, "--scale", "smoke", "--os-path", "none",
            "--out", out, *argv)  # fmt: skip


def sweep(*argv):
    return ("sweep", "run", "--uri-file", "{dead}", *argv)


def report(*argv):
    return ("report", "--pkb-results", "{samples}", *argv)


E2E = "tests/e2e/test_pkb_issue22_campaign.py::"
REPLAYED_ELSEWHERE = {
    "B14": "tests/unit/test_compare.py::"
    "test_a_phase_failed_at_every_size_still_gives_the_report_and_its_plots",
    "W19": "tests/integration/test_perftables_client_vms.py::"
    "test_a_lonely_leader_says_what_it_waits_for_and_waits_once",
    "W20": "tests/unit/test_progress.py::test_a_wait_says_what_it_waits_for_and_its_limit",
    "W22": "tests/integration/test_perftables_bad_target.py::"
    "test_a_server_lost_mid_variant_costs_seconds_not_server_selection",
}

CASES = [
    # ------------------------------------------------------------------ bad
    Case("B1", "a server killed in the last variant: exit 0", replay="test_B1"),
    Case("B2", "... and SUCCEEDED through PKB",
         replay=E2E + "test_B2_a_server_killed_in_the_last_variant_fails_the_pkb_run"),
    Case("B3", "SIGTERM leaves workers running", replay="test_B3_B6"),
    Case("B4", "sweep run leaves YCSB's Java process", replay="test_B4"),
    Case("B5", "Ctrl-C on ./pkb.py mid-variant left 2 engine workers",
         replay=E2E + "test_B5_a_signal_to_pkb_mid_variant_runs_cleanup"),
    Case("B5", "a terminal's Ctrl-C during Cleanup killed its ssh commands",
         replay=E2E + "test_B5_a_terminal_s_ctrl_c_during_cleanup_leaves_every_step_undone"),
    Case("B5", "SIGTERM to ./pkb.py in its Provision stage",
         replay=E2E + "test_B5_sigterm_during_provision_ends_pkb_with_nothing_started"),
    Case("B6", "SIGINT to the engine alone waits, then a traceback", replay="test_B3_B6"),
    Case("B7", "perftables --out /dev/full became a regular file", run(out="/dev/full"),
         ("--out /dev/full", "regular")),
    Case("B7", "sweep --out /dev/full became a regular file", sweep("--out", "/dev/full"),
         ("--out /dev/full", "regular")),
    Case("B8", "report --out /dev/full: traceback, /dev/plots/", report("--out", "/dev/full"),
         ("/dev/full", "No space left on device")),
    Case("B8", "report --out /dev/stdout sent to a file made /dev/plots/", replay="test_B8"),
    Case("B9", "a symlink given as --out is replaced", replay="test_B9_perftables"),
    Case("B9", "a symlink given as report --out is replaced", replay="test_B9_report"),
    Case("B10", "perftables run --out /etc/hostname/x", run(out="/etc/hostname/x"),
         ("/etc/hostname", "not a directory")),
    Case("B10", "report --out /etc/hostname/x", report("--out", "/etc/hostname/x"),
         ("--out /etc/hostname/x", "/etc/hostname is not a directory")),
    Case("B10", "--out in a missing directory", run(out="/nonexistent-dir/r.json"),
         ("does not exist",)),
    Case("B10", "--out a directory", run(out="/tmp"), ("--out /tmp", "is a directory")),
    Case("B11", "--experiments-file missing", run("--experiments-file", "/nonexistent.yaml"),
         ("/nonexistent.yaml", "No such file")),
    Case("B11", "perftables list --experiments-file missing",
         ("perftables", "list", "--experiments-file", "no_such.yaml"),
         ("experiments file no_such.yaml", "No such file")),
    Case("B11", "--experiments-file malformed YAML", run("--experiments-file", "{badyaml}"),
         ("{badyaml}", "not valid YAML (line")),
    Case("B12", "--experiments '' runs all 94 variants", run("--experiments", ""),
         ("--experiments", "empty list")),
    Case("B12", "--variants ';'", run("--variants", ";"), ("--variants", "empty list")),
    Case("B12", "--skip ''", run("--skip", ""), ("skip", "empty list")),
    Case("B12", "sweep --phases ''", sweep("--phases", ""), ("--phases: no phase given",)),
    Case("B12", "sweep --sizes ''", sweep("--sizes", ""), ("--sizes: no dataset sizes given",)),
    Case("B13", 'mongodb_perftables_experiments: "" passes the checks',
         replay=E2E + "test_refused_before_anything_is_provisioned"),
    Case("B14", "compare on a sweep with a failed phase: log-scale error",
         replay=REPLAYED_ELSEWHERE["B14"]),
    # ------------------------------------------------------------------ weak
    Case("W1", "a sweep table ''", sweep("--table", ""), ("--table", "empty collection name")),
    Case("W2", "a sweep table bad$name", sweep("--table", "bad$name"),
         ("--table 'bad$name'", "'$'")),
    Case("W3", "port 70000 (the URI's)", run(uri="{port70000}"), ("70000", "Port must be")),
    Case("W3", "perftables port 70000 found after provisioning",
         replay=E2E + "test_refused_before_anything_is_provisioned"),
    Case("W4", "database a.b", run("--database", "a.b"), ("--database 'a.b'", "'.'")),
    Case("W5", "database ''", run("--database", ""), ("--database", "empty")),
    Case("W6", "--os-path missing", run("--os-path", "/nonexistent/path"),
         ("--os-path", "no such")),
    Case("W7", "no credentials: every variant fails separately",
         run("--experiments", "insert_idtype,delete", uri="{auth}"),
         ("not authorized on database 'mongobench'", "the URI names no user"), forbid=("[1/",)),
    Case("W8", "admin accepted as the benchmark database", run("--database", "admin"),
         ("'admin'", "system database")),
    Case("W9", "a two-line URI file gives 'Bad database name'",
         ("perftables", "run", "--uri-file", "{twoline}", "--out", "{out}"),
         ("holds 2 lines", "one connection string")),
    Case("W10", "a URI at the sshd port: 'Got response id' after 30 s", run(uri="{ssh}"),
         ("127.0.0.1:{sshport} did not answer in MongoDB's wire protocol",)),
    Case("W11", "--variants across two experiments lists the first one's labels",
         run("--experiments", "insert_docsize,insert_idtype", "--variants", "1;nope"),
         ("unknown variant(s) nope", "insert_docsize: 1, 4", "insert_idtype: business_id")),
    Case("W12", "an unescaped / in a password is read as a host, its tail shown",
         ("perftables", "run", "--uri-file", "{slashpw}", "--out", "{out}"),
         ("percent-escaped",), forbid=("TAIL",)),
    Case("W12", "an unescaped ? in a password",
         ("perftables", "run", "--uri-file", "{qmarkpw}", "--out", "{out}"),
         ("percent-escaped",), forbid=("TAIL",)),
    Case("W13", "a one-record sweep fails its 50/50 phase: 'no READ operations'",
         sweep("--sizes", "0.001"), ("too few", "50/50", "at least 30")),
    Case("W14", "--set doc_size_kb=8 labels all five rows '8'", replay="test_W14"),
    Case("W15", "duration_s is scaled after --set", replay="test_W15_W16"),
    Case("W16", "the URI's w= is overridden by the experiment's", replay="test_W15_W16"),
    Case("W17", "a run that skips every variant (CLI)",
         run("--experiments", "insert_idtype", "--variants", "uuid", "--skip",
             "insert_idtype/uuid"), ("nothing to run",)),
    Case("W17", "a PKB run that skips every variant: SUCCEEDED, 0 samples",
         replay=E2E + "test_refused_before_anything_is_provisioned"),
    Case("W18", "report on a file it has nothing to say about exits 0",
         ("report", "--pkb-results", "{other}"),
         ("mongobench report: {other}: 1 sample(s), none of them a Performance Tables,"
          " sweep or stress sample",)),
    Case("W18", "report on an empty file exits 0", ("report", "--pkb-results", "{empty}"),
         ("mongobench report: {empty}: 0 sample(s), none of them a Performance Tables,"
          " sweep or stress sample",)),
    Case("W19", "a leader without followers: 180 s per variant",
         replay=REPLAYED_ELSEWHERE["W19"]),
    Case("W20", "... its heartbeat says 'timed phase 2m00s'", replay=REPLAYED_ELSEWHERE["W20"]),
    Case("W21", "perftables follow with a wrong run id waits forever",
         ("perftables", "follow", "--uri-file", "{uri}", "--run-id", "nobody-runs-this",
          "--client-index", "1", "--processes", "1", "--leader-wait-s", "2"),
         ("mongobench: no leader with run id 'nobody-runs-this' within 2 s: is `perftables run"
          " --client-vms K --run-id nobody-runs-this` running on client VM 0?",)),
    Case("W22", "a variant whose server dies waits 30 s for server selection",
         replay=REPLAYED_ELSEWHERE["W22"]),
]  # fmt: skip

REFUSED = [c for c in CASES if c.argv]


def test_the_campaign_holds_the_issues_36_cases_each_replayed():
    ids = {c.id for c in CASES}
    assert ids == {f"B{i}" for i in range(1, 15)} | {f"W{i}" for i in range(1, 23)}
    for c in CASES:
        assert bool(c.argv) != bool(c.replay), c
        if c.replay.startswith("test_"):
            assert c.replay in globals(), c
        elif c.replay:
            path, name = c.replay.split("::")
            text = (TESTS.parent / path).read_text()
            assert f"def {name}(" in text, c


# ----------------------------------------------------------------- the refused tries


def _write(path, text, mode=0o600):
    path.write_text(text)
    path.chmod(mode)
    return str(path)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    workdir = built_workdir(tmp_path_factory, "campaign-auth")
    users = write_users_file(workdir, [{"user": "alice", "password": "s3cret"}])
    srv = testbed.start_server(str(workdir / "auth"), users_file=users)
    yield srv
    srv.stop()


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


def _perftables_samples(tmp_path):
    return _write(
        tmp_path / "samples.json",
        json.dumps({"metric": "Document Throughput", "value": 1.0, "unit": "docs/sec",
                    "metadata": {"experiment": "insert_docsize", "variant": "1"}}) + "\n",
    )  # fmt: skip


def _placeholders(case, tmp_path, request) -> dict:
    """The files and values a case's {placeholders} name, made only when it names them."""
    text = " ".join(case.argv + case.expect)
    made = {"out": str(tmp_path / "r.json")}
    uris = {
        "dead": DEAD,
        "port70000": "mongodb://127.0.0.1:70000/",
        "twoline": f"{DEAD}\nmongodb://other/",
        "slashpw": "mongodb://u:pa/ssTAIL@h/",
        "qmarkpw": "mongodb://u:pa?ssTAIL@h/",
    }
    for name, uri in uris.items():
        if "{" + name + "}" in text:
            made[name] = _write(tmp_path / name, uri + "\n")
    if "{uri}" in text:
        made["uri"] = request.getfixturevalue("uri_file")
    if "{auth}" in text:
        made["auth"] = _write(tmp_path / "auth", request.getfixturevalue("auth_server").uri)
    if "{ssh}" in text:
        made["sshport"] = request.getfixturevalue("ssh_like_port")
        made["ssh"] = _write(tmp_path / "ssh", f"mongodb://127.0.0.1:{made['sshport']}/")
    if "{badyaml}" in text:
        made["badyaml"] = _write(tmp_path / "bad.yaml", "experiments: {a: [1, 2\n")
    if "{samples}" in text:
        made["samples"] = _perftables_samples(tmp_path)
    if "{other}" in text:
        made["other"] = _write(
            tmp_path / "other.json",
            json.dumps({"metric": "lscpu", "value": 0.0, "metadata": {}}) + "\n",
        )
    if "{empty}" in text:
        made["empty"] = _write(tmp_path / "empty.json", "\n")
    return made


@pytest.mark.parametrize("case", REFUSED, ids=[f"{c.id} {c.issue}" for c in REFUSED])
def test_refused(tmp_path, request, case):
    values = _placeholders(case, tmp_path, request)
    argv = [a.format(**values) if "{" in a else a for a in case.argv]
    marker = new_marker(case.id)
    p = cli(marker, *argv, timeout=120)
    refused(p, *(e.format(**values) if "{" in e else e for e in case.expect))
    for text in case.forbid:
        assert text not in p.stderr, (text, p.stderr[-2000:])
    if "{dead}" in case.argv:
        assert "server unreachable" not in p.stderr  # nothing was contacted
    after_case(marker, p, status=1)


# ----------------------------------------------------------------- the survived cases


def test_B1(tmp_path, tmp_path_factory):
    # the server died during the last variant after some operations were acknowledged;
    # the run exited 0 and published the fragment as that variant's figures
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "campaign-last") / "s"))
    out = tmp_path / "r.json"
    marker = new_marker("B1")
    proc = start(
        marker, *run("--experiments", "update_fields", "--variants",
                     "1, 500000, plain;10, 500000, plain", "--set", "duration_s=30",
                     "--processes", "1", uri=_write(tmp_path / "uri", srv.uri), out=str(out)),
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for line in proc.stderr:
            if "[2/2] update_fields/10, 500000, plain: running" in line:
                break
        # once the last variant acknowledged something (or, on a slow machine, still in its
        # preparation: it fails either way)
        time.sleep(4.0)
        srv.stop()
        proc.stderr = proc.stderr.read()
        proc.wait(120)
    finally:
        proc.kill()
        srv.stop()
    after_case(marker, proc, status=1)
    first, last = json.loads(out.read_text())["results"]
    assert first["status"] == "ok" and not first.get("fails_run")
    assert last["status"] == "failed" or last["fails_run"].startswith("the server was lost")
    assert "FAILED update_fields [10, 500000, plain]" in proc.stderr


STOP_S = 2.0  # SIGTERM or SIGINT to the whole process tree gone (the issue's bound)


def _stop(proc, marker, signum) -> tuple[float, str]:
    """Sends `signum` to the engine alone; returns (seconds until every process of the case
    was gone, its stderr)."""
    t0 = time.monotonic()
    proc.send_signal(signum)
    try:
        wait_for(lambda: not marked(marker), 30, "end of the case's processes")
    finally:
        elapsed = time.monotonic() - t0
        left = kill_marked(marker)
    _, err = proc.communicate(timeout=10)
    assert not left, left
    proc.stderr = err
    return elapsed, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["B3", "B6"])
def test_B3_B6(tmp_path, uri_file, signum):
    # SIGTERM left the workers loading the server until the timed phase's end; SIGINT
    # waited for it, then printed a traceback
    out = tmp_path / "r.json"
    marker = new_marker(signal.Signals(signum).name)
    proc = start(
        marker, *run("--experiments", "update_fields", "--variants",
                     "1, 500000, plain;10, 500000, plain", "--set", "duration_s=60",
                     "--processes", "2", uri=uri_file, out=str(out)),
    )  # fmt: skip
    # the first variant's timed phase runs in two worker processes
    wait_for(lambda: len(marked(marker)) >= 3, 120, "worker processes")
    time.sleep(1.0)
    elapsed, err = _stop(proc, marker, signum)
    name = signal.Signals(signum).name
    assert elapsed < STOP_S, elapsed
    after_case(marker, proc, status=128 + signum, gone_within_s=0)
    assert err.strip().splitlines()[-1] == (
        f"mongobench: stopped by {name} during update_fields [1, 500000, plain];"
        f" 1 variant result(s) in {out}"
    )
    run_doc = json.loads(out.read_text())
    (res,) = run_doc["results"]
    assert res["status"] == "failed" and res["interrupted"] == name
    assert res["error"] == f"interrupted by {name}" == res["fails_run"]
    assert run_doc["interrupted"] == f"{name} during update_fields [1, 500000, plain]"


def test_B4(tmp_path, server_uri):
    # SIGTERM to `sweep run` left YCSB's Java process running for 16 s
    javabuild.build()
    uri = _write(tmp_path / "uri", server_uri.rstrip("/") + "/t_interrupt\n")
    out = tmp_path / "sweep.json"
    marker = new_marker("B4")
    proc = start(marker, "sweep", "run", "--uri-file", uri, "--sizes", "50", "--phases", "load",
                 "--out", str(out))  # fmt: skip
    wait_for(
        lambda: any(" java " in f" {m} " or "/java " in m for m in marked(marker)),
        120,
        "YCSB's Java process",
    )
    time.sleep(1.0)
    elapsed, err = _stop(proc, marker, signal.SIGTERM)
    assert elapsed < STOP_S, elapsed
    after_case(marker, proc, status=128 + signal.SIGTERM, gone_within_s=0)
    assert err.strip().splitlines()[-1] == "mongobench: stopped by SIGTERM"
    (sample,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert sample["metric"] == "Phase Failed"
    assert sample["metadata"]["error"] == "interrupted by SIGTERM"


def test_B8(tmp_path):
    # /dev/stdout redirected by the shell to a regular file counted as a report file, and
    # its plots went to a new /dev/plots/
    out = tmp_path / "report.md"
    marker = new_marker("B8")
    with open(out, "w") as f:
        p = cli(marker, "report", "--pkb-results", _perftables_samples(tmp_path), "--out",
                "/dev/stdout", stdout=f)  # fmt: skip
    after_case(marker, p, status=0)  # no /dev/plots among the checks
    assert out.read_text().startswith("# MongoDB Performance Tables")


def test_B9_perftables(tmp_path, uri_file):
    link = Symlink.make(tmp_path)
    marker = new_marker("B9")
    p = cli(marker, *run("--experiments", "insert_idtype", "--variants", "uuid", "--set",
                         "total_docs=50", "--processes", "1", uri=uri_file, out=link.link))  # fmt: skip
    after_case(marker, p, status=0, symlinks=[link])
    assert json.loads(pathlib.Path(link.target).read_text())["results"][0]["label"] == "uuid"


def test_B9_report(tmp_path):
    link = Symlink.make(tmp_path, "report.md")
    marker = new_marker("B9")
    p = cli(marker, "report", "--pkb-results", _perftables_samples(tmp_path), "--out", link.link)
    after_case(marker, p, status=0, symlinks=[link])
    assert pathlib.Path(link.target).read_text().startswith("# MongoDB Performance Tables")


def test_W14(tmp_path, server_uri):
    # --set doc_size_kb=8 labelled every insert_docsize row "8" while they loaded different
    # volumes
    out = tmp_path / "r.json"
    marker = new_marker("W14")
    p = cli(marker, *run("--experiments", "insert_docsize", "--variants", "1;4", "--set",
                         "doc_size_kb=8", "--processes", "1",
                         uri=_write(tmp_path / "uri", server_uri), out=str(out)))  # fmt: skip
    after_case(marker, p, status=0)
    results = json.loads(out.read_text())["results"]
    assert [r["label"] for r in results] == ["8 (variant 1)", "8 (variant 4)"]
    assert {r["settings"]["doc_size_kb"] for r in results} == {8}
    assert len({r["settings"]["total_docs"] for r in results}) == 2


def test_W15_W16(tmp_path, server_uri):
    # the URI's w= was replaced by the experiments' majority without a word (W16), and
    # duration_s was scaled after --set: the user's 1.5 s ran as less (W15)
    out = tmp_path / "r.json"
    marker = new_marker("W15")
    uri = _write(tmp_path / "uri", server_uri.rstrip("/") + "/?w=1")
    p = cli(marker, *run("--experiments", "update_fields", "--variants", "1, 500000, plain",
                         "--set", "duration_s=1.5", "--processes", "1", uri=uri, out=str(out)))  # fmt: skip
    after_case(marker, p, status=0)
    assert "the URI's w=1 replaces the experiments' own" in p.stderr
    (res,) = json.loads(out.read_text())["results"]
    assert res["settings"]["write_concern"] == 1
    assert res["settings"]["duration_s"] == 1.5
    assert 1.3 < res["duration_s"] < 3.0
