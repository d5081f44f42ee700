"""The sweep's typed run request (issue 24, item 2): one SweepRun declared once, validated
once, to and from JSON; `sweep run --request` and the equivalent flags build the same
request, and the sweep's functions take it."""

import dataclasses
import json

import pytest

from mongobench import cli
from mongobench.cli import sweep as cli_sweep
from mongobench.core.units import MiB
from mongobench.sweep import plan, runner
from mongobench.sweep import properties as sweep_properties
from mongobench.sweep import request as request_mod
from mongobench.sweep.request import RequestError, SweepRun


def _request(tmp_path, **kw):
    return SweepRun(out=str(tmp_path / "r.json"), **kw)


def test_round_trip_through_json_keeps_every_field(tmp_path):
    req = _request(
        tmp_path,
        sizes_mb=[0.5, 2.0],
        phases=["load", "read_update"],
        operation_count=300,
        threads=4,
        memory_mb=512.5,
        max_seconds=30,
        phase_timeout=90,
        load_batchsize=100,
        table="sweep_t",
        keep_data=True,
        repeats=3,
        status_interval_s=2,
        raw_dir=str(tmp_path / "raw"),
        metadata={"machine": "n2-standard-4"},
        run_uri="r1",
    )
    text = req.to_json()
    assert json.loads(text)["sizes_mb"] == [0.5, 2.0]
    back = SweepRun.from_json(text, "run.json")
    assert back == req
    assert {f.name for f in dataclasses.fields(back)} == set(json.loads(text))
    back.validate(request_mod.request_key("run.json"))  # a valid request stays valid
    assert SweepRun.from_json("{}") == SweepRun()  # every key has its default
    assert SweepRun().sizes_mb == [float(s) for s in plan.DEFAULT_SIZES_MB]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"size": [1]}, "run.json: unknown key(s) size; known keys: sizes_mb, phases,"),
        ({"sizes_mb": "1,2"}, "run.json: sizes_mb: '1,2' is not a list of numbers"),
        ({"sizes_mb": [1, True]}, "run.json: sizes_mb: [1, True] is not a list of numbers"),
        ({"sizes_mb": []}, "run.json: sizes_mb: no dataset sizes given"),
        ({"sizes_mb": [0]}, "run.json: sizes_mb: dataset size must be > 0 MB, not 0"),
        ({"sizes_mb": [1, 1]}, "run.json: sizes_mb: dataset sizes repeat"),
        ({"phases": []}, "run.json: phases: no phase given (an empty list)"),
        ({"phases": ["read_only"]}, "run.json: phases: the load phase is needed"),
        ({"phases": ["load", "scan"]}, "run.json: phases: unknown phase(s) scan"),
        ({"phases": "load"}, "run.json: phases: 'load' is not a list of names or null"),
        ({"threads": 0}, "run.json: threads: must be a whole number >= 1, not 0"),
        ({"threads": 1.5}, "run.json: threads: 1.5 is not a whole number"),
        ({"repeats": True}, "run.json: repeats: True is not a whole number"),
        ({"keep_data": 1}, "run.json: keep_data: 1 is not true or false"),
        ({"max_seconds": -5}, "run.json: max_seconds: must be a whole number >= 1, not -5"),
        ({"phase_timeout": 0}, "run.json: phase_timeout: must be a whole number >= 1, not 0"),
        ({"status_interval_s": 0}, "run.json: status_interval_s: must be a whole number >= 1"),
        ({"operation_count": 2**31}, "run.json: operation_count: 2147483648 is more than YCSB"),
        ({"memory_mb": 0}, "run.json: memory_mb: must be > 0 MiB, not 0"),
        ({"table": "a$b"}, "run.json: table 'a$b':"),
        ({"metadata": {"": "x"}}, "run.json: metadata: {'': 'x'}: keys must be names"),
        (
            {"sizes_mb": [0.01], "operation_count": 10},
            "run.json: sizes_mb, run.json: operation_count: 0.01 MB: 10 operation(s) are too",
        ),
        ([1, 2], "run.json: a request is a JSON object, not list"),
    ],
)
def test_a_bad_request_is_one_line_naming_the_key_and_value(tmp_path, doc, expected):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RequestError) as e:
        SweepRun.read(str(path))
    message = str(e.value).replace(str(path), "run.json")
    assert message.startswith(expected), message
    assert "\n" not in message
    assert isinstance(e.value, plan.SweepError)  # the sweep's callers catch it as before


def test_a_missing_request_file_names_the_option(tmp_path):
    with pytest.raises(RequestError, match=r"^--request .*nope.json: No such file"):
        SweepRun.read(str(tmp_path / "nope.json"))


def test_the_same_checks_name_the_cli_flags_and_pkb_flags():
    req = SweepRun(sizes_mb=[1], operation_count=0)
    with pytest.raises(RequestError, match=r"^--operations: must be a whole number >= 1, not 0$"):
        req.validate()
    with pytest.raises(
        RequestError, match=r"^--mongodb_ycsb_sweep_operation_count: must be a whole number"
    ):
        req.validate(request_mod.pkb_flag)


