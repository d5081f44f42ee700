"""Atlas process and disk measurements per variant window, against the local Admin API fake."""

import urllib.parse

import pytest
from atlas_fake import PRIVATE, PROJECT, PUBLIC, serve

from mongobench.core.units import MiB
from mongobench.deploy.atlas import api, measurements
from mongobench.deploy.atlas import cluster as atlas_cluster
from mongobench.reports import results

BASE = 1_800_000_000  # a whole minute (epoch seconds)
SPEC = atlas_cluster.ClusterSpec("bench-m30", "M30")


@pytest.fixture
def fake():
    with serve() as state:
        yield state


def make_client(fake, sleeps=None, **kw):
    sleep = sleeps.append if sleeps is not None else (lambda _: None)
    retry = api.Retry(**kw)
    credentials = api.Credentials(PUBLIC, PRIVATE)
    return api.AtlasClient(PROJECT, credentials, base_url=fake.base, sleep=sleep, retry=retry)


def idle_cluster(fake, client):
    client.create_cluster(SPEC)
    return client.wait_for_idle(SPEC.name, poll=0, sleep=lambda _: None)


def variant(label, start, duration, **extra):
    return {
        "status": "ok",
        "experiment": "insert_docsize",
        "label": label,
        "start": start,
        "duration_s": duration,
        "docs": 1000,
        "bytes": 1000 * 1024,
        "ops": {"insert": 1000},
        "errors": {},
        **extra,
    }


def run_doc():
    return {
        "results": [
            variant("1", BASE + 5, 50),  # inside minute 0
            variant("4", BASE + 65, 100),  # overlaps minutes 1 and 2
            {"status": "failed", "experiment": "insert_docsize", "label": "8", "error": "x"},
        ]
    }


def primary_of(fake):
    return next(p["id"] for p in fake.processes[SPEC.name] if p["typeName"] == "REPLICA_PRIMARY")


def by_minute(fake):
    """The primary's CPU user grows by 10 points a minute; everything else is the default."""
    default = fake.measure

    def measure(pid, name, t):
        if name == measurements.CPU_USER and pid == primary_of(fake):
            return 20.0 + 10.0 * (t - BASE) // 60
        return default(pid, name, t)

    fake.measure = measure


def measurement_calls(fake):
    return [r[1] for r in fake.requests if "Authorization" in r[2] and "/measurements" in r[1]]


def test_each_variant_gets_the_seed_figures_of_its_window(fake):
    client = make_client(fake)
    cluster = idle_cluster(fake, client)
    by_minute(fake)
    run = run_doc()
    measurements.attach(run, client, cluster, settle_s=0, clock=lambda: BASE + 10_000)
    first, second, failed = run["results"]
    primary = primary_of(fake)
    assert "atlas_server" not in failed

    a = first["atlas_server"]
    assert a["process"] == primary and a["granularity"] == "PT1M" and a["partition"] == "data"
    assert a["points"] == 1
    assert a["cpu_pct"] == pytest.approx(20 + 10)  # user + kernel
    assert a["iowait_pct"] == pytest.approx(5)
    assert a["iops"] == pytest.approx(3000)
    assert a["write_mb_s"] == pytest.approx(50) and a["read_mb_s"] == pytest.approx(2)
    assert a["op_exec_writes_ms"] == pytest.approx(0.8)
    # Two minutes overlap the second variant: the mean of (30+10) and (40+10).
    assert second["atlas_server"]["points"] == 2
    assert second["atlas_server"]["cpu_pct"] == pytest.approx(45)
    # Every member is kept; the busiest (the primary) is the variant's figure.
    assert set(second["atlas_server_hosts"]) == {p["id"] for p in fake.processes[SPEC.name]}
    secondary = next(h for h in second["atlas_server_hosts"] if h != primary)
    assert second["atlas_server_hosts"][secondary]["cpu_pct"] == pytest.approx(15)

    # The run's span is read once per process (process + disk), not once per variant.
    calls = measurement_calls(fake)
    assert len(calls) == 2 * 3
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(calls[0]).query)
    assert query["granularity"] == ["PT1M"]
    assert query["start"] == [measurements.iso(BASE)]
    assert query["end"] == [measurements.iso(BASE + 180)]  # widened to whole minutes
    assert set(query["m"]) == set(measurements.PROCESS_METRICS)
    disk = next(c for c in calls if "/disks/data/" in c)
    assert set(urllib.parse.parse_qs(urllib.parse.urlsplit(disk).query)["m"]) == set(
        measurements.DISK_METRICS
    )


