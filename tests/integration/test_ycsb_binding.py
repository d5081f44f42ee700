"""Real YCSB runs of the project's MongoDB binding against the wire-protocol stand-in."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shutil
import socket
import subprocess
import threading
import urllib.parse

import pymongo
import pytest

from mongobench.remote import javabuild

pytestmark = pytest.mark.integration

RECORDS = 2000
STARTUP_TIMEOUT_S = 90
YCSB_TIMEOUT_S = 300
HDR_PERCENTILES = "50,95,99,99.9"
PERCENTILE_METRICS = [
    "50thPercentileLatency(us)",
    "95thPercentileLatency(us)",
    "99thPercentileLatency(us)",
    "99.9PercentileLatency(us)",
]
# Distinctive enough that any occurrence in YCSB's output is a leak, in raw or URL-encoded form.
PASSWORD = "Pa55:w@rd/Secret!"
_METRIC_LINE = re.compile(r"^\[(?P<section>[^\]]+)\], (?P<metric>[^,]+), (?P<value>-?[0-9.E+-]+)$")


@dataclasses.dataclass
class Standin:
    host: str
    port: int
    log: pathlib.Path

    def uri(self, db: str, options: str = "w=1") -> str:
        return f"mongodb://{self.host}:{self.port}/{db}?{options}"


@dataclasses.dataclass
class YcsbResult:
    returncode: int
    stdout: str
    stderr: str
    metrics: dict[tuple[str, str], float]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def get(self, section: str, metric: str, default: float | None = None) -> float | None:
        return self.metrics.get((section, metric), default)

    def count(self, section: str, metric: str) -> int:
        return int(self.metrics.get((section, metric), 0))

    def returns(self) -> dict[tuple[str, str], int]:
        """{(section, status): count} for every ``[SECTION], Return=STATUS, N`` line."""
        return {
            (section, metric.removeprefix("Return=")): int(value)
            for (section, metric), value in self.metrics.items()
            if metric.startswith("Return=")
        }


def _read_listening(proc: subprocess.Popen, log: pathlib.Path) -> tuple[str, int]:
    found: list[str] = []

    def reader() -> None:
        for line in proc.stdout:
            if line.startswith("LISTENING "):
                found.append(line.split()[1])
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(STARTUP_TIMEOUT_S)
    if not found:
        raise RuntimeError(
            f"stand-in printed no LISTENING line within {STARTUP_TIMEOUT_S}s "
            f"(exit code {proc.poll()}); stderr:\n{log.read_text(errors='replace')[-4000:]}"
        )
    host, port = found[0].rsplit(":", 1)
    return host, int(port)


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Standin:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java and mvn are needed to build and run the stand-in and YCSB")
    javabuild.build()
    log = tmp_path_factory.mktemp("standin") / "stderr.log"
    with open(log, "wb") as err:  # a file, not a pipe: nobody drains stderr while tests run
        proc = subprocess.Popen(
            javabuild.standin_command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        host, port = _read_listening(proc, log)
        yield Standin(host, port, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="module")
def mongo(standin):
    client = pymongo.MongoClient(standin.host, standin.port, serverSelectionTimeoutMS=5000)
    yield client
    client.close()


@pytest.fixture
def db_name(request) -> str:
    """A database per test, so tests sharing the module's stand-in cannot see each other's data."""
    return "t_" + re.sub(r"[^A-Za-z0-9]+", "_", request.node.name).strip("_")


def _parse_metrics(stdout: str) -> dict[tuple[str, str], float]:
    metrics = {}
    for line in stdout.splitlines():
        m = _METRIC_LINE.match(line.strip())
        if m:
            metrics[(m["section"], m["metric"])] = float(m["value"])
    return metrics


def run_ycsb(phase: str, props: dict[str, object], workdir: pathlib.Path) -> YcsbResult:
    """Runs site.ycsb.Client for ``phase`` ("load" or "run") with ``props`` in a properties file."""
    base = {
        "workload": "site.ycsb.workloads.CoreWorkload",
        "measurementtype": "hdrhistogram",
        "hdrhistogram.percentiles": HDR_PERCENTILES,
        "fieldcount": 10,
        "fieldlength": 100,
    }
    prop_file = workdir / f"{phase}.properties"
    prop_file.write_text("".join(f"{k}={v}\n" for k, v in {**base, **props}.items()))
    cmd = [
        "java",
        "-cp",
        javabuild.ycsb_classpath(),
        javabuild.YCSB_CLIENT_CLASS,
        "-load" if phase == "load" else "-t",
        "-db",
        javabuild.YCSB_BINDING_CLASS,
        "-P",
        str(prop_file),
        "-s",
    ]
    proc = subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=YCSB_TIMEOUT_S,
        check=False,
    )
    return YcsbResult(proc.returncode, proc.stdout, proc.stderr, _parse_metrics(proc.stdout))


def assert_clean(result: YcsbResult, allowed=("OK", "BATCHED_OK")) -> None:
    assert result.returncode == 0, result.output[-4000:]
    assert "Return=ERROR" not in result.stdout, result.output[-4000:]
    bad = {k: v for k, v in result.returns().items() if k[1] not in allowed}
    assert not bad, f"unexpected statuses {bad}\n{result.output[-4000:]}"
    assert result.get("OVERALL", "Throughput(ops/sec)", 0) > 0


def assert_percentiles(result: YcsbResult, section: str) -> None:
    for metric in PERCENTILE_METRICS:
        assert (section, metric) in result.metrics, f"{section} lacks {metric}"


def expected_insert_statuses(records: int, threads: int, batch: int) -> tuple[int, int]:
    """(OK, BATCHED_OK): YCSB splits the records over threads, and the insert that fills a batch
    reports OK for it; the partial batch left in each thread is written in cleanup()."""
    shares = [records // threads + (1 if t < records % threads else 0) for t in range(threads)]
    ok = sum(n // batch for n in shares)
    return ok, records - ok


def load(standin, db_name, tmp_path, batch=100, threads=1, **extra) -> YcsbResult:
    props = {
        "mongodb.url": standin.uri(db_name),
        "recordcount": RECORDS,
        "batchsize": batch,
        "threadcount": threads,
        **extra,
    }
    result = run_ycsb("load", props, tmp_path)
    assert_clean(result)
    return result


@pytest.mark.parametrize(
    "batch,threads",
    [(1, 1), (100, 1), (300, 2)],
    ids=["batch1", "batch100", "batch300-2threads-partial"],
)
def test_load_inserts_every_record(standin, mongo, db_name, tmp_path, batch, threads):
    result = load(standin, db_name, tmp_path, batch=batch, threads=threads)

    assert result.count("INSERT", "Operations") == RECORDS
    ok, batched = expected_insert_statuses(RECORDS, threads, batch)
    assert result.count("INSERT", "Return=OK") == ok
    assert result.count("INSERT", "Return=BATCHED_OK") == batched
    assert_percentiles(result, "INSERT")

    coll = mongo[db_name]["usertable"]
    assert coll.count_documents({}) == RECORDS
    doc = coll.find_one({})
    fields = {k: v for k, v in doc.items() if k != "_id"}
    assert len(fields) == 10
    assert all(isinstance(v, bytes) and len(v) == 100 for v in fields.values())


def test_workloada_run(standin, mongo, db_name, tmp_path):
    load(standin, db_name, tmp_path)
    ops = 4000
    result = run_ycsb(
        "run",
        {
            "mongodb.url": standin.uri(db_name),
            "recordcount": RECORDS,
            "operationcount": ops,
            "readproportion": 0.5,
            "updateproportion": 0.5,
            "requestdistribution": "zipfian",
            "threadcount": 2,
        },
        tmp_path,
    )
    assert_clean(result, allowed=("OK",))
    reads, updates = (
        result.count("READ", "Operations"),
        result.count("UPDATE", "Operations"),
    )
    assert reads + updates == ops
    assert reads > 0 and updates > 0
    assert result.count("READ", "Return=OK") == reads
    assert result.count("UPDATE", "Return=OK") == updates
    assert_percentiles(result, "READ")
    assert_percentiles(result, "UPDATE")
    assert mongo[db_name]["usertable"].count_documents({}) == RECORDS


def test_scan_insert_rmw_run(standin, mongo, db_name, tmp_path):
    load(standin, db_name, tmp_path)
    ops = 1500
    result = run_ycsb(
        "run",
        {
            "mongodb.url": standin.uri(db_name),
            "recordcount": RECORDS,
            "operationcount": ops,
            "readproportion": 0.25,
            "updateproportion": 0.15,
            "scanproportion": 0.25,
            "insertproportion": 0.2,
            "readmodifywriteproportion": 0.15,
            "maxscanlength": 20,
            "requestdistribution": "zipfian",
            "threadcount": 2,
        },
        tmp_path,
    )
    assert_clean(result, allowed=("OK",))
    per_op = {s: result.count(s, "Operations") for s in ("READ", "UPDATE", "SCAN", "INSERT")}
    assert all(per_op.values()), per_op
    # READ-MODIFY-WRITE is reported on its own and also as one READ plus one UPDATE.
    rmw = result.count("READ-MODIFY-WRITE", "Operations")
    assert rmw > 0
    assert sum(per_op.values()) - rmw == ops
    for section, n in per_op.items():
        assert result.count(section, "Return=OK") == n, section
    assert_percentiles(result, "SCAN")
    # Run-phase inserts use fresh keys, so each one adds a document.
    assert mongo[db_name]["usertable"].count_documents({}) == RECORDS + per_op["INSERT"]


def test_commandline_crud_with_delete(standin, mongo, db_name):
    """CoreWorkload never deletes, so drive every DB method through YCSB's CommandLine shell."""
    # Expected statuses: OK for the first seven commands, then NOT_FOUND for the last three.
    script = """\
insert k1 f1=hello f2=world
insert k2 f1=x
read k1 f2
update k1 f1=bye
read k1
scan k1 5
delete k1
read k1
delete k1
scan zzz 3
quit
"""
    cmd = [
        "java",
        "-cp",
        javabuild.ycsb_classpath(),
        "site.ycsb.CommandLine",
        "-db",
        javabuild.YCSB_BINDING_CLASS,
        "-p",
        f"mongodb.url={standin.uri(db_name)}",
        "-table",
        "cli",
    ]
    proc = subprocess.run(
        cmd, input=script, capture_output=True, check=False, text=True, timeout=120
    )
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    statuses = re.findall(r"(?:Result|Return code|Return result): (\w+)", out)
    assert statuses == ["OK"] * 7 + ["NOT_FOUND"] * 3, out
    assert "f2=world" in out and "f1=bye" in out
    assert "Record 1" in out  # the scan returned k1 and k2, in _id order

    coll = mongo[db_name]["cli"]
    assert coll.find_one({"_id": "k1"}) is None
    assert coll.find_one({"_id": "k2"}) == {
        "_id": "k2",
        "f1": b"x",
    }  # values stored as binary


