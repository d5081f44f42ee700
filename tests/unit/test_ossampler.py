import os

import pytest

from mongobench.measure import ossampler

STAT_A = "cpu  100 0 50 800 40 0 10 0 0 0\ncpu0 1 2 3 4\n"
STAT_B = "cpu  200 0 100 1500 90 0 10 0 0 0\n"
DISK = (
    "   8       0 sda 100 0 800 0 200 0 1600 0 0 0 0 0 0 0 0 0 0\n"
    "   8       1 sda1 90 0 700 0 190 0 1500 0 0 0 0 0 0 0 0 0 0\n"
    "   7       0 loop0 5 0 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    " 259       0 nvme0n1 10 0 80 0 20 0 160 0 0 0 0 0 0 0 0 0 0\n"
    " 259       1 nvme0n1p1 10 0 80 0 20 0 160 0 0 0 0 0 0 0 0 0 0\n"
)


def test_parse_cpu_and_disks():
    cpu = ossampler.read_cpu(STAT_A)
    assert cpu == {"busy": 160, "iowait": 40, "steal": 0, "total": 1000}
    disks = ossampler.read_disks(DISK)
    assert disks["sda"]["write_sectors"] == 1600 and disks["sda1"]["reads"] == 90
    assert ossampler.physical_disks(disks) == ["sda", "nvme0n1"]
    with pytest.raises(ValueError):
        ossampler.read_cpu("intr 1 2 3\n")


def test_summarize_two_readings():
    a = {
        "t": 10.0,
        "cpu": ossampler.read_cpu(STAT_A),
        "io": {"reads": 0, "read_sectors": 0, "writes": 0, "write_sectors": 0},
    }
    b = {
        "t": 12.0,
        "cpu": ossampler.read_cpu(STAT_B),
        "io": {"reads": 100, "read_sectors": 2048, "writes": 300, "write_sectors": 4096 * 4},
    }
    s = ossampler.summarize([a, b])
    # busy 160 -> 310 of total 1000 -> 1900 jiffies
    assert s["cpu_pct"] == pytest.approx(100 * 150 / 900)
    assert s["iowait_pct"] == pytest.approx(100 * 50 / 900)
    assert s["iops"] == pytest.approx(200)
    assert s["read_mb_s"] == pytest.approx(2048 * 512 / 2**20 / 2)
    assert s["write_mb_s"] == pytest.approx(4.0)
    assert all(v is None for v in ossampler.summarize([a]).values())


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_sampler_on_this_host(tmp_path):
    s = ossampler.Sampler(str(tmp_path), interval=0.05).start()
    sum(i * i for i in range(300000))
    out = s.stop()
    assert len(s.readings) >= 2
    assert 0 <= out["cpu_pct"] <= 100 and out["iops"] >= 0


def test_standalone_process_writes_readings(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "os.jsonl"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mongobench.measure.ossampler",
            "--out",
            str(out),
            "--interval",
            "0.05",
            "--path",
            str(tmp_path),
        ]
    )
    # SIGTERM once it has written readings: before its handler is installed (a loaded
    # machine starts Python slowly) the signal would kill it instead of stopping it.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and p.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    label, readings = ossampler.load(str(out))
    assert label and len(readings) >= 3
    assert ossampler.summarize(readings)["cpu_pct"] is not None


def _r(t, busy, total, reads=0):
    return {
        "t": t,
        "cpu": {"busy": busy, "iowait": 0, "steal": 0, "total": total},
        "io": {"reads": reads, "read_sectors": 0, "writes": 0, "write_sectors": 0},
    }


def test_window_brackets_a_phase_shorter_than_the_interval():
    readings = [_r(0, 0, 0), _r(1, 10, 100), _r(2, 20, 200), _r(3, 30, 300)]
    assert [r["t"] for r in ossampler.window(readings, 1.2, 1.7)] == [1, 2]
    assert [r["t"] for r in ossampler.window(readings, 0.5, 2.5)] == [0, 1, 2, 3]
    assert ossampler.window(readings, 2.5, 3.5) == []  # not covered: missing


def test_attach_server_os_picks_the_busiest_host_per_variant():
    quiet = [_r(0, 0, 0), _r(10, 10, 1000)]
    busy = [_r(0, 0, 0), _r(10, 900, 1000, reads=50)]
    run = {
        "results": [
            {"status": "ok", "start": 2.0, "duration_s": 3.0},
            {"status": "failed"},
            {"status": "ok", "start": 20.0, "duration_s": 1.0},
        ]
    }
    ossampler.attach_server_os(run, {"secondary": quiet, "primary": busy})
    first = run["results"][0]
    assert first["os_server"]["cpu_pct"] == pytest.approx(90.0)
    assert first["os_server"]["iops"] == pytest.approx(5.0)
    assert set(first["os_server_hosts"]) == {"primary", "secondary"}
    assert "os_server" not in run["results"][2]  # after the readings: missing
