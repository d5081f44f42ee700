"""The typed run request (issue 24, item 2): one PerftablesRun declared once, validated
once, to and from JSON; `perftables run --request` and the equivalent flags build the same
request, plan the same variants and write to the same files."""

import dataclasses
import json

import pytest

from mongobench import cli
from mongobench.cli import perftables as cli_perftables
from mongobench.perftables import request as request_mod
from mongobench.perftables.request import PerftablesRun, RequestError


def _request(tmp_path, **kw):
    return PerftablesRun(out=str(tmp_path / "r.json"), **kw)


def test_round_trip_through_json_keeps_every_field(tmp_path):
    req = _request(
        tmp_path,
        experiments=["insert_docsize", "update_fields"],
        scale="0.5",
        variants=["1", "4"],
        skip="insert_docsize/4",
        database="db1",
        overrides={"threads": 8, "write_concern": "majority"},
        samples=str(tmp_path / "s.json"),
        os_path="none",
        max_seconds=12.5,
        reply_timeout=30,
        interval_s=0,
        client_path="multiplexed",
        processes=3,
        client_vms=2,
        run_id="r1",
        repeats=2,
        rate_steps="auto",
        auth_retry_s=60.0,
    )
    text = req.to_json()
    assert json.loads(text)["overrides"] == {"threads": 8, "write_concern": "majority"}
    back = PerftablesRun.from_json(text, "run.json")
    assert back == req
    assert {f.name for f in dataclasses.fields(back)} == set(json.loads(text))
    back.validate(request_mod.request_key("run.json"))  # a valid request stays valid
    assert PerftablesRun.from_json("{}") == PerftablesRun()  # every key has its default


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"threads": 4}, "run.json: unknown key(s) threads; known keys: experiments,"),
        ({"max_seconds": "10"}, "run.json: max_seconds: '10' is not a number or null"),
        ({"repeats": True}, "run.json: repeats: True is not a whole number"),
        ({"repeats": 1.5}, "run.json: repeats: 1.5 is not a whole number"),
        ({"experiments": "insert_docsize"}, "run.json: experiments: 'insert_docsize' is not"),
        ({"experiments": [""]}, "run.json: experiments: [''] is not a list of names"),
        ({"max_seconds": -5}, "run.json: max_seconds must be > 0 seconds, not -5"),
        ({"interval_s": -1}, "run.json: interval_s: must be a number of seconds >= 0, not -1"),
        ({"repeats": 0}, "run.json: repeats: must be a whole number >= 1, not 0"),
        ({"processes": 0}, "run.json: processes: must be a whole number >= 1, not 0"),
        ({"client_path": "wire"}, "run.json: client_path: must be one of multiplexed, pymongo"),
        ({"scale": "huge"}, "run.json: scale: scale must be one of full"),
        ({"database": "a.b"}, "run.json: database 'a.b': a database name cannot hold '.'"),
        ({"overrides": {"threads": -4}}, "run.json: overrides: threads=-4 is not an integer"),
        ({"overrides": {"bogus": 1}}, "run.json: overrides: unknown setting 'bogus'"),
        ({"rate_steps": "0.5,100/s"}, "run.json: rate_steps '0.5,100/s': fractions and rates"),
        ({"os_path": "/no/such/dir"}, "run.json: os_path /no/such/dir: no such file"),
        ({"client_vms": 2}, "run.json: client_vms 2: several client VMs need run.json:"),
        ([1, 2], "run.json: a request is a JSON object, not list"),
    ],
)
def test_a_bad_request_is_one_line_naming_the_key_and_value(tmp_path, doc, expected):
    path = tmp_path / "run.json"
    if isinstance(doc, dict):
        doc = {"out": str(tmp_path / "r.json"), **doc}
    path.write_text(json.dumps(doc))
    with pytest.raises(RequestError) as e:
        PerftablesRun.read(str(path))
    message = str(e.value).replace(str(path), "run.json")
    assert message.startswith(expected), message
    assert "\n" not in message


def test_a_bad_out_path_is_named_by_its_key(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"out": str(tmp_path / "no" / "r.json")}))
    with pytest.raises(RequestError, match=r"run.json: out .*r.json: the directory .* does not"):
        PerftablesRun.read(str(path))


def test_the_same_checks_name_the_cli_flags_and_pkb_flags(tmp_path):
    req = _request(tmp_path, max_seconds=-1)
    with pytest.raises(RequestError, match=r"^--max-seconds must be > 0 seconds, not -1$"):
        req.validate()
    pkb = lambda key: f"--mongodb_perftables_{key}"  # noqa: E731
    with pytest.raises(RequestError, match=r"^--mongodb_perftables_max_seconds must be > 0"):
        req.validate(pkb)


def test_plans_name_the_options_as_validate_was_told(tmp_path):
    req = _request(tmp_path, overrides={"target_ops_per_s": 100}, client_path="pymongo")
    with pytest.raises(ValueError, match="--client-path pymongo is a closed loop only"):
        _ = req.validate().plans
    with pytest.raises(ValueError, match="run.json: client_path pymongo is a closed loop"):
        _ = req.validate(request_mod.request_key("run.json")).plans


def _cli_request(*argv):
    args = cli.build_parser().parse_args(["perftables", "run", "--uri-file", "u", *argv])
    return cli_perftables.run_request(args)


def test_request_file_and_equivalent_flags_build_one_run(tmp_path):
    out, samples = str(tmp_path / "r.json"), str(tmp_path / "s.json")
    from_flags = _cli_request(
        "--experiments", "insert_docsize,update_fields", "--variants", "1;4",
        "--scale", "smoke", "--database", "mb_req", "--set", "threads=2",
        "--set", "write_concern=1", "--out", out, "--samples", samples, "--os-path", "none",
        "--max-seconds", "3", "--interval-s", "0.5", "--repeats", "2", "--processes", "2",
        "--reply-timeout", "40", "--auth-retry-s", "5",
    )  # fmt: skip
    path = tmp_path / "run.json"
    from_flags.write(str(path))
    from_file = _cli_request("--request", str(path))
    assert from_file == from_flags
    assert from_file.overrides == {"threads": 2, "write_concern": 1}

    # the same planned variants, with the same settings, and the same output files
    def plan(req):  # key_example: a fresh ObjectId each time
        return [
            (e.name, v.label, {k: x for k, x in v.settings.items() if k != "key_example"})
            for e, vs in req.plans
            for v in vs
        ]

    assert plan(from_file) == plan(from_flags) and len(plan(from_file)) == 2
    assert (from_file.out, from_file.samples) == (out, samples)
    assert from_file.runs == from_flags.runs == 2


def test_defaults_of_the_flags_are_the_requests():
    assert _cli_request() == PerftablesRun()


def test_a_request_file_with_run_option_flags_is_refused(tmp_path, capsys):
    path = tmp_path / "run.json"
    _request(tmp_path).write(str(path))
    with pytest.raises(SystemExit) as e:
        _cli_request("--request", str(path), "--scale", "small", "--set", "threads=2")
    assert str(e.value) == (
        f"mongobench: --request {path} holds every run option; leave out --scale, --set"
        " (or leave out --request)"
    )
    with pytest.raises(SystemExit, match=r"--request .*nope.json: No such file"):
        _cli_request("--request", str(tmp_path / "nope.json"))
