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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mongobench.remote import javabuild
from mongobench.ycsb.status import STATUS_INTERVAL_S

FIELD_COUNT = 10
FIELD_LENGTH = 100

DEFAULT_PERCENTILES = (50.0, 95.0, 99.0, 99.9)
# YCSB's Integer.parseInt(operationcount): bound it, maxexecutiontime ends the run anyway.
MAX_OPERATION_COUNT = 2**31 - 1
# Our binding's property for a PEM of CA certificates to trust (the Java driver ignores
# tlsCAFile in a URI): TLS on, only those CAs trusted, host names checked.
TLS_CA_FILE_PROPERTY = "mongodb.tlsCAFile"


# ----------------------------------------------------------------------------- properties


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class Workload:
    """A YCSB CoreWorkload property file. Defaults: 1 KB records (10 x 100 B), 90/10
    read/update, zipfian, HdrHistogram with p50/p95/p99/p99.9.

    ``insertstart``/``insertcount`` give one process its own key range: YCSB needs
    ``recordcount >= insertstart + insertcount``. ``histogram_prefix`` turns on HdrHistogram
    log files (``<prefix><OP>.hdr``), one set per process. ``target`` None or 0 is unthrottled.
    Prefer ``urlfile`` for URIs with credentials; either way nothing lands on a command line.
    ``tls_ca_file`` (a path on the machine running YCSB) is the CA the binding trusts for TLS.
    ``status_interval_s``: seconds between the -s status lines (whole seconds, YCSB's
    ``status.interval``), from which ycsb.status builds the phase's time series.
    """

    recordcount: int
    operationcount: int | None = None
    readproportion: float = 0.9
    updateproportion: float = 0.1
    scanproportion: float = 0.0
    insertproportion: float = 0.0
    requestdistribution: str = "zipfian"
    fieldcount: int = 10
    fieldlength: int = 100
    insertstart: int | None = None
    insertcount: int | None = None
    target: float | None = None
    threadcount: int = 1
    percentiles: Sequence[float] = DEFAULT_PERCENTILES
    url: str | None = None
    urlfile: str | None = None
    maxexecutiontime: int | None = None
    histogram_prefix: str | None = None
    batchsize: int | None = None
    tls_ca_file: str | None = None
    status_interval_s: int = STATUS_INTERVAL_S
    extra: Mapping[str, object] | None = None

    def text(self) -> str:
        """The property file's text; a ValueError names what YCSB would refuse."""
        if self.recordcount <= 0:
            raise ValueError(f"recordcount must be positive, got {self.recordcount}")
        mix = {
            "readproportion": self.readproportion,
            "updateproportion": self.updateproportion,
            "scanproportion": self.scanproportion,
            "insertproportion": self.insertproportion,
        }
        if any(v < 0 for v in mix.values()) or not math.isclose(
            sum(mix.values()), 1.0, abs_tol=1e-9
        ):
            raise ValueError(f"operation proportions must be >= 0 and sum to 1, got {mix}")
        start = self.insertstart or 0
        count = self.recordcount - start if self.insertcount is None else self.insertcount
        if start < 0 or count <= 0 or start + count > self.recordcount:
            raise ValueError(
                f"key range [{start}, {start + count}) does not fit recordcount={self.recordcount}"
            )
        operationcount = count if self.operationcount is None else self.operationcount
        if not 0 < operationcount <= MAX_OPERATION_COUNT:
            raise ValueError(f"operationcount must be in 1..{MAX_OPERATION_COUNT}")
        if self.threadcount < 1:
            raise ValueError("threadcount must be >= 1")
        if int(self.status_interval_s) < 1:
            raise ValueError(
                f"status_interval_s must be a whole number >= 1, got {self.status_interval_s}"
            )
        props: dict[str, object] = {
            "workload": "site.ycsb.workloads.CoreWorkload",
            "recordcount": self.recordcount,
            "operationcount": operationcount,
            **mix,
            "readallfields": True,
            "requestdistribution": self.requestdistribution,
            "fieldcount": self.fieldcount,
            "fieldlength": self.fieldlength,
            "threadcount": self.threadcount,
            "measurementtype": "hdrhistogram",
            "hdrhistogram.percentiles": ",".join(_fmt(float(p)) for p in self.percentiles),
            "status.interval": int(self.status_interval_s),
        }
        if self.insertstart is not None or self.insertcount is not None:
            props["insertstart"] = start
            props["insertcount"] = count
        if self.target:
            props["target"] = int(round(self.target))
        if self.maxexecutiontime:
            props["maxexecutiontime"] = int(self.maxexecutiontime)
        if self.histogram_prefix:
            props["hdrhistogram.fileoutput"] = True
            props["hdrhistogram.output.path"] = self.histogram_prefix
        if self.batchsize:
            props["batchsize"] = int(self.batchsize)
        if self.url:
            props["mongodb.url"] = self.url
        if self.urlfile:
            props["mongodb.urlfile"] = self.urlfile
        if self.tls_ca_file:
            props[TLS_CA_FILE_PROPERTY] = self.tls_ca_file
        props.update(self.extra or {})
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
