"""The comparison report (mongobench.compare) over several PKB results files."""

from __future__ import annotations

import json
import pathlib
import re
import struct

import pytest

from mongobench import cli
from mongobench.core import pairs, pricing
from mongobench.reports import compare
from mongobench.reports import plots as reports_plots
from mongobench.reports import runs as reports_runs
from mongobench.stress import search as stress
from mongobench.sweep import plan
from mongobench.sweep import samples as sweep_samples
from mongobench.ycsb import parse as ycsb

GiB = 1024**3
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Seed 002, every YCSB run as printed: records -> phase -> (RunTime ms, ops/s, {op: p99 ms}).
SEED = {
    1000: {
        "load": (1211, 825.7638315441784, {"INSERT": 1.963}),
        "read_only": (1370, 729.92700729927, {"READ": 2.617}),
        "update_only": (1568, 637.7551020408164, {"UPDATE": 3.505}),
        "read_update": (1532, 652.7415143603133, {"READ": 3.841, "UPDATE": 3.543}),
    },
    2000: {
        "load": (1592, 1256.2814070351758, {"INSERT": 1.644}),
        "read_only": (1686, 1186.2396204033214, {"READ": 1.731}),
        "update_only": (1668, 1199.0407673860911, {"UPDATE": 1.523}),
        "read_update": (1727, 1158.0775911986102, {"READ": 1.744, "UPDATE": 1.607}),
    },
    3000: {
        "load": (1776, 1689.1891891891892, {"INSERT": 1.244}),
        "read_only": (1913, 1568.2174594877156, {"READ": 1.38}),
        "update_only": (2027, 1480.0197335964478, {"UPDATE": 1.395}),
        "read_update": (2312, 1297.5778546712802, {"READ": 1.48, "UPDATE": 1.524}),
    },
    10_000: {
        "load": (3604, 2774.695, {"INSERT": 0.948}),
        "read_only": (3888, 2572.016, {"READ": 1.033}),
        "update_only": (4486, 2229.157, {"UPDATE": 1.025}),
        "read_update": (4526, 2209.456, {"READ": 1.175, "UPDATE": 1.133}),
    },
    100_000: {
        "load": (20342, 4915.937469275391, {"INSERT": 0.58}),
        "read_only": (22122, 4520.387, {"READ": 0.673}),
        "update_only": (25899, 3861.153, {"UPDATE": 0.671}),
        "read_update": (27299, 3663.138, {"READ": 0.693, "UPDATE": 0.731}),
    },
    1_000_000: {
        "load": (200962, 4976.065, {"INSERT": 0.534}),
        "read_only": (203949, 4903.187, {"READ": 0.552}),
        "update_only": (248519, 4023.837, {"UPDATE": 0.586}),
        "read_update": (253346, 3947.171, {"READ": 0.57, "UPDATE": 0.617}),
    },
    10_000_000: {
        "load": (1968504, 5080.0, {"INSERT": 0.513}),
        "read_only": (3176793, 3147.829, {"READ": 0.749}),
        "update_only": (4326840, 2311.1554852964287, {"UPDATE": 1.231}),
        "read_update": (4174540, 2395.474, {"READ": 1.085, "UPDATE": 1.161}),
    },
}


def seed_samples(scale: float = 1.0, memory_gib: float = 8, skip=()) -> list[dict]:
    """The seed's sweep as our samples; `scale` multiplies throughput (a faster machine)."""
    out = []
    for step in plan.plan(memory_bytes=int(memory_gib * GiB), memory_source="flag"):
        for phase in plan.PHASES:
            if (step.size_mb, phase.name) in skip:
                continue
            runtime, tput, p99 = SEED[step.records][phase.name]
            ops = {
                op: ycsb.OpStats(
                    name=op,
                    operations=step.records // len(p99),
                    average_us=v * 400,
                    percentiles_us={95.0: v * 800, 99.0: v * 1000},
                )
                for op, v in p99.items()
            }
            res = ycsb.YcsbResult(runtime / scale, tput * scale, ops, {})
            out += sweep_samples.phase_samples(step, phase, res)
    return out


