"""Installs the engine (`mongobench`) and the PKB plugin hook.

PKB has no plugin mechanism, so the package ships a `.pth` file whose import
line extends `perfkitbenchmarker.linux_benchmarks` / `.linux_packages` with this
project's `linux_benchmarks/` and `linux_packages/` directories (see
`mongobench_pkb/__init__.py`).
"""

import pathlib
import zipfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = pathlib.Path(__file__).parent
PTH_NAME = "mongobench_pkb.pth"
# A .pth line is executed only if it starts with "import"; errors must never
# break the interpreter, so the hook catches everything itself.
PTH_LINE = "import mongobench_pkb\n"


def _requirements(name):
    lines = (HERE / "mongobench" / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


class BuildPyWithPth(build_py):
    """Regular wheels: put the .pth at the root of site-packages."""

    def run(self):
        super().run()
        target = pathlib.Path(self.build_lib) / PTH_NAME
        target.write_text(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return [
            *super().get_outputs(include_bytecode),
            str(pathlib.Path(self.build_lib) / PTH_NAME),
        ]


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
    packages=[
        "mongobench",
        "mongobench_pkb",
        "mongobench_pkb.linux_benchmarks",
        "mongobench_pkb.linux_packages",
    ],
    package_dir={
        "mongobench_pkb.linux_benchmarks": "linux_benchmarks",
        "mongobench_pkb.linux_packages": "linux_packages",
    },
    package_data={"mongobench": ["*.txt", "experiments/*.yaml", "data/*"]},
    install_requires=_requirements("client-requirements.txt") + ["matplotlib>=3.7"],
    extras_require={"test": ["pytest>=8", "ruff==0.17.5"]},
    entry_points={"console_scripts": ["mongobench=mongobench.cli:main"]},
    cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth},
)
