"""SIGTERM and SIGINT stop the engine at once, in order, without a traceback.

`installed()` (around the command line's work) turns both signals into `Interrupted`, a
KeyboardInterrupt raised in the main thread wherever it waits: the timed phase's parent
(procs.run) stops and ends its worker processes, a YCSB child is killed by subprocess.run,
the runners write what they have with the interrupted variant or phase marked, and the
command line exits with one line and 128 + the signal's number. Worker processes keep
neither handler (`worker_defaults`): their parent ends them, and they die with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """The engine was told to stop by `signum` (a KeyboardInterrupt: no `except Exception`
    swallows it, and whatever handles Ctrl-C handles it)."""

    def __init__(self, signum: int = signal.SIGINT):
        self.signum = int(signum)
        super().__init__(self.name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def of(e: KeyboardInterrupt) -> Interrupted:
    """`e` as an Interrupted (a plain KeyboardInterrupt is SIGINT's)."""
    return e if isinstance(e, Interrupted) else Interrupted(signal.SIGINT)


def _raise(signum, frame):
    raise Interrupted(signum)


@contextlib.contextmanager
def installed():
    """While in the block, SIGTERM and SIGINT raise Interrupted in the main thread (outside
    the main thread, nothing changes); the earlier handlers come back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """While in the block (or the decorated function), SIGTERM raises Interrupted(SIGTERM) in
    the main thread, a KeyboardInterrupt: a host program that handles Ctrl-C handles SIGTERM
    the same way. PKB has no SIGTERM handler (it would end at once, without its Cleanup); it
    answers a KeyboardInterrupt in a stage by calling the benchmark's Cleanup when the
    benchmark set `always_call_cleanup`. SIGINT is left to the host; outside the main thread
    nothing changes; the earlier SIGTERM handler comes back after the block, so a second
    SIGTERM during Cleanup ends the host as before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def held(log, what: str = "the cleanup"):
    """While in the block, SIGTERM and SIGINT do not interrupt it: each is logged (`log`,
    one line) and the block runs to its end; then the first one logged is raised as
    Interrupted, unless the block ended with an exception of its own (that one goes on).
    For a host program's cleanup (PKB's Cleanup stage): a second SIGTERM or a Ctrl-C during
    it would end the host half-way, leaving the engine it had not stopped yet running.
    SIGKILL still ends the host at once. Outside the main thread nothing changes; the
    earlier handlers come back after the block.

    A terminal's Ctrl-C goes to the whole process group, the host's children too: PKB's
    ssh running a cleanup command died of it (PKB ran the command again, while the first
    one may still run on the VM; a file copy is not run again). So SIGINT is blocked in
    this thread during the block: the children it starts inherit the mask through fork and
    exec (OpenSSH keeps it), and the signal reaches the host through `_sigint_taker`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []

    def hold(signum, frame):
        got.append(signum)
        log(
            f"mongobench: {signal.Signals(signum).name} during {what}: {what} goes on, so"
            " that nothing is left running (SIGKILL stops at once)"
        )

    before = {s: signal.signal(s, hold) for s in SIGNALS}
    taker = _sigint_taker()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        # unblocked first: a SIGINT still pending runs `hold` here (pthread_sigmask runs
        # the handlers of the signals it unblocks), before the earlier handlers come back
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        taker.set()
        for s, handler in before.items():
            signal.signal(s, handler)
    if got:  # not reached when the block raised
        raise Interrupted(got[0])


def _sigint_taker() -> threading.Event:
    """A thread that only waits, started before SIGINT is blocked, so it keeps SIGINT
    unblocked: the kernel delivers a process's SIGINT to a thread that does not block it,
    and Python runs the handler in the main thread as soon as that one runs Python again
    (without such a thread the signal would wait until the block's end). Set the event to
    end the thread."""
    done = threading.Event()
    threading.Thread(target=done.wait, name="sigint-taker", daemon=True).start()
    return done


_PR_SET_PDEATHSIG = 1


def worker_defaults(parent: int) -> None:
    """In a forked worker: SIGTERM kills it, SIGINT (a terminal's Ctrl-C reaches the whole
    process group) is left to the parent, which ends its workers; and on Linux the worker
    is killed when its parent (PID `parent`) dies, however it dies (even by SIGKILL)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's stop is all there is
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
