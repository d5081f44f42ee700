"""Constants and helpers the end-to-end tests share (their fixtures are in conftest.py)."""

import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
PKB_DIR = os.environ.get("PKB_DIR")


def dpkg_selections() -> str:
    """The host's package selections: a static run must leave them as they were."""
    return subprocess.run(["dpkg", "--get-selections"], capture_output=True, text=True).stdout
