"""Provenance on samples: engine version and commit, client versions, server facts, timestamps."""

import importlib.metadata
import io
import json
import platform
import shutil
import subprocess
import sys
import tarfile

import pytest
from test_results_report import raw_result

from mongobench.measure import serverstats
from mongobench.remote import javabuild, provenance, shipping
from mongobench.reports import results
from mongobench.sweep import runner as sweep_runner
from mongobench.sweep import samples as sweep_samples
from mongobench.sweep.plan import PHASES, plan

needs_git = pytest.mark.skipif(not shutil.which("git"), reason="git is needed")


def _git(cwd, *args):
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    """A git checkout holding a package `mongobench/` and a setup.py declaring 9.8.7."""
    (tmp_path / "mongobench").mkdir()
    (tmp_path / "setup.py").write_text('setup(\n    name="x",\n    version="9.8.7",\n)\n')
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return tmp_path


def _not_installed(monkeypatch):
    def version(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(provenance.importlib.metadata, "version", version)


def test_package_version_installed_then_setup_py_then_unknown(tmp_path, monkeypatch):
    assert provenance.package_version() == importlib.metadata.version("mongobench-pkb")
    (tmp_path / "mongobench").mkdir()
    (tmp_path / "setup.py").write_text('setup(name="x", version="9.8.7")\n')
    _not_installed(monkeypatch)
    assert provenance.package_version(tmp_path / "mongobench") == "9.8.7"
    (tmp_path / "setup.py").unlink()
    assert provenance.package_version(tmp_path / "mongobench") == "unknown"


@needs_git
def test_commit_of_a_checkout_and_none_elsewhere(checkout, tmp_path_factory, monkeypatch):
    head = _git(checkout, "rev-parse", "--short", "HEAD")
    assert provenance.git_commit(checkout) == head and len(head) >= 7
    plain = tmp_path_factory.mktemp("plain")
    assert provenance.git_commit(plain) is None
    # A package directory inside the checkout is not a checkout's top: no commit claimed.
    assert provenance.git_commit(checkout / "mongobench") is None
    _not_installed(monkeypatch)
    info = provenance.build_info(checkout / "mongobench")
    assert info == {"version": "9.8.7", "commit": head}
    assert provenance.version_string(info) == f"9.8.7+g{head}"
    assert provenance.version_string({"version": "9.8.7", "commit": None}) == "9.8.7"


def test_a_shipped_build_info_file_wins(tmp_path):
    pkg = tmp_path / "mongobench"
    pkg.mkdir()
    (pkg / provenance.BUILD_INFO_NAME).write_text('{"version": "1.2.3", "commit": "abc1234"}')
    assert provenance.build_info(pkg) == {"version": "1.2.3", "commit": "abc1234"}
    (pkg / provenance.BUILD_INFO_NAME).write_text("{damaged")
    assert provenance.build_info(pkg)["version"] != "1.2.3"


def test_the_archive_carries_this_hosts_version_and_the_copy_reports_it(tmp_path):
    data = shipping.archive_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        shipped = json.loads(tar.extractfile("mongobench/_build_info.json").read())
        tar.extractall(tmp_path, filter="data")
    assert names.count("mongobench/_build_info.json") == 1
    assert shipped == provenance.build_info()
    assert data == shipping.archive_bytes()  # still reproducible
    # The copy (no .git, no setup.py beside it) reports the PKB host's version.
    out = subprocess.run(
        [sys.executable, "-c", "from mongobench.remote import provenance as p; print(p.engine())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    ).stdout
    assert f"'mongobench_version': '{provenance.engine()['mongobench_version']}'" in out


def test_engine_versions():
    got = provenance.engine()
    assert set(got) == set(provenance.ENGINE_KEYS)
    assert got["python_version"] == platform.python_version()
    assert got["pymongo_version"] == importlib.metadata.version("pymongo")
    assert got["mongobench_version"].startswith(provenance.package_version())


def test_ycsb_versions_from_the_poms_resolve_properties_and_management(tmp_path):
    ns = 'xmlns="http://maven.apache.org/POM/4.0.0"'
    (tmp_path / "ycsb-binding").mkdir()
    (tmp_path / "pom.xml").write_text(
        f"<project {ns}><version>2.0.0</version><properties><drv>5.9.1</drv></properties>"
        "<dependencyManagement><dependencies>"
        "<dependency><artifactId>mongodb-driver-sync</artifactId><version>${drv}</version>"
        "</dependency><dependency><artifactId>core</artifactId><version>0.17.0</version>"
        "</dependency></dependencies></dependencyManagement></project>"
    )
    (tmp_path / "ycsb-binding" / "pom.xml").write_text(
        f"<project {ns}><parent><version>2.0.0</version></parent><dependencies>"
        "<dependency><artifactId>core</artifactId><version>0.18.0</version></dependency>"
        "<dependency><artifactId>mongodb-driver-sync</artifactId></dependency>"
        "</dependencies></project>"
    )
    assert provenance.ycsb_from_poms(tmp_path) == {
        "ycsb_binding_version": "2.0.0",
        "ycsb_version": "0.18.0",  # the binding's own version wins over the management's
        "java_driver_version": "5.9.1",
    }


def test_ycsb_versions_of_this_project_agree_with_the_built_jars(tmp_path):
    got = provenance.ycsb()
    assert got == provenance.ycsb_from_poms(javabuild.source_dir())
    assert all(got.values()), got
    for name in ("ycsb-binding-0.1.0.jar", "core-0.17.0.jar", "mongodb-driver-sync-5.1.0.jar"):
        (tmp_path / name).write_text("")
    (tmp_path / "mongodb-driver-core-5.1.0.jar").write_text("")  # not the sync driver
    assert provenance.ycsb_from_jars(tmp_path) == {
        "ycsb_binding_version": "0.1.0",
        "ycsb_version": "0.17.0",
        "java_driver_version": "5.1.0",
    }
    (tmp_path / "core-0.18.0.jar").write_text("")  # two versions: cannot tell which runs
    assert provenance.ycsb_from_jars(tmp_path)["ycsb_version"] is None
    assert provenance.ycsb_from_jars(tmp_path / "absent") == dict.fromkeys(got)


def test_storage_engine_of_servers_and_of_the_stand_in():
    assert serverstats.server_info({"storageEngine": {"name": "wiredTiger"}})["storage_engine"] == (
        "wiredTiger"
    )
    standin = {"version": "7.0.0", "process": "java"}  # what the stand-in's serverStatus says
    assert serverstats.server_info(standin)["storage_engine"] == provenance.STANDIN_ENGINE
    assert serverstats.server_info({"process": "mongod"})["storage_engine"] == "unknown"
    assert provenance.storage_engine_of("mongod") == "wiredTiger"
    assert provenance.storage_engine_of("standin") == provenance.STANDIN_ENGINE


def _run(**extra):
    first = dict(raw_result("1"), start=1_700_000_000.5, os_server={"steal_pct": 3.0})
    first["server_info"] = serverstats.server_info({"process": "java", "version": "7.0.0"})
    second = dict(raw_result("4"), start=1_700_000_100.25)
    second["os_client"] = {"cpu_pct": 40.0, "steal_pct": 1.5}
    second["server_info"] = {"storage_engine": "wiredTiger"}
    run = {"scale": "smoke", "server_version": "7.0.1", "results": [first, second]}
    return dict(run, **extra)


def test_perftables_samples_carry_provenance_and_their_variants_start():
    prov = {"mongobench_version": "0.1.0+gabc1234", "python_version": "3.12.1"}
    samples = results.to_samples(_run(provenance=dict(prov, pymongo_version="4.9")))
    assert samples
    for s in samples:
        md = s["metadata"]
        assert md["mongobench_version"] == "0.1.0+gabc1234" and md["pymongo_version"] == "4.9"
        assert md["python_version"] == "3.12.1" and md["server_version"] == "7.0.1"
        start = {"1": 1_700_000_000.5, "4": 1_700_000_100.25}[md["variant"]]
        assert s["timestamp"] == start
        engine = {"1": provenance.STANDIN_ENGINE, "4": "wiredTiger"}[md["variant"]]
        assert md["storage_engine"] == engine
    # A results file from before provenance: the keys are there, and say they are unknown.
    old = results.to_samples(dict(_run(), server_version=None))
    assert all(s["metadata"]["mongobench_version"] is None for s in old)
    assert results.engine_metadata(_run()) == dict.fromkeys(provenance.ENGINE_KEYS)
    assert {s["metadata"]["server_version"] for s in old} == {"7.0.0", "unknown"}


def test_steal_is_published_for_server_and_client_and_missing_when_unknown():
    samples = results.to_samples(_run())
    steal = {(s["metadata"]["variant"], s["metric"]): s for s in samples if "Steal" in s["metric"]}
    assert set(steal) == {("1", "Server CPU Steal"), ("4", "Client CPU Steal")}
    assert steal["1", "Server CPU Steal"]["value"] == 3.0
    assert steal["4", "Client CPU Steal"]["unit"] == "%"
    missing = steal["4", "Client CPU Steal"]["metadata"]["missing_metrics"].split(",")
    assert "steal_pct" in missing and "client_steal_pct" not in missing


def test_sweep_samples_carry_provenance_and_the_drop_reports_the_server():
    step = plan([1])[0]
    out = (
        '{"dropped": "t", "server_memory_mb": 8, "server_version": "8.0.3",'
        ' "storage_engine": "wiredTiger"}'
    )
    server = sweep_runner.parse_drop_server("noise\n" + out + "\n")
    assert server == {"server_version": "8.0.3", "storage_engine": "wiredTiger"}
    # An engine from before these keys: they say unknown.
    assert sweep_runner.parse_drop_server('{"dropped": "t"}')["storage_engine"] == "unknown"
    md = sweep_samples.base_metadata([step], 1, server)
    failure = sweep_samples.failure_sample(step, PHASES[0], "boom", md)["metadata"]
    for key in (*provenance.ENGINE_KEYS, "ycsb_binding_version", "java_driver_version"):
        assert failure[key], key
    assert failure["server_version"] == "8.0.3" and failure["storage_engine"] == "wiredTiger"
