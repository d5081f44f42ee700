"""No import cycles among the project's Python modules, counting the imports made only for
type checkers (`if TYPE_CHECKING:`): a cycle hidden there is still two modules that each need
the other to be read. Read from the source (ast), so it runs without PKB."""

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("mongobench", "mongobench_pkb", "linux_benchmarks", "linux_packages", "testbed")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _edges(name: str, source: str, known: set[str]) -> set[str]:
    """The project's modules that the module `name` imports anywhere in its source."""
    is_package = any(k.startswith(name + ".") for k in known)
    package = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package up
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            # the deepest project module the name is, or lies in
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph(files: dict[str, str]) -> dict[str, set[str]]:
    """{module: the project modules it imports}, for {module name: its source}."""
    known = set(files)
    return {name: _edges(name, source, known) for name, source in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _project_sources() -> dict[str, str]:
    files = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            files[_module_name(path)] = path.read_text()
    return files


def test_the_project_has_no_import_cycle():
    files = _project_sources()
    assert {"mongobench.stress.settings", "mongobench.sweep.plan"} <= set(files)
    graph = import_graph(files)
    # the graph is read: the edges that made the last cycles are seen
    assert "mongobench.stress.settings" in graph["mongobench.stress.steps"]
    assert "mongobench.sweep.plan" in graph["mongobench.sweep.request"]
    assert cycles(graph) == []


def test_a_cycle_through_a_type_checking_import_is_found():
    files = {
        "p": "",
        "p.a": "from p.b import B\n",
        "p.b": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.c import C\n"),
        "p.c": "from p import a\n",
        "p.d": "from .a import x\nimport p.b\n",
    }
    graph = import_graph(files)
    assert graph["p.d"] == {"p.a", "p.b"}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    del files["p.c"]
    assert cycles(import_graph(files)) == []
