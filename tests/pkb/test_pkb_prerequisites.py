"""What the benchmarks refuse in CheckPrerequisites, before any VM exists: MongoDB version
flags that disagree (PKB's own --mongodb_version is honoured, issue 20 defect 11) and a PKB
host without Maven or a JDK 17+ (defect 9); the stand-in from an installed package, which
ships without it (issue 24)."""

import os
import shutil
import stat

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_perftables_benchmark as perftables,
)
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_stress_benchmark as stress,
)
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_ycsb_sweep_benchmark as sweep,
)
from perfkitbenchmarker.linux_packages import mongobench_mongod

from mongobench.remote import javabuild
from mongobench_pkb import mongod


class _Group:
    def __init__(self, vm_count):
        self.vm_count = vm_count


class _Config:
    def __init__(self, **groups):
        self.vm_groups = {name: _Group(n) for name, n in groups.items()}


def test_pkbs_own_mongodb_version_is_installed_when_only_it_is_set(pkb_flags):
    pkb_flags(mongodb_version="7.0")
    vm = FakeVm("server0")
    mongobench_mongod.AptInstall(vm)
    joined = "\n".join(vm.commands())
    assert "jammy/mongodb-org/7.0 multiverse" in joined and "mongodb-org/8.0" not in joined


def test_our_version_flag_wins_over_pkbs_default(pkb_flags):
    pkb_flags(mongobench_mongodb_version="7.0")
    assert mongod.MongodbVersion() == "7.0"
    pkb_flags(mongodb_version="7.0")  # both set, the same: fine
    assert mongod.MongodbVersion() == "7.0"


def test_disagreeing_version_flags_are_refused_before_provisioning(pkb_flags):
    pkb_flags(
        mongodb_version="7.0",
        mongobench_mongodb_version="8.0",
        mongodb_perftables_deployment="standalone",
    )
    with pytest.raises(errors.Config.InvalidValue) as e:
        perftables.CheckPrerequisites(_Config(clients=1, servers=1))
    assert str(e.value) == (
        "--mongodb_version=7.0 and --mongobench_mongodb_version=8.0 disagree: set one of them"
        " (or both to the same version)"
    )
    with pytest.raises(errors.Config.InvalidValue, match="disagree"):
        stress.CheckPrerequisites(_Config(clients=1, servers=1))


@pytest.fixture
def no_java_tools(tmp_path, monkeypatch):
    """A PKB host whose Java components are not built and that has neither Maven nor javac."""
    src = tmp_path / "java"
    (src / "pom.xml").parent.mkdir(parents=True)
    (src / "pom.xml").write_text("<project/>")
    for m in ("standin", "ycsb-binding"):
        (src / m / "src").mkdir(parents=True)
        (src / m / "pom.xml").write_text(f"<project>{m}</project>")
        (src / m / "src" / "A.java").write_text("class A {}")
    monkeypatch.setattr(javabuild, "SHIPPED_SOURCES", src)
    monkeypatch.setenv(javabuild.BUILD_DIR_ENV, str(tmp_path / "cache"))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def _check_names_maven_and_jdk(check):
    with pytest.raises(errors.Setup.InvalidSetupError) as e:
        check()
    msg = str(e.value)
    assert msg.startswith("PKB host: building the Java components in ")
    assert "Maven ('mvn' is not on PATH" in msg and "a JDK 17 or newer ('javac' is not" in msg
    assert "\n" not in msg


def test_missing_maven_and_jdk_fail_the_sweep_before_provisioning(pkb_flags, no_java_tools):
    uri = no_java_tools.parent / "target.uri"
    uri.write_text("mongodb://db.example:27017/\n")
    pkb_flags(mongodb_ycsb_sweep_uri_file=str(uri))
    _check_names_maven_and_jdk(lambda: sweep.CheckPrerequisites(_Config(clients=1)))


def test_missing_maven_and_jdk_fail_stress_and_the_standin_before_provisioning(
    pkb_flags, no_java_tools
):
    _check_names_maven_and_jdk(lambda: stress.CheckPrerequisites(_Config(clients=1, servers=1)))
    pkb_flags(mongodb_perftables_deployment="standalone", mongobench_mongod_server="standin")
    _check_names_maven_and_jdk(lambda: perftables.CheckPrerequisites(_Config(clients=1, servers=1)))


def test_an_old_jdk_is_named(pkb_flags, no_java_tools):
    for name, text in (("mvn", "#!/bin/sh\n"), ("javac", "#!/bin/sh\necho javac 11.0.2 >&2\n")):
        path = no_java_tools / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    os.environ["PATH"] = f"{no_java_tools}{os.pathsep}/bin:/usr/bin"
    with pytest.raises(errors.Setup.InvalidSetupError, match=r"JDK 17 or newer \(.*JDK 11;") as e:
        stress.CheckPrerequisites(_Config(clients=1, servers=1))
    assert "Maven" not in str(e.value)


def test_the_standin_from_an_installed_package_is_refused_in_one_line(
    pkb_flags, no_java_tools, monkeypatch
):
    """A wheel ships the YCSB binding's sources only: the stand-in needs a source checkout."""
    monkeypatch.setattr(javabuild, "CHECKOUT_SOURCES", no_java_tools.parent / "no-checkout")
    for name in ("mvn", "javac"):  # a host that could build: the stand-in's absence is the error
        path = no_java_tools / name
        path.write_text("#!/bin/sh\necho javac 17.0.2\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    shutil.rmtree(javabuild.SHIPPED_SOURCES / "standin")
    pkb_flags(mongodb_perftables_deployment="standalone", mongobench_mongod_server="standin")
    with pytest.raises(errors.Config.InvalidValue) as e:
        perftables.CheckPrerequisites(_Config(clients=1, servers=1))
    assert str(e.value) == (
        "--mongobench_mongod_server=standin: the stand-in comes only with a source checkout of"
        " mongobench-pkb (pip install -e <checkout>, docs/standin.md); this installed package"
        " ships the YCSB binding alone"
    )