def test_report_resource_usage_reads_the_atlas_figures(fake):
    client = make_client(fake)
    cluster = idle_cluster(fake, client)
    run = run_doc()
    measurements.attach(run, client, cluster, settle_s=0, clock=lambda: BASE + 10_000)
    figs = results.figures(run["results"][0])
    assert figs["cpu_pct"] == pytest.approx(50)
    assert figs["iowait_pct"] == pytest.approx(5)
    assert figs["os_iops"] == pytest.approx(3000)
    assert figs["os_write_mb_s"] == pytest.approx(50)
    assert figs["os_read_mb_s"] == pytest.approx(2)
    assert figs["steal_pct"] is None  # Atlas has no steal figure: n/a, not zero
    # No serverStatus counters in this result: the Atlas write execution time, labelled.
    assert figs["avg_latency_ms"] == pytest.approx(0.8)
    samples = results.to_samples(dict(run, scale="smoke"))
    avg = next(s for s in samples if s["metric"] == "Average Op Latency")
    assert avg["metadata"]["latency_source"] == "atlas OP_EXECUTION_TIME_WRITES"
    cpu = next(s for s in samples if s["metric"] == "Server CPU Usage")
    assert cpu["metadata"]["server_metrics_source"] == "atlas measurements (PT1M)"
    assert cpu["metadata"]["atlas_process"] == primary_of(fake)


def test_rate_limit_is_retried_after_retry_after(fake):
    sleeps = []
    client = make_client(fake, sleeps)
    cluster = idle_cluster(fake, client)
    fake.faults.append(("GET", "/measurements", 429, False, {"Retry-After": "7"}))
    run = run_doc()
    measurements.attach(run, client, cluster, settle_s=0, clock=lambda: BASE + 10_000)
    assert 7.0 in sleeps
    assert run["results"][0]["atlas_server"]["cpu_pct"] == pytest.approx(50)
    assert not fake.faults


def test_waits_for_the_last_interval_to_be_published(fake):
    client = make_client(fake)
    cluster = idle_cluster(fake, client)
    waited = []
    run = run_doc()
    last_end = BASE + 165
    measurements.attach(
        run, client, cluster, settle_s=90, sleep=waited.append, clock=lambda: last_end
    )
    assert waited == [90]


def test_unpublished_intervals_are_missing_not_zero(fake):
    client = make_client(fake)
    cluster = idle_cluster(fake, client)
    fake.published_until = BASE + 60  # minutes 1 and 2 are still null
    run = run_doc()
    measurements.attach(run, client, cluster, settle_s=0, clock=lambda: BASE + 10_000)
    first, second, _ = run["results"]
    assert first["atlas_server"]["cpu_pct"] == pytest.approx(50)
    assert "atlas_server" not in second
    assert "no Atlas data point" in second["atlas_error"]
    figs = results.figures(second)
    assert figs["cpu_pct"] is None and figs["avg_latency_ms"] is None


def test_api_failure_keeps_the_results_and_says_why(fake):
    client = make_client(fake, max_attempts=2)
    cluster = idle_cluster(fake, client)
    fake.faults += [("GET", "/measurements", 500, False)] * 2
    run = run_doc()
    measurements.attach(run, client, cluster, settle_s=0, clock=lambda: BASE + 10_000)
    for res in run["results"][:2]:
        assert "atlas_server" not in res
        assert "HTTP 500" in res["atlas_error"]
    samples = results.to_samples(dict(run, scale="smoke"))
    md = next(s["metadata"] for s in samples if s["metric"] == "Document Throughput")
    assert "HTTP 500" in md["atlas_measurements_error"]
    assert "cpu_pct" in md["missing_metrics"].split(",")
    assert "Server CPU Usage" not in {s["metric"] for s in samples}


def test_processes_of_other_clusters_are_left_out(fake):
    client = make_client(fake)
    cluster = idle_cluster(fake, client)
    client.create_cluster(atlas_cluster.ClusterSpec("other", "M10"))
    client.wait_for_idle("other", poll=0, sleep=lambda _: None)
    ids = {p["id"] for p in measurements.cluster_processes(client, cluster)}
    assert ids == {p["id"] for p in fake.processes[SPEC.name]}
    # Matched by the connection string's hosts as well as by alias.
    only_hosts = dict(cluster, name="renamed")
    assert {p["id"] for p in measurements.cluster_processes(client, only_hosts)} == {
        primary_of(fake)
    }


def test_units_are_converted_and_unknown_units_refused():
    doc = {
        "measurements": [
            {
                "name": measurements.OP_TIME_WRITES,
                "units": "MICROSECONDS",
                "dataPoints": [{"timestamp": "2027-01-15T08:00:00Z", "value": 1500}],
            },
            {
                "name": measurements.DISK_WRITE,
                "units": "KILOBYTES_PER_SECOND",
                "dataPoints": [{"timestamp": "2027-01-15T08:00:00Z", "value": None}],
            },
        ]
    }
    series = measurements._series(doc, measurements.PROCESS_METRICS + measurements.DISK_METRICS)
    t = measurements.parse_iso("2027-01-15T08:00:00Z")
    assert series[measurements.OP_TIME_WRITES] == [(t, 1.5)]
    assert series[measurements.DISK_WRITE] == [(t, None)]
    doc["measurements"][0]["units"] = "PERCENT"
    with pytest.raises(ValueError, match="unexpected units"):
        measurements._series(doc, measurements.PROCESS_METRICS)
    summary = measurements.summarize(
        {measurements.DISK_WRITE: [(t, 3.0 * MiB), (t + 60, None)]}, t, t + 120, 60
    )
    assert summary["write_mb_s"] == pytest.approx(3.0) and summary["cpu_pct"] is None
