"""One stress step: YCSB processes and properties, and the result merged from their outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from mongobench.deploy.mongod import FIRST_PORT, instance_port
from mongobench.stress.settings import LOAD_THREADS, StressSettings
from mongobench.ycsb import merge, parse, properties, status

# java/ycsb-binding: CoreWorkload that ends its run early when its stop file appears
STOPPABLE_WORKLOAD = "io.github.mongobench.ycsb.StoppableCoreWorkload"
STOP_FILE_PROPERTY = "mongobench.stopfile"


class StepError(RuntimeError):
    """A step whose measurement cannot be trusted: failed YCSB process, missing p99, dead mongod."""


# ----------------------------------------------------------------------------- step plans


@dataclass(frozen=True)
class YcsbProcess:
    """One YCSB process: its instance, the client VM (index) that runs it, its key range and
    its file stem (`<stem>.properties`, `.out`, `.err`, `<stem>-<OP>.hdr`), unique per run."""

    phase: str  # "load" or "run"
    instance: int
    client: int
    host: str
    port: int
    insertstart: int
    insertcount: int
    recordcount: int
    stem: str

    def uri(self, options: str = "") -> str:
        return f"mongodb://{self.host}:{self.port}/ycsb" + (f"?{options}" if options else "")


def _url(proc: YcsbProcess, url: str | None, urlfile: str | None, tls_ca_file: str | None):
    """The process's own URI unless one is given; tls=true with a CA (the binding then trusts
    that CA only and checks that the certificate names proc.host)."""
    if url or urlfile:
        return url
    return proc.uri("tls=true" if tls_ca_file else "")


@dataclass(frozen=True)
class StepPlan:
    step: int  # = number of instances and of YCSB run processes
    instances: tuple[int, ...]
    load: tuple[YcsbProcess, ...]  # instances not loaded yet, loaded in parallel before the step
    run: tuple[YcsbProcess, ...]
    copy: tuple[int, ...] = ()  # instances that get copies of the source's data files
    source: int | None = None  # with copies: the instance whose files are copied

    @property
    def clients_used(self) -> int:
        return len({p.client for p in self.run})


def _process(phase, instance, client, hosts, records, first_port, stem, keys_of=None):
    keys = instance if keys_of is None else keys_of  # whose key range the instance holds
    return YcsbProcess(
        phase=phase,
        instance=instance,
        client=client,
        host=hosts[instance % len(hosts)],
        port=instance_port(instance, first_port),
        insertstart=keys * records,
        insertcount=records,
        recordcount=(keys + 1) * records,
        stem=stem,
    )


def _slices(proc: YcsbProcess, parts: int, clients: int) -> tuple[YcsbProcess, ...]:
    """`proc`'s key range in `parts` load processes of (nearly) equal slices."""
    size, extra = divmod(proc.insertcount, parts)
    out, start = [], proc.insertstart
    for j in range(parts):
        count = size + (1 if j < extra else 0)
        out.append(
            dataclasses.replace(
                proc,
                client=j % clients,
                insertstart=start,
                insertcount=count,
                stem=f"{proc.stem}-p{j}",
            )
        )
        start += count
    return tuple(out)


@dataclass(frozen=True)
class Copying:
    """Data seeding by copy (stress.seeding) in a step's plan: YCSB loads only `source`, the
    other instances get copies of its data files. `upto` > the step's n copies to the
    instances below it as well (clones cost nothing: one round for the run); `loaders` > 1
    loads the source with that many YCSB processes, each its own slice of the key range."""

    source: int = 0
    upto: int = 0
    loaders: int = 1


