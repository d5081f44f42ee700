"""YCSB helpers: property files, command lines and output parsing. No PKB imports.

YCSB prints its summary as ``[SECTION], Stat(unit), value`` lines. Versions differ:
0.1.x prints ``95thPercentileLatency(ms)`` / ``99thPercentileLatency(ms)`` and integer
return codes (``Return=0`` is success), 0.17 prints microsecond percentiles chosen by
``hdrhistogram.percentiles`` (``99.9`` is spelt ``99.9PercentileLatency(us)``) and status
names (``Return=OK``). A YCSB process that could not connect still exits 0 and prints an
``[OVERALL]`` block with zero operations, so success is judged from the output only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mongobench import javabuild

DEFAULT_PERCENTILES = (50.0, 95.0, 99.0, 99.9)
# YCSB's Integer.parseInt(operationcount): bound it, maxexecutiontime ends the run anyway.
MAX_OPERATION_COUNT = 2**31 - 1
# Our binding's property for a PEM of CA certificates to trust (the Java driver ignores
# tlsCAFile in a URI): TLS on, only those CAs trusted, host names checked.
TLS_CA_FILE_PROPERTY = "mongodb.tlsCAFile"

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


class YcsbError(RuntimeError):
    """YCSB's output shows a failed or incomplete run."""


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
        stats = self.ops.get(op)
        return stats.p99_ms if stats else None

    @property
    def p99_by_op_ms(self) -> dict[str, float]:
        return {name: s.p99_ms for name, s in self.ops.items() if s.p99_ms is not None}

    @property
    def not_found(self) -> int:
        return sum(s.not_found for s in self.ops.values())


# ----------------------------------------------------------------------------- properties


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def workload_properties(
    *,
    recordcount: int,
    operationcount: int | None = None,
    readproportion: float = 0.9,
    updateproportion: float = 0.1,
    scanproportion: float = 0.0,
    insertproportion: float = 0.0,
    requestdistribution: str = "zipfian",
    fieldcount: int = 10,
    fieldlength: int = 100,
    insertstart: int | None = None,
    insertcount: int | None = None,
    target: float | None = None,
    threadcount: int = 1,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    url: str | None = None,
    urlfile: str | None = None,
    maxexecutiontime: int | None = None,
    histogram_prefix: str | None = None,
    batchsize: int | None = None,
    tls_ca_file: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> str:
    """A YCSB CoreWorkload property file (text). Defaults: 1 KB records (10 x 100 B), 90/10
    read/update, zipfian, HdrHistogram with p50/p95/p99/p99.9.

    ``insertstart``/``insertcount`` give one process its own key range: YCSB needs
    ``recordcount >= insertstart + insertcount``. ``histogram_prefix`` turns on HdrHistogram
    log files (``<prefix><OP>.hdr``), one set per process. ``target`` None or 0 is unthrottled.
    Prefer ``urlfile`` for URIs with credentials; either way nothing lands on a command line.
    ``tls_ca_file`` (a path on the machine running YCSB) is the CA the binding trusts for TLS.
    """
    if recordcount <= 0:
        raise ValueError(f"recordcount must be positive, got {recordcount}")
    mix = {
        "readproportion": readproportion,
        "updateproportion": updateproportion,
        "scanproportion": scanproportion,
        "insertproportion": insertproportion,
    }
    if any(v < 0 for v in mix.values()) or not math.isclose(sum(mix.values()), 1.0, abs_tol=1e-9):
        raise ValueError(f"operation proportions must be >= 0 and sum to 1, got {mix}")
    start = insertstart or 0
    count = recordcount - start if insertcount is None else insertcount
    if start < 0 or count <= 0 or start + count > recordcount:
        raise ValueError(
            f"key range [{start}, {start + count}) does not fit recordcount={recordcount}"
        )
    if operationcount is None:
        operationcount = count
    if not 0 < operationcount <= MAX_OPERATION_COUNT:
        raise ValueError(f"operationcount must be in 1..{MAX_OPERATION_COUNT}")
    if threadcount < 1:
        raise ValueError("threadcount must be >= 1")
    props: dict[str, object] = {
        "workload": "site.ycsb.workloads.CoreWorkload",
        "recordcount": recordcount,
        "operationcount": operationcount,
        **mix,
        "readallfields": True,
        "requestdistribution": requestdistribution,
        "fieldcount": fieldcount,
        "fieldlength": fieldlength,
        "threadcount": threadcount,
        "measurementtype": "hdrhistogram",
        "hdrhistogram.percentiles": ",".join(_fmt(float(p)) for p in percentiles),
    }
    if insertstart is not None or insertcount is not None:
        props["insertstart"] = start
        props["insertcount"] = count
    if target:
        props["target"] = int(round(target))
    if maxexecutiontime:
        props["maxexecutiontime"] = int(maxexecutiontime)
    if histogram_prefix:
        props["hdrhistogram.fileoutput"] = True
        props["hdrhistogram.output.path"] = histogram_prefix
    if batchsize:
        props["batchsize"] = int(batchsize)
    if url:
        props["mongodb.url"] = url
    if urlfile:
        props["mongodb.urlfile"] = urlfile
    if tls_ca_file:
        props[TLS_CA_FILE_PROPERTY] = tls_ca_file
    props.update(extra or {})
    return "".join(f"{k}={_fmt(v)}\n" for k, v in props.items())


def ycsb_command(
    classpath: str,
    phase: str,
    props_path: str,
    java: str = "java",
    extra_jvm: Sequence[str] = (),
) -> list[str]:
    """argv of one YCSB client process (``phase`` "load" or "run") with our MongoDB binding."""
    flag = {"load": "-load", "run": "-t"}.get(phase)
    if flag is None:
        raise ValueError(f"phase must be 'load' or 'run', got {phase!r}")
    return [
        java,
        *extra_jvm,
        "-cp",
        classpath,
        javabuild.YCSB_CLIENT_CLASS,
        flag,
        "-db",
        javabuild.YCSB_BINDING_CLASS,
        "-P",
        str(props_path),
        "-s",
    ]


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


# ----------------------------------------------------------------------------- histogram logs


def merge_histogram_logs(texts: Iterable[str]):
    """One HdrHistogram (microseconds) from YCSB ``.hdr`` interval logs of several processes,
    so a step's p99 is exact over all processes rather than a max of per-process p99s."""
    from hdrh.histogram import HdrHistogram

    from mongobench import latency

    merged = latency.new_histogram()
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", '"')):
                continue
            fields = line.split(",")
            if fields[0].startswith("Tag="):
                fields = fields[1:]
            if len(fields) < 4:
                raise ValueError(f"not an HdrHistogram log line: {line[:80]!r}")
            merged.add(HdrHistogram.decode(fields[3]))
    return merged


def histogram_percentile_ms(hist, p: float) -> float | None:
    """Percentile in ms with Java HdrHistogram's rank rule (ceil), so merged values agree with
    what YCSB prints; the Python library rounds the rank and can land one value lower."""
    total = hist.get_total_count()
    if total == 0:
        return None
    rank = max(1, math.ceil(p / 100.0 * total))
    seen = 0
    for item in hist.get_recorded_iterator():
        seen += item.count_at_value_iterated_to
        if seen >= rank:
            return hist.get_highest_equivalent_value(item.value_iterated_to) / 1000.0
    return hist.get_max_value() / 1000.0
