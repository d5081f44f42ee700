"""Shared fixtures: a real wire-protocol server the tests start themselves."""

import os
import shutil

import pytest

from testbed import bed as testbed


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs the test-bed server (Java)")
    config.addinivalue_line("markers", "e2e: runs the real PKB (needs PKB_DIR)")


@pytest.fixture(scope="session", autouse=True)
def _private_rates_file(tmp_path_factory):
    """The estimates' record of past runs (measure.rates) in the session's own file:
    tests neither read nor write the user's ~/.cache/mongobench/rates.json."""
    os.environ["MONGOBENCH_RATES_FILE"] = str(tmp_path_factory.mktemp("rates") / "rates.json")


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """mongod when on PATH, else the stand-in; stopped at the end of the session."""
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.skip("java and mvn are needed to build the stand-in server")
    srv = testbed.start_server(str(tmp_path_factory.mktemp("server")))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def server_uri(server):
    return server.uri


@pytest.fixture
def uri_file(tmp_path, server_uri):
    path = tmp_path / "uri"
    path.write_text(server_uri + "\n")
    os.chmod(path, 0o600)
    return str(path)
