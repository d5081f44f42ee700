import io
import os
import shlex
import tarfile

import pytest

from mongobench.core import redact
from mongobench.driver import native
from mongobench.remote import shipping as deploy

URI = "mongodb+srv://alice:s%40cret!x@cluster0.example.net/db?retryWrites=true"


def test_uri_is_redacted():
    assert redact.uri(URI) == "mongodb+srv://alice:***@cluster0.example.net/db?retryWrites=true"
    assert redact.uri("mongodb://h:27017/") == "mongodb://h:27017/"
    assert redact.uri("mongodb://bob@h/") == "mongodb://bob@h/"


def test_text_masks_raw_and_decoded_password():
    msg = f"failed to auth s%40cret!x and s@cret!x via {URI}"
    out = redact.text(msg, URI)
    assert "cret" not in out and "alice:***@" in out


def test_read_uri_sources(tmp_path, monkeypatch):
    f = tmp_path / "u"
    f.write_text(URI + "\n")
    assert redact.read_uri(uri_file=str(f)) == URI
    monkeypatch.setenv("X_URI", URI)
    assert redact.read_uri(env="X_URI") == URI
    with pytest.raises(ValueError, match="X_NONE"):
        redact.read_uri(env="X_NONE")
    (tmp_path / "e").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        redact.read_uri(uri_file=str(tmp_path / "e"))
    with pytest.raises(ValueError, match="no target"):
        redact.read_uri()


def test_archive_holds_the_engine_and_no_caches():
    with tarfile.open(fileobj=io.BytesIO(deploy.archive_bytes())) as tar:
        names = tar.getnames()
    assert "mongobench/perftables/runner.py" in names
    assert "mongobench/experiments/perftables.yaml" in names
    assert "mongobench/client-requirements.txt" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # the compiled loop's source; never a module built here (another host's arch or Python)
    assert {f"mongobench/driver/{p.name}" for p in (*native.SOURCES, *native.HEADERS)} <= set(names)
    assert not any(n.endswith(".so") for n in names)
    assert deploy.archive_bytes() == deploy.archive_bytes()  # reproducible


def test_setup_and_run_commands_quote_and_carry_no_secret(tmp_path):
    workdir = "/scratch dir/mongobench"
    cmds = deploy.setup_commands(workdir, f"{workdir}/a.tgz")
    assert any("-m venv '/scratch dir/mongobench/venv'" in c for c in cmds)
    pymongo_req = next(r for r in deploy.requirements() if r.startswith("pymongo"))
    assert ">" in pymongo_req and any(f"'{pymongo_req}'" in c for c in cmds)  # '>' quoted
    cmd = deploy.perftables_command(workdir, f"{workdir}/target.uri", f"{workdir}/run.json")
    argv = shlex.split(cmd.split("&&", 1)[1])
    assert argv[argv.index("--uri-file") + 1] == f"{workdir}/target.uri"
    assert argv[argv.index("--request") + 1] == f"{workdir}/run.json"
    assert "--uri" not in argv


def test_setup_commands_build_a_working_client(tmp_path):
    """The generated commands, run here, give a client that imports."""
    import subprocess
    import sys

    archive = tmp_path / "engine.tgz"
    archive.write_bytes(deploy.archive_bytes())
    workdir = tmp_path / "w"
    workdir.mkdir()
    # Reuse this interpreter's environment instead of a fresh venv + PyPI.
    venv = workdir / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    os.chmod(venv / "python", 0o755)
    cmds = [
        c
        for c in deploy.setup_commands(str(workdir), str(archive), python=sys.executable)
        if "pip install" not in c
    ]
    for c in cmds:
        subprocess.run(c, shell=True, check=True)
    assert (workdir / "mongobench" / "driver" / "base.py").exists()
    # the compiled loop was built there, from the shipped source, and is the one a run uses
    probe = "from mongobench.driver import native; print(native.kind(), native._MODULE.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=workdir, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "native" and out[1].startswith(str(workdir)), out