def write_results(path: pathlib.Path, samples, run_uri: str, extra_md=None, labels=False):
    """A PKB results file: metadata as PKB's `labels` string, or as a dict."""
    with open(path, "w") as f:
        for s in samples:
            md = {**s["metadata"], **(extra_md or {})}
            rec = {"metric": s["metric"], "value": s["value"], "unit": s["unit"]}
            rec["run_uri"] = run_uri
            if labels:
                rec["labels"] = ",".join(f"|{k}:{v}|" for k, v in md.items())
            else:
                rec["metadata"] = md
            f.write(json.dumps(rec) + "\n")
    return str(path)


def perftables_samples(docs_per_s: dict[str, float]) -> list[dict]:
    return [
        {
            "metric": "Document Throughput",
            "value": v,
            "unit": "docs/sec",
            "metadata": {"experiment": "insert_docsize", "variant": label, "variant_index": i},
        }
        for i, (label, v) in enumerate(docs_per_s.items())
    ]


def stress_samples(best: float, sla: float | None, p99: float) -> list[dict]:
    out = [
        {
            "metric": stress.MAX_METRIC,
            "value": best,
            "unit": "ops/sec",
            "metadata": {"instances": 3, "p99_read_latency_ms": p99, "step": 3},
        }
    ]
    if sla is not None:
        md = {"instances": 2} if sla else {"reason": "no step met read p99 <= 3 ms"}
        out.append({"metric": stress.SLA_METRIC, "value": sla, "unit": "ops/sec", "metadata": md})
    return out


