"""The generated references (docs/reference/, scripts/gendocs): current, complete, and the
checks themselves catch what they are for."""

import argparse
import pathlib
import re
import shutil

from mongobench import cli, gendocs

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_pages_are_current():
    stale = gendocs.stale()
    assert not stale, f"stale generated docs {stale}: run scripts/gendocs and commit the result"


def test_every_flag_and_cli_option_has_help():
    missing = gendocs.undocumented()
    assert not missing, "\n".join(missing) + "\n(add help text, then run scripts/gendocs)"


def test_flag_reference_names_every_define():
    sources = [p for d in gendocs.FLAG_DIRS for p in sorted((ROOT / d).glob("*.py"))]
    defined = set()
    for path in sources:
        defined |= set(re.findall(r"DEFINE_\w+\(\s*\"(\w+)\"", path.read_text()))
    page = (ROOT / "docs/reference/flags.md").read_text()
    listed = set(re.findall(r"^\| `--(\w+)`", page, re.M))
    # and the pairs mongobench_pkb.target.DefineUriFlags defines for each benchmark
    templated = {
        f"mongodb_{b}_uri_{k}" for b in ("perftables", "ycsb_sweep") for k in ("file", "env")
    }
    assert defined and listed == defined | templated
    # two the old README never named
    assert {"mongodb_stress_bind_ip", "mongobench_atlas_region"} <= listed


def test_cli_reference_names_every_command_and_option():
    page = (ROOT / "docs/reference/cli.md").read_text()
    for command, action in gendocs.cli_options(cli.build_parser()):
        assert f"## `{command}`" in page
        for opt in action.option_strings:
            assert f"`{opt}`" in page.split(f"## `{command}`\n", 1)[1].split("\n## ", 1)[0]


def test_a_flag_without_help_is_named(tmp_path):
    (tmp_path / "linux_benchmarks").mkdir()
    (tmp_path / "linux_packages").mkdir()
    (tmp_path / "linux_benchmarks/x_benchmark.py").write_text(
        "from absl import flags\n"
        "from perfkitbenchmarker import sample\n"
        "from mongobench.stress import settings\n"
        "KINDS = ('a', 'b')\n"
        "_A = flags.DEFINE_integer('x_rate', settings.TARGET_PER_PROCESS, 'Offered load.')\n"
        "_B = flags.DEFINE_enum('x_kind', 'a', KINDS, '')\n"
    )
    flags = gendocs.all_flags(tmp_path)
    from mongobench.stress import settings

    assert [(f.name, f.default, f.choices) for f in flags] == [
        ("x_rate", settings.TARGET_PER_PROCESS, ()),
        ("x_kind", "a", ("a", "b")),
    ]
    parser = argparse.ArgumentParser(prog="mongobench")
    parser.add_argument("--quiet", action="store_true")
    assert gendocs.undocumented(tmp_path, parser) == [
        "flag --x_kind (linux_benchmarks/x_benchmark.py) has no help",
        "option --quiet of `mongobench` has no help",
    ]


def test_a_stale_page_is_named(tmp_path):
    for d in gendocs.FLAG_DIRS:
        shutil.copytree(ROOT / d, tmp_path / d)
    for rel, text in gendocs.pages(tmp_path).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert gendocs.stale(tmp_path) == []
    flags_page = tmp_path / "docs/reference/flags.md"
    flags_page.write_text(flags_page.read_text().replace("mongodb_stress_bind_ip", "x", 1))
    (tmp_path / "docs/reference/cli.md").unlink()
    assert gendocs.stale(tmp_path) == ["docs/reference/flags.md", "docs/reference/cli.md"]


def test_a_wing_function_that_defines_flags_defines_them_for_each_caller(tmp_path):
    for d in ("linux_benchmarks", "linux_packages", "mongobench_pkb"):
        (tmp_path / d).mkdir()
    (tmp_path / "mongobench_pkb/target.py").write_text(
        "from absl import flags\n"
        "HELP = 'File holding the URI.'\n"
        "def DefineUriFlags(benchmark, note=''):\n"
        "    return (flags.DEFINE_string(f'{benchmark}_uri_file', None, HELP + note),\n"
        "            flags.DEFINE_string(f'{benchmark}_uri_env', None, 'Variable.'))\n"
    )
    (tmp_path / "linux_benchmarks/a_benchmark.py").write_text(
        "from mongobench_pkb import target\n"
        "NAME = 'a'\n"
        "_T = target.DefineUriFlags(NAME, ' Its database.')\n"
    )
    (tmp_path / "linux_benchmarks/b_benchmark.py").write_text(
        "from mongobench_pkb import target\n_T = target.DefineUriFlags('b')\n"
    )
    flags = gendocs.all_flags(tmp_path)
    assert [(f.name, f.help, f.module) for f in flags] == [
        ("a_uri_file", "File holding the URI. Its database.", "linux_benchmarks/a_benchmark.py"),
        ("a_uri_env", "Variable.", "linux_benchmarks/a_benchmark.py"),
        ("b_uri_file", "File holding the URI.", "linux_benchmarks/b_benchmark.py"),
        ("b_uri_env", "Variable.", "linux_benchmarks/b_benchmark.py"),
    ]
