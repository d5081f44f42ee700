"""Where javabuild finds the Maven sources and where it builds them (a fake mvn, no Java)."""

import os
import stat

import pytest

from mongobench.remote import javabuild

FAKE_MVN = """#!/bin/sh
# Records the call (and its arguments), then lays out what `mvn package` leaves in each module.
echo "$PWD" >> "$MVN_CALLS"
echo "$@" >> "$MVN_CALLS.args"
for m in standin ycsb-binding; do
  [ -f "$m/pom.xml" ] || continue
  mkdir -p "$m/target/lib" && touch "$m/target/lib/dep.jar" "$m/target/$m-0.1.jar"
done
"""


def _sources(root, body="class A {}", modules=("standin", "ycsb-binding")):
    (root / "pom.xml").parent.mkdir(parents=True, exist_ok=True)
    (root / "pom.xml").write_text("<project/>")
    for m in modules:
        src = root / m / "src" / "main" / "java"
        src.mkdir(parents=True)
        (root / m / "pom.xml").write_text(f"<project>{m}</project>")
        (src / "A.java").write_text(body)
    return root


def _exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """An installed-package layout: shipped sources, no checkout, a private cache, fake tools."""
    shipped = tmp_path / "site-packages" / "mongobench" / "java"
    monkeypatch.setattr(javabuild, "SHIPPED_SOURCES", shipped)
    monkeypatch.setattr(javabuild, "CHECKOUT_SOURCES", tmp_path / "site-packages" / "java")
    monkeypatch.setenv(javabuild.BUILD_DIR_ENV, str(tmp_path / "cache"))
    tools = tmp_path / "tools"
    tools.mkdir()
    _exe(tools / "mvn", FAKE_MVN)
    _exe(tools / "java", "#!/bin/sh\n")
    _exe(tools / "javac", "#!/bin/sh\necho javac 17.0.2\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MVN_CALLS", str(tmp_path / "mvn-calls"))
    return tmp_path, shipped


def _mvn_calls(tmp_path):
    calls = tmp_path / "mvn-calls"
    return calls.read_text().split() if calls.exists() else []


def test_no_sources_anywhere_says_how_to_fix(layout):
    with pytest.raises(RuntimeError, match=r"neither in .*mongobench/java.*reinstall"):
        javabuild.source_dir()


def test_checkout_sources_build_in_place(tmp_path, monkeypatch):
    checkout = _sources(tmp_path / "repo" / "java")
    monkeypatch.setattr(javabuild, "SHIPPED_SOURCES", tmp_path / "repo" / "mongobench" / "java")
    monkeypatch.setattr(javabuild, "CHECKOUT_SOURCES", checkout)
    assert javabuild.source_dir() == checkout
    assert javabuild.java_dir() == checkout
    assert javabuild.JAVA_DIR == checkout


def test_shipped_sources_build_in_the_cache_not_the_package(layout):
    tmp_path, shipped = layout
    _sources(shipped)
    jdir = javabuild.java_dir()
    assert jdir.parent == tmp_path / "cache" and jdir.name.startswith("java-")
    javabuild.build()
    assert _mvn_calls(tmp_path) == [str(jdir)]
    assert (jdir / "standin" / "src" / "main" / "java" / "A.java").read_text() == "class A {}"
    assert not any(p.name == "target" for p in shipped.rglob("*"))
    assert javabuild.ycsb_classpath() == str(jdir / "ycsb-binding" / "target" / "lib" / "*")
    assert javabuild.standin_classpath().endswith("standin-0.1.jar")
    javabuild.build()  # up to date: Maven is not run again
    assert len(_mvn_calls(tmp_path)) == 1


def test_a_wheel_without_the_standin_builds_the_binding_alone_and_refuses_the_standin(layout):
    """setup.py ships the YCSB binding's sources only: the parent pom still names the stand-in,
    so Maven builds the binding's pom alone, and asking for the stand-in says why it is not there."""
    tmp_path, shipped = layout
    _sources(shipped, modules=("ycsb-binding",))
    assert not javabuild.has_standin()
    javabuild.build()
    jdir = javabuild.java_dir()
    assert (tmp_path / "mvn-calls.args").read_text().split()[-2:] == ["-f", "ycsb-binding/pom.xml"]
    assert javabuild.is_up_to_date()
    assert javabuild.ycsb_classpath() == str(jdir / "ycsb-binding" / "target" / "lib" / "*")
    for call in (javabuild.standin_classpath, javabuild.standin_command):
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == javabuild.NO_STANDIN
    assert "source checkout" in javabuild.NO_STANDIN and "\n" not in javabuild.NO_STANDIN


