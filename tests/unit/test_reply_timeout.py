"""The bound on every wait for the server: the flag, else the URI's timeoutMS, else its
socketTimeoutMS, else the documented default; shipped to the client VM as a flag."""

import json

import pytest

from mongobench.driver import connection
from mongobench.perftables import checks
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun


@pytest.mark.parametrize(
    ("uri", "given", "expected"),
    [
        ("mongodb://h/", None, (checks.DEFAULT_REPLY_TIMEOUT_S, "default")),
        ("mongodb://h/?socketTimeoutMS=2500", None, (2.5, "uri")),
        ("mongodb://h/?timeoutMS=1500&socketTimeoutMS=9000", None, (1.5, "uri")),
        ("mongodb://h/?socketTimeoutMS=0", None, (checks.DEFAULT_REPLY_TIMEOUT_S, "default")),
        ("mongodb://h/?socketTimeoutMS=2500", 7, (7.0, "flag")),
    ],
)
def test_reply_timeout_resolution(uri, given, expected):
    assert checks.reply_timeout(uri, given) == expected


def test_reply_timeout_must_be_positive():
    with pytest.raises(exp_mod.ExperimentError, match="reply timeout must be > 0"):
        checks.reply_timeout("mongodb://h/", 0)


def test_options_carry_the_uris_reply_timeout():
    assert connection.options("mongodb://h/?socketTimeoutMS=2500").reply_timeout == 2.5
    assert connection.options("mongodb://h/").reply_timeout is None


def test_the_client_vm_request_carries_the_option():
    # PKB ships the run options as a request file (PerftablesRun) beside target.uri
    assert json.loads(PerftablesRun(reply_timeout=12.5).to_json())["reply_timeout"] == 12.5
    assert json.loads(PerftablesRun().to_json())["reply_timeout"] is None