def test_memory_is_named_by_the_option_that_gave_it():
    assert SweepRun().memory == (None, None)
    assert SweepRun(memory_mb=2).validate().memory == (2 * MiB, "--memory-mb")
    pkb = SweepRun(memory_mb=2).validate(request_mod.pkb_flag)
    assert pkb.memory == (2 * MiB, "--mongodb_ycsb_sweep_memory_mb")
    [step] = pkb.replace(sizes_mb=[3.0]).steps(*pkb.memory)
    assert step.exceeds_memory and step.metadata()["memory_source"].endswith("memory_mb")


def test_local_timeout_is_the_phase_timeout_else_the_cap_and_a_grace():
    assert SweepRun().local_timeout() is None
    assert SweepRun(max_seconds=10).local_timeout() == 10 + request_mod.LOCAL_GRACE_S
    assert SweepRun(max_seconds=10, phase_timeout=20).local_timeout() == 20


def _cli_request(*argv):
    args = cli.build_parser().parse_args(["sweep", "run", "--uri-file", "u", *argv])
    return cli_sweep.run_request(args)


def test_request_file_and_equivalent_flags_build_one_sweep(tmp_path):
    out, raw = str(tmp_path / "r.json"), str(tmp_path / "raw")
    from_flags = _cli_request(
        "--sizes", "0.5,2", "--phases", "load,read_update", "--operations", "300",
        "--threads", "4", "--memory-mb", "512", "--max-seconds", "30", "--phase-timeout", "90",
        "--load-batchsize", "100", "--table", "sweep_t", "--keep-data", "--repeats", "3",
        "--status-interval-s", "2", "--out", out, "--raw-dir", raw,
        "--metadata", "machine=n2", "--run-uri", "r1",
    )  # fmt: skip
    path = tmp_path / "run.json"
    from_flags.write(str(path))
    from_file = _cli_request("--request", str(path))
    assert from_file == from_flags
    assert (from_file.sizes_mb, from_file.metadata) == ([0.5, 2.0], {"machine": "n2"})
    # the same sizes, phases and property files
    assert from_file.steps() == from_flags.steps()
    assert [p.name for p in from_file.phase_list] == ["load", "read_update"]
    step = from_file.steps()[0]
    for phase in from_file.phase_list:
        assert sweep_properties.phase_properties(
            step, phase, from_file, "/u"
        ) == sweep_properties.phase_properties(step, phase, from_flags, "/u")


def test_defaults_of_the_flags_are_the_requests():
    assert _cli_request() == SweepRun()
    assert _cli_request("--phases", "all").phases is None


def test_a_request_file_with_run_option_flags_is_refused(tmp_path, capsys):
    path = tmp_path / "run.json"
    SweepRun(sizes_mb=[1]).write(str(path))
    with pytest.raises(SystemExit) as e:
        _cli_request("--request", str(path), "--sizes", "2", "--keep-data")
    assert str(e.value) == (
        f"mongobench: --request {path} holds every run option; leave out --sizes,"
        " --keep-data (or leave out --request)"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--sizes", ""], "mongobench: --sizes: no dataset sizes given"),
        (["--sizes", "1", "--phases", ""], "mongobench: --phases: no phase given"),
        (["--sizes", "1", "--threads", "0"], "mongobench: --threads: must be a whole number"),
        (["--sizes", "1", "--table", "a$b"], "mongobench: --table 'a$b':"),
        (["--sizes", "1", "--metadata", "novalue"], "mongobench: --metadata takes key=value"),
    ],
)
def test_a_bad_flag_is_one_line_before_the_target_is_read(argv, expected):
    with pytest.raises(SystemExit) as e:
        cli.main(["sweep", "run", "--uri-file", "/no/such/uri", *argv])
    assert str(e.value).startswith(expected), str(e.value)


def test_the_sweep_functions_take_the_request_and_few_parameters():
    import inspect

    for fn in (
        runner.run_sweep,
        runner.sweep_steps,
        sweep_properties.phase_properties,
        sweep_properties.process_properties,
    ):
        params = inspect.signature(fn).parameters
        assert "request" in params and len(params) <= 8, (fn.__name__, list(params))


def test_the_loop_runs_the_requests_phases_and_repeats():
    ran = []
    req = SweepRun(sizes_mb=[1], phases=["load", "update_only"], repeats=2, keep_data=True)
    hooks = runner.SweepHooks(
        drop=lambda: ran.append("drop"),
        drop_errors=(),
        describe_error=str,
        run_phase=lambda step, phase: ran.append(phase.name) or [],
        log=lambda m, problem=False: None,
    )
    runner.sweep_steps(req, req.steps(), {}, hooks)
    assert ran == ["drop", "load", "update_only", "update_only"]  # kept: no final drop
    runner.sweep_steps(req.replace(keep_data=False, repeats=1), req.steps(), {}, hooks)
    assert ran[4:] == ["drop", "load", "update_only", "drop"]
