"""Shared pieces of the end-to-end tests that run the unmodified ./pkb.py.

They run when PKB_DIR names a PKB checkout; PKB_PYTHON is the Python of an
environment with PKB's requirements (default: python3.12; scripts/pkbvenv makes one).
The plugin is `pip install -e`'d into it when it is missing. With
MONGOBENCH_REQUIRE_PKB=1 (CI) a missing PKB fails every test instead of skipping it.
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
        why = (
            f"PKB_DIR ({PKB_DIR or 'unset'}) does not name a PerfKitBenchmarker checkout: set"
            " PKB_DIR (and PKB_PYTHON) to run the end-to-end tests (see docs/development.md)"
        )
        if os.environ.get("MONGOBENCH_REQUIRE_PKB") == "1":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    py = os.environ.get("PKB_PYTHON", "python3.12")
    # Asked from outside the repo: from inside it, the checkout's own mongobench_pkb/ folder
    # would answer although PKB's environment lacks the plugin.
    installed = [py, "-c", "import mongobench_pkb, mongobench, hdrh"]
    if subprocess.run(installed, capture_output=True, cwd=PKB_DIR).returncode:
        # as the README says: pip install -e <repo> into PKB's environment
        subprocess.run([py, "-m", "pip", "install", "-q", "-e", str(REPO)], check=True)
        subprocess.run(installed, check=True, cwd=PKB_DIR)
    return py


@pytest.fixture
def pkb_temp():
    # PKB puts ssh ControlMaster sockets under --temp_dir: keep it short (108-byte limit).
    d = tempfile.mkdtemp(prefix="pkb-", dir="/tmp")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)
