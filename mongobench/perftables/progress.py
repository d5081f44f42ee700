"""Progress of a perftables run: an `[i/N]` line as each variant ends, heartbeats while one
runs, and the time left.

The lines go through the run's `log` (stderr: PKB copies them into pkb.log while the engine
runs detached on its VM). On a terminal the CLI adds a tqdm bar over the variants.

Time left is the mean time of the variants done so far times the variants still to run:
a rough figure (a 60M-document preload is not a 2-second smoke variant), written `~`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from tqdm import tqdm

HEARTBEAT_S = 30.0
PHASES = ("prepare", "timed", "finish")  # a variant's phases; any other phase is a wait


def write(msg: str) -> None:
    """A log line on stderr, above the bar when one is shown."""
    tqdm.write(msg, file=sys.stderr)
    sys.stderr.flush()


def terminal_bar(total: int):
    """A bar over the run's variants on stderr; log lines must then go through tqdm.write."""
    return tqdm(total=total, unit="variant", dynamic_ncols=True, leave=True)


def duration(seconds: float | None) -> str:
    """`42s`, `3m05s`, `2h07m`: short enough for a progress line."""
    if seconds is None:
        return "?"
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Counts variants; `begin`/`phase`/`end` around each, `close` at the end of the run."""

    def __init__(
        self,
        total: int,
        log: Callable[[str], None],
        *,
        heartbeat_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
        bar=None,
    ):
        self.total = total
        self.log = log
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.bar = bar  # a tqdm bar (CLI on a terminal) or None
        self.started = clock()
        self.done = 0
        self.spent = 0.0  # seconds of the variants done
        self.current: str | None = None
        self.current_phase = ""
        self.current_started = 0.0
        self.phase_started = 0.0
        self.phase_planned: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat_s:
            self._thread = threading.Thread(target=self._beat, daemon=True, name="progress")
            self._thread.start()

    def _prefix(self) -> str:
        return f"[{min(self.done + 1, self.total)}/{self.total}] {self.current}"

    def line(self, what: str) -> str:
        """`[i/N] experiment/variant: what` for the variant running now."""
        with self._lock:
            return f"{self._prefix()}: {what}"

    def left(self, in_variant: float = 0.0) -> float | None:
        """Seconds the run still needs, from the mean of the variants done (None before one)."""
        if not self.done:
            return None
        mean = self.spent / self.done
        return max(0.0, mean * (self.total - self.done) - in_variant)

    def _times(self, in_variant: float = 0.0) -> str:
        left = self.left(in_variant)
        return f"elapsed {duration(self.clock() - self.started)}, " + (
            f"~{duration(left)} left" if left is not None else "time left unknown"
        )

    def begin(self, name: str) -> None:
        with self._lock:
            self.current = name
            self.current_started = self.clock()
            self.current_phase, self.phase_planned = "", None

    def phase(self, name: str, planned_s: float | None = None) -> None:
        """The variant entered phase `name` (prepare, timed, finish); `planned_s`: its length
        when known (a timed phase of fixed duration)."""
        with self._lock:
            self.current_phase, self.phase_started, self.phase_planned = (
                name,
                self.clock(),
                planned_s,
            )

    def end(self, summary: str) -> str:
        """The variant ended; logs and returns its `[i/N] experiment/variant: summary` line."""
        with self._lock:
            now = self.clock()
            line = f"{self._prefix()}: {summary}"
            self.spent += now - self.current_started
            self.done += 1
            self.current = None
            line += f", {self._times()}"
        self.log(line)
        if self.bar is not None:
            self.bar.update(1)
        return line

    def heartbeat(self) -> str | None:
        """The line a heartbeat logs now (None between variants)."""
        with self._lock:
            if self.current is None:
                return None
            now = self.clock()
            in_variant = now - self.current_started
            what = f"running, {duration(in_variant)} in"
            if self.current_phase:
                # "timed phase 1m00s of 2m00s"; a wait says what for, and its limit
                phase = self.current_phase
                phase += " phase" if phase in PHASES else ","
                what += f", {phase} {duration(now - self.phase_started)}"
                if self.phase_planned:
                    what += f" of {duration(self.phase_planned)}"
                    what += " at most" if self.current_phase not in PHASES else ""
            return f"{self._prefix()}: {what}, {self._times(in_variant)}"

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            line = self.heartbeat()
            if line:
                self.log(line)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar is not None:
            self.bar.close()
