"""The diagnostics archive command (mongobench.remote.diagnostics), run locally on a work
tree laid out like a VM's: what it takes, what it never takes, what it skips."""

import subprocess
import tarfile

import pytest

from mongobench.deploy import mongod
from mongobench.remote import diagnostics


def _write(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def vm_tree(tmp_path):
    """The work directories of a run (a space in the base, as a scratch path may have)."""
    base = tmp_path / "scratch dir"
    inst = mongod.instance_paths(0, str(base / "mongobench-mongod" / "instances"))
    for p in (inst.log, inst.log + ".2026-01-01T00-00-00", inst.stdout, inst.config):
        _write(base / p[len(str(base)) + 1 :])
    ftdc = base / "mongobench-mongod/instances/mongod-0/data/diagnostic.data"
    _write(ftdc / "metrics.2026-01-01T00-00-00Z-00000", "ftdc")
    _write(ftdc.parent / "collection-0-123.wt", "a large data file")
    _write(base / "mongobench-mongod/tls/server.pem", "PRIVATE KEY")
    _write(base / "mongobench/target.uri", "mongodb://user:SECRET@host/")
    _write(base / "mongobench/perftables-results.json", "{}")
    _write(base / "mongobench/perftables-results-1.json", "{}")
    _write(base / "mongobench/venv/bin/python", "not wanted")
    run = base / "mongobench-ycsb/run"
    _write(run / "s100-load-c0.out", "[OVERALL], Throughput(ops/sec), 1")
    _write(run / "s100-load-c0.properties", "mongodb.urlfile=/x/target.uri")
    _write(run / "users.json", '[{"user": "u", "pwd": "SECRET"}]')
    _write(run / "stray.uri", "mongodb://user:SECRET@host/")
    _write(run / "keyFile", "SECRET")
    _write(base / "mongobench-ycsb/tls/ca.pem", "CERT")
    _write(base / "mongobench-ycsb/target.uri", "mongodb://user:SECRET@host/")
    return base


def _patterns(base):
    b = str(base)
    return [
        *diagnostics.mongod_patterns(f"{b}/mongobench-mongod/instances"),
        *diagnostics.engine_patterns(f"{b}/mongobench"),
        f"{b}/mongobench-ycsb/run",
        f"{b}/mongobench-stress-ng",  # absent: skipped
    ]


def _run(base, patterns, archive):
    cmd = diagnostics.archive_command(str(base), patterns, str(archive), sudo=False)
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True)
    return diagnostics.parse_archive_count(out.stdout)


def _members(archive):
    with tarfile.open(archive) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def test_takes_logs_ftdc_outputs_and_results_relative_to_the_base(vm_tree, tmp_path):
    archive = tmp_path / "d.tgz"
    count = _run(vm_tree, _patterns(vm_tree), archive)
    inst = "mongobench-mongod/instances/mongod-0"
    assert _members(archive) == {
        f"{inst}/mongod.log",
        f"{inst}/mongod.log.2026-01-01T00-00-00",
        f"{inst}/mongod.stdout",
        f"{inst}/mongod.conf",
        f"{inst}/data/diagnostic.data/metrics.2026-01-01T00-00-00Z-00000",
        "mongobench/perftables-results.json",
        "mongobench/perftables-results-1.json",
        "mongobench-ycsb/run/s100-load-c0.out",
        "mongobench-ycsb/run/s100-load-c0.properties",
    }
    # 2 logs, stdout, config, FTDC + 2 results files + the run directory; not the absent ones
    assert count == 8


def test_never_takes_secret_files_even_when_asked_for_them(vm_tree, tmp_path):
    archive = tmp_path / "d.tgz"
    b = str(vm_tree)
    asked = [f"{b}/mongobench", f"{b}/mongobench-ycsb", f"{b}/mongobench-mongod/tls"]
    _run(vm_tree, asked, archive)
    names = _members(archive)
    assert "mongobench/perftables-results.json" in names  # the archive is not empty
    leaked = [n for n in names if "target.uri" in n or "tls/" in n or n.endswith((".pem", ".uri"))]
    assert leaked == []
    assert not [n for n in names if "users" in n or "keyFile" in n]
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            if m.isfile():
                assert b"SECRET" not in tar.extractfile(m).read(), m.name


def test_nothing_there_writes_no_archive(tmp_path):
    base = tmp_path / "empty"
    base.mkdir()
    archive = tmp_path / "d.tgz"
    assert _run(base, _patterns(base), archive) == 0
    assert not archive.exists()


def test_globs_stay_active_and_the_rest_is_quoted():
    assert diagnostics.glob_quote("/a b/mongod-*/mongod.log*") == "'/a b/mongod-'*/mongod.log*"
    assert diagnostics.glob_quote("/x/$(reboot)/[ab]") == "'/x/$(reboot)/'[ab]"


def test_with_sudo_the_archive_goes_back_to_the_caller():
    cmd = diagnostics.archive_command("/s", ["/s/a"], "/s/d.tgz")
    assert cmd.startswith("sudo sh -c ")
    assert "sudo chown $(id -u):$(id -g) /s/d.tgz" in cmd


def test_paths_outside_the_base_are_refused():
    with pytest.raises(ValueError, match="not under"):
        diagnostics.archive_command("/s/base", ["/s/baseother/x"], "/s/base/d.tgz")
    with pytest.raises(ValueError, match="not under"):
        diagnostics.archive_command("/s/base", ["/etc/shadow"], "/s/base/d.tgz")


def test_unexpected_output_is_an_error():
    with pytest.raises(ValueError):
        diagnostics.parse_archive_count("tar: something\n")