def plan_step(
    n: int,
    *,
    loaded: Collection[int],
    clients: int,
    records: int,
    hosts: Sequence[str],
    first_port: int = FIRST_PORT,
    copying: Copying | None = None,
) -> StepPlan:
    """Step n: instances 0..n-1, each driven by its own YCSB process; process i runs on client
    VM i mod `clients`. Instances missing from `loaded` get a load process first (spread over
    the clients the same way). `hosts` are the server's addresses (several NICs: instance i
    is reached on hosts[i mod len]).

    With `copying` (data seeding by copy, stress.seeding) only its source is ever loaded
    by YCSB; the other missing instances are in `copy` (they get copies of its data files)
    and every instance holds, and is driven on, the source's key range. Instances below
    `copying.upto` > n are copied to as well. `copying.loaders` > 1 loads the source with
    that many YCSB processes, each its own slice of the key range (`load-i000-p<j>`, on
    client VM j mod `clients`), where a server absorbs parallel loaders (the anchor loads
    its instances in parallel too)."""
    source_loaders = copying.loaders if copying else 1
    if n < 1 or clients < 1 or records < 1 or not hosts or source_loaders < 1:
        raise ValueError(
            "need n >= 1, clients >= 1, records >= 1, source_loaders >= 1 and at least one host"
        )
    copy_from = copying.source if copying else None
    if copy_from is not None and not 0 <= copy_from < n:
        raise ValueError(f"the copy source {copy_from} is not one of the step's instances")
    todo = [i for i in range(n) if i not in set(loaded)]
    copies: tuple[int, ...] = ()
    if copying:
        ahead = [i for i in range(n, copying.upto) if i not in set(loaded)]
        copies = tuple(i for i in [*todo, *ahead] if i != copy_from)
        todo = [i for i in todo if i == copy_from]
    loads = tuple(
        _process("load", i, j % clients, hosts, records, first_port, f"load-i{i:03d}", copy_from)
        for j, i in enumerate(todo)
    )
    if copying and loads and source_loaders > 1:
        loads = _slices(loads[0], min(source_loaders, records), clients)
    runs = tuple(
        _process(
            "run", i, i % clients, hosts, records, first_port, f"step{n:03d}-i{i:03d}", copy_from
        )
        for i in range(n)
    )
    return StepPlan(
        step=n, instances=tuple(range(n)), load=loads, run=runs, copy=copies, source=copy_from
    )


def run_properties(
    proc: YcsbProcess,
    settings: StressSettings,
    *,
    directory: str,
    url: str | None = None,
    urlfile: str | None = None,
    tls_ca_file: str | None = None,
    stop_file: str | None = None,
    extra: Mapping | None = None,
) -> str:
    """90 % read / 10 % update, zipfian, 1 KB records, on the process's own key range, ended
    by the settings' `step_seconds`, offering `target_ops` ops/s with `run_threads` threads.
    With `histograms`, HdrHistogram logs go to `<directory>/<stem>-<OP>.hdr` (step_result
    then merges them exactly); that needs HdrHistogram >= 2.1.10 on the YCSB classpath: YCSB
    0.17's 2.1.4 needs JAXB, absent from Java 11+, and the run fails.
    With `tls_ca_file` (the CA certificate on the client VM) the process connects with TLS.
    With `stop_file` (a path on the client VM) the process ends early, as at its
    `step_seconds`, once that file exists (the steady-state stop, stress.steady).
    `status_interval_s`: seconds between YCSB's status lines (the step's time series)."""
    if stop_file:
        extra = {"workload": STOPPABLE_WORKLOAD, STOP_FILE_PROPERTY: stop_file, **(extra or {})}
    return properties.Workload(
        recordcount=proc.recordcount,
        insertstart=proc.insertstart,
        insertcount=proc.insertcount,
        operationcount=properties.MAX_OPERATION_COUNT,
        readproportion=0.9,
        updateproportion=0.1,
        requestdistribution="zipfian",
        target=settings.target_ops,
        threadcount=settings.run_threads,
        maxexecutiontime=settings.step_seconds,
        url=_url(proc, url, urlfile, tls_ca_file),
        urlfile=urlfile,
        histogram_prefix=f"{directory.rstrip('/')}/{proc.stem}-" if settings.histograms else None,
        tls_ca_file=tls_ca_file,
        status_interval_s=settings.status_interval_s,
        extra=extra,
    ).text()


def load_properties(
    proc: YcsbProcess,
    *,
    threads: int = LOAD_THREADS,
    batchsize: int | None = None,
    url: str | None = None,
    urlfile: str | None = None,
    tls_ca_file: str | None = None,
    extra: Mapping | None = None,
) -> str:
    """Inserts the instance's key range [insertstart, insertstart + records), unthrottled
    (with TLS when `tls_ca_file` is given, as run_properties)."""
    return properties.Workload(
        recordcount=proc.recordcount,
        insertstart=proc.insertstart,
        insertcount=proc.insertcount,
        operationcount=proc.insertcount,
        threadcount=threads,
        batchsize=batchsize,
        url=_url(proc, url, urlfile, tls_ca_file),
        urlfile=urlfile,
        tls_ca_file=tls_ca_file,
        extra=extra,
    ).text()


# ----------------------------------------------------------------------------- step results


@dataclass(frozen=True)
class ProcessOutput:
    """What one YCSB run process left: exit code, stdout+stderr, optional `.hdr` logs by op."""

    instance: int
    client: int
    returncode: int | None
    output: str
    histograms: Mapping[str, str] = field(default_factory=dict)
    running: bool = False  # still running when its time was up (then stopped)
    timeout_s: float | None = None


