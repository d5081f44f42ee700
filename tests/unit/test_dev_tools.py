"""The test bed is a development tool: the installed package lacks it (setup.py), and its
command then says so in one line instead of failing on an import (scripts/check_install
checks the installed package itself)."""

import subprocess
import sys

BLOCK_TESTBED = """
import sys

class NoTestbed:
    def find_spec(self, name, path=None, target=None):
        if name == "mongobench.testbed" or name.startswith("mongobench.testbed."):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, NoTestbed())
from mongobench import cli

sys.exit(cli.main(sys.argv[1:]))
"""


def _cli_without_testbed(*argv):
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TESTBED, *argv], capture_output=True, text=True, timeout=300
    )


def test_testbed_command_without_the_test_bed_says_it_is_a_development_tool():
    got = _cli_without_testbed("testbed", "up", "--server", "standin")
    assert got.returncode != 0
    assert got.stderr.strip().splitlines() == [
        "mongobench testbed: the test bed is a development tool that the installed package"
        " does not ship; run scripts/testbed in a checkout of the repository (docs/testbed.md)"
    ]


def test_the_other_commands_run_without_the_test_bed():
    got = _cli_without_testbed("perftables", "list")
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip()
