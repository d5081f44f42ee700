"""The compiled loop in tests: its module, or a failure saying why it is missing (scripts/setup
builds it; a test that needs it never skips)."""

import pytest

from mongobench.driver import native


def compiled():
    """The compiled module (driver.native), or fails the test."""
    module = native.module()
    if module is None:
        pytest.fail("the compiled loop is not built here (scripts/setup builds it)")
    return module
