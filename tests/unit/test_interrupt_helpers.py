"""SIGTERM as Ctrl-C for a host program (PKB): the benchmark modules' Prepare and Run."""

import os
import signal
import subprocess
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


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_held_signals_let_the_block_finish_then_interrupt(signum):
    # PKB's Cleanup: a second SIGTERM (or a Ctrl-C) in it ended PKB half-way, the engine it
    # had not stopped yet still running
    before = {s: signal.getsignal(s) for s in interrupt.SIGNALS}
    lines, done = [], []
    with pytest.raises(interrupt.Interrupted) as e:
        with interrupt.held(lines.append, "X's Cleanup"):
            os.kill(os.getpid(), signum)
            time.sleep(0.1)  # (SIGINT reaches the host through another thread)
            os.kill(os.getpid(), signal.SIGTERM)  # a further one is held too
            time.sleep(0.2)
            done.append(True)
    assert done == [True] and e.value.signum == signum
    name = signal.Signals(signum).name
    assert lines[0] == (
        f"mongobench: {name} during X's Cleanup: X's Cleanup goes on, so that nothing is left"
        " running (SIGKILL stops at once)"
    )
    assert len(lines) == 2
    assert {s: signal.getsignal(s) for s in interrupt.SIGNALS} == before


def test_a_held_ctrl_c_does_not_reach_the_children_started_in_the_block():
    # A terminal's Ctrl-C reaches the host's children too: PKB's ssh running a Cleanup
    # command died of it (exit 255, run again by PKB while the first still ran on the VM)
    lines = []
    with pytest.raises(interrupt.Interrupted) as e:
        with interrupt.held(lines.append, "X's Cleanup"):
            child = subprocess.Popen(["sleep", "0.5"])
            blocked = _sigint_blocked(child.pid)
            os.kill(child.pid, signal.SIGINT)  # the terminal's Ctrl-C, as the child gets it
            os.kill(os.getpid(), signal.SIGINT)  # and as the host gets it
            time.sleep(0.2)
            logged_in_the_block = list(lines)
            assert child.wait(timeout=5) == 0
    assert blocked and e.value.signum == signal.SIGINT
    assert len(logged_in_the_block) == 1  # logged when it came, not at the block's end
    assert len(lines) == 1
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    after = subprocess.Popen(["sleep", "5"])  # after the block, Ctrl-C reaches children again
    try:
        assert not _sigint_blocked(after.pid)
    finally:
        after.kill()
        after.wait()


def _sigint_blocked(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigBlk:"))
    return bool(mask >> (signal.SIGINT - 1) & 1)


def test_a_held_signal_gives_way_to_the_blocks_own_error():
    with pytest.raises(ValueError, match="undo failed"):
        with interrupt.held(lambda line: None):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            raise ValueError("undo failed")


def test_nothing_held_nothing_raised():
    with interrupt.held(lambda line: None):
        pass
