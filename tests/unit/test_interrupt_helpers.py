"""SIGTERM as Ctrl-C for a host program (PKB): the benchmark modules' Prepare and Run."""

import os
import signal
import threading
import time

import pytest

from mongobench.core import interrupt


def _sigterm_self():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises long before
    raise AssertionError("SIGTERM did not interrupt")


def test_sigterm_raises_a_keyboard_interrupt_in_the_block_and_the_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt) as e:
        with interrupt.sigterm_as_ctrl_c():
            _sigterm_self()
    assert isinstance(e.value, interrupt.Interrupted) and e.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_as_a_decorator_sigint_untouched():
    sigint = signal.getsignal(signal.SIGINT)
    seen = {}

    @interrupt.sigterm_as_ctrl_c()
    def stage(x):
        seen["sigint"] = signal.getsignal(signal.SIGINT)
        _sigterm_self()

    assert stage.__name__ == "stage"
    with pytest.raises(interrupt.Interrupted):
        stage(1)
    assert seen["sigint"] is sigint


def test_outside_the_main_thread_nothing_changes():
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def body():
        with interrupt.sigterm_as_ctrl_c():
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [before]
