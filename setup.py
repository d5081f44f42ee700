"""Installs the engine (`mongobench`) and the PKB plugin hook.

PKB has no plugin mechanism, so the package ships a `.pth` file whose import
line extends `perfkitbenchmarker.linux_benchmarks` / `.linux_packages` with this
project's `linux_benchmarks/` and `linux_packages/` directories (see
`mongobench_pkb/__init__.py`).
"""

import pathlib
import shutil
import zipfile

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = pathlib.Path(__file__).parent
PTH_NAME = "mongobench_pkb.pth"
# A .pth line is executed only if it starts with "import"; errors must never
# break the interpreter, so the hook catches everything itself.
PTH_LINE = "import mongobench_pkb\n"
# The Maven sources of the YCSB binding: the PKB host builds them (mongobench/remote/javabuild.py),
# so a wheel carries them as mongobench/java/. The stand-in (java/standin) is a development
# tool, like the test bed: a source checkout has it, a wheel does not.
JAVA_MODULES = ("ycsb-binding",)


def _requirements(name):
    lines = (HERE / "mongobench" / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _java_sources():
    """(source, path relative to java/) of every Maven input; never target/."""
    root = HERE / "java"
    files = [root / "pom.xml"]
    for module in JAVA_MODULES:
        files.append(root / module / "pom.xml")
        files += sorted(p for p in (root / module / "src").rglob("*") if p.is_file())
    return [(f, f.relative_to(root)) for f in files]


class BuildPyWithPth(build_py):
    """Regular wheels: the .pth at the root of site-packages, the Java sources in the package.

    Editable installs read java/ from the checkout, so they get neither copy.
    """

    def _extra_outputs(self):
        build_lib = pathlib.Path(self.build_lib)
        java = build_lib / "mongobench" / "java"
        return [(None, build_lib / PTH_NAME)] + [(src, java / rel) for src, rel in _java_sources()]

    def run(self):
        super().run()
        if self.editable_mode:
            return
        for src, target in self._extra_outputs():
            target.parent.mkdir(parents=True, exist_ok=True)
            if src is None:
                target.write_text(PTH_LINE)
            else:
                shutil.copyfile(src, target)

    def get_outputs(self, include_bytecode=True):
        extra = [] if self.editable_mode else [str(t) for _, t in self._extra_outputs()]
        return [*super().get_outputs(include_bytecode), *extra]


class EditableWheelWithPth(editable_wheel):
    """`pip install -e`: PEP 660 wheels skip build_py's output, so append the .pth."""

    def run(self):
        super().run()
        for wheel in pathlib.Path(self.dist_dir).glob("*.whl"):
            with zipfile.ZipFile(wheel, "a") as zf:
                if PTH_NAME not in zf.namelist():
                    zf.writestr(PTH_NAME, PTH_LINE)


setup(
    name="mongobench-pkb",
    version="0.1.0",
    description="MongoDB Performance Tables and stress benchmarks for PerfKitBenchmarker",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    # the engine's sub-packages are found; the plugin's two are mapped by package_dir.
    # Development tools stay in the checkout: the test bed (testbed/, run by scripts/testbed
    # and the tests), the stand-in (java/standin) and scripts/ (the benchmarks, the native floor).
    packages=[
        *find_packages(include=["mongobench", "mongobench.*"]),
        "mongobench_pkb",
        "mongobench_pkb.linux_benchmarks",
        "mongobench_pkb.linux_packages",
    ],
    package_dir={
        "mongobench_pkb.linux_benchmarks": "linux_benchmarks",
        "mongobench_pkb.linux_packages": "linux_packages",
    },
    # driver/_loop*.c, _loop*.h: the driver's compiled loop, built on each client VM
    # (driver.native)
    package_data={
        "mongobench": [
            "*.txt",
            "experiments/*.yaml",
            "data/*",
            "driver/_loop*.c",
            "driver/_loop*.h",
        ]
    },
    # cryptography: the PKB host makes the run's TLS material (mongobench.remote.tlscerts)
    install_requires=_requirements("client-requirements.txt")
    + ["matplotlib>=3.7", "cryptography>=41"],
    # build: scripts/check_install makes the sdist a user would install.
    extras_require={"test": ["pytest>=8", "ruff==0.17.5", "build>=1.0"]},
    entry_points={"console_scripts": ["mongobench=mongobench.cli:main"]},
    cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth},
)
