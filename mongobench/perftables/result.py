"""One variant's raw result, typed: what the runner measured and decided about a variant.

`to_dict()` is the results file's JSON object for the variant, the same keys as before the
type existed (reports.loader, results, compare and the samples read those files): a field
left ABSENT is no key at all, as a key that only some results carry (`server_lost`,
`open_loop`, `quiesce`, `repeat`, ...) was left out before.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

RESULT_SCHEMA = 1


class _Absent:
    def __repr__(self):
        return "ABSENT"

    def __bool__(self):
        return False


ABSENT = _Absent()  # no such key in the result's JSON


@dataclass
class VariantResult:
    status: str  # ok, failed, n/a
    experiment: str
    label: str
    variant_index: int
    params: dict
    settings: dict
    schema: int = RESULT_SCHEMA
    error: str | _Absent = ABSENT  # failed: why, one line
    reason: str | _Absent = ABSENT  # n/a: why
    # -- what ran (status ok) ------------------------------------------------------
    workload: str | _Absent = ABSENT
    prepared: object = ABSENT
    prepare_s: float | _Absent = ABSENT
    planned: object = ABSENT
    # the timed phase (variant._timed_threads, _timed_multiplexed)
    start: float | _Absent = ABSENT
    duration_s: float | _Absent = ABSENT
    stopped_early: bool | _Absent = ABSENT
    client_process_cpu_s: float | _Absent = ABSENT
    client_processes: int | _Absent = ABSENT
    client_cores: int | _Absent = ABSENT
    client_per_process: object = ABSENT  # multiplexed path only
    client_worker_wall_s: float | _Absent = ABSENT
    client_vms: int | _Absent = ABSENT
    client_per_vm: object = ABSENT  # several client VMs only
    threads: int | _Absent = ABSENT
    client_path: str | _Absent = ABSENT
    client_loop: str | _Absent = ABSENT  # multiplexed path: "native" or "python"
    client_sources: str | _Absent = ABSENT  # multiplexed path: "compiled" or "python"
    ops: dict | _Absent = ABSENT
    docs: int | _Absent = ABSENT
    bytes: int | _Absent = ABSENT
    errors: dict | _Absent = ABSENT
    had_errors: bool | _Absent = ABSENT
    server_lost: str | _Absent = ABSENT  # why the server could not be reached after it
    counters: dict | _Absent = ABSENT
    finished: object = ABSENT
    audit: object = ABSENT
    error_samples: object = ABSENT
    latency: object = ABSENT  # encoded histogram; open loop: from the intended send times
    open_loop: object = ABSENT  # open loop only, with service_latency
    service_latency: object = ABSENT
    server_before: object = ABSENT
    connections_before: object = ABSENT  # the next variant's quiet check (quiesce)
    server_after: object = ABSENT
    server_info: object = ABSENT
    os_client: object = ABSENT
    server_signals: object = ABSENT
    series: object = ABSENT  # per interval of the timed phase (core.series)
    sampler_cpu_s: object = ABSENT
    os_client_device: object = ABSENT
    # -- what the run loop adds ----------------------------------------------------
    quiesce: object = ABSENT  # the quiet check before it
    repeat: int | _Absent = ABSENT  # with repeats: its round, from 0
    repeats: int | _Absent = ABSENT
    rate_step: object = ABSENT  # with rate steps: its place in the curve
    fails_run: str | _Absent = ABSENT  # measured, but the run fails for this reason
    interrupted: str | _Absent = ABSENT  # the signal that stopped it

    def to_dict(self) -> dict:
        """The results file's object for this variant (ABSENT fields are no keys)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not ABSENT
        }

    @classmethod
    def from_dict(cls, doc: dict) -> VariantResult:
        """A result read back from a results file (an unknown key is refused)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ValueError(f"variant result: unknown key(s) {', '.join(unknown)}")
        return cls(**doc)

    @property
    def acknowledged(self) -> int:
        """Operations acknowledged in the timed phase (0 when none ran)."""
        return sum((self.ops or {}).values())
