"""Development tools live outside the shipped package (issue 24): the test bed is the checkout's
`testbed/` package (scripts/testbed), which setup.py does not ship, and the engine never imports
it. scripts/check_install checks the built sdist, wheel and installed package themselves."""

import ast
import pathlib
import subprocess
import sys

import mongobench
import testbed

REPO = pathlib.Path(__file__).resolve().parents[2]

BLOCK_TESTBED = """
import sys

class NoTestbed:
    def find_spec(self, name, path=None, target=None):
        if name == "testbed" or name.startswith("testbed."):
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


def test_the_test_bed_is_outside_the_package():
    package = pathlib.Path(mongobench.__file__).resolve().parent
    assert pathlib.Path(testbed.__file__).resolve().parent == REPO / "testbed"
    assert not (package / "testbed").exists()


def test_no_engine_or_plugin_module_imports_the_test_bed():
    importers = []
    for root in ("mongobench", "mongobench_pkb", "linux_benchmarks", "linux_packages"):
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                if any(n == "testbed" or n.startswith("testbed.") for n in names):
                    importers.append(str(path.relative_to(REPO)))
    assert importers == []


def test_the_installed_cli_has_no_testbed_command():
    got = _cli_without_testbed("testbed", "up")
    assert got.returncode == 2
    assert "invalid choice: 'testbed'" in got.stderr


def test_the_other_commands_run_without_the_test_bed():
    got = _cli_without_testbed("perftables", "list")
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip()
