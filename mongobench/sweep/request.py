"""One dataset-size sweep, as a typed request: every run option declared once.

`sweep run`'s flags build a `SweepRun`; `sweep run --request run.json` reads one; PKB's
mongodb_ycsb_sweep benchmark builds one from its flags in CheckPrerequisites. `validate()`
checks it once, before anything touches the target, in one line naming the option (the
flag or the JSON key) and the value. The sweep takes the object: runner.run_sweep,
runner.sweep_steps, properties.phase_properties, properties.process_properties.

PKB's benchmark drives YCSB from the PKB host (its client VMs run YCSB processes; the
engine there only drops the collection), so the request is not shipped to a VM: it is the
one object the benchmark passes from CheckPrerequisites to Run.
The target is not in the request: its connection string stays in its file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from mongobench.core import files, names
from mongobench.core import request as core_request
from mongobench.core.request import request_key
from mongobench.core.units import MiB
from mongobench.sweep import plan
from mongobench.ycsb import properties as ycsb
from mongobench.ycsb.status import STATUS_INTERVAL_S

# How `sweep run` names an option where its flag is not the field's name.
CLI_FLAGS = {"sizes_mb": "--sizes", "operation_count": "--operations"}
# Seconds a local YCSB process gets beyond --max-seconds before it is stopped (no
# --phase-timeout given).
LOCAL_GRACE_S = 300


def cli_flag(name: str) -> str:
    """The `sweep run` flag of field `name`."""
    return CLI_FLAGS.get(name, "--" + name.replace("_", "-"))


def pkb_flag(name: str) -> str:
    """The mongodb_ycsb_sweep benchmark's flag of field `name`."""
    return f"--mongodb_ycsb_sweep_{name}"


class RequestError(core_request.RequestError, plan.SweepError):
    """A sweep request that cannot run: one line naming the option and the value."""


def _default_sizes() -> list[float]:
    return [float(s) for s in plan.DEFAULT_SIZES_MB]