def png_size(path) -> tuple[int, int]:
    raw = pathlib.Path(path).read_bytes()
    assert raw[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert raw[12:16] == b"IHDR"
    return struct.unpack(">II", raw[16:24])


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The rows (header first) of the first table after `heading`."""
    block = []
    for ln in text.split(heading, 1)[1].splitlines()[1:]:
        if ln.startswith("|"):
            block.append(ln)
        elif block:
            break
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in block]
    return [r for r in rows if not all(re.fullmatch(r":?-+:?", c) for c in r)]


@pytest.fixture
def three_runs(tmp_path):
    """Sweep + perftables + stress on n2-standard-2 (labels string), n2-standard-4 (dict),
    and an Atlas M30 run with no sweep and a missing perftables variant."""
    a = write_results(
        tmp_path / "a.json",
        seed_samples()
        + perftables_samples({"1": 1000.0, "4": 800.0})
        + stress_samples(20000.0, 15000.0, 2.5),
        "run-a",
        {"clients_machine_type": "n2-standard-2", "clients_data_disk_0_type": "pd-ssd"},
        labels=True,
    )
    b = write_results(
        tmp_path / "b.json",
        seed_samples(scale=2.0, memory_gib=16, skip={(1, "update_only")})
        + perftables_samples({"1": 2000.0, "4": 1500.0})
        + stress_samples(36000.0, 0.0, 4.2),
        "run-b",
        {"clients_machine_type": "n2-standard-4", "clients_data_disk_0_type": "pd-ssd"},
    )
    c = write_results(
        tmp_path / "c.json",
        perftables_samples({"1": 3000.0}),
        "run-c",
        {"atlas_tier": "M30", "atlas_provider": "AWS", "atlas_region": "US_EAST_1"},
    )
    return a, b, c


# ----------------------------------------------------------------------------- runs, labels


def test_runs_are_labelled_by_machine_type_and_tier(three_runs):
    runs = reports_runs.load_runs(three_runs)
    assert [r.label for r in runs] == ["n2-standard-2", "n2-standard-4", "Atlas M30"]
    assert [r.run_uri for r in runs] == ["run-a", "run-b", "run-c"]
    assert runs[0].machine_type == "n2-standard-2" and runs[0].disk_type == "pd-ssd"
    assert runs[0].benchmarks == ["perftables", "stress", "sweep"]
    assert runs[2].tier == "M30" and runs[2].benchmarks == ["perftables"]


def test_disk_type_joins_the_label_when_it_differs(tmp_path):
    s = perftables_samples({"1": 1.0})
    files = [
        write_results(tmp_path / f"{d}.json", s, f"r-{d}", {"machine_type": "m5.large", **md})
        for d, md in (
            ("gp3", {"data_disk_0_type": "gp3"}),
            ("io2", {"data_disk_0_type": "io2"}),
        )
    ]
    assert [r.label for r in reports_runs.load_runs(files)] == ["m5.large / gp3", "m5.large / io2"]


def test_same_machine_twice_is_told_apart_by_run_uri_and_user_labels_win(tmp_path):
    s = perftables_samples({"1": 1.0})
    files = [
        write_results(tmp_path / f"{n}.json", s, f"{n}0000000xyz", {"machine_type": "m5.large"})
        for n in ("a", "b")
    ]
    assert [r.label for r in reports_runs.load_runs(files)] == [
        "m5.large (a0000000)",
        "m5.large (b0000000)",
    ]
    labels = {files[0]: "before", "b.json": "after"}  # by path or by file name
    assert [r.label for r in reports_runs.load_runs(files, labels)] == ["before", "after"]
    with pytest.raises(ValueError, match="names no --results file"):
        reports_runs.load_runs(files, {"other.json": "x"})
    with pytest.raises(ValueError, match="share the label"):
        reports_runs.load_runs(files, {files[0]: "same", files[1]: "same"})


# ----------------------------------------------------------------------------- prices


def test_prices_from_flag_atlas_table_and_instance_table(three_runs):
    runs = reports_runs.load_runs(three_runs)
    reports_runs.assign_prices(runs, {"n2-standard-4": 0.25})
    assert runs[0].price == pricing.INSTANCE_PRICES["n2-standard-2"]
    assert "built-in table" in runs[0].price_source and "approximate" in runs[0].price_source
    assert "clients VM only" in runs[0].price_source
    assert (runs[1].price, runs[1].price_source) == (0.25, "--price")
    assert runs[2].price == 0.54  # mongobench.atlas: M30 on AWS us-east-1
    assert runs[2].price_source.startswith("Atlas list price")
    with pytest.raises(ValueError, match="names no run"):
        reports_runs.assign_prices(reports_runs.load_runs(three_runs), {"m9.huge": 1.0})


def test_unknown_machine_has_no_price(tmp_path):
    f = write_results(tmp_path / "x.json", perftables_samples({"1": 1.0}), "r", {"x": 1})
    [run] = reports_runs.load_runs([f])
    reports_runs.assign_prices([run])
    assert run.price is None and run.price_source is None


def test_ops_per_dollar_arithmetic():
    assert reports_runs.ops_per_dollar(1000.0, 0.5) == 7_200_000.0  # 1000 ops/s x 3600 s / $0.5
    assert reports_runs.ops_per_dollar(250.0, 0.0971) == pytest.approx(9_268_795.06, rel=1e-9)
    assert reports_runs.ops_per_dollar(None, 0.5) is None
    assert reports_runs.ops_per_dollar(1000.0, None) is None


def test_pairs_parsing():
    assert pairs.parse_pairs(["a=b=c"], "--label") == {"a": "b=c"}
    assert pairs.parse_pairs(["n2 / x=y=$1.5"], "--price", number=True) == {"n2 / x=y": 1.5}
    for bad in (["noequals"], ["x="], ["x=abc"], ["x=0"]):
        with pytest.raises(ValueError):
            pairs.parse_pairs(bad, "--price", number=True)


def test_linear_sizes_are_the_seeds_linear_prefix():
    assert reports_plots.linear_sizes([1, 2, 3, 10, 100, 1000, 10000]) == [1, 2, 3]
    assert reports_plots.linear_sizes([0.1, 0.2]) == [0.1, 0.2]
    assert reports_plots.linear_sizes([1, 10, 100]) == [1, 10]
    assert reports_plots.linear_sizes([5]) == [5]


# ----------------------------------------------------------------------------- report


def test_report_tables_plots_and_na(three_runs, tmp_path):
    out = tmp_path / "out" / "report.md"
    text, plots = compare.compare(
        three_runs, str(out), str(tmp_path / "out" / "plots"), prices={"n2-standard-4": 0.25}
    )
    assert out.read_text() == text

    # 5 sweep plots, 1 per perftables experiment, 1 for the stress KPIs; all valid PNGs.
    names = sorted(pathlib.Path(p).name for p in plots)
    assert names == [
        "perftables_insert_docsize.png",
        "stress_kpis.png",
        "sweep_p99.png",
        "sweep_runtime_linear.png",
        "sweep_runtime_log.png",
        "sweep_throughput_linear.png",
        "sweep_throughput_log.png",
    ]
    for p in plots:
        w, h = png_size(p)
        assert w > 300 and h > 200
        assert f"](plots/{pathlib.Path(p).name})" in text  # linked relative to the report
    assert sorted(x.name for x in (tmp_path / "out" / "plots").iterdir()) == names

    # Runs table: labels, prices and their sources.
    runs = table_rows(text, "# MongoDB benchmark comparison")
    assert [r[0] for r in runs[1:]] == ["n2-standard-2", "n2-standard-4", "Atlas M30"]
    assert runs[3][6:8] == ["M30", "0.5400"]

    # Sweep, load phase: side by side, seed numbers, † beyond memory, ops/$ for both runs.
    load = table_rows(text, "### Load")
    assert load[0] == [
        "Size",
        "n2-standard-2 Runtime (s)",
        "n2-standard-4 Runtime (s)",
        "n2-standard-2 Throughput (ops/s)",
        "n2-standard-4 Throughput (ops/s)",
        "n2-standard-2 INSERT p99 (ms)",
        "n2-standard-4 INSERT p99 (ms)",
        "n2-standard-2 ops/$",
        "n2-standard-4 ops/$",
    ]
    assert [r[0] for r in load[1:]] == [
        "1 MB",
        "2 MB",
        "3 MB",
        "10 MB",
        "100 MB",
        "1 GB",
        "10 GB †",
    ]
    assert load[1][1:7] == ["1.21", "0.606", "826", "1652", "1.96", "1.96"]
    tput_a = SEED[1000]["load"][1]
    assert load[1][7] == f"{tput_a * 3600 / pricing.INSTANCE_PRICES['n2-standard-2']:.0f}"
    assert load[1][8] == f"{tput_a * 2 * 3600 / 0.25:.0f}"
    # 10 GB exceeds the 8 GiB machine only; the marker says which.
    assert load[7][3] == "5080 †" and load[7][4] == "10160"

    # The phase b did not run at 1 MB is n/a for b, never 0.
    upd = table_rows(text, "### Update-only")
    assert upd[1][1] == "1.57" and upd[1][2] == "n/a"
    assert upd[1][4] == "n/a" and upd[1][8] == "n/a"

    # Perftables: variants side by side, in the seed's label column; the missing variant of
    # the Atlas run is n/a.
    pt = table_rows(text, "### Expected insert speed by document size")
    assert pt[0][:4] == [
        "Document Size (KB)",
        "n2-standard-2 (Speed (docs/s))",
        "n2-standard-4 (Speed (docs/s))",
        "Atlas M30 (Speed (docs/s))",
    ]
    assert pt[1][:4] == ["1", "1000", "2000", "3000"]
    assert pt[2][:4] == ["4", "800", "1500", "n/a"]
    assert pt[1][4:] == [
        f"{1000 * 3600 / 0.0971:.0f}",
        f"{2000 * 3600 / 0.25:.0f}",
        f"{3000 * 3600 / 0.54:.0f}",
    ]
    assert pt[2][6] == "n/a"

    # Stress KPIs: the Atlas run has none (n/a), b met no SLA (not a 0 figure).
    st = {r[0]: r[1:] for r in table_rows(text, "## Stress KPIs")}
    assert st["Maximum Throughput (ops/s)"] == ["20000", "36000", "n/a"]
    assert st["Maximum Throughput for Latency SLA (ops/s)"] == [
        "15000",
        "none within SLA",
        "n/a",
    ]
    assert st["Read p99 at maximum (ms)"] == ["2.50", "4.20", "n/a"]
    assert st["Maximum Throughput per dollar (ops/$)"] == [
        f"{20000 * 3600 / 0.0971:.0f}",
        f"{36000 * 3600 / 0.25:.0f}",
        "n/a",
    ]
    assert not re.search(r"\|\s*0\s*\|", text)  # nothing missing is shown as 0

    # the sweep and stress sections carry the provenance line, as the perftables tables do
    sweep_part = text.split("## Dataset-size sweep", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^Target: .*sizes 1 MB to 10 GB;.*\.$", sweep_part, re.M), sweep_part
    stress_part = text.split("## Stress KPIs", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^Target: .*; .*repeat.*\.$", stress_part, re.M), stress_part


def test_report_of_perftables_only_has_no_sweep_plots(tmp_path):
    f = write_results(tmp_path / "p.json", perftables_samples({"1": 5.0, "4": 3.0}), "r1", {})
    text, plots = compare.compare([f], str(tmp_path / "r.md"))
    assert [pathlib.Path(p).name for p in plots] == ["perftables_insert_docsize.png"]
    assert pathlib.Path(plots[0]).parent == tmp_path / "r-plots"
    assert "Dataset-size sweep" not in text and "Stress KPIs" not in text


def test_cli_compare(three_runs, tmp_path, capsys):
    out = tmp_path / "cli" / "report.md"
    rc = cli.main(
        [
            "compare",
            "--pkb-results",
            *three_runs,
            "--label",
            f"{three_runs[0]}=small",
            "--price",
            "small=0.1",
            "--out",
            str(out),
            "--plots-dir",
            str(tmp_path / "cli" / "png"),
        ]
    )
    assert rc == 0
    text = out.read_text()
    assert "| small | a.json | run-a |" in text
    assert "](png/sweep_p99.png)" in text
    assert len(list((tmp_path / "cli" / "png").glob("*.png"))) == 7
    assert "7 plot(s)" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="price must be a number"):
        cli.main(["compare", "--pkb-results", three_runs[0], "--price", "x=y", "--out", str(out)])


def test_failed_phase_shows_as_failed_and_is_listed(tmp_path):
    step = plan.plan([1])[0]
    samples = seed_samples(skip={(1, "load")})
    samples.append(
        sweep_samples.failure_sample(step, plan.PHASES[0], "YCSB reported a failure: boom")
    )
    f = write_results(tmp_path / "f.json", samples, "rf", {"machine_type": "m5.large"})
    text, _ = compare.compare([f], str(tmp_path / "r.md"))
    load = table_rows(text, "### Load")
    # Runtime, throughput, INSERT p99: failed; ops/$ (m5.large is priced): n/a, not 0.
    assert load[1] == ["1 MB", "failed", "failed", "failed", "n/a"]
    assert "- m5.large: 1 MB load: YCSB reported a failure: boom" in text


def test_warns_when_runs_differ_in_what_makes_them_comparable(tmp_path):
    a = write_results(
        tmp_path / "a.json",
        perftables_samples({"1": 1000.0}),
        "ra",
        {
            "machine_type": "m5.large",
            "scale": "full",
            "mongodb_version": "8.0.4",
            "topology": "replset",
            "client_path": "multiplexed",
            "client_vms": 1,
        },
    )
    b = write_results(
        tmp_path / "b.json",
        perftables_samples({"1": 1500.0}),
        "rb",
        {
            "machine_type": "m5.xlarge",
            "scale": "tenth",
            "mongodb_version": "8.0.4",
            "topology": "standalone",
            "client_path": "multiplexed",
            "client_vms": 2,
        },
    )
    same = write_results(
        tmp_path / "c.json",
        perftables_samples({"1": 900.0}),
        "rc",
        {
            "machine_type": "m5.2xlarge",
            "scale": "full",
            "mongodb_version": "8.0.4",
            "topology": "replset",
            "client_path": "multiplexed",
            "client_vms": 1,
        },
    )
    # fmt: skip
    runs = reports_runs.load_runs([a, b])
    warnings = reports_runs.comparability_warnings(runs)
    assert [w.split(" (")[0] for w in warnings] == [
        "the runs differ in scale",
        "the runs differ in topology",
        "the runs differ in client count",
    ]
    assert "m5.large: scale full; m5.xlarge: scale tenth" in warnings[0]
    text, _ = compare.compare([a, b], str(tmp_path / "r.md"))
    assert "## Warnings" in text and "- the runs differ in scale (" in text
    assert reports_runs.comparability_warnings(reports_runs.load_runs([a, same])) == []
    text, _ = compare.compare([a, same], str(tmp_path / "s.md"))
    assert "the runs differ" not in text  # only the single runs are noted (issue 21)


def test_baseline_adds_percent_change(three_runs, tmp_path):
    text, _ = compare.compare(list(three_runs), str(tmp_path / "r.md"), baseline="n2-standard-2")
    rows = table_rows(text, "### Expected insert speed by document size")
    assert rows[0][-2:] == ["n2-standard-4 vs n2-standard-2", "Atlas M30 vs n2-standard-2"]
    by_variant = {r[0]: r for r in rows[1:]}
    # 2000 and 3000 against 1000; single runs: marked unreplicated (issue 21)
    assert by_variant["1"][-2:] == ["+100.0% (unreplicated)", "+200.0% (unreplicated)"]
    assert by_variant["4"][-2:] == ["+87.5% (unreplicated)", "n/a"]  # M30 has no "4"
    kpis = table_rows(text, "## Stress KPIs (mongodb_stress)")
    assert ["Maximum Throughput vs n2-standard-2", "+0.0%", "+80.0%", "n/a"] in kpis
    with pytest.raises(ValueError, match="--baseline 'nope' names no run; runs: n2-standard-2"):
        compare.compare(list(three_runs), str(tmp_path / "r.md"), baseline="nope")
    out = tmp_path / "cli.md"
    args = ["compare", "--pkb-results", *three_runs, "--out", str(out)]
    assert cli.main([*args, "--baseline", "Atlas M30"]) == 0
    assert "n2-standard-2 vs Atlas M30" in out.read_text()
    with pytest.raises(SystemExit, match="--baseline 'x' names no run"):
        cli.main([*args, "--baseline", "x"])


def test_sweep_points_read_pkb_names_and_the_former_names_alike():
    """Sweep samples carry PKB's ycsb_stats names (`overall RunTime` in ms); results files
    written under the former names (`Runtime` in sec, `<OP> p99 Latency`) read the same."""
    new = seed_samples()
    assert {"overall RunTime", "overall Throughput", "read p99 latency"} <= {
        s["metric"] for s in new
    }
    legacy = []
    for s in new:
        md, op = s["metadata"], s["metadata"].get("op", "")
        if s["metric"] == "overall RunTime":
            legacy.append({**s, "metric": "Runtime", "value": s["value"] / 1000, "unit": "sec"})
        elif s["metric"] == "overall Throughput":
            legacy.append({**s, "metric": "Throughput"})
        elif op and s["metric"] == f"{op.lower()} p99 latency":
            legacy.append({**s, "metric": f"{op} p99 Latency", "metadata": md})
    points = reports_runs.sweep_points(reports_runs.Run("new", "a", new))
    assert points == reports_runs.sweep_points(reports_runs.Run("old", "b", legacy))
    p = points[("read_update", 1.0)]
    assert p.runtime_s == 1.532 and p.throughput == 652.7415143603133
    assert p.p99_ms == {"READ": 3.841, "UPDATE": 3.543}


def test_baseline_difference_within_noise_when_the_intervals_overlap(tmp_path):
    def repeated(values, intervals):
        samples = perftables_samples(values)
        for s, (lo, hi) in zip(samples, intervals, strict=True):
            s["metadata"].update(repeats=3, ci95_low=lo, ci95_high=hi)
        return samples

    a = write_results(tmp_path / "a.json",
                      repeated({"1": 1000.0, "4": 730.0}, [(900.0, 1100.0), (700.0, 760.0)]),
                      "ra", {"machine_type": "m5.large"})  # fmt: skip
    b = write_results(tmp_path / "b.json",
                      repeated({"1": 1050.0, "4": 800.0}, [(950.0, 1150.0), (780.0, 820.0)]),
                      "rb", {"machine_type": "m5.xlarge"})  # fmt: skip
    single = write_results(tmp_path / "c.json", perftables_samples({"1": 1000.0}), "rc",
                           {"machine_type": "m5.2xlarge"})  # fmt: skip
    text, _ = compare.compare([a, b, single], str(tmp_path / "r.md"), baseline="m5.large")
    rows = {r[0]: r for r in table_rows(text, "### Expected insert speed by document size")[1:]}
    # 1: [900, 1100] and [950, 1150] overlap; 4: [700, 760] and [780, 820] do not
    assert rows["1"][-2:] == ["+5.0% (within noise)", "+0.0% (unreplicated)"]  # a single run
    assert rows["4"][-2] == "+9.6%"


def test_a_phase_failed_at_every_size_still_gives_the_report_and_its_plots(tmp_path, capsys):
    # issue 22, bad 6: a phase failed in every run left its log-scale panel without one
    # positive value; matplotlib's "Data cannot be log-scaled" became one vague line and
    # no report was written
    samples = [s for s in seed_samples() if s["metadata"]["phase"] != "read_only"]
    for step in plan.plan():
        samples.append(sweep_samples.failure_sample(step, plan.PHASES[1], "YCSB exited"))
    f = write_results(tmp_path / "f.json", samples, "rf", {"machine_type": "m5.large"})
    out = tmp_path / "r.md"
    assert cli.main(["compare", "--pkb-results", f, "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    assert table_rows(out.read_text(), "### Read-only")[1][1] == "failed"
    pngs = sorted(p.name for p in (tmp_path / "r-plots").iterdir())
    assert "sweep_throughput_log.png" in pngs and "sweep_p99.png" in pngs
    for png in pngs:
        assert (tmp_path / "r-plots" / png).read_bytes().startswith(PNG_SIGNATURE)


def test_sweep_and_stress_sections_show_p50_beside_p99(tmp_path):
    """A sweep whose YCSB printed p50 (our property files ask for it) gets an `<OP> p50 (ms)`
    column before each p99; the stress KPIs a read p50 row at the maximum."""
    out = []
    for s in seed_samples():
        if s["metric"] == "insert p99 latency":
            out.append({**s, "metric": "insert p50 latency", "value": s["value"] / 4})
        out.append(s)
    stress_kpis = stress_samples(20000.0, 15000.0, 2.5)
    stress_kpis[0]["metadata"]["p50_read_latency_ms"] = 0.75
    f = write_results(tmp_path / "a.json", out + stress_kpis, "run-a", {"machine_type": "x"})
    text, _ = compare.compare([f], str(tmp_path / "r.md"))
    load = table_rows(text, "### Load")
    assert load[0] == ["Size", "x Runtime (s)", "x Throughput (ops/s)", "x INSERT p50 (ms)",
                       "x INSERT p99 (ms)"]  # fmt: skip
    assert load[1][3:5] == ["0.491", "1.96"]
    st = {r[0]: r[1:] for r in table_rows(text, "## Stress KPIs")}
    assert st["Read p50 at maximum (ms)"] == ["0.75"]
    assert st["Read p99 at maximum (ms)"] == ["2.50"]
