"""Bad input fails early with one clear line naming the flag or value, never a
traceback and never a password."""

import json

import pytest

from mongobench import cli
from mongobench.core import redact
from mongobench.reports import report
from mongobench.sweep import plan as sweep

SECRET = "s3cr3t-Pass"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"user:{SECRET}@host", r"--uri-file F: not a MongoDB connection string"),
        ("garbage \x01\x02", r"--uri-file F: not a MongoDB connection string"),
        (f"mongodb://user:{SECRET}@host:99999/", r"mongodb://\*\*\*@host:99999/: Port must be"),
        (
            f"mongodb://user:p@ss{SECRET}@host/",
            r"mongodb://\*\*\*@host/: cannot parse it: user name",
        ),
        (f"mongodb://user:a/{SECRET}@host/", r"mongodb://\*\*\*@host/: cannot parse it: user name"),
        ("mongodb://host/?tls=maybe", r"mongodb://host/\?tls=maybe: The value of tls"),
        (
            "mongodb://host/?w=1&bogusOption=1",
            r"mongodb://host/\?w=1&bogusOption=1: unknown connection string option\(s\) 'bogusOption'$",
        ),
        (f"mongodb+srv://u:{SECRET}@c.example.net:27017/", r"exactly one host and no port"),
        ("mongodb://", r"at least one hostname"),
    ],
)
def test_bad_uris_are_rejected_without_the_secret(value, expected):
    with pytest.raises(redact.TargetError, match=expected) as e:
        redact.check_uri(value, "--uri-file F")
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    "value",
    [
        "mongodb://127.0.0.1:27017/",
        f"mongodb://u:{SECRET}@a:1,b:2/db?replicaSet=rs0&w=majority&readPreference=primary",
        f"mongodb+srv://u:{SECRET}@cluster0.example.net/?retryWrites=true",  # not resolved
    ],
)
def test_good_uris_pass_unchanged(value):
    assert redact.check_uri(value) == value


def _cli(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        cli.main(list(argv))
    return str(e.value.code) + capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "bogus_key=5"], "--set: unknown setting 'bogus_key'; known settings:"),
        (["--set", "threads=-4"], "--set: threads=-4 is not an integer in [1, 10000]"),
        (["--set", "threads=abc"], "--set: threads='abc' is not an integer"),
        (["--max-seconds", "-5"], "--max-seconds: must be a number of seconds > 0, not '-5'"),
        (["--max-seconds", "0"], "--max-seconds: must be a number of seconds > 0, not '0'"),
        (["--skip", "nope/1"], "skip names unknown variant(s): nope/1"),
        (["--set", "target_ops_per_s=0"], "--set: target_ops_per_s=0 is not a number in"),
        (
            ["--set", "target_ops_per_s=100", "--client-path", "pymongo"],
            "--client-path pymongo is a closed loop only",
        ),
        (["--rate-steps", "0.5,100/s"], "--rate-steps '0.5,100/s': fractions and rates"),
        (
            ["--rate-steps", "auto", "--experiments", "insert_batchsize"],
            "inserts in batches of 10 (a bulk operation); rate steps need a single-operation",
        ),
    ],
)
def test_cli_run_rejects_bad_flags_before_connecting(tmp_path, capsys, args, expected):
    uri = tmp_path / "uri"
    uri.write_text("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=1\n")
    out = _cli(
        capsys, "perftables", "run", "--uri-file", str(uri), "--out", str(tmp_path / "r"), *args
    )
    assert expected in out
    assert "Traceback" not in out


def test_cli_run_rejects_a_uri_file_without_scheme_and_hides_it(tmp_path, capsys):
    uri = tmp_path / "uri"
    uri.write_text(f"user:{SECRET}@host\n")
    out = _cli(capsys, "perftables", "run", "--uri-file", str(uri))
    assert f"mongobench: --uri-file {uri}: not a MongoDB connection string" in out
    assert SECRET not in out
    uri.write_bytes(b"\xff\xfe\x00binary")
    assert f"--uri-file {uri}: not a text file" in _cli(
        capsys, "perftables", "run", "--uri-file", str(uri)
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "No such file or directory"),
        ("not json\n", ":1: not a JSON sample"),
        (b"\x89PNG\r\n\x1a\n\x00\xff", "not a text file"),
        ("[1, 2]\n", ": item 1: not a sample"),  # a JSON array: a --samples file
        ('{"metric": "x"}\n', ":1: not a PKB sample"),
        ('{"metric": "x", "value": 1, "metadata": [1]}\n', ":1: metadata is not an object"),
    ],
)
def test_report_on_bad_files_is_one_line_naming_the_file(tmp_path, capsys, content, expected):
    path = tmp_path / "results.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    out = _cli(capsys, "report", "--pkb-results", str(path))
    assert out.startswith("mongobench report: ") and str(path) in out and expected in out
    assert "Traceback" not in out


def test_report_marks_variants_with_errors_and_lists_failed_ones(tmp_path):
    md = {"experiment": "insert_docsize", "variant": "4", "variant_index": 1}
    lines = [
        {"metric": "Document Throughput", "value": 5.0, "unit": "docs/sec",
         "metadata": dict(md, had_errors=True, error_types="insert:AutoReconnect=3")},
        {"metric": "Variant Failed", "value": 1, "unit": "count",
         "metadata": {"experiment": "insert_docsize", "variant": "32",
                      "error": "no operation was acknowledged; 10 failed"}},
    ]  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    text = report.render(report.load_pkb_results(str(path)))
    assert "| 4 (errors) |" in text
    assert "- 4: insert:AutoReconnect=3" in text
    assert "- 32: no operation was acknowledged; 10 failed" in text


@pytest.mark.parametrize("value", ["", [], ",", " , "])
def test_empty_sweep_sizes_are_an_error_not_the_default_sweep(value):
    with pytest.raises(sweep.SweepError, match="no dataset sizes given"):
        sweep.plan(value)
    assert len(sweep.plan(None)) == len(sweep.DEFAULT_SIZES_MB)
