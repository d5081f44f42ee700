"""FerretDB's build and command line: a missing Go is one line that says so; the server listens
on loopback only, with no telemetry and no debug listener; an unknown backend is refused."""

import pytest

from testbed import bed as testbed
from testbed import ferretdb


def test_missing_go_is_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("GO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ferretdb, "_GO_FALLBACK", ())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no cached binary either
    with pytest.raises(ferretdb.GoMissing, match="needs Go") as e:
        ferretdb.build()
    assert "\n" not in str(e.value) and "stand-in" in str(e.value)
    assert not ferretdb.available()


def test_cached_binary_needs_no_go(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(ferretdb, "_GO_FALLBACK", ())
    monkeypatch.setenv("PATH", str(tmp_path))
    path = ferretdb.binary_path()
    assert path == str(tmp_path / "mongobench" / f"ferretdb-{ferretdb.VERSION}" / "ferretdb")
    (tmp_path / "mongobench" / f"ferretdb-{ferretdb.VERSION}").mkdir(parents=True)
    open(path, "w").close()
    assert ferretdb.build() == path and ferretdb.available()


def test_command_line(tmp_path):
    cmd = ferretdb.command("/b/ferretdb", 27999, "sqlite", str(tmp_path))
    assert "--listen-addr=127.0.0.1:27999" in cmd
    assert "--telemetry=disable" in cmd and "--debug-addr=-" in cmd
    assert f"--sqlite-url=file:{tmp_path}/sqlite/" in cmd
    pg = ferretdb.command("/b/ferretdb", 1, "postgresql", str(tmp_path), "postgres://u@h:2/f")
    assert "--handler=postgresql" in pg and "--postgresql-url=postgres://u@h:2/f" in pg
    with pytest.raises(ValueError, match="backend 'mysql'"):
        ferretdb.command("/b/ferretdb", 1, "mysql", str(tmp_path))


def test_testbed_kinds_and_stand_in_options(tmp_path):
    assert {"ferretdb", "ferretdb-postgresql"} <= set(testbed.SERVER_KINDS)
    with pytest.raises(ValueError, match="options of the stand-in only"):
        testbed.start_server(str(tmp_path), "ferretdb", mongos=True)