def test_urlfile_wins_over_url(standin, mongo, db_name, tmp_path):
    uri_file = tmp_path / "uri"
    uri_file.write_text(standin.uri(db_name) + "\n")
    dead = f"mongodb://127.0.0.1:{_free_port()}/wrong?serverSelectionTimeoutMS=1000"
    result = run_ycsb(
        "load",
        {
            "mongodb.url": dead,
            "mongodb.urlfile": uri_file,
            "recordcount": 50,
            "batchsize": 1,
        },
        tmp_path,
    )
    assert_clean(result)
    assert result.count("INSERT", "Return=OK") == 50
    assert mongo[db_name]["usertable"].count_documents({}) == 50
    assert "wrong" not in mongo.list_database_names()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("target", ["unreachable", "auth-rejected"])
@pytest.mark.parametrize("source", ["urlfile", "url"])
def test_password_never_printed(standin, tmp_path, target, source):
    port = _free_port() if target == "unreachable" else standin.port
    secret = urllib.parse.quote(PASSWORD, safe="")
    uri = (
        f"mongodb://bench:{secret}@127.0.0.1:{port}/ycsb"
        "?authSource=admin&serverSelectionTimeoutMS=1500&connectTimeoutMS=1000"
    )
    props = {"recordcount": 10}
    if source == "urlfile":
        (tmp_path / "uri").write_text(uri)
        props["mongodb.urlfile"] = tmp_path / "uri"
    else:
        props["mongodb.url"] = uri  # in the properties file, never on the command line
    result = run_ycsb("load", props, tmp_path)

    assert "cannot connect to mongodb://bench:***@127.0.0.1" in result.output, result.output
    assert result.count("INSERT", "Return=OK") == 0
    for leaked in (PASSWORD, secret, "Secret"):
        assert leaked not in result.output, f"{leaked!r} printed:\n{result.output}"
