"""Parsing YCSB output: per-operation stats, statuses, failures; the one judgement of a
YCSB process's outcome (`judge`: its exit, then its output) that the sweep, its PKB
benchmark and the stress steps share."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Sections that are not client operations: per-thread cleanup and JVM GC counters.
_NON_OPS = ("OVERALL", "CLEANUP", "INIT")
_BASE_OPS = ("READ", "UPDATE", "INSERT", "SCAN", "DELETE")
_OK_STATUSES = frozenset({"OK", "BATCHED_OK"})
_BENIGN_STATUSES = frozenset({"NOT_FOUND"})  # counted, judged by the caller

_LINE = re.compile(r"^\[(?P<section>[^\]]+)\],\s*(?P<stat>[^,]+?),\s*(?P<value>\S+)\s*$")
_PERCENTILE = re.compile(
    r"^(?P<p>\d+(?:\.\d+)?)(?:st|nd|rd|th)?PercentileLatency\((?P<unit>us|ms)\)$"
)
# A Java exception or error as the first line of a stack trace, or the binding's own message.
_FAILURE = re.compile(
    r"^(?:Exception in thread .*"
    r"|(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error)(?::.*)?"
    r"|Error inserting.*"
    r"|.*\bcannot connect to\b.*)$"
)

# A -s status line: "<date> <time> 10 sec: 12345 operations; 1234.5 current ops/sec; [READ: ...]"
_STATUS = re.compile(r"^\S+ \S+ \d+ sec: \d+ operations;")


def is_status_line(line: str) -> bool:
    """True for YCSB's periodic status lines (its -s output on stderr)."""
    return bool(_STATUS.match(line))


class YcsbError(RuntimeError):
    """YCSB's output shows a failed or incomplete run."""


@dataclass(frozen=True)
class Outcome:
    """What one YCSB process left: its output (stdout, then stderr), its exit status (None:
    it vanished without one) and whether it was still running when its time was up."""

    text: str
    returncode: int | None = 0
    running: bool = False
    timeout_s: float | None = None


@dataclass(frozen=True)
class OpStats:
    """Summary of one operation type (READ, UPDATE, ...) as YCSB printed it."""

    name: str
    operations: int
    average_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    percentiles_us: Mapping[float, float] = field(default_factory=dict)
    returns: Mapping[str, int] = field(default_factory=dict)

    def percentile_ms(self, p: float) -> float | None:
        v = self.percentiles_us.get(float(p))
        return None if v is None else v / 1000.0

    @property
    def p99_ms(self) -> float | None:
        return self.percentile_ms(99.0)

    @property
    def errors(self) -> int:
        return sum(n for s, n in self.returns.items() if s not in _OK_STATUSES | _BENIGN_STATUSES)

    @property
    def not_found(self) -> int:
        return self.returns.get("NOT_FOUND", 0)


@dataclass(frozen=True)
class YcsbResult:
    runtime_ms: float
    throughput: float  # ops/s, as YCSB computed it over its own run time
    ops: Mapping[str, OpStats]
    metrics: Mapping[tuple[str, str], float]  # every summary line, raw

    @property
    def operations(self) -> int:
        """Operations done, as YCSB counts operationcount: READ-MODIFY-WRITE is also reported
        as one READ plus one UPDATE, so it is subtracted once."""
        base = sum(s.operations for name, s in self.ops.items() if name in _BASE_OPS)
        rmw = self.ops.get("READ-MODIFY-WRITE")
        return base - (rmw.operations if rmw else 0)

    def p99_ms(self, op: str) -> float | None:
        return self.percentile_ms(op, 99.0)

    def percentile_ms(self, op: str, p: float) -> float | None:
        stats = self.ops.get(op)
        return stats.percentile_ms(p) if stats else None

    @property
    def p99_by_op_ms(self) -> dict[str, float]:
        return {name: s.p99_ms for name, s in self.ops.items() if s.p99_ms is not None}

    @property
    def not_found(self) -> int:
        return sum(s.not_found for s in self.ops.values())


# ----------------------------------------------------------------------------- parsing


def _status(stat: str) -> str:
    """``Return=OK`` -> OK; 0.1.x integer codes: 0 is success, anything else an error."""
    code = stat.split("=", 1)[1].strip()
    if re.fullmatch(r"-?\d+", code):
        return "OK" if int(code) == 0 else "ERROR"
    return code


def _failure_lines(text: str) -> list[str]:
    return [s for s in (ln.strip() for ln in text.splitlines()) if s and _FAILURE.match(s)]


