"""Latency-versus-throughput curves of rate steps (perftables --rate-steps).

Each curve is one variant: its closed-loop point (step 0) and its open-loop steps, each
with the offered rate (target_ops_per_s), the achieved throughput, and the main
operation's latency from the intended send times (p50, p99) beside its service time
(from the actual sends). The report shows a table and a plot per curve; the steps stay
out of the experiment's own tables (report.group), which keep the closed-loop row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from mongobench.core.markdown import fmt, md_table

THROUGHPUT = "Operation Throughput"


def is_step(md: Mapping) -> bool:
    """An open-loop step of a curve (not its closed-loop point)."""
    return bool(md.get("rate_step"))


def collect(samples: Sequence[dict]) -> dict[str, dict[str, list[dict]]]:
    """experiment -> the closed-loop variant's label -> its points in step order, each
    {step, name, target, achieved, p50_ms, p99_ms, service_p50_ms, service_p99_ms}."""
    points: dict[tuple, dict] = {}
    for s in samples:
        md = s.get("metadata") or {}
        if md.get("rate_step") is None or not md.get("experiment"):
            continue
        label = str(md.get("variant", "")).split(" @ ", 1)[0]
        key = (md["experiment"], label, s.get("run_uri", ""), int(md["rate_step"]))
        p = points.setdefault(
            key,
            {
                "step": int(md["rate_step"]),
                "name": md.get("rate_step_name") or "closed loop",
                "target": md.get("target_ops_per_s"),
                "op": md.get("latency_op"),
            },
        )
        metric = s["metric"]
        if metric == THROUGHPUT:
            p["achieved"] = float(s["value"])
        elif metric == "Client Average Op Latency":
            p["op"] = md.get("latency_op")
        for name, key_ in (("p50 latency", "p50_ms"), ("p99 latency", "p99_ms")):
            op = md.get("op")
            if op and metric == f"{op} {name}":
                p.setdefault("by_op", {}).setdefault(op, {})[key_] = float(s["value"])
            elif op and metric == f"{op} service {name}":
                p.setdefault("by_op", {}).setdefault(op, {})[f"service_{key_}"] = float(s["value"])
    out: dict[str, dict[str, list[dict]]] = {}
    for (experiment, label, _run, _step), p in sorted(points.items()):
        by_op = p.pop("by_op", {})
        op = p.pop("op", None) or (next(iter(by_op)) if by_op else None)
        p.update(by_op.get(op, {}))
        out.setdefault(experiment, {}).setdefault(label, []).append(p)
    return out


def section(
    experiment: str,
    curves: Mapping[str, list[dict]],
    plots_dir: str | None = None,
    plots_ref: str | None = None,
) -> list[str]:
    """The report's lines for one experiment's curves (with a PNG per curve in
    `plots_dir`, linked as `plots_ref/<file>`)."""
    out = []
    for n, (label, points) in enumerate(curves.items()):
        if not any(p["step"] for p in points):
            continue  # a closed loop whose steps never ran
        out += [
            f"### Latency versus throughput: {label}",
            "",
            "Open loop (target_ops_per_s): latency counts from each operation's intended"
            " send time; the service time from its actual send. The closed loop's latency"
            " hides the wait of operations that could not be sent on time.",
            "",
        ]
        rows = [
            [
                p["name"],
                fmt(p.get("target")) if p["step"] else "-",
                fmt(p.get("achieved")),
                fmt(p.get("p50_ms")),
                fmt(p.get("p99_ms")),
                fmt(p.get("service_p50_ms")) if p["step"] else "-",
                fmt(p.get("service_p99_ms")) if p["step"] else "-",
            ]
            for p in points
        ]
        header = ["Step", "Offered (ops/s)", "Achieved (ops/s)", "p50 (ms)", "p99 (ms)",
                  "Service p50 (ms)", "Service p99 (ms)"]  # fmt: skip
        out += [md_table(header, rows), ""]
        if plots_dir:
            os.makedirs(plots_dir, exist_ok=True)
            name = f"{experiment}-rate-{n}.png"
            plot(f"{experiment} [{label}]", points, os.path.join(plots_dir, name))
            ref = plots_ref if plots_ref is not None else os.path.basename(plots_dir.rstrip("/"))
            out += [f"![Latency versus throughput: {experiment} [{label}]]({ref}/{name})", ""]
    return out


def plot(title: str, points: Sequence[dict], path: str) -> str:
    """Latency (log axis) against the achieved throughput: p50 and p99 from the intended
    send times, p99 service time dashed, the closed loop's point apart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    steps = [p for p in points if p["step"] and p.get("achieved") is not None]
    x = [p["achieved"] for p in steps]
    for key, name, style in (
        ("p50_ms", "p50 (intended time)", "o-"),
        ("p99_ms", "p99 (intended time)", "s-"),
        ("service_p99_ms", "p99 service time", "^--"),
    ):
        pairs = [(xi, p[key]) for xi, p in zip(x, steps, strict=True) if p.get(key)]
        if pairs:
            ax.plot(*zip(*pairs, strict=True), style, label=name)
    for p in points:
        if not p["step"] and p.get("achieved") is not None and p.get("p99_ms"):
            ax.plot([p["achieved"]], [p["p99_ms"]], "k*", markersize=11, label="closed loop p99")
    ax.set_yscale("log")
    ax.set_xlabel("achieved throughput (ops/s)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
