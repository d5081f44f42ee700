"""Plugs this project's benchmark and package modules into an unmodified PKB; its modules
are the PKB wing's orchestration (stages, target, topology, stress, atlas, host, vm), imported by
their real names (`from mongobench_pkb import topology`), never through the hook.

This `__init__` is imported at interpreter start by `mongobench_pkb.pth`. PKB loads every module
found on the `__path__` of `perfkitbenchmarker.linux_benchmarks` and
`.linux_packages`; a meta-path finder appends our directories to those paths
when PKB imports the two packages. Nothing here imports PKB, and nothing here
may raise: an exception in a .pth line would disturb every Python program of
the environment.
"""

import importlib.machinery
import importlib.util
import os
import sys

_TARGETS = {
    "perfkitbenchmarker.linux_benchmarks": "linux_benchmarks",
    "perfkitbenchmarker.linux_packages": "linux_packages",
}


def plugin_dir(name):
    """Directory holding our `linux_benchmarks` or `linux_packages` modules."""
    spec = importlib.util.find_spec(f"{__name__}.{name}")
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    # Running from a source tree that was not installed.
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name)


class PkbPluginFinder:
    """Extends PKB's module directories; finds nothing by itself."""

    def find_spec(self, fullname, path=None, target=None):
        sub = _TARGETS.get(fullname)
        if sub is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None:
            return spec
        extra = plugin_dir(sub)
        if extra not in spec.submodule_search_locations:
            spec.submodule_search_locations.append(extra)
        return spec

    def invalidate_caches(self):
        pass


def install():
    if not any(isinstance(f, PkbPluginFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PkbPluginFinder())


try:
    install()
except Exception as e:  # noqa: BLE001 - see module docstring
    sys.stderr.write(f"mongobench_pkb: PKB plugin hook not installed: {e}\n")