@dataclass(frozen=True)
class SweepRun(core_request.Named):
    """Everything one sweep is asked to do (not the target, not the estimate's rate table,
    not the terminal's confirmation)."""

    default_name = staticmethod(cli_flag)  # the CLI's flags, until validated

    sizes_mb: list[float] = field(default_factory=_default_sizes)  # MB of 1 KB records
    phases: list[str] | None = None  # plan.PHASES names; None: all
    operation_count: int | None = None  # of each run phase; None: the size's records
    threads: int = 1  # of each YCSB process
    memory_mb: float | None = None  # MiB of the machine holding the data; None: found out
    max_seconds: int | None = None  # cap on each phase (YCSB maxexecutiontime)
    phase_timeout: int | None = None  # seconds before a phase's YCSB is stopped and failed
    load_batchsize: int | None = None  # insert batch size of the load
    table: str = plan.DEFAULT_TABLE  # dropped and rebuilt at every size
    keep_data: bool = False  # leave the last size's collection
    repeats: int = 1  # of each size's run phases
    status_interval_s: int = STATUS_INTERVAL_S  # YCSB's status.interval
    out: str | None = None  # results file (local runner)
    raw_dir: str | None = None  # every YCSB output, redacted (local runner)
    metadata: dict = field(default_factory=dict)  # added to every sample
    run_uri: str | None = None  # written into the results (local runner); None: random

    def __post_init__(self):
        if self.metadata is None:  # none given
            object.__setattr__(self, "metadata", {})

    # -- serialisation -------------------------------------------------------------

    def to_json(self) -> str:
        return core_request.to_json(self)

    @classmethod
    def from_json(cls, text: str, source: str = "request") -> SweepRun:
        """The request in `text` (unknown keys refused, missing ones default), type-checked,
        not yet validated."""
        return core_request.from_json(cls, text, source, RequestError)

    @classmethod
    def read(cls, path: str) -> SweepRun:
        """The request file `path`, validated with its keys named in errors."""
        text = core_request.read_text(path, RequestError)
        return cls.from_json(text, path).validate(request_key(path))

    def write(self, path: str) -> None:
        files.write_text(path, self.to_json())

    # -- validation ----------------------------------------------------------------

    def validate(self, name: Callable[[str], str] = cli_flag) -> SweepRun:
        """Self, when every option can run; else a RequestError (a SweepError, a ValueError)
        naming the option by `name` (cli_flag, pkb_flag, request_key) and the value.
        Touches no target."""
        core_request.check_types(self, name, RequestError)
        for key in ("phases",):
            value = getattr(self, key)
            if value is not None and not all(isinstance(v, str) for v in value):
                raise RequestError(f"{name(key)}: {value!r} is not a list of names")
        if not all(isinstance(k, str) and k for k in self.metadata):
            raise RequestError(f"{name('metadata')}: {self.metadata!r}: keys must be names")
        for key in (
            "operation_count",
            "threads",
            "max_seconds",
            "phase_timeout",
            "load_batchsize",
            "repeats",
            "status_interval_s",
        ):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise RequestError(f"{name(key)}: must be a whole number >= 1, not {value!r}")
        if self.operation_count is not None and self.operation_count > ycsb.MAX_OPERATION_COUNT:
            raise RequestError(
                f"{name('operation_count')}: {self.operation_count} is more than YCSB can"
                f" count ({ycsb.MAX_OPERATION_COUNT})"
            )
        if self.memory_mb is not None and not 0 < self.memory_mb < math.inf:
            raise RequestError(f"{name('memory_mb')}: must be > 0 MiB, not {self.memory_mb!r}")
        try:
            steps = plan.plan(self.sizes_mb, operation_count=self.operation_count)
        except plan.SweepError as e:
            raise RequestError(f"{name('sizes_mb')}: {e}") from None
        try:
            phases = plan.parse_phases(self.phases)
        except plan.SweepError as e:
            raise RequestError(f"{name('phases')}: {e}") from None
        try:
            plan.check_mix(steps, phases)
        except plan.SweepError as e:
            raise RequestError(f"{name('sizes_mb')}, {name('operation_count')}: {e}") from None
        try:
            names.check_collection(self.table, name("table"))
            if self.out:
                files.check_output(self.out, name("out"), rewritten=True)
            if self.raw_dir:
                files.check_output_dir(self.raw_dir, name("raw_dir"))
        except ValueError as e:  # names, files (OutputError)
            raise RequestError(str(e)) from None
        self._named(name)
        return self

    # -- what runs -----------------------------------------------------------------

    @property
    def phase_list(self) -> list[plan.Phase]:
        """The phases, load first."""
        return plan.parse_phases(self.phases)

    @property
    def memory(self) -> tuple[int | None, str | None]:
        """(bytes, where from) of memory_mb, named by its option; (None, None) when not
        given (the runner asks the server)."""
        if self.memory_mb is None:
            return None, None
        return int(self.memory_mb * MiB), self._name("memory_mb")

    def steps(self, memory_bytes: int | None = None, memory_source: str | None = None):
        """The sizes (plan.SizeStep), smallest first, judged against the memory given."""
        return plan.plan(
            self.sizes_mb,
            operation_count=self.operation_count,
            memory_bytes=memory_bytes,
            memory_source=memory_source,
        )

    def local_timeout(self) -> float | None:
        """Seconds a local YCSB process runs before it is stopped: phase_timeout, else
        max_seconds and a grace, else no limit."""
        if self.phase_timeout:
            return self.phase_timeout
        return self.max_seconds + LOCAL_GRACE_S if self.max_seconds else None


def sizes_option(value, option: str) -> list[float]:
    """A flag's sizes ('1,2,3' or ['1', '2']) as numbers; an empty one is an error naming
    `option`, not the default sweep (which loads up to 10 GB)."""
    try:
        return plan.parse_sizes(value if value is not None else [])
    except plan.SweepError as e:
        raise RequestError(f"{option}: {e}") from None


def phases_option(value) -> list[str] | None:
    """A flag's phases ('load,read_only', ['load'], 'all') as names; None for all."""
    if value in ("all", ["all"]):
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [v.strip() for v in items if v.strip()]
