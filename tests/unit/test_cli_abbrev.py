"""The command line takes options by their full names only."""

import pytest

from mongobench import cli


@pytest.mark.parametrize(
    "argv",
    [
        ["perftables", "list", "--experiments-f", "x.yaml"],
        ["perftables", "run", "--uri-file", "t.uri", "--experiments-f", "x.yaml"],
        ["sweep", "run", "--uri-file", "t.uri", "--siz", "1"],
    ],
)
def test_a_prefix_of_an_option_is_refused(argv, capsys):
    # argparse's default took `--experiments` for `--experiments-file` in `list`
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv)
    assert e.value.code == 2
    assert f"unrecognized arguments: {argv[-2]}" in capsys.readouterr().err


def test_the_full_name_is_taken():
    args = cli.build_parser().parse_args(["perftables", "list", "--experiments-file", "x.yaml"])
    assert args.experiments_file == "x.yaml"
