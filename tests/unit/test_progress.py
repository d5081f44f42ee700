"""perftables.progress: [i/N] lines, heartbeats and time left, on a clock the test moves."""

import io
import threading

from tqdm import tqdm

from mongobench.perftables import progress


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_lines_count_variants_and_estimate_what_is_left():
    clock, lines = Clock(), []
    p = progress.Progress(3, lines.append, heartbeat_s=0, clock=clock)
    p.begin("insert_docsize/1")
    assert p.heartbeat() == "[1/3] insert_docsize/1: running, 0s in, elapsed 0s, time left unknown"
    clock.t += 60
    assert p.end("10 ops, 5 docs/s, 0 errors") == (
        "[1/3] insert_docsize/1: 10 ops, 5 docs/s, 0 errors, elapsed 1m00s, ~2m00s left"
    )
    p.begin("insert_docsize/4")
    p.phase("prepare")
    clock.t += 30
    p.phase("timed", planned_s=120)
    clock.t += 45
    # mean 60 s per variant, two to go, 75 s spent on this one
    assert p.heartbeat() == (
        "[2/3] insert_docsize/4: running, 1m15s in, timed phase 45s of 2m00s,"
        " elapsed 2m15s, ~45s left"
    )
    p.end("FAILED boom")
    p.begin("concurrency/8")
    clock.t += 7200
    assert p.end("1 ops").endswith("elapsed 2h02m, ~0s left")
    assert [line.split(":")[0] for line in lines] == [
        "[1/3] insert_docsize/1",
        "[2/3] insert_docsize/4",
        "[3/3] concurrency/8",
    ]
    assert p.heartbeat() is None  # between variants there is nothing to say


def test_heartbeat_thread_logs_while_a_variant_runs_and_stops_on_close():
    lines, beat = [], threading.Event()

    def log(line):
        lines.append(line)
        beat.set()

    p = progress.Progress(2, log, heartbeat_s=0.02)
    p.begin("shell_mixed/x")
    assert beat.wait(5), "no heartbeat within 5 s"
    p.close()
    n = len(lines)
    assert lines[0].startswith("[1/2] shell_mixed/x: running")
    threading.Event().wait(0.1)
    assert len(lines) == n  # closed: no more beats


def test_bar_advances_per_variant():
    out = io.StringIO()
    bar = tqdm(total=2, file=out, unit="variant")
    p = progress.Progress(2, lambda _: None, heartbeat_s=0, bar=bar)
    for name in ("a/1", "a/2"):
        p.begin(name)
        p.end("ok")
    p.close()
    assert bar.n == 2 and "2/2" in out.getvalue()


def test_durations_read_short():
    assert [progress.duration(s) for s in (None, 0.4, 59, 61, 3599, 3600, 7322)] == [
        "?", "0s", "59s", "1m01s", "59m59s", "1h00m", "2h02m",
    ]  # fmt: skip


def test_a_wait_says_what_it_waits_for_and_its_limit():
    # issue 22: a leader waiting 3 minutes for followers that never came said "timed phase"
    clock = Clock()
    p = progress.Progress(2, [].append, heartbeat_s=0, clock=clock)
    p.begin("concurrency/10, False")
    p.phase("waiting for client VM(s) 1 to be ready", 180)
    clock.t += 65
    assert p.heartbeat() == (
        "[1/2] concurrency/10, False: running, 1m05s in, waiting for client VM(s) 1 to be"
        " ready, 1m05s of 3m00s at most, elapsed 1m05s, time left unknown"
    )
