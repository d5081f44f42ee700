"""Shared pieces of the end-to-end tests that run the unmodified ./pkb.py.

They run when PKB_DIR names a PKB checkout; PKB_PYTHON is the Python of an
environment with PKB's requirements (default: python3.12). The plugin is
`pip install -e`'d into it when it is missing.
"""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from pkb_helpers import PKB_DIR, REPO


@pytest.fixture(scope="session")
def pkb_python():
    if not PKB_DIR or not os.path.exists(os.path.join(PKB_DIR, "pkb.py")):
        pytest.skip(
            "PKB_DIR does not name a PerfKitBenchmarker checkout: set PKB_DIR (and PKB_PYTHON)"
            " to run the end-to-end tests (see README: Tests)"
        )
    py = os.environ.get("PKB_PYTHON", "python3.12")
    if subprocess.run([py, "-c", "import mongobench_pkb"], capture_output=True).returncode:
        subprocess.run([py, "-m", "pip", "install", "-q", "-e", str(REPO)], check=True)
    return py


@pytest.fixture
def pkb_temp():
    # PKB puts ssh ControlMaster sockets under --temp_dir: keep it short (108-byte limit).
    d = tempfile.mkdtemp(prefix="pkb-", dir="/tmp")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)
