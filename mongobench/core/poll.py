"""The one poll loop: check, stop when done, give up after a deadline, sleep, repeat.

Used by the Atlas client, the replica-set wait, the test bed's port wait and the PKB
packages' process waits. `sleep` and `clock` are injectable so tests run without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class PollTimeout(Exception):
    """The deadline passed; `last` is the value of the last check (the state to report)."""

    def __init__(self, last: Any):
        super().__init__("timed out")
        self.last = last


def poll_until(
    check: Callable[[], tuple[bool, Any]],
    *,
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """Calls check() -> (done, value) until done and returns that value.

    Every call checks at least once; after a check that is not done past the deadline it
    raises PollTimeout(value). Exceptions from check() propagate (a check raises to stop
    the loop early, e.g. when the process it waits for died).
    """
    deadline = clock() + timeout
    while True:
        done, value = check()
        if done:
            return value
        if clock() >= deadline:
            raise PollTimeout(value)
        sleep(interval)
