"""Pieces the stand-in feature tests share (auth, TLS, replica sets, mongos)."""

import json
import os
import shutil

import pytest

from mongobench.remote import javabuild


def built_workdir(tmp_path_factory, name):
    """A fresh directory for a module's stand-ins, with the stand-in built (or a skip)."""
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.skip("java and mvn are needed to build the stand-in")
    javabuild.build()
    return tmp_path_factory.mktemp(name)


def write_users_file(directory, users) -> str:
    """The stand-in's --users-file: JSON, mode 0600 (it holds passwords)."""
    path = directory / "users.json"
    path.write_text(json.dumps(users))
    os.chmod(path, 0o600)
    return str(path)
