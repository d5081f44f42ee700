"""The PKB wing's layout (issue 24, item 3): the orchestration in `mongobench_pkb` imports
nothing from PKB's `linux_packages` (those names resolve only through the .pth hook, so no
tool would see the edge), and `linux_packages/` holds PKB package modules that install
software and nothing else. Read from the source, so it runs without PKB."""

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
# what a PKB package module may define: its install entry points (PKB's package interface)
PACKAGE_FUNCTIONS = {"Install", "AptInstall", "YumInstall", "Uninstall", "AptUninstall",
                     "YumUninstall"}  # fmt: skip


def _imported(tree):
    """Every module name an import in `tree` names, with `from x import y` also as x.y."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def _linux_packages_imports(source):
    return [
        n
        for n in _imported(ast.parse(source))
        if n == "perfkitbenchmarker.linux_packages"
        or n.startswith("perfkitbenchmarker.linux_packages.")
    ]


def test_no_wing_module_imports_pkbs_linux_packages():
    modules = sorted((REPO / "mongobench_pkb").glob("*.py"))
    assert {m.stem for m in modules} >= {"mongod", "ycsb", "stress_ng", "engine", "topology"}
    found = {m.name: _linux_packages_imports(m.read_text()) for m in modules}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_check_sees_each_spelling_of_the_edge():
    for source in (
        "from perfkitbenchmarker.linux_packages import mongobench_mongod",
        "from perfkitbenchmarker import linux_packages",
        "import perfkitbenchmarker.linux_packages.mongobench_ycsb as y",
    ):
        assert _linux_packages_imports(source), source
    assert not _linux_packages_imports("from perfkitbenchmarker import errors, vm_util")


def test_linux_packages_only_install():
    for path in sorted((REPO / "linux_packages").glob("mongobench_*.py")):
        tree = ast.parse(path.read_text())
        public = {
            n.name
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")
        }
        assert public and public <= PACKAGE_FUNCTIONS, (path.name, public - PACKAGE_FUNCTIONS)
        assert not [n for n in tree.body if isinstance(n, ast.ClassDef)], path.name
