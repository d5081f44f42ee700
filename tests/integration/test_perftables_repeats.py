"""--repeats and progress lines through the CLI against the stand-in: every variant runs N
times interleaved, each end gives an [i/N] line, the samples carry mean and 95 % interval."""

import json
import re
import subprocess
import sys

import pytest

from mongobench.core import stats

pytestmark = pytest.mark.integration

LINE = re.compile(r"^\[(\d+)/(\d+)\] (\w+)/(\S+) \(repeat (\d)/2\): (\d+) ops, .* elapsed ", re.M)


def test_repeats_run_interleaved_and_fold_into_intervals(uri_file, tmp_path):
    out, samples = tmp_path / "r.json", tmp_path / "s.json"
    p = subprocess.run(
        [sys.executable, "-m", "mongobench", "perftables", "run", "--uri-file", uri_file,
         "--experiments", "insert_docsize", "--variants", "1;4", "--scale", "smoke",
         "--database", "mb_rep", "--os-path", "none", "--repeats", "2",
         "--out", str(out), "--samples", str(samples)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    lines = LINE.findall(p.stderr)
    # four runs, counted 1..4 of 4, in rounds of alternating direction
    assert [(i, n, v, r) for i, n, _, v, r, _ in lines] == [
        ("1", "4", "1", "1"), ("2", "4", "4", "1"), ("3", "4", "4", "2"), ("4", "4", "1", "2"),
    ]  # fmt: skip
    run = json.loads(out.read_text())
    assert run["repeats"] == 2
    assert [(r["label"], r["repeat"]) for r in run["results"]] == [
        ("1", 0), ("4", 0), ("4", 1), ("1", 1),
    ]  # fmt: skip
    for r, (_, _, _, _, _, ops) in zip(run["results"], lines, strict=True):
        assert int(ops) == sum(r["ops"].values()) > 0  # the line says what the run did
    tput = {
        s["metadata"]["variant"]: s
        for s in json.loads(samples.read_text())
        if s["metric"] == "Document Throughput"
    }
    assert set(tput) == {"1", "4"}  # one sample per variant, not per repeat
    for label, s in tput.items():
        values = [r["docs"] / r["duration_s"] for r in run["results"] if r["label"] == label]
        iv = stats.interval(values)
        md = s["metadata"]
        assert md["repeats"] == 2 and s["value"] == pytest.approx(iv.mean)
        assert md["ci95_low"] == pytest.approx(iv.low) and md["ci95_high"] == pytest.approx(iv.high)
        assert md["ci95_low"] <= s["value"] <= md["ci95_high"]