@dataclass(frozen=True)
class StepResult:
    instances: int
    throughput: float  # ops/s, summed over processes
    read_p99_ms: float | None
    update_p99_ms: float | None = None
    clients: int = 1
    processes: int = 1
    operations: int = 0
    p99_source: str = ""
    process_throughputs: tuple[float, ...] = ()
    # p50 per op, from the same source as the p99s (merged histograms or the highest printed)
    read_p50_ms: float | None = None
    update_p50_ms: float | None = None
    # the step's time series from its processes' YCSB status lines (ycsb.status)
    series: dict | None = field(default=None, compare=False)

    def metadata(self) -> dict:
        return {
            "instances": self.instances,
            "clients": self.clients,
            "ycsb_processes": self.processes,
            "operations": self.operations,
            "p99_read_latency_ms": self.read_p99_ms,
            "p99_update_latency_ms": self.update_p99_ms,
            "p50_read_latency_ms": self.read_p50_ms,
            "p50_update_latency_ms": self.update_p50_ms,
            "p99_source": self.p99_source,
        }


def step_result(
    n: int,
    outputs: Sequence[ProcessOutput],
    *,
    dead_instances: Mapping[int, str] | Collection[int] = (),
    required_ops: Sequence[str] = ("READ", "UPDATE"),
    first_port: int = FIRST_PORT,
    status_interval_s: int = status.STATUS_INTERVAL_S,
) -> StepResult:
    """Combines the step's YCSB outputs; raises StepError naming the process or instance.
    The step's time series comes from their status lines, every `status_interval_s`.

    Throughput is the sum over processes. p99 per op is exact over all processes when every
    process supplied its histogram log for that op, otherwise the largest per-process p99 (an
    upper bound; `p99_source` says which). NOT_FOUND reads mean an instance lacks its data.
    """
    if dead_instances:
        detail = dead_instances if isinstance(dead_instances, Mapping) else {}
        names = ", ".join(
            f"{i} (port {instance_port(i, first_port)}{': ' + detail[i] if i in detail else ''})"
            for i in sorted(dead_instances)
        )
        raise StepError(f"step {n}: mongod instance(s) not running after the step: {names}")
    if sorted(o.instance for o in outputs) != list(range(n)):
        got = sorted(o.instance for o in outputs)
        raise StepError(f"step {n}: expected one YCSB output per instance 0..{n - 1}, got {got}")
    parsed = []
    for o in outputs:
        where = f"step {n}: YCSB process for instance {o.instance} on client {o.client}"
        try:
            res = parse.judge(
                parse.Outcome(o.output, o.returncode, o.running, o.timeout_s),
                required_ops=required_ops,
            )
        except parse.YcsbError as exc:
            raise StepError(f"{where}: {exc}") from exc
        if res.not_found:
            raise StepError(
                f"{where}: {res.not_found} operations found no document; instance "
                f"{o.instance} lacks (part of) its data"
            )
        parsed.append(res)

    histograms = [o.histograms for o in outputs]
    read, source = merge.op_p99(parsed, histograms, "READ")
    read_p50 = merge.op_percentile(parsed, histograms, "READ", 50.0)[0]
    update = update_p50 = None
    if all("UPDATE" in r.ops for r in parsed):
        update = merge.op_p99(parsed, histograms, "UPDATE")[0]
        update_p50 = merge.op_percentile(parsed, histograms, "UPDATE", 50.0)[0]
    if read is None:
        raise StepError(f"step {n}: no READ p99 latency in the YCSB outputs")
    return StepResult(
        instances=n,
        throughput=sum(r.throughput for r in parsed),
        read_p99_ms=read,
        update_p99_ms=update,
        clients=len({o.client for o in outputs}),
        processes=len(outputs),
        operations=sum(r.operations for r in parsed),
        p99_source=source,
        process_throughputs=tuple(r.throughput for r in parsed),
        read_p50_ms=read_p50,
        update_p50_ms=update_p50,
        series=status.series([o.output for o in outputs], status_interval_s),
    )


def load_result(
    proc: YcsbProcess,
    returncode: int | None,
    output: str,
    *,
    running: bool = False,
    timeout_s: float | None = None,
) -> parse.YcsbResult:
    """Checks one load process: finished (not `running` when its time was up) with exit
    status 0, no failure in its output (parse.judge), and exactly its key range inserted (a
    short load would make later reads NOT_FOUND). Raises StepError."""
    last = proc.insertstart + proc.insertcount - 1
    where = (
        f"loading instance {proc.instance} (port {proc.port}, keys {proc.insertstart}..{last}) "
        f"from client {proc.client}"
    )
    try:
        res = parse.judge(
            parse.Outcome(output, returncode, running, timeout_s),
            required_ops=["INSERT"],
            required_percentiles=(),
        )
    except parse.YcsbError as exc:
        raise StepError(f"{where}: {exc}") from exc
    done = res.ops["INSERT"].operations
    if done != proc.insertcount:
        raise StepError(f"{where}: {done} records inserted, expected {proc.insertcount}")
    return res