def test_a_checkout_builds_both_modules_in_one_reactor(layout):
    tmp_path, shipped = layout
    _sources(shipped)
    assert javabuild.has_standin()
    javabuild.build()
    assert "-f" not in (tmp_path / "mvn-calls.args").read_text().split()


def test_changed_sources_get_their_own_build(layout):
    tmp_path, shipped = layout
    _sources(shipped)
    javabuild.build()
    first = javabuild.java_dir()
    (shipped / "standin" / "src" / "main" / "java" / "A.java").write_text("class B {}")
    second = javabuild.java_dir()
    assert second != first
    javabuild.build()
    assert _mvn_calls(tmp_path) == [str(first), str(second)]
    assert (second / "standin" / "src" / "main" / "java" / "A.java").read_text() == "class B {}"


def test_unwritable_build_dir_names_the_variable(layout, monkeypatch):
    tmp_path, shipped = layout
    _sources(shipped)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(javabuild.BUILD_DIR_ENV, str(blocker))
    with pytest.raises(RuntimeError, match=f"set {javabuild.BUILD_DIR_ENV} to a writable"):
        javabuild.build()


def test_not_built_says_how_to_build(layout):
    _, shipped = layout
    _sources(shipped)
    with pytest.raises(RuntimeError, match=r"not built; build them with .*javabuild.build\(\)"):
        javabuild.ycsb_classpath()


def _only_tools(tmp_path, monkeypatch, javac_version=None):
    """PATH holds the fake mvn (when no javac_version: nothing else) and a fake javac."""
    tools = tmp_path / "only"
    tools.mkdir(parents=True)
    if javac_version:
        _exe(tools / "mvn", FAKE_MVN)
        _exe(tools / "javac", f"#!/bin/sh\necho javac {javac_version} >&2\n")
    monkeypatch.setenv("PATH", str(tools))


def test_missing_maven_and_jdk_are_named_before_the_build(layout, monkeypatch):
    tmp_path, shipped = layout
    _sources(shipped)
    _only_tools(tmp_path, monkeypatch)
    with pytest.raises(RuntimeError) as e:
        javabuild.check_build_tools()
    msg = str(e.value)
    assert "Maven ('mvn' is not on PATH" in msg and "a JDK 17 or newer ('javac' is not" in msg
    assert "\n" not in msg
    with pytest.raises(RuntimeError, match="needs Maven"):
        javabuild.build()
    assert _mvn_calls(tmp_path) == []


def test_an_old_jdk_is_named_with_its_version(layout, monkeypatch):
    tmp_path, shipped = layout
    _sources(shipped)
    _only_tools(tmp_path, monkeypatch, javac_version="11.0.21")
    with pytest.raises(RuntimeError, match=r"needs a JDK 17 or newer \(.*javac: JDK 11;") as e:
        javabuild.check_build_tools()
    assert "Maven" not in str(e.value)
    _only_tools(tmp_path / "new", monkeypatch, javac_version="21.0.5")
    javabuild.check_build_tools()  # JDK 21 and Maven: nothing missing


def test_built_components_need_no_build_tools(layout, monkeypatch):
    tmp_path, shipped = layout
    _sources(shipped)
    javabuild.build()
    _only_tools(tmp_path, monkeypatch)
    javabuild.check_build_tools()  # up to date: no Maven or JDK needed


def test_ensure_built_builds_on_first_use_and_says_so(layout):
    tmp_path, shipped = layout
    _sources(shipped)
    said = []
    javabuild.ensure_built(said.append)
    assert len(said) == 1 and "building the Java components" in said[0]
    assert str(javabuild.java_dir()) in said[0]
    assert _mvn_calls(tmp_path) == [str(javabuild.java_dir())]
    javabuild.ensure_built(said.append)  # built: silent, no Maven
    assert len(said) == 1 and len(_mvn_calls(tmp_path)) == 1