def parse_output(
    text: str,
    *,
    required_ops: Iterable[str] = (),
    required_percentiles: Iterable[float] = (99.0,),
) -> YcsbResult:
    """Parses YCSB's stdout (stderr may be appended) and raises YcsbError on any sign of failure.

    Failures: a Java exception or "cannot connect" line, no ``[OVERALL]`` block, zero
    operations, any error status (``Return=ERROR``, a non-zero 0.1.x code, a ``*-FAILED``
    section), an op of ``required_ops`` absent, or an op lacking a percentile of
    ``required_percentiles``. NOT_FOUND is counted, not judged: callers decide.
    """
    raw: dict[tuple[str, str], float] = {}
    sections: dict[str, dict] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        section, stat, value = m["section"].strip(), m["stat"].strip(), m["value"]
        try:
            number = float(value)
        except ValueError:
            continue
        raw[(section, stat)] = number
        if section.startswith("TOTAL_G") or section in ("OVERALL", "INIT"):
            continue
        sec = sections.setdefault(section, {"pct": {}, "ret": {}})
        pm = _PERCENTILE.match(stat)
        if stat.startswith("Return="):
            st = _status(stat)
            sec["ret"][st] = sec["ret"].get(st, 0) + int(number)
        elif pm:
            scale = 1000.0 if pm["unit"] == "ms" else 1.0
            sec["pct"][float(pm["p"])] = number * scale
        elif stat in ("Operations", "AverageLatency(us)", "MinLatency(us)", "MaxLatency(us)"):
            sec[stat] = number
        # anything else (0.1.x histogram buckets "0", ">1000", ...) is kept in raw only

    failures = _failure_lines(text)
    if failures:
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        raise YcsbError(f"YCSB reported a failure: {failures[0][:300]}{more}")
    if ("OVERALL", "Throughput(ops/sec)") not in raw:
        raise YcsbError("no [OVERALL] Throughput line: YCSB did not finish (killed or crashed?)")

    ops: dict[str, OpStats] = {}
    failed_sections = []
    for name, sec in sections.items():
        if name.endswith("-FAILED"):
            failed_sections.append(f"{name}={int(sec.get('Operations', 0))}")
            continue
        returns = dict(sec["ret"])
        # Some outputs (edited logs, old versions) lack the Operations line: use the statuses.
        count = sec.get("Operations", sum(returns.values()) if returns else 0)
        ops[name] = OpStats(
            name=name,
            operations=int(count),
            average_us=sec.get("AverageLatency(us)"),
            min_us=sec.get("MinLatency(us)"),
            max_us=sec.get("MaxLatency(us)"),
            percentiles_us=dict(sec["pct"]),
            returns=returns,
        )
    result = YcsbResult(
        runtime_ms=raw.get(("OVERALL", "RunTime(ms)"), 0.0),
        throughput=raw[("OVERALL", "Throughput(ops/sec)")],
        ops=ops,
        metrics=raw,
    )

    errors = {n: s.errors for n, s in ops.items() if s.errors}
    if errors or failed_sections:
        detail = ", ".join([f"{n}: {c} errors" for n, c in errors.items()] + failed_sections)
        raise YcsbError(f"YCSB operations failed ({detail})")
    if result.operations <= 0:
        raise YcsbError(
            f"YCSB did no operations (throughput {result.throughput:g} ops/s, "
            f"run time {result.runtime_ms:g} ms)"
        )
    for op in required_ops:
        if op not in ops or ops[op].operations == 0:
            raise YcsbError(f"YCSB output has no {op} operations (found: {sorted(ops) or 'none'})")
    wanted = [float(p) for p in required_percentiles]
    for name, stats in ops.items():
        if name in _NON_OPS or stats.operations == 0:
            continue
        for p in wanted:
            if p not in stats.percentiles_us:
                have = ", ".join(f"p{q:g}" for q in sorted(stats.percentiles_us)) or "none"
                raise YcsbError(
                    f"YCSB output lacks the {p:g}th percentile latency of {name} "
                    f"(it printed: {have}); set hdrhistogram.percentiles to include {p:g}"
                )
    return result


def judge(
    outcome: Outcome | str,
    *,
    required_ops: Iterable[str] = (),
    required_percentiles: Iterable[float] = (99.0,),
) -> YcsbResult:
    """The result of one YCSB process, or YcsbError saying why there is none.

    A process still running when its time was up, one that vanished without an exit status
    or one that exited non-zero failed, whatever it printed: the message names that, then
    the first failure line of its output (a Java exception, "cannot connect"), else the
    output's last lines. Otherwise its output is judged by `parse_output`. A plain string is
    an output whose process exited 0."""
    if isinstance(outcome, str):
        outcome = Outcome(outcome)
    why = None
    if outcome.running:
        after = f" after {outcome.timeout_s:g} s" if outcome.timeout_s else ""
        why = f"YCSB still running{after} (stopped)"
    elif outcome.returncode is None:
        why = "YCSB process vanished without an exit status"
    elif outcome.returncode != 0:
        why = f"YCSB exited with status {outcome.returncode}"
    if why:
        failures = _failure_lines(outcome.text)
        if failures:
            raise YcsbError(f"{why}: {failures[0][:300]}")
        tail = "\n".join(outcome.text.strip().splitlines()[-5:])
        raise YcsbError(f"{why}; output ends:\n{tail}" if tail else f"{why}; no output")
    return parse_output(
        outcome.text, required_ops=required_ops, required_percentiles=required_percentiles
    )
