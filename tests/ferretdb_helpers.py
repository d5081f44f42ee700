"""FerretDB for the tests: built from the Go module proxy by the project's own code (cached
under the user's cache directory), skipped only where no Go exists."""

import pytest

from testbed import bed as testbed
from testbed import ferretdb


def start(workdir, kind="ferretdb"):
    """A FerretDB test bed server (`ferretdb` or `ferretdb-postgresql`), or a skip without Go."""
    if not ferretdb.available():
        pytest.skip("no Go toolchain: FerretDB cannot be built here")
    return testbed.start_server(str(workdir), kind)
