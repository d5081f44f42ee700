"""Unit tests of the PKB-facing modules (linux_benchmarks/, linux_packages/), run in-process
against PKB's own modules and flags. They need PKB importable: PKB's Python 3.12
environment (scripts/pkbvenv) and a PKB checkout (PKB_DIR, default ../shared/pkb):

    eval "$(scripts/pkbvenv)" && "$PKB_PYTHON" -m pytest tests/pkb

Elsewhere (.venv, scripts/test) each module skips with the reason; with
MONGOBENCH_REQUIRE_PKB=1 (CI) a missing PKB fails instead.
"""

import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PKB_DIR = os.environ.get("PKB_DIR") or str(REPO.parent / "shared" / "pkb")
# pkb.py runs from PKB's directory: its package is not installed. Appended: ours come first.
if os.path.isfile(os.path.join(PKB_DIR, "pkb.py")) and PKB_DIR not in sys.path:
    sys.path.append(PKB_DIR)
if os.environ.get("MONGOBENCH_REQUIRE_PKB") == "1":
    import perfkitbenchmarker.pkb  # noqa: F401  CI: no PKB is a failure, never a skip


@pytest.fixture
def pkb_flags():
    """Sets flags as the command line or a config's `flags:` do (they count as present);
    every flag is restored after the test."""
    from absl import flags
    from absl.testing import flagsaver

    flag_values = flags.FLAGS
    flag_values.mark_as_parsed()
    with flagsaver.flagsaver():

        def set_flags(**values):
            for name, value in values.items():
                flag_values[name].parse(value)

        yield set_flags
