"""YCSB dataset-size sweep (seed 002): one collection rebuilt and measured at growing sizes.

For each dataset size (MB of 1 KB records: 10 fields x 100 B, so 1 MB = 1,000 records) the
collection is dropped, loaded with YCSB, then read-only, update-only and 50/50 read/update
workloads run over it (zipfian keys, operation count = record count unless overridden). Every
size and phase yields samples: runtime, throughput, and average/p50/p95/p99 latency per operation,
named and scaled as PKB's ``ycsb_stats`` names YCSB's figures (so they sit beside
``mongodb_ycsb``'s samples).
Sizes larger than the memory of the machine holding the data are allowed; their samples say so
(``exceeds_memory``).

Pure planning functions and the sample names (no PKB imports). The phases' YCSB property files
are sweep.properties'; the local runner (sweep.runner) and the PKB module run the same files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mongobench.core.units import MB, MiB
from mongobench.ycsb import properties as ycsb
from mongobench.ycsb.properties import FIELD_COUNT, FIELD_LENGTH

BENCHMARK_NAME = "mongodb_ycsb_sweep"
DEFAULT_SIZES_MB = (1, 2, 3, 10, 100, 1000, 10000)
RECORD_BYTES = FIELD_COUNT * FIELD_LENGTH  # "1 KB" records, as in the seed
RECORDS_PER_MB = 1_000_000 // RECORD_BYTES  # the seed: 1,000 records ~ 1 MB
DEFAULT_TABLE = "usertable"
DEFAULT_DATABASE = "ycsb"  # our binding's database when the URI names none (or admin)
DISTRIBUTION = "zipfian"

# PKB's ycsb_stats names: "<group> <YCSB statistic>" with YCSB's unit moved out of the name
# (microseconds become ms), plus "<group> p<N> latency" from the histogram percentiles.
RUNTIME_METRIC = "overall RunTime"  # ms
THROUGHPUT_METRIC = "overall Throughput"  # ops/sec
FAILED_METRIC = "Phase Failed"
# (statistic, percentile or None for the mean), all in ms. PKB emits both percentile forms for
# one run (YCSB's summary line and its own from the histogram): ours are the same figure.
LATENCY_STATS = (
    ("AverageLatency", None),
    ("50thPercentileLatency", 50.0),
    ("95thPercentileLatency", 95.0),
    ("99thPercentileLatency", 99.0),
    ("p50 latency", 50.0),
    ("p95 latency", 95.0),
    ("p99 latency", 99.0),
)
P50_STAT = "p50 latency"
# YCSB prints only the percentiles its hdrhistogram.percentiles asks for (0.17's default:
# 95,99). Our property files ask for 50 as well; outputs of runs that did not (the seed's)
# lack it, so p50 is emitted when printed and never listed in missing_metrics.
OPTIONAL_STATS = frozenset({"50thPercentileLatency", P50_STAT})
P99_STAT = "p99 latency"


class SweepError(ValueError):
    """A bad size list, phase name or option."""


@dataclass(frozen=True)
class Phase:
    name: str
    title: str
    ycsb_phase: str  # "load" or "run"
    read: float
    update: float
    insert: float
    ops: tuple[str, ...]  # operations the phase must report


PHASES = (
    Phase("load", "Load", "load", 0.0, 0.0, 1.0, ("INSERT",)),
    Phase("read_only", "Read-only", "run", 1.0, 0.0, 0.0, ("READ",)),
    Phase("update_only", "Update-only", "run", 0.0, 1.0, 0.0, ("UPDATE",)),
    Phase("read_update", "50/50 read/update", "run", 0.5, 0.5, 0.0, ("READ", "UPDATE")),
)
PHASES_BY_NAME = {p.name: p for p in PHASES}


def latency_metric(op: str, stat: str) -> str:
    """PKB's name of an operation's statistic: ``read p99 latency``, ``update AverageLatency``,
    ``insert 99thPercentileLatency`` (YCSB's operation, lower case, as ycsb_stats has it)."""
    return f"{op.lower()} {stat}"


def size_label(size_mb: float) -> str:
    return f"{size_mb / 1000:g} GB" if size_mb >= 1000 else f"{size_mb:g} MB"


def parse_sizes(value: str | Iterable[float] | None) -> list[float]:
    """``"1,2,3"`` (MB) -> [1.0, 2.0, 3.0]; None -> the seed's sizes. An empty value is
    an error, not the default sweep (which loads up to 10 GB)."""
    if value is None:
        return [float(s) for s in DEFAULT_SIZES_MB]
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        if isinstance(item, str):
            item = item.strip()
            if not item:
                continue
        try:
            size = float(item)
        except (TypeError, ValueError):
            raise SweepError(f"dataset size must be a number of MB, not {item!r}") from None
        if not size > 0 or size != size or size == float("inf"):
            raise SweepError(f"dataset size must be > 0 MB, not {item!r}")
        if round(size * RECORDS_PER_MB) < 1:
            raise SweepError(f"dataset size {size:g} MB is less than one 1 KB record")
        out.append(size)
    if not out:
        raise SweepError("no dataset sizes given")
    if len(set(out)) != len(out):
        raise SweepError(f"dataset sizes repeat: {value}")
    return out


def parse_phases(value: str | Iterable[str] | None) -> list[Phase]:
    """Phase names (``load`` is always first and required for the runs)."""
    if value is None or value == "all" or value == ["all"]:
        return list(PHASES)
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    names = [n for n in names if n]
    if not names:
        raise SweepError("no phase given (an empty list); leave it out for all")
    unknown = [n for n in names if n not in PHASES_BY_NAME]
    if unknown:
        raise SweepError(
            f"unknown phase(s) {', '.join(unknown)}; phases: {', '.join(PHASES_BY_NAME)}"
        )
    if "load" not in names:
        raise SweepError("the load phase is needed: every size is rebuilt before it is measured")
    return [p for p in PHASES if p.name in names]


@dataclass(frozen=True)
class SizeStep:
    """One dataset size of the sweep."""

    size_mb: float
    records: int
    operations: int  # operationcount of the run phases
    memory_bytes: int | None = None
    memory_source: str | None = None

    @property
    def dataset_bytes(self) -> int:
        return self.records * RECORD_BYTES

    @property
    def exceeds_memory(self) -> bool | None:
        """True when the records alone are larger than the memory; None when it is unknown."""
        if not self.memory_bytes:
            return None
        return self.dataset_bytes > self.memory_bytes

    @property
    def label(self) -> str:
        return size_label(self.size_mb)

    def metadata(self) -> dict:
        md = {
            "size_mb": self.size_mb,
            "size_label": self.label,
            "records": self.records,
            "operation_count": self.operations,
            "record_bytes": RECORD_BYTES,
            "dataset_mb": round(self.dataset_bytes / MB, 3),
        }
        if self.memory_bytes:
            md["exceeds_memory"] = self.exceeds_memory
            md["memory_mb"] = round(self.memory_bytes / MiB)
            md["memory_source"] = self.memory_source or "given"
        else:
            md["memory_source"] = "unknown"
        return md


def plan(
    sizes_mb: Iterable[float] | str | None = None,
    *,
    operation_count: int | None = None,
    memory_bytes: int | None = None,
    memory_source: str | None = None,
) -> list[SizeStep]:
    """The sweep's sizes, smallest first: records = size x 1,000, operations = records unless
    `operation_count` fixes them for every size."""
    if operation_count is not None and not 0 < operation_count <= ycsb.MAX_OPERATION_COUNT:
        raise SweepError(f"operation count must be in 1..{ycsb.MAX_OPERATION_COUNT}")
    steps = []
    for size in sorted(parse_sizes(sizes_mb)):
        records = int(round(size * RECORDS_PER_MB))
        if records > ycsb.MAX_OPERATION_COUNT:
            raise SweepError(f"{size:g} MB is more records than YCSB can count")
        steps.append(
            SizeStep(
                size_mb=size,
                records=records,
                operations=operation_count or records,
                memory_bytes=int(memory_bytes) if memory_bytes else None,
                memory_source=memory_source,
            )
        )
    return steps


# A mixed phase's operations are drawn at random: with n operations, one kind is missing
# with probability 2 x 0.5^n, so below this count a 50/50 phase may measure one kind only.
MIN_MIXED_OPERATIONS = 30


def check_mix(steps: Sequence[SizeStep], phases: Sequence[Phase]) -> None:
    """Refuses, before anything runs, a size whose mixed phase has too few operations for
    every kind to occur (a one-record sweep: its 50/50 phase did only reads or updates)."""
    mixed = [p for p in phases if len(p.ops) > 1]
    for step in steps:
        for p in mixed:
            if step.operations < MIN_MIXED_OPERATIONS:
                raise SweepError(
                    f"{step.label}: {step.operations} operation(s) are too few for the"
                    f" {p.title} phase, which needs at least {MIN_MIXED_OPERATIONS} so that"
                    f" {' and '.join(p.ops)} all occur; raise the size or the operation count"
                )
